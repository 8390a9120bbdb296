package codegen

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"ipu.local/libs/numfmt"
)

// SumParts gives bit for bit the chain of Binary adds it replaces (and,
// with Out, the FP16 cast after it), with the cycles its Cost says, for
// part counts, lengths and worker counts it was not written around, with
// pairs and (Interleaved) 128-bit units.
func TestSumParts(t *testing.T) {
	tl := newTile()
	for si, sh := range []struct{ n, parts, stride, w int }{
		{1, 1, 0, 1}, {2, 3, 4, 6}, {7, 2, 8, 6}, {33, 5, 36, 3}, {250, 7, 256, 6}, {1001, 3, 1004, 6}, {64, 15, 64, 4}, {6, 4, 8, 6},
		{252, 3, 256, 6}, {1000, 3, 1000, 5}, {8, 1, 0, 6},
	} {
		for _, v := range []struct {
			name           string
			il, f16        bool
			y, x, yo, bias uint32
		}{
			{"pairs", false, false, nonIlBuf, ilBuf, 0, 0},
			{"quads", true, false, ilBuf + 0x20000, ilBuf, 0, 0},
			{"pairs-f16", false, true, nonIlBuf, ilBuf, nonIlBuf + 0x8004, 0},
			{"quads-f16", true, true, ilBuf + 0x20000, ilBuf, nonIlBuf + 0x8008, 0},
			{"quads-f16-bias", true, true, ilBuf + 0x20000, ilBuf, nonIlBuf + 0x8008, nonIlBuf + 0x4008},
		} {
			if v.f16 && sh.n%2 != 0 || v.bias != 0 && sh.n%4 != 0 {
				continue
			}
			t.Run(fmt.Sprintf("n%d-p%d-s%d-w%d-%s", sh.n, sh.parts, sh.stride, sh.w, v.name), func(t *testing.T) {
				r := rng(int64(7000 + si))
				y := randF32(r, sh.n, -1e3, 1e3)
				span := (sh.parts-1)*sh.stride + sh.n
				x := randF32(r, span, -1e3, 1e3)
				if sh.n >= 100 {
					copy(y[1:], specials)
					copy(x[5:], specials)
				}
				p := SumParts{N: sh.n, Y: v.y, X: v.x, Out: v.yo, Bias: v.bias, Parts: sh.parts, Stride: sh.stride, Workers: sh.w, Interleaved: v.il}
				tl.putF32(p.Y, y)
				tl.putF32(p.X, x)
				bias := make([]uint16, sh.n)
				if v.bias != 0 {
					// FP16 values of the sums' magnitude, so that the add
					// rounds, and some specials.
					for i, f := range randF32(r, sh.n, -1e3, 1e3) {
						bias[i] = numfmt.F32ToF16(math.Float32bits(f))
					}
					if sh.n >= 100 {
						copy(bias[9:], []uint16{0x7c00, 0xfc00, 0x7e00, 0x8000, 0x0001, 0x7bff, 0xfbff})
					}
					raw := make([]byte, 2*sh.n)
					for i, h := range bias {
						binary.LittleEndian.PutUint16(raw[2*i:], h)
					}
					tl.put(p.Bias, raw)
				}
				phase := si % Slots
				k, cycles := tl.runKernel(t, phase, func(b *Builder) (Kernel, error) { return EmitSumParts(b, p) })
				want := append([]float32{}, y...)
				for k := 0; k < sh.parts; k++ {
					for i := range want {
						want[i] = EmulateBinary(Add, want[i], x[k*sh.stride+i])
					}
				}
				if v.f16 {
					if diff := cmp.Diff(f32bits(y), f32bits(readF32(tl, p.Y, p.N))); diff != "" {
						t.Fatalf("Y written with an FP16 output (-want +got):\n%s", diff)
					}
					got := tl.get(p.Out, 2*p.N)
					for i, w := range want {
						e := numfmt.F32ToF16(math.Float32bits(w))
						if v.bias != 0 {
							e = EmulateBinaryF16(Add, e, bias[i])
						}
						if g := binary.LittleEndian.Uint16(got[2*i:]); g != e {
							t.Fatalf("element %d: FP16 %#04x, want %#04x (of %v)", i, g, e, w)
						}
					}
				} else if diff := cmp.Diff(f32bits(want), f32bits(readF32(tl, p.Y, p.N))); diff != "" {
					t.Fatalf("result mismatch (-want +got):\n%s", diff)
				}
				checkCycles(t, k, cycles, phase)
				if f, err := p.Cost(); err != nil || f.CyclesAt(phase) != k.CyclesAt(phase) {
					t.Errorf("Cost() = %v, %v; want the emitted kernel's %d", f.CyclesAt(phase), err, k.CyclesAt(phase))
				}
			})
		}
	}
}

