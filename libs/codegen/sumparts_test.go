package codegen

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// SumParts gives bit for bit the chain of Binary adds it replaces, with
// the cycles its Cost says, for part counts, lengths and worker counts it
// was not written around.
func TestSumParts(t *testing.T) {
	tl := newTile()
	for si, sh := range []struct{ n, parts, stride, w int }{
		{1, 1, 0, 1}, {2, 3, 2, 6}, {7, 2, 8, 6}, {33, 5, 34, 3}, {250, 7, 256, 6}, {1001, 3, 1002, 6}, {64, 15, 64, 4},
	} {
		t.Run(fmt.Sprintf("n%d-p%d-s%d-w%d", sh.n, sh.parts, sh.stride, sh.w), func(t *testing.T) {
			r := rng(int64(7000 + si))
			y := randF32(r, sh.n, -1e3, 1e3)
			span := (sh.parts-1)*sh.stride + sh.n
			x := randF32(r, span, -1e3, 1e3)
			if sh.n >= 100 {
				copy(y[1:], specials)
				copy(x[5:], specials)
			}
			p := SumParts{N: sh.n, Y: nonIlBuf, X: ilBuf, Parts: sh.parts, Stride: sh.stride, Workers: sh.w}
			tl.putF32(p.Y, y)
			tl.putF32(p.X, x)
			phase := si % Slots
			k, cycles := tl.runKernel(t, phase, func(b *Builder) (Kernel, error) { return EmitSumParts(b, p) })
			got := readF32(tl, p.Y, p.N)
			want := append([]float32{}, y...)
			for k := 0; k < sh.parts; k++ {
				for i := range want {
					want[i] = EmulateBinary(Add, want[i], x[k*sh.stride+i])
				}
			}
			if diff := cmp.Diff(f32bits(want), f32bits(got)); diff != "" {
				t.Fatalf("result mismatch (-want +got):\n%s", diff)
			}
			checkCycles(t, k, cycles, phase)
			if f, err := p.Cost(); err != nil || f.CyclesAt(phase) != k.CyclesAt(phase) {
				t.Errorf("Cost() = %v, %v; want the emitted kernel's %d", f.CyclesAt(phase), err, k.CyclesAt(phase))
			}
		})
	}
}

func TestSumPartsRefuses(t *testing.T) {
	b := NewBuilder(newTile().p, codeBase)
	for _, c := range []struct {
		p    SumParts
		want string
	}{
		{SumParts{N: 4, Y: nonIlBuf, X: ilBuf, Parts: 0, Workers: 1}, "part count 0"},
		{SumParts{N: 4, Y: nonIlBuf, X: ilBuf, Parts: 2, Stride: 3, Workers: 1}, "part stride 3"},
		{SumParts{N: 4, Y: nonIlBuf, X: ilBuf, Parts: 3, Stride: 8192, Workers: 1}, "16-bit offset"},
		{SumParts{N: 4, Y: ilBuf + 8, X: ilBuf, Parts: 2, Stride: 4, Workers: 1}, "overlaps"},
		{SumParts{N: 4, Y: nonIlBuf + 4, X: ilBuf, Parts: 1, Workers: 1}, "aligned"},
	} {
		if _, err := EmitSumParts(b, c.p); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.p, err, c.want)
		}
	}
}
