package codegen

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// runGather runs p (X and Y given as offsets from the areas' bases) on
// the simulator with random data around Y and checks Y's area against
// EmulateGather, X unchanged and the cycles at each phase.
func runGather(t *testing.T, tl *tile, p Gather, seed int64, phases []int) {
	t.Helper()
	const guard = 64
	r := rng(seed)
	sz := p.Size
	xn := sz * ((p.R-1)*p.RStride + (p.C-1)*p.CStride + 1 + int(outerSpan(p.Outer, true)))
	xn = (xn + int(p.X%4) + 3) &^ 3 // whole words from X's word
	yn := sz * ((p.R-1)*p.YStride + p.C + int(outerSpan(p.Outer, false)))
	x := randBytes(r, xn)
	area := randBytes(r, yn+2*guard)
	xw := p.X &^ 3
	want := append(append([]byte(nil), area[:guard]...), EmulateGather(p, x[p.X-xw:], area[guard:guard+yn])...)
	want = append(want, area[guard+yn:]...)
	for _, phase := range phases {
		tl.put(xw, x)
		tl.put(p.Y-guard, area)
		k, cycles := tl.runKernel(t, phase, func(b *Builder) (Kernel, error) { return EmitGather(b, p) })
		if d := cmp.Diff(want, tl.get(p.Y-guard, len(area))); d != "" {
			t.Fatalf("phase %d: Y mismatch (-want +got):\n%s", phase, d)
		}
		if d := cmp.Diff(x, tl.get(xw, xn)); d != "" {
			t.Fatalf("phase %d: X changed (-want +got):\n%s", phase, d)
		}
		checkCycles(t, k, cycles, phase)
		if c, err := p.Cost(); err != nil || c.CyclesAt(phase) != cycles {
			t.Errorf("Cost() = %v, %v; measured %d", c.CyclesAt(phase), err, cycles)
		}
	}
}

