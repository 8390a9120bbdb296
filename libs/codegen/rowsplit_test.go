package codegen

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// runLaunches runs the Rows kernels ps back to back from phase
// (runChain).
func (t *tile) runLaunches(tb testing.TB, phase int, ps []Rows) ([]Kernel, int64) {
	tb.Helper()
	emits := make([]func(b *Builder) (Kernel, error), len(ps))
	for i, p := range ps {
		emits[i] = func(b *Builder) (Kernel, error) { return EmitRows(b, p) }
	}
	return t.runChain(tb, phase, emits...)
}

// chainedCycles returns the cycles of kernels run back to back from
// phase.
func chainedCycles(ks []Kernel, phase int) int64 {
	var total int64
	for _, k := range ks {
		total += k.CyclesAt((phase + int(total%Slots)) % Slots)
	}
	return total
}

// rowsCase is one Rows problem of the split tests.
type rowsCase struct {
	op                     RowOp
	in, out, sf16          bool
	scale, bias, mean, inv bool
	inPlace                bool
	quad                   bool // ScratchInterleaved, the scratch at spScratchQ
	r, c                   int
}

func (rc rowsCase) String() string {
	s := fmt.Sprintf("%s-in%v-out%v", rc.op, rc.in, rc.out)
	if rc.op == LayerNorm {
		s += fmt.Sprintf("-s%v-g%v-b%v-o%v", rc.sf16, rc.scale, rc.bias, rc.mean)
	}
	if rc.quad {
		s += "-quad"
	}
	return s + fmt.Sprintf("/%dx%d", rc.r, rc.c)
}

// Addresses of the split tests.
const (
	spXBase, spYBase, spGBase, spBBase, spMBase, spIBase, spScratch, spGuard = 0x80000, 0xA0000, 0x60000, 0x62000, 0x64000, 0x64800, 0x65000, 32
	// spScratchQ is the scratch of ScratchInterleaved launches.
	spScratchQ = 0xC0000
)

// scratchOf returns the test scratch of p: spScratchQ with
// ScratchInterleaved, else spScratch.
func scratchOf(p Rows) uint32 {
	if p.ScratchInterleaved {
		return spScratchQ
	}
	return spScratch
}

// rows returns the problem's parameters (padded strides).
func (rc rowsCase) rows() Rows {
	p := Rows{Op: rc.op, R: rc.r, C: rc.c, X: spXBase, Y: spYBase, Workers: Slots, Epsilon: 1e-3, InF16: rc.in, OutF16: rc.out, ScaleF16: rc.sf16}
	pad := func(c int, f16 bool) int {
		if f16 {
			return (c+3)&^3 + 4
		}
		return (c+1)&^1 + 2
	}
	p.XStride, p.YStride = pad(rc.c, rc.in), pad(rc.c, rc.out)
	if rc.scale {
		p.Scale = spGBase
	}
	if rc.bias {
		p.Bias = spBBase
	}
	if rc.mean {
		p.Mean = spMBase
	}
	if rc.inv {
		p.InvStdDev = spIBase
	}
	if rc.inPlace {
		p.Y, p.YStride = p.X, p.XStride
	}
	p.ScratchInterleaved = rc.quad
	return p
}

// rowsData is a problem's inputs and the expected bytes of Y's area.
type rowsData struct {
	x, g, b, area []byte
}

func (rc rowsCase) data(p Rows, seed int64) rowsData {
	r := rng(seed)
	lo, hi := -8.0, 8.0
	if p.Op == LayerNorm {
		lo, hi = -1, 5
	}
	var d rowsData
	xe := int(p.xSize())
	d.x = rowBytes(r, p.R*p.XStride, p.InF16, lo, hi, false)
	for i := 1; i < p.R; i += 3 {
		copy(d.x[xe*i*p.XStride:], rowBytes(r, p.C, p.InF16, lo, hi, true))
	}
	if rc.scale {
		d.g = rowBytes(r, p.C, p.ScaleF16, 0.5, 1.5, false)
	}
	if rc.bias {
		d.b = rowBytes(r, p.C, p.ScaleF16, -1, 1, false)
	}
	d.area = randBytes(r, p.yspan()+2*spGuard)
	if p.X == p.Y {
		copy(d.area[spGuard:], d.x[:p.yspan()])
	}
	return d
}

