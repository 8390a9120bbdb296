package codegen

import (
	"encoding/binary"
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// randBytes returns n random bytes with float specials mixed in: the
// words (and halves) of NaNs with payloads, infinities, signed zeros and
// subnormals.
func randBytes(r *rand.Rand, n int) []byte {
	out := make([]byte, n)
	r.Read(out)
	specials := []uint32{0x7FC00001, 0xFFBFFFFF, 0x7F800001, 0x80000000, 0x7F800000, 0xFF800000, 0x00000001, 0x807FFFFF,
		0x7E017C01, 0xFC00FE01, 0x80000001, 0x03FF8400}
	for i := 0; i+4 <= n; i += 4 * (3 + r.Intn(5)) {
		binary.LittleEndian.PutUint32(out[i:], specials[r.Intn(len(specials))])
	}
	return out
}

// TestCopy runs Copy on the simulator: Y's words bit-exact copies of X's,
// every other byte of the area untouched, cycles equal to Cost at every
// phase for the first cases (phase 0 for the rest).
func TestCopy(t *testing.T) {
	cases := []struct {
		c          Copy
		xoff, yoff uint32 // byte offsets from the areas' bases
	}{
		{Copy{R: 1, W: 1024, XStride: 1024, YStride: 1024, Workers: 6, Interleaved: true}, 0, 0},
		{Copy{R: 1, W: 1024, XStride: 1024, YStride: 1024, Workers: 6}, 0, 0},
		{Copy{R: 7, W: 13, XStride: 15, YStride: 13, Workers: 6}, 4, 0},
		{Copy{R: 5, W: 33, XStride: 40, YStride: 37, Workers: 3, Interleaved: true}, 4, 12},
		{Copy{R: 130, W: 1, XStride: 3, YStride: 1, Workers: 6}, 8, 4},
		{Copy{R: 3, W: 130, XStride: 131, YStride: 133, Workers: 6, Interleaved: true}, 12, 8},
		{Copy{R: 1, W: 1, Workers: 1}, 0, 4},
		{Copy{R: 2, W: 3, XStride: 3, YStride: 3, Workers: 6}, 0, 0},
		{Copy{R: 64, W: 64, XStride: 64, YStride: 65, Workers: 5, Interleaved: true}, 0, 0},
		{Copy{R: 9, W: 17, XStride: 0, YStride: 18, Workers: 4}, 4, 4},
		{Copy{R: 5, W: 6, XStride: 9000, YStride: 8500, Workers: 6}, 0, 4},
		{Copy{R: 4, W: 9000, XStride: 9001, YStride: 9003, Workers: 2}, 4, 0},
		{Copy{R: 6, W: 2, XStride: 2, YStride: 5, Workers: 6, Interleaved: true}, 8, 0},
		{Copy{R: 17, W: 19, XStride: 21, YStride: 19, Workers: 1}, 12, 4},
		{Copy{R: 3, W: 5, XStride: 5, YStride: 5, Workers: 2}, 4, 8},
		// Blocks: a stride-2 window gather's rows (one word a row), by
		// window offset and by input row; rows of loops in loops of
		// blocks (three counters); X repeated; a level of one block.
		{Copy{R: 32, W: 1, XStride: 2, YStride: 1, Workers: 6, Outer: [2]BlockDim{{7, 1, 32}, {5, 70, 224}}}, 4, 0},
		{Copy{R: 20, W: 40, XStride: 41, YStride: 40, Workers: 2, Outer: [2]BlockDim{{3, 900, 800}, {3, 2800, 2400}}}, 8, 4},
		{Copy{R: 3, W: 13, XStride: 15, YStride: 13, Workers: 6, Interleaved: true, Outer: [2]BlockDim{{4, 50, 40}, {3, 0, 170}}}, 12, 8},
		{Copy{R: 5, W: 2, XStride: 3, YStride: 2, Workers: 4, Outer: [2]BlockDim{{1, 0, 0}, {9, 17, 10}}}, 0, 4},
		{Copy{R: 1, W: 3, XStride: 3, YStride: 3, Workers: 5, Outer: [2]BlockDim{{11, 5, 3}}}, 4, 4},
	}
	const xBase, yBase, guard = 0x80000, 0xB0000, 64
	tl := newTile()
	for ci, tc := range cases {
		p := tc.c
		p.X, p.Y = xBase+tc.xoff, yBase+tc.yoff
		name := fmt.Sprintf("%dx%d-s%d,%d-o%d,%d-w%d-il%v-b%v", p.R, p.W, p.XStride, p.YStride, tc.xoff, tc.yoff, p.Workers, p.Interleaved, p.Outer)
		t.Run(name, func(t *testing.T) {
			r := rng(int64(ci))
			xn := 4 * int(p.span(true))
			yn := 4 * int(p.span(false))
			x := randBytes(r, xn)
			area := randBytes(r, yn+2*guard)
			want := copyWant(p, x, area, guard)
			phases := []int{0}
			if ci < 4 {
				phases = []int{0, 1, 2, 3, 4, 5}
			}
			for _, phase := range phases {
				cycles := runCopy(t, tl, p, x, area, want, guard, phase)
				if d := cmp.Diff(x, tl.get(p.X, xn)); d != "" {
					t.Fatalf("phase %d: X changed (-want +got):\n%s", phase, d)
				}
				if c, err := p.Cost(); err != nil || c.CyclesAt(phase) != cycles {
					t.Errorf("Cost() = %v, %v; measured %d", c.CyclesAt(phase), err, cycles)
				}
			}
		})
	}
}

// copyWant returns the area around Y (guard bytes before it) after p
// copies from x, by the definition.
func copyWant(p Copy, x, area []byte, guard int) []byte {
	want := append([]byte(nil), area...)
	for _, o := range BlockOffsets(p.Outer) {
		for i := 0; i < p.R; i++ {
			xs, ys := o[0]+i*p.XStride, o[1]+i*p.YStride
			copy(want[guard+4*ys:guard+4*(ys+p.W)], x[4*xs:4*(xs+p.W)])
		}
	}
	return want
}

// TestCopyRandom copies random shapes, offsets and worker counts.
func TestCopyRandom(t *testing.T) {
	const xBase, yBase, guard = 0x80000, 0xB0000, 32
	tl := newTile()
	r := rng(99)
	for i := 0; i < 40; i++ {
		p := Copy{R: 1 + r.Intn(130), W: 1 + r.Intn(130), Workers: 1 + r.Intn(6), Interleaved: r.Intn(2) == 0}
		if r.Intn(4) == 0 {
			p.R = 1 + r.Intn(4)
		}
		p.XStride = p.W + r.Intn(5)
		p.YStride = p.W + r.Intn(5)
		if r.Intn(5) == 0 {
			p.XStride, p.YStride = p.W, p.W
		}
		p.X, p.Y = xBase+4*uint32(r.Intn(8)), yBase+4*uint32(r.Intn(8))
		t.Run(fmt.Sprintf("%d-%dx%d-s%d,%d-w%d", i, p.R, p.W, p.XStride, p.YStride, p.Workers), func(t *testing.T) {
			xn, yn := 4*((p.R-1)*p.XStride+p.W), 4*((p.R-1)*p.YStride+p.W)
			x, area := randBytes(r, xn), randBytes(r, yn+2*guard)
			want := append([]byte(nil), area...)
			for i := 0; i < p.R; i++ {
				copy(want[guard+4*i*p.YStride:guard+4*(i*p.YStride+p.W)], x[4*i*p.XStride:])
			}
			runCopy(t, tl, p, x, area, want, guard, i%Slots)
		})
	}
}

// runCopy runs Copy p at phase on tl with x at X and area around Y (guard
// bytes either side), checks that area becomes want and the cycles, and
// returns them.
func runCopy(t *testing.T, tl *tile, p Copy, x, area, want []byte, guard uint32, phase int) int64 {
	t.Helper()
	tl.put(p.X, x)
	tl.put(p.Y-guard, area)
	k, cycles := tl.runKernel(t, phase, func(b *Builder) (Kernel, error) { return EmitCopy(b, p) })
	if d := cmp.Diff(want, tl.get(p.Y-guard, len(area))); d != "" {
		t.Fatalf("phase %d: Y mismatch (-want +got):\n%s", phase, d)
	}
	checkCycles(t, k, cycles, phase)
	return cycles
}

// TestCopyBlocksRandom copies random blocks: shapes, strides (X's
// anything, Y's nested with gaps), offsets and worker counts.
func TestCopyBlocksRandom(t *testing.T) {
	const xBase, yBase, guard = 0x80000, 0xB0000, 32
	tl := newTile()
	r := rng(7)
	for i := 0; i < 40; i++ {
		p := Copy{R: 1 + r.Intn(12), W: 1 + r.Intn(12), Workers: 1 + r.Intn(6), Interleaved: r.Intn(2) == 0}
		p.XStride, p.YStride = r.Intn(2*p.W+1), p.W+r.Intn(3)
		yspan := (p.R-1)*p.YStride + p.W
		for d := range p.Outer {
			if r.Intn(4) == 0 {
				continue
			}
			n := 1 + r.Intn(6)
			p.Outer[d] = BlockDim{N: n, XStride: r.Intn(3 * yspan), YStride: yspan + r.Intn(4)}
			yspan += (n - 1) * p.Outer[d].YStride
		}
		p.X, p.Y = xBase+4*uint32(r.Intn(8)), yBase+4*uint32(r.Intn(8))
		t.Run(fmt.Sprintf("%d-%dx%d-s%d,%d-w%d-b%v", i, p.R, p.W, p.XStride, p.YStride, p.Workers, p.Outer), func(t *testing.T) {
			xn := 4 * int(p.span(true))
			yn := 4 * int(p.span(false))
			x, area := randBytes(r, xn), randBytes(r, yn+2*guard)
			want := copyWant(p, x, area, guard)
			phase := i % Slots
			cycles := runCopy(t, tl, p, x, area, want, guard, phase)
			if c, err := p.Cost(); err != nil || c.CyclesAt(phase) != cycles {
				t.Errorf("Cost() = %v, %v; measured %d", c.CyclesAt(phase), err, cycles)
			}
		})
	}
}

func TestCopyErrors(t *testing.T) {
	ok := Copy{R: 4, W: 8, X: 0x80000, XStride: 8, Y: 0x90000, YStride: 10, Workers: 6}
	cases := []struct {
		name string
		edit func(p *Copy)
		want string
	}{
		{"workers", func(p *Copy) { p.Workers = 7 }, "workers 7 out of range"},
		{"rows", func(p *Copy) { p.R = 0 }, "want positive dimensions"},
		{"huge", func(p *Copy) { p.R, p.W = 1<<20, 1<<20 }, "want positive dimensions"},
		{"stride", func(p *Copy) { p.XStride = -1 }, "row strides -1, 10"},
		{"y-stride", func(p *Copy) { p.YStride = 7 }, "row stride 7 of Y: want at least W=8"},
		{"x-align", func(p *Copy) { p.X += 2 }, "X at 0x80002 is not 4-byte aligned"},
		{"y-outside", func(p *Copy) { p.Y = 0xE7FF0 }, "Y [0xe7ff0, 0xe8088) is outside tile memory"},
		{"interleaved", func(p *Copy) { p.X, p.Interleaved = 0x60000, true }, "X [0x60000, 0x60080) is outside interleaved memory"},
		{"overlap", func(p *Copy) { p.Y = 0x80040 }, "X row 2 [0x80040, 0x80060) overlaps Y row 0 [0x80040, 0x80060)"},
		{"overlap-stride", func(p *Copy) { p.XStride, p.Y, p.YStride = 16, 0x80028, 16 }, "X row 1 [0x80040, 0x80060) overlaps Y row 0 [0x80028, 0x80048)"},
		{"outer-count", func(p *Copy) { p.Outer[0].N = -1 }, "outer dimension 0: -1 blocks"},
		{"outer-nest", func(p *Copy) { p.Outer[1] = BlockDim{2, 40, 37} }, "outer dimension 1: Y stride 37: want at least the 38 it repeats"},
		{"outer-total", func(p *Copy) { p.Outer = [2]BlockDim{{1 << 12, 0, 38}, {1 << 12, 0, 38 << 12}} }, "in all: want at most 2^24"},
		{"outer-overlap", func(p *Copy) { p.Outer[0], p.Y = BlockDim{3, 40, 40}, 0x80100 }, "X [0x80000, 0x801c0) and Y [0x80100, 0x802d8) overlap"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := c.edit
			q := ok
			p(&q)
			_, err := EmitCopy(NewBuilder(newTile().p, codeBase), q)
			if err == nil || !strings.HasPrefix(err.Error(), "copy: ") || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one with %q", err, c.want)
			}
		})
	}
	// Interleaved rows of X and Y that share no word are fine.
	q := ok
	q.XStride, q.Y, q.YStride = 16, 0x80020, 16
	if _, err := EmitCopy(NewBuilder(newTile().p, codeBase), q); err != nil {
		t.Errorf("interleaved rows: %v", err)
	}
}

// TestCopyRate checks the per-word issue rates of Copy's doc from Cost.
func TestCopyRate(t *testing.T) {
	cases := []struct {
		name   string
		x, y   uint32
		il     bool
		issues float64 // per word, one worker, large W
	}{
		{"aligned", 0x80000, 0x90000, false, 1},
		{"aligned-il", 0x80000, 0x90000, true, 0.5},
		{"off4", 0x80000, 0x90004, false, 1.5},
		{"off8-il", 0x80000, 0x90008, true, 0.75},
		{"off4-il", 0x80000, 0x90004, true, 1.25},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			work := func(w int) int64 {
				cost, err := Copy{R: 1, W: w, X: c.x, Y: c.y, Workers: 1, Interleaved: c.il}.Cost()
				if err != nil {
					t.Fatal(err)
				}
				return cost.Work[0]
			}
			got := float64(work(2048)-work(1024)) / 1024 / Slots
			if d := cmp.Diff(c.issues, got); d != "" {
				t.Errorf("issues per word mismatch (-want +got):\n%s", d)
			}
		})
	}
}