// With 128-bit units a sum costs fewer issues than with pairs: per four
// elements 2 + 3*Parts instead of 4 + 4*Parts.
func TestSumPartsQuadsCheaper(t *testing.T) {
	p := SumParts{N: 256, Parts: 15, Stride: 256, Workers: Slots}
	pairs, err := p.Cost()
	if err != nil {
		t.Fatal(err)
	}
	p.Interleaved = true
	quads, err := p.Cost()
	if err != nil {
		t.Fatal(err)
	}
	// 64 units over 6 workers: 11 on the busiest, at 47 issues against
	// 22 pairs at 32.
	if d := pairs.Work[0] - quads.Work[0]; d != Slots*(22*32-11*47) {
		t.Errorf("pairs %v, quads %v: busiest worker saves %d cycles, want %d", pairs.Work, quads.Work, d, Slots*(22*32-11*47))
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
		{SumParts{N: 4, Y: nonIlBuf, X: ilBuf, Parts: 1, Workers: 1, Interleaved: true}, "interleaved memory"},
		{SumParts{N: 4, Y: ilBuf + 0x1008, X: ilBuf, Parts: 1, Workers: 1, Interleaved: true}, "16-byte aligned"},
		{SumParts{N: 4, Y: ilBuf + 0x1000, X: ilBuf, Parts: 2, Stride: 6, Workers: 1, Interleaved: true}, "multiple of 4"},
		{SumParts{N: 3, Y: nonIlBuf, X: ilBuf, Out: nonIlBuf + 0x100, Parts: 1, Workers: 1}, "even count"},
		{SumParts{N: 4, Y: nonIlBuf, X: ilBuf, Out: nonIlBuf + 0x102, Parts: 1, Workers: 1}, "aligned"},
		{SumParts{N: 4, Y: nonIlBuf, X: ilBuf, Out: nonIlBuf + 4, Parts: 1, Workers: 1}, "overlaps"},
		{SumParts{N: 4, Y: nonIlBuf, X: ilBuf, Out: nonIlBuf + 0x100, Bias: nonIlBuf + 0x200, Parts: 1, Workers: 1}, "a bias wants"},
		{SumParts{N: 4, Y: nonIlBuf, X: ilBuf, Parts: 1, Workers: 1, Act: Activation{On: true, Op: Relu}}, "an activation wants"},
		{SumParts{N: 4, Y: nonIlBuf, X: ilBuf, Out: nonIlBuf + 0x100, Parts: 1, Workers: 1, Act: Activation{On: true, Op: numUnary}}, "unknown activation"},
		{SumParts{N: 6, Y: ilBuf + 0x1000, X: ilBuf, Out: nonIlBuf + 0x100, Bias: nonIlBuf + 0x200, Parts: 1, Workers: 1, Interleaved: true}, "a bias wants"},
		{SumParts{N: 8, Y: ilBuf + 0x1000, X: ilBuf, Out: nonIlBuf + 0x100, Bias: nonIlBuf + 0x108, Parts: 1, Workers: 1, Interleaved: true}, "overlaps"},
		{SumParts{N: 4, Y: ilBuf + 0x1000, X: ilBuf, Out: nonIlBuf + 0x100, Bias: nonIlBuf + 0x204, Parts: 1, Workers: 1, Interleaved: true}, "aligned"},
	} {
		if _, err := EmitSumParts(b, c.p); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.p, err, c.want)
		}
	}
}