// yspan returns the bytes of Y's rows.
func (p Rows) yspan() int {
	if p.Op.reduces() {
		return int(p.ySize()) * p.R
	}
	return int(p.ySize()) * ((p.R-1)*p.YStride + p.C)
}

// expect returns Y's area, Mean and InvStdDev as the emulation of p says.
func (d rowsData) expect(t *testing.T, p Rows) (area []byte, mus, rs []uint32) {
	t.Helper()
	area = append([]byte(nil), d.area...)
	xe, ye := int(p.xSize()), int(p.ySize())
	for i := 0; i < p.R; i++ {
		y, mu, rr := EmulateRowBytes(p, d.x[xe*i*p.XStride:], d.g, d.b)
		if y == nil {
			t.Fatal("EmulateRowBytes gave nil")
		}
		at := spGuard + ye*i*p.YStride
		if p.Op.reduces() {
			at = spGuard + ye*i
		}
		copy(area[at:], y)
		mus, rs = append(mus, f32bits([]float32{mu})...), append(rs, f32bits([]float32{rr})...)
	}
	return area, mus, rs
}

// runSplit runs the launches on the problem's data and compares Y's area,
// Mean and InvStdDev with the emulation, and the cycles with the costs.
func (tl *tile) runSplit(t *testing.T, seq []Rows, d rowsData, phase int) int64 {
	t.Helper()
	p := seq[0]
	want, mus, rs := d.expect(t, p)
	tl.put(p.X, d.x)
	if d.g != nil {
		tl.put(p.Scale, d.g)
	}
	if d.b != nil {
		tl.put(p.Bias, d.b)
	}
	tl.put(p.Y-spGuard, d.area)
	ks, cycles := tl.runLaunches(t, phase, seq)
	if diff := cmp.Diff(want, tl.get(p.Y-spGuard, len(want))); diff != "" {
		t.Fatalf("Y mismatch (-want +got):\n%s", diff)
	}
	if p.Mean != 0 {
		if diff := cmp.Diff(mus, tl.getBits(p.Mean, p.R)); diff != "" {
			t.Errorf("mean mismatch (-want +got):\n%s", diff)
		}
	}
	if p.InvStdDev != 0 {
		if diff := cmp.Diff(rs, tl.getBits(p.InvStdDev, p.R)); diff != "" {
			t.Errorf("inverse std mismatch (-want +got):\n%s", diff)
		}
	}
	if want := chainedCycles(ks, phase); cycles != want {
		t.Errorf("cycles %d, want %d (the launches' costs back to back)", cycles, want)
	}
	var costs []Kernel
	for _, q := range seq {
		c, err := q.Cost()
		if err != nil {
			t.Fatal(err)
		}
		costs = append(costs, Kernel{Cost: c})
	}
	if got, want := chainedCycles(costs, phase), chainedCycles(ks, phase); got != want {
		t.Errorf("Cost() gives %d cycles, the emitted kernels %d", got, want)
	}
	return cycles
}

// splitVariants are the ops and options of the split tests.
func splitVariants() []rowsCase {
	var out []rowsCase
	for _, io := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
		for _, op := range []RowOp{Softmax, LogSoftmax, ReduceSum, ReduceMean, LayerNorm} {
			out = append(out, rowsCase{op: op, in: io[0], out: io[1]})
		}
		out = append(out,
			rowsCase{op: LayerNorm, in: io[0], out: io[1], scale: true, bias: true, sf16: io[0], mean: true, inv: true},
			rowsCase{op: LayerNorm, in: io[0], out: io[1], scale: true, sf16: !io[1]},
			rowsCase{op: LayerNorm, in: io[0], out: io[1], bias: true, inv: true})
	}
	return out
}

