package codegen

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"ipu.local/libs/numfmt"
)

// The casts to FP8 from FP32 and FP16, with and without Interleaved, in
// one and two dimensions, odd sizes and row strides, every worker
// count: the bytes are numfmt's (EmulateCast), the padding after every
// row of Y is kept, and the cycles are the cost model's.
func TestCastToF8Paths(t *testing.T) {
	tl := newTile()
	type shape struct{ r, n, xs, ys int }
	shapes := []shape{{1, 1, 0, 0}, {1, 3, 0, 0}, {1, 4, 0, 0}, {1, 7, 0, 0}, {1, 9, 0, 0}, {1, 15, 0, 0},
		{1, 16, 0, 0}, {1, 17, 0, 0}, {1, 31, 0, 0}, {1, 100, 0, 0}, {1, 257, 0, 0},
		{3, 5, 16, 16}, {4, 19, 32, 32}, {5, 33, 48, 48}, {2, 16, 0, 32}, {7, 40, 64, 48}, {9, 8, 16, 16}}
	formats := []struct {
		f     numfmt.Format
		scale int
		sat   bool
	}{{numfmt.E4M3FNUZ, 0, true}, {numfmt.E5M2, -1, false}, {numfmt.E4M3FN, 2, false}}
	i := 0
	for _, kind := range []CastKind{F32ToF8, F16ToF8} {
		for _, wide := range []bool{false, true} {
			for si, sh := range shapes {
				for w := 1; w <= Slots; w++ {
					i++
					fm := formats[i%len(formats)]
					name := fmt.Sprintf("%s/wide%v/r%d-n%d-xs%d-ys%d/w%d", kind, wide, sh.r, sh.n, sh.xs, sh.ys, w)
					t.Run(name, func(t *testing.T) {
						p := Cast{Kind: kind, N: sh.n, R: sh.r, XStride: sh.xs, YStride: sh.ys, X: ilBuf, Y: ilBuf + 0x8000,
							Format: fm.f, Scale: fm.scale, Saturate: fm.sat, Workers: w, Interleaved: wide}
						if sh.r <= 1 {
							p.R = 0
						}
						if !wide && si%2 == 1 {
							p.X = nonIlBuf // the narrow path works anywhere
						}
						runCastRows(t, tl, p, int64(i), i%Slots)
					})
				}
			}
		}
	}
}

// runCastRows runs p on inputs from seed and checks its bytes and cycles.
func runCastRows(t *testing.T, tl *tile, p Cast, seed int64, phase int) {
	t.Helper()
	ein, eout := p.Kind.sizes()
	rows := max(p.R, 1)
	xs, ys := p.XStride, p.YStride
	if rows == 1 {
		xs, ys = p.N, p.N
	}
	xrows := rows
	if xs == 0 {
		xrows = 1
	}
	x := castInput(rng(seed), p.Kind, xs*(xrows-1)+p.N)
	tl.put(p.X, x)
	ySize := eout*(ys*(rows-1)+p.N) + 16
	guard := bytes.Repeat([]byte{0xA5}, ySize)
	tl.put(p.Y, guard)
	k, cycles := tl.runKernel(t, phase, func(b *Builder) (Kernel, error) { return EmitCast(b, p) })
	got := tl.get(p.Y, ySize)
	want := append([]byte(nil), guard...)
	row := p
	row.R, row.XStride, row.YStride = 0, 0, 0
	for r := 0; r < rows; r++ {
		in := x[ein*xs*r:]
		if p.XStride == 0 {
			in = x
		}
		copy(want[eout*ys*r:], EmulateCast(row, in[:ein*p.N]))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("result mismatch (-want +got):\n%s", diff)
	}
	checkCycles(t, k, cycles, phase)
}

// The elements per cycle of the long casts to FP8, on six workers: the
// cost model's, which the simulator confirms.
func TestCastToF8Rate(t *testing.T) {
	tl := newTile()
	for _, tc := range []struct {
		kind CastKind
		wide bool
		min  float64
	}{{F32ToF8, false, 0.78}, {F32ToF8, true, 0.97}, {F16ToF8, false, 1.55}, {F16ToF8, true, 2.2}} {
		const n = 6 * 16 * 200
		p := Cast{Kind: tc.kind, N: n, X: ilBuf, Y: ilBuf + 0x20000, Format: numfmt.E4M3FNUZ, Saturate: true, Workers: Slots, Interleaved: tc.wide}
		x := castInput(rng(7), p.Kind, n)
		tl.put(p.X, x)
		k, cycles := tl.runKernel(t, 0, func(b *Builder) (Kernel, error) { return EmitCast(b, p) })
		checkCycles(t, k, cycles, 0)
		rate := float64(n) / float64(cycles)
		t.Logf("%s interleaved %v: %d elements in %d cycles, %.3f per cycle", tc.kind, tc.wide, n, cycles, rate)
		if rate < tc.min {
			t.Errorf("%s interleaved %v: %.3f elements per cycle, want at least %.2f", tc.kind, tc.wide, rate, tc.min)
		}
	}
}

// Interleaved is checked: arrays outside interleaved memory, or rows
// not 16-byte aligned, are refused.
func TestCastInterleavedChecked(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    Cast
	}{
		{"x-outside", Cast{Kind: F16ToF8, N: 32, X: nonIlBuf, Y: ilBuf, Workers: 6, Interleaved: true}},
		{"y-unaligned", Cast{Kind: F16ToF8, N: 32, X: ilBuf, Y: ilBuf + 0x1008, Workers: 6, Interleaved: true}},
		{"row-stride", Cast{Kind: F32ToF8, N: 6, R: 3, XStride: 6, YStride: 8, X: ilBuf, Y: ilBuf + 0x1000, Workers: 6, Interleaved: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBuilder(newTile().p, codeBase)
			if _, err := EmitCast(b, tc.p); err == nil {
				t.Fatal("no error")
			} else {
				t.Log(err)
			}
		})
	}
}