// An activation fused into the sum gives bit for bit the FP16 Unary that
// would follow it, for every operation, with pairs and 128-bit units,
// with and without a bias, and the cycles its Cost says.
func TestSumPartsActivation(t *testing.T) {
	tl := newTile()
	acts := []Unary{
		{Op: Neg}, {Op: Abs}, {Op: Relu}, {Op: Exp}, {Op: Sqrt}, {Op: Tanh}, {Op: Sigmoid}, {Op: GeluErf}, {Op: GeluTanh},
		{Op: PowConst, Exponent: 2}, {Op: PowConst, Exponent: 3}, {Op: Clip, Min: -6, Max: 6}, {Op: Log}, {Op: Erf},
		{Op: Softplus}, {Op: LeakyRelu, Alpha: 0.01}, {Op: Elu, Alpha: 1.5}, {Op: Selu, Alpha: 1.6732632, Gamma: 1.050701},
		{Op: HardSigmoid, Alpha: 0.2, Beta: 0.5}, {Op: HardSwish}, {Op: Floor}, {Op: Ceil}, {Op: Round}, {Op: Sign}, {Op: Sin}, {Op: Cos},
	}
	if len(acts) < int(numUnary) {
		t.Fatalf("%d activations tested, %d unary operations", len(acts), numUnary)
	}
	for ai, u := range acts {
		for _, v := range []struct {
			name       string
			il         bool
			n, parts   int
			y, yo, bia uint32
		}{
			{"pairs", false, 38, 3, nonIlBuf, nonIlBuf + 0x8004, 0},
			{"quads", true, 52, 2, ilBuf + 0x20000, nonIlBuf + 0x8008, 0},
			{"quads-bias", true, 124, 4, ilBuf + 0x20000, nonIlBuf + 0x8008, nonIlBuf + 0x4008},
		} {
			t.Run(fmt.Sprintf("%s-%v-%s", u.Op, u.Exponent, v.name), func(t *testing.T) {
				r := rng(int64(9000 + ai))
				stride := (v.n + 3) &^ 3
				y := randF32(r, v.n, -8, 8)
				x := randF32(r, (v.parts-1)*stride+v.n, -4, 4)
				copy(y[1:], specials)
				p := SumParts{N: v.n, Y: v.y, X: ilBuf, Out: v.yo, Bias: v.bia, Parts: v.parts, Stride: stride, Workers: 1 + ai%Slots,
					Interleaved: v.il, Act: ActivationOf(u)}
				tl.putF32(p.Y, y)
				tl.putF32(p.X, x)
				bias := make([]uint16, v.n)
				if v.bia != 0 {
					raw := make([]byte, 2*v.n)
					for i, f := range randF32(r, v.n, -2, 2) {
						bias[i] = numfmt.F32ToF16(math.Float32bits(f))
						binary.LittleEndian.PutUint16(raw[2*i:], bias[i])
					}
					tl.put(p.Bias, raw)
				}
				phase := ai % Slots
				k, cycles := tl.runKernel(t, phase, func(b *Builder) (Kernel, error) { return EmitSumParts(b, p) })
				got := tl.get(p.Out, 2*p.N)
				for i := range y {
					s := y[i]
					for k := 0; k < v.parts; k++ {
						s = EmulateBinary(Add, s, x[k*stride+i])
					}
					e := numfmt.F32ToF16(math.Float32bits(s))
					if v.bia != 0 {
						e = EmulateBinaryF16(Add, e, bias[i])
					}
					e = EmulateUnaryF16(u, e)
					if g := binary.LittleEndian.Uint16(got[2*i:]); g != e {
						t.Fatalf("element %d: FP16 %#04x, want %#04x", i, g, e)
					}
				}
				checkCycles(t, k, cycles, phase)
				if f, err := p.Cost(); err != nil || f.CyclesAt(phase) != k.CyclesAt(phase) {
					t.Errorf("Cost() = %v, %v; want the emitted kernel's %d", f.CyclesAt(phase), err, k.CyclesAt(phase))
				}
			})
		}
	}
}