// forcedSplit returns a split of p other than RowsSplit's: k chunks of
// the smallest allowed length, or nil.
func forcedSplit(p Rows, k int) []Rows {
	g := p.granule()
	L := ((p.C+k-1)/k + g - 1) / g * g
	if k < 2 || (k-1)*L >= p.C {
		return nil
	}
	return p.splitSeq(k, L, scratchOf(p))
}

// TestRowsSplit runs split sequences on the simulator for every op and
// FP32/FP16 combination, R 1..7 and C from 1 to 1000: every byte of Y's
// area (rows, padding, guard), Mean and InvStdDev as EmulateRowBytes
// says, the cycles of the launches back to back equal to their costs.
// Besides RowsSplit's choice it runs a forced split of 2 or 3 chunks
// (so that short rows, which RowsSplit leaves whole, run split too).
func TestRowsSplit(t *testing.T) {
	tl := newTile()
	cs := []int{1, 2, 3, 7, 8, 64, 127, 128, 768, 1000}
	n := 0
	for vi, v := range splitVariants() {
		for r := 1; r <= 7; r++ {
			for ci, c := range cs {
				rc := v
				rc.r, rc.c = r, c
				rc.inPlace = rc.in == rc.out && !rc.op.reduces() && (r+ci)%3 == 0
				n++
				phase := n % Slots
				seed := int64(10000*vi + 100*r + ci)
				rc.quad = (r+ci)%2 == 0 // partials four at a time
				t.Run(rc.String(), func(t *testing.T) {
					p := rc.rows()
					seq, bytes, err := RowsSplit(p, scratchOf(p))
					if err != nil {
						t.Fatal(err)
					}
					if bytes != seq[0].ScratchBytes() {
						t.Errorf("RowsSplit gave %d scratch bytes, its launches use %d", bytes, seq[0].ScratchBytes())
					}
					d := rc.data(p, seed)
					tl.runSplit(t, seq, d, phase)
					if r > 3 && c > 128 {
						return // the large cases once
					}
					if f := forcedSplit(p, 2+(r+ci)%2); f != nil && (len(seq) == 1 || f[0].Chunks != seq[0].Chunks) {
						tl.runSplit(t, f, d, (phase+3)%Slots)
					}
				})
			}
		}
	}
}

// TestRowsSplitLaunchCycles runs each launch of a few sequences alone at
// every phase: cycles equal to its Cost().CyclesAt(phase).
func TestRowsSplitLaunchCycles(t *testing.T) {
	tl := newTile()
	for _, rc := range []rowsCase{
		{op: LayerNorm, r: 1, c: 768, in: true, out: true, scale: true, bias: true, sf16: true, mean: true, inv: true},
		{op: Softmax, r: 4, c: 128, in: true, out: true},
		{op: ReduceMean, r: 5, c: 1000, in: true, out: true},
		{op: LogSoftmax, r: 2, c: 127},
		{op: LayerNorm, r: 1, c: 768, in: true, out: true, scale: true, bias: true, sf16: true, mean: true, inv: true, quad: true},
		{op: Softmax, r: 1, c: 1000, in: true, out: true, quad: true},
		{op: ReduceSum, r: 1, c: 1000, quad: true},
	} {
		t.Run(rc.String(), func(t *testing.T) {
			seq, _, err := RowsSplit(rc.rows(), scratchOf(rc.rows()))
			if err != nil {
				t.Fatal(err)
			}
			if len(seq) < 2 {
				t.Fatalf("RowsSplit left %s whole", rc)
			}
			for _, q := range seq {
				c, err := q.Cost()
				if err != nil {
					t.Fatal(err)
				}
				for phase := 0; phase < Slots; phase++ {
					k, cycles := tl.runKernel(t, phase, func(b *Builder) (Kernel, error) { return EmitRows(b, q) })
					if c.CyclesAt(phase) != cycles || k.CyclesAt(phase) != cycles {
						t.Errorf("launch %d at phase %d: Cost %d, kernel %d, measured %d", q.Phase, phase, c.CyclesAt(phase), k.CyclesAt(phase), cycles)
					}
				}
			}
		})
	}
}