func TestGather(t *testing.T) {
	const xBase, yBase = 0x80000, 0xB0000
	cases := []Gather{
		// Transposes of a 64x64 matrix.
		{Size: 4, R: 64, C: 64, YStride: 64, RStride: 1, CStride: 64, Workers: 6},
		{Size: 4, R: 64, C: 64, YStride: 64, RStride: 1, CStride: 64, Workers: 6, Interleaved: true},
		{Size: 2, R: 64, C: 64, YStride: 64, RStride: 1, CStride: 64, Workers: 6},
		// Rows in pairs from source words (2x2 blocks, gatherpairs.go):
		// attention's 16x16 key blocks, workers starting inside a row
		// pair, padded rows of Y, two rows, a column stride beyond a
		// post-increment, and blocks of a wider source.
		{Size: 2, R: 16, C: 16, YStride: 16, RStride: 1, CStride: 16, Workers: 6},
		{Size: 2, R: 10, C: 14, YStride: 18, RStride: 1, CStride: 12, Workers: 5, X: 4, Y: 8},
		{Size: 2, R: 2, C: 8, YStride: 8, RStride: 1, CStride: 2, Workers: 6},
		{Size: 2, R: 6, C: 4, YStride: 4, RStride: 1, CStride: 20000, Workers: 3},
		{Size: 2, R: 12, C: 40, YStride: 40, RStride: 1, CStride: 30, Workers: 6, X: 8},
		// Odd shapes, contiguous odd rows of halves (a word carried from
		// row to row), Y starting inside a word.
		{Size: 2, R: 5, C: 3, YStride: 3, RStride: 1, CStride: 5, Workers: 6},
		{Size: 2, R: 7, C: 9, YStride: 9, RStride: 1, CStride: 7, Workers: 4, Y: 2},
		{Size: 2, R: 13, C: 6, YStride: 6, RStride: 6, CStride: 1, Workers: 6, Y: 2, X: 2},
		{Size: 2, R: 13, C: 6, YStride: 6, RStride: 6, CStride: 1, Workers: 3, X: 2},
		{Size: 2, R: 9, C: 11, YStride: 14, RStride: 13, CStride: 1, Workers: 5, X: 6, Y: 6},
		{Size: 2, R: 3, C: 130, YStride: 131, RStride: 0, CStride: 3, Workers: 6, Y: 4},
		{Size: 2, R: 130, C: 1, YStride: 1, RStride: 3, CStride: 0, Workers: 6},
		{Size: 2, R: 2, C: 5, YStride: 7, RStride: 17001, CStride: 9000, Workers: 2, Y: 2},
		{Size: 2, R: 1, C: 1, Workers: 1, Y: 2, X: 2},
		{Size: 2, R: 1, C: 1, Workers: 6, X: 2},
		{Size: 2, R: 6, C: 4, YStride: 4, RStride: 2, CStride: 24, Workers: 6, X: 2},
		{Size: 4, R: 7, C: 9, YStride: 9, RStride: 1, CStride: 7, Workers: 6, Y: 4},
		{Size: 4, R: 9, C: 13, YStride: 15, RStride: 20, CStride: 1, Workers: 5, X: 4, Interleaved: true},
		{Size: 4, R: 3, C: 33, YStride: 33, RStride: 0, CStride: 0, Workers: 6},
		{Size: 4, R: 2, C: 4, YStride: 5, RStride: 9001, CStride: 8200, Workers: 3, Y: 12},
		{Size: 4, R: 130, C: 2, YStride: 3, RStride: 2, CStride: 1, Workers: 6, X: 4, Interleaved: true},
		// Blocks: an FP16 stride-2 window gather (16 outputs of a row,
		// 7 window offsets, 9 input rows), a transposed block repeated
		// with X's stride 0, rows of loops in loops of blocks, the FP32
		// window gather, a level of one block.
		{Size: 2, R: 1, C: 16, YStride: 16, RStride: 0, CStride: 2, Workers: 6, X: 2, Outer: [2]BlockDim{{7, 1, 16}, {9, 38, 112}}},
		{Size: 2, R: 6, C: 4, YStride: 4, RStride: 1, CStride: 6, Workers: 5, Outer: [2]BlockDim{{3, 0, 26}, {4, 7, 80}}},
		{Size: 2, R: 12, C: 40, YStride: 42, RStride: 41, CStride: 1, Workers: 2, X: 6, Outer: [2]BlockDim{{3, 500, 506}, {2, 1600, 1600}}},
		{Size: 4, R: 32, C: 1, YStride: 1, RStride: 2, CStride: 1, Workers: 6, X: 4, Outer: [2]BlockDim{{7, 1, 32}, {5, 70, 224}}},
		{Size: 4, R: 5, C: 3, YStride: 3, RStride: 7, CStride: 2, Workers: 3, Interleaved: true, Outer: [2]BlockDim{{1, 0, 0}, {6, 40, 16}}},
		// 2-byte blocks that end inside a word: 7 outputs of a row in
		// rows padded to 8 (a 7x7 window gather); rows of one element
		// carried from row to row, odd blocks; odd rows padded.
		{Size: 2, R: 7, C: 1, YStride: 1, RStride: 2, CStride: 1, Workers: 6, X: 2, Outer: [2]BlockDim{{9, 14, 8}, {3, 1, 72}}},
		{Size: 2, R: 9, C: 1, YStride: 1, RStride: 2, CStride: 1, Workers: 4, Outer: [2]BlockDim{{5, 1, 10}, {4, 60, 50}}},
		{Size: 2, R: 5, C: 3, YStride: 5, RStride: 9, CStride: 2, Workers: 5, X: 6, Outer: [2]BlockDim{{6, 50, 24}}},
	}
	tl := newTile()
	for ci, p := range cases {
		p.X += xBase
		p.Y += yBase
		name := fmt.Sprintf("s%d-%dx%d-ys%d-rs%d-cs%d-x%d-y%d-w%d-il%v-b%v", p.Size, p.R, p.C, p.YStride, p.RStride, p.CStride, p.X%16, p.Y%16, p.Workers, p.Interleaved, p.Outer)
		t.Run(name, func(t *testing.T) {
			phases := []int{ci % Slots}
			if ci < 9 {
				phases = []int{0, 1, 2, 3, 4, 5}
			}
			runGather(t, tl, p, int64(ci), phases)
		})
	}
}