// TestRowsSplitGain checks that RowsSplit splits every op with R <= 4
// and C >= 128 into a sequence faster than the whole-row kernel, and
// logs the ratios (split / whole cycles, from the costs, which the tests
// above check against the simulator).
func TestRowsSplitGain(t *testing.T) {
	for _, v := range splitVariants() {
		var line []string
		for r := 1; r <= 7; r++ {
			for _, c := range []int{128, 768, 1000} {
				rc := v
				rc.r, rc.c = r, c
				p := rc.rows()
				whole, err := p.Cost()
				if err != nil {
					t.Fatal(err)
				}
				seq, _, err := RowsSplit(p, spScratch)
				if err != nil {
					t.Fatal(err)
				}
				var costs []Cost
				for _, q := range seq {
					c, err := q.Cost()
					if err != nil {
						t.Fatal(err)
					}
					costs = append(costs, c)
				}
				split := sequenceCycles(costs)
				if r <= 4 && (len(seq) < 2 || split >= whole.Cycles()+LaunchCallCycles) {
					t.Errorf("%s: split %d cycles (%d launches), whole %d", rc, split, len(seq), whole.Cycles())
				}
				line = append(line, fmt.Sprintf("%dx%d:%.2f", r, c, float64(split)/float64(whole.Cycles())))
			}
		}
		rc := v
		rc.r, rc.c = 0, 0
		t.Logf("%s %s", strings.TrimSuffix(rc.String(), "/0x0"), strings.Join(line, " "))
	}
}

// TestRowsSplitErrors checks the split parameters: errors, never panics.
func TestRowsSplitErrors(t *testing.T) {
	tl := newTile()
	base := Rows{Op: Softmax, R: 2, C: 100, X: 0x80000, XStride: 100, Y: 0x90000, YStride: 100, Workers: 6}
	split := func(f func(p *Rows)) Rows {
		p := base
		p.Phase, p.Chunks, p.ChunkLen, p.Scratch = 1, 4, 26, 0x70000
		f(&p)
		return p
	}
	cases := []struct {
		p    Rows
		want string
	}{
		{split(func(p *Rows) { p.Phase = 4 }), "phase 4 out of range [0, 3]"},
		{split(func(p *Rows) { p.Op, p.Phase = ReduceSum, 3 }), "phase 3 out of range [0, 2]"},
		{split(func(p *Rows) { p.Phase = -1 }), "phase -1 out of range"},
		{split(func(p *Rows) { p.ChunkLen = 25 }), "4 chunks of 25 elements for rows of 100: want 2 or more chunks of a multiple of 2 elements"},
		{split(func(p *Rows) { p.Chunks, p.ChunkLen = 5, 26 }), "5 chunks of 26 elements"},
		{split(func(p *Rows) { p.Chunks, p.ChunkLen = 3, 26 }), "3 chunks of 26 elements"},
		{split(func(p *Rows) { p.Chunks = 1 << 40 }), "chunks of 26 elements"},
		{split(func(p *Rows) { p.InF16, p.XStride = true, 100 }), "multiple of 4 elements"},
		{split(func(p *Rows) { p.R, p.C, p.XStride, p.YStride, p.Chunks, p.ChunkLen = 2000, 6, 6, 6, 3, 2 }), "2000 rows of 3 chunks: want at most 4096 chunks in all"},
		{split(func(p *Rows) { p.Scratch = 0x70004 }), "scratch at 0x70004 is not 8-byte aligned"},
		{split(func(p *Rows) { p.Scratch = 0x80010 }), "overlaps"},
		{split(func(p *Rows) { p.Scratch = 0 }), "scratch [0x0, 0x40) is outside tile memory"},
		{split(func(p *Rows) { p.ScratchInterleaved = true }), "scratch [0x70000, 0x70040) is outside interleaved memory"},
		{split(func(p *Rows) { p.ScratchInterleaved, p.Scratch = true, 0xC0008 }), "scratch at 0xc0008 is not 16-byte aligned"},
		{func() Rows { p := base; p.Scratch = 0x70000; return p }(), "chunks, chunk length and scratch belong to a split launch"},
		{func() Rows { p := base; p.Chunks = 2; return p }(), "belong to a split launch"},
	}
	for i, c := range cases {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			_, err := EmitRows(NewBuilder(tl.p, codeBase), c.p)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("EmitRows: error %v, want one with %q", err, c.want)
			}
			if strings.Contains(c.want, "scratch [") || strings.Contains(c.want, "overlaps") || strings.Contains(c.want, "aligned") {
				return // addresses: checked when emitting
			}
			if _, err := c.p.Cost(); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Cost: error %v, want one with %q", err, c.want)
			}
		})
	}
	for i, c := range []struct {
		p       Rows
		scratch uint32
		want    string
	}{
		{base, 0x70004, "softmax: scratch at 0x70004 is not 8-byte aligned"},
		{split(func(*Rows) {}), 0x70000, "softmax: split of launch 1 of a split sequence"},
		{func() Rows { p := base; p.C = 0; return p }(), 0x70000, "matrix 2x0"},
		{func() Rows { p := base; p.Workers = 7; return p }(), 0x70000, "workers 7 out of range"},
	} {
		t.Run(fmt.Sprint("split", i), func(t *testing.T) {
			if _, _, err := RowsSplit(c.p, c.scratch); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("RowsSplit: error %v, want one with %q", err, c.want)
			}
		})
	}
	q := split(func(*Rows) {})
	if y, _, _ := EmulateRowBytes(q, make([]byte, 4*99), nil, nil); y != nil {
		t.Errorf("short row: EmulateRowBytes gave %d bytes, want nil", len(y))
	}
}