// TestGatherRandom gathers random shapes, strides and offsets.
func TestGatherRandom(t *testing.T) {
	tl := newTile()
	r := rng(5)
	for i := 0; i < 60; i++ {
		p := Gather{Size: 2 + 2*r.Intn(2), R: 1 + r.Intn(40), C: 1 + r.Intn(40), Workers: 1 + r.Intn(6)}
		if r.Intn(3) == 0 {
			p.R, p.C = 1+r.Intn(130), 1+r.Intn(4)
		}
		p.YStride = p.C + r.Intn(3)
		if r.Intn(2) == 0 {
			p.YStride = p.C
		}
		p.RStride, p.CStride = r.Intn(50), r.Intn(50)
		if r.Intn(2) == 0 { // a permutation of a dense matrix
			p.RStride, p.CStride = 1, p.R
			if r.Intn(2) == 0 {
				p.RStride, p.CStride = p.C, 1
			}
		}
		p.X = 0x80000 + uint32(p.Size*r.Intn(8))
		p.Y = 0xB0000 + uint32(p.Size*r.Intn(8))
		p.Interleaved = r.Intn(2) == 0
		t.Run(fmt.Sprintf("%d-s%d-%dx%d-ys%d-rs%d-cs%d-w%d", i, p.Size, p.R, p.C, p.YStride, p.RStride, p.CStride, p.Workers), func(t *testing.T) {
			runGather(t, tl, p, int64(1000+i), []int{i % Slots})
		})
	}
}

// TestGatherBlocksRandom gathers random blocks: shapes, strides (Y's
// nested with gaps, even between 2-byte blocks), offsets.
func TestGatherBlocksRandom(t *testing.T) {
	tl := newTile()
	r := rng(11)
	for i := 0; i < 60; i++ {
		p := Gather{Size: 2 + 2*r.Intn(2), R: 1 + r.Intn(10), C: 1 + r.Intn(10), Workers: 1 + r.Intn(6), Interleaved: r.Intn(2) == 0}
		even := func(n int) int {
			if p.Size == 2 {
				return n + n%2
			}
			return n
		}
		p.YStride = p.C + r.Intn(3)
		p.RStride, p.CStride = r.Intn(30), r.Intn(5)
		yspan := (p.R-1)*p.YStride + p.C
		for d := range p.Outer {
			if r.Intn(4) == 0 {
				continue
			}
			n := 1 + r.Intn(5)
			p.Outer[d] = BlockDim{N: n, XStride: r.Intn(3 * yspan), YStride: even(yspan + r.Intn(4))}
			yspan += (n - 1) * p.Outer[d].YStride
		}
		p.X = 0x80000 + uint32(p.Size*r.Intn(8))
		p.Y = 0xB0000 + uint32(4*r.Intn(4))
		t.Run(fmt.Sprintf("%d-s%d-%dx%d-ys%d-rs%d-cs%d-w%d-b%v", i, p.Size, p.R, p.C, p.YStride, p.RStride, p.CStride, p.Workers, p.Outer), func(t *testing.T) {
			runGather(t, tl, p, int64(2000+i), []int{i % Slots})
		})
	}
}

func TestGatherErrors(t *testing.T) {
	ok := Gather{Size: 2, R: 4, C: 8, X: 0x80000, RStride: 1, CStride: 4, Y: 0x90000, YStride: 8, Workers: 6}
	cases := []struct {
		name string
		edit func(p *Gather)
		want string
	}{
		{"workers", func(p *Gather) { p.Workers = 0 }, "workers 0 out of range"},
		{"size", func(p *Gather) { p.Size = 1 }, "element size 1: want 4 or 2"},
		{"rows", func(p *Gather) { p.C = 0 }, "want positive dimensions"},
		{"stride", func(p *Gather) { p.CStride = -3 }, "strides 8, 1, -3 (Y, rows, columns): want 0..2^24"},
		{"y-stride", func(p *Gather) { p.YStride = 7 }, "row stride 7 of Y: want at least C=8"},
		{"x-align", func(p *Gather) { p.X++ }, "X at 0x80001 is not 2-byte aligned"},
		{"y-align", func(p *Gather) { p.Size, p.Y = 4, 0x90002 }, "Y at 0x90002 is not 4-byte aligned"},
		{"x-outside", func(p *Gather) { p.X = 0xE7FF0 }, "is outside tile memory"},
		{"interleaved", func(p *Gather) { p.Y, p.Interleaved = 0x70000, true }, "is outside interleaved memory"},
		{"overlap", func(p *Gather) { p.Y = 0x80010 }, "overlaps Y row 0"},
		{"outer-nest", func(p *Gather) { p.Outer[0] = BlockDim{2, 0, 31} }, "outer dimension 0: Y stride 31: want at least the 32 it repeats"},
		{"outer-odd", func(p *Gather) { p.Outer[1] = BlockDim{2, 0, 33} }, "outer dimension 1: Y stride 33: 2-byte blocks start words (want even)"},
		{"outer-y-align", func(p *Gather) { p.Outer[0], p.Y = BlockDim{2, 40, 32}, 0x90002 }, "Y at 0x90002: 2-byte blocks want it word-aligned"},
		{"outer-overlap", func(p *Gather) { p.Outer[0], p.Y = BlockDim{2, 40, 32}, 0x80020 }, "X [0x80000, 0x80090) and Y [0x80020, 0x800a0) overlap"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q := ok
			c.edit(&q)
			_, err := EmitGather(NewBuilder(newTile().p, codeBase), q)
			if err == nil || !strings.HasPrefix(err.Error(), "gather: ") || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one with %q", err, c.want)
			}
		})
	}
	if out := EmulateGather(ok, make([]byte, 10), make([]byte, 100)); out != nil {
		t.Errorf("short X: EmulateGather gave %d bytes, want nil", len(out))
	}
}