// TestRowsSplitRandom gives Cost and EmitRows random split parameters:
// an error or a kernel, never a panic.
func TestRowsSplitRandom(t *testing.T) {
	tl := newTile()
	r := rand.New(rand.NewSource(7))
	pick := func(v ...int) int { return v[r.Intn(len(v))] }
	for i := 0; i < 2000; i++ {
		p := Rows{Op: RowOp(r.Intn(6)), R: pick(-1, 0, 1, 2, 5, 7, 1<<30), C: pick(-3, 0, 1, 3, 8, 100, 5000, 1<<40),
			X: 0x80000, Y: 0xA0000, Workers: pick(0, 1, 3, 6, 7), InF16: r.Intn(2) == 0, OutF16: r.Intn(2) == 0,
			Phase: pick(-1, 0, 1, 2, 3, 4), Chunks: pick(-1, 0, 1, 2, 3, 7, 1<<40), ChunkLen: pick(-4, 0, 1, 2, 4, 12, 64, 1<<40),
			Scratch: uint32(pick(0, 0x70000, 0x70004, 0xE7FF8))}
		p.XStride, p.YStride = pick(p.C, p.C+1, 8, 1<<40), pick(p.C, p.C+3, 0)
		if _, err := p.Cost(); err == nil {
			_, _ = EmitRows(NewBuilder(tl.p, codeBase), p) // no panic is the point

		}
		_, _, _ = RowsSplit(p, p.Scratch)
	}
}

// TestRowsSplitLong runs splits whose chunks are longer than an rpti
// count (pairs, FP16 quads).
func TestRowsSplitLong(t *testing.T) {
	tl := newTile()
	for _, rc := range []rowsCase{
		{op: Softmax, r: 1, c: 16400},
		{op: LayerNorm, r: 1, c: 32770, in: true, out: true, scale: true, bias: true, sf16: true},
		{op: ReduceSum, r: 2, c: 16390, in: true},
	} {
		t.Run(rc.String(), func(t *testing.T) {
			p := rc.rows()
			if rc.scale {
				p.Scale, p.Bias = 0xB8000, 0xD0000 // 64 KiB and 4 bytes each
			}
			seq := forcedSplit(p, 2)
			if seq == nil {
				t.Fatal("no split")
			}
			tl.runSplit(t, seq, rc.data(p, 5), 1)
		})
	}
}