// TestGatherPairs checks that a transpose of 2-byte elements whose rows
// pair in source words takes the 2x2 blocks (1.5 issues an element on
// one worker) and fewer cycles than pairs of halves, and that a shape
// that does not pair keeps the half engine.
func TestGatherPairs(t *testing.T) {
	for _, c := range []struct {
		p     Gather
		pairs bool
	}{
		{Gather{Size: 2, R: 16, C: 16, YStride: 16, RStride: 1, CStride: 16}, true},
		{Gather{Size: 2, R: 64, C: 64, YStride: 64, RStride: 1, CStride: 64}, true},
		{Gather{Size: 2, R: 15, C: 16, YStride: 16, RStride: 1, CStride: 15}, false},
		{Gather{Size: 2, R: 16, C: 16, YStride: 16, RStride: 1, CStride: 16, X: 2}, false},
		{Gather{Size: 2, R: 16, C: 16, YStride: 16, RStride: 16, CStride: 1}, false},
	} {
		p := c.p
		p.X, p.Y, p.Workers = p.X+0x80000, 0xB0000, 6
		got, err := p.Cost()
		if err != nil {
			t.Fatal(err)
		}
		half := genBestSplit(p.gen(), p.Workers).cost()
		t.Logf("%dx%d (rows %d, columns %d apart): %d cycles, %d in halves", p.R, p.C, p.RStride, p.CStride, got.Cycles(), half.Cycles())
		if pairs := got.Cycles() < half.Cycles(); pairs != c.pairs {
			t.Errorf("%+v: %d cycles, %d in halves: pairs %v, want %v", c.p, got.Cycles(), half.Cycles(), pairs, c.pairs)
		}
	}
	work := func(n int) int64 {
		p := Gather{Size: 2, R: 2, C: n, YStride: n, RStride: 1, CStride: 2, X: 0x80000, Y: 0xB0000, Workers: 1}
		c, err := p.Cost()
		if err != nil {
			t.Fatal(err)
		}
		return c.Work[0]
	}
	if got := float64(work(2048)-work(1024)) / 2048 / Slots; got != 1.5 {
		t.Errorf("paired rows: %g issues an element, want 1.5", got)
	}
}

// TestGatherRate checks the per-element issue rates of Gather's doc from
// Cost (one worker, one long row).
func TestGatherRate(t *testing.T) {
	cases := []struct {
		name   string
		p      Gather
		issues float64 // per element
	}{
		{"s4", Gather{Size: 4, CStride: 3}, 1.5},
		{"s4-il", Gather{Size: 4, CStride: 3, Interleaved: true}, 1.25},
		{"s4-contiguous", Gather{Size: 4, CStride: 1}, 1},
		{"s4-big-stride", Gather{Size: 4, CStride: 9000}, 2.5},
		{"s2", Gather{Size: 2, CStride: 3}, 2.5},
		{"s2-even", Gather{Size: 2, CStride: 64}, 2},
		{"s2-contiguous", Gather{Size: 2, CStride: 1}, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			work := func(n int) int64 {
				p := c.p
				p.R, p.C, p.X, p.Y, p.Workers = 1, n, 0x80000, 0xB0000, 1
				cost, err := p.Cost()
				if err != nil {
					t.Fatal(err)
				}
				return cost.Work[0]
			}
			got := float64(work(2048)-work(1024)) / 1024 / Slots
			if d := cmp.Diff(c.issues, got); d != "" {
				t.Errorf("issues per element mismatch (-want +got):\n%s", d)
			}
		})
	}
}
