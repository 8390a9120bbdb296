package codegen

import (
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"

	"ipu.local/libs/numfmt"
)

// specials are placed at the start of some inputs: the bit-exact check
// covers them, the tolerance check skips non-finite values.
var specials = []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)),
	float32(math.NaN()), 1e-40, -3e38, 3e38}

// sizes and worker counts every elementwise test runs.
var ewShapes = []struct{ n, w int }{{1, 6}, {2, 6}, {7, 6}, {13, 1}, {64, 4}, {101, 6}, {1000, 6}}

func readF32(tl *tile, addr uint32, n int) []float32 {
	out := make([]float32, n)
	for i, w := range tl.getBits(addr, n) {
		out[i] = math.Float32frombits(w)
	}
	return out
}

func checkCycles(t *testing.T, k Kernel, measured int64, phase int) {
	t.Helper()
	if diff := cmp.Diff(k.CyclesAt(phase), measured); diff != "" {
		t.Errorf("cycles mismatch (-formula +measured):\n%s", diff)
	}
}

// finite64 reports whether every value is finite.
func finite64(v ...float64) bool {
	for _, x := range v {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return false
		}
	}
	return true
}

func TestUnary(t *testing.T) {
	tl := newTile()
	type opCase struct {
		p      Unary
		lo, hi float64
		exact  func(x float64) float64
		// bound is the allowed |device - exact| for input x and device
		// result y (derived from the roundings in the op's definition).
		bound func(x, y float64) float64
	}
	one := func(x, y float64) float64 { return u * math.Abs(y) }
	zero := func(x, y float64) float64 { return 0 }
	cases := []opCase{
		{Unary{Op: Neg}, -4, 4, func(x float64) float64 { return -x }, zero},
		{Unary{Op: Abs}, -4, 4, math.Abs, zero},
		{Unary{Op: Relu}, -4, 4, func(x float64) float64 { return math.Max(x, 0) }, zero},
		{Unary{Op: Exp}, -10, 10, math.Exp, one},
		{Unary{Op: Sqrt}, 0, 100, math.Sqrt, one},
		{Unary{Op: Tanh}, -4, 4, math.Tanh, one},
		// exp, add, rcp: three roundings, each relative error <= u, the
		// first damped by e/(1+e) < 1.
		{Unary{Op: Sigmoid}, -10, 10, func(x float64) float64 { return 1 / (1 + math.Exp(-x)) },
			func(x, y float64) float64 { return 3.01 * u * math.Abs(y) }},
		// c, x*c, erf, 1+t, 0.5x, product: erf's argument is off by <= 2u
		// relative (|erf'(z) z| <= 0.5), erf and 1+t add u each on a
		// value below 2, the product u: <= |x/2| * 3.5u + u|y|.
		{Unary{Op: GeluErf}, -5, 5, func(x float64) float64 { return 0.5 * x * (1 + math.Erf(x/math.Sqrt2)) },
			func(x, y float64) float64 { return 3.5*u*math.Abs(x/2) + 1.01*u*math.Abs(y) }},
		// The argument v*c0 of tanh carries <= 6u relative error on the
		// sum of magnitudes |x| + c1|x|^3 (times c0 < 0.8); tanh' <= 1.
		{Unary{Op: GeluTanh}, -5, 5, func(x float64) float64 {
			return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
		}, func(x, y float64) float64 {
			ax := math.Abs(x)
			return math.Abs(x/2)*(6*u*(ax+0.044715*ax*ax*ax)+2*u) + 1.01*u*math.Abs(y)
		}},
		{Unary{Op: PowConst, Exponent: 1.7}, 0, 8, func(x float64) float64 { return math.Pow(x, float64(float32(1.7))) }, one},
		{Unary{Op: PowConst, Exponent: 2}, -8, 8, func(x float64) float64 { return x * x }, one},
		{Unary{Op: Clip, Min: -1.5, Max: 2.25}, -4, 4, func(x float64) float64 { return math.Min(math.Max(x, -1.5), 2.25) }, zero},
		{Unary{Op: Log}, 0.01, 100, math.Log, one},
		{Unary{Op: Erf}, -4, 4, math.Erf, one},
		// exp(-|x|) and 1+e err by <= u each on a value <= 2 (log's
		// argument), log adds u*log 2, the sum u|y|.
		{Unary{Op: Softplus}, -10, 10, func(x float64) float64 { return math.Max(x, 0) + math.Log1p(math.Exp(-math.Abs(x))) },
			func(x, y float64) float64 { return 3*u + 1.01*u*math.Abs(y) }},
		{Unary{Op: LeakyRelu, Alpha: 0.1}, -4, 4, func(x float64) float64 {
			if x < 0 {
				return x * float64(float32(0.1))
			}
			return x
		}, one},
		// e errs by u*e <= u, e-1 by u|e-1| <= u, then *alpha and its
		// rounding.
		{Unary{Op: Elu, Alpha: 1.3}, -6, 4, func(x float64) float64 {
			if x > 0 {
				return x
			}
			return float64(float32(1.3)) * math.Expm1(x)
		}, func(x, y float64) float64 { return 2.1*u*1.3 + 1.01*u*math.Abs(y) }},
		{Unary{Op: Selu, Alpha: 1.6732632, Gamma: 1.050701}, -6, 4, func(x float64) float64 {
			a, g := float64(float32(1.6732632)), float64(float32(1.050701))
			if x > 0 {
				return g * x
			}
			return g * a * math.Expm1(x)
		}, func(x, y float64) float64 { return 1.051*1.674*3.1*u + 1.01*u*math.Abs(y) }},
		{Unary{Op: HardSigmoid, Alpha: 0.2, Beta: 0.5}, -4, 4, func(x float64) float64 {
			return math.Max(0, math.Min(1, float64(float32(0.2))*x+0.5))
		}, func(x, y float64) float64 { return u*math.Abs(0.2*x) + 1.01*u*math.Abs(y) }},
		// c = RN32(1/6) errs by u/6, x*c and +0.5 round: h errs by
		// <= 2u|x|/6 + u; times x, and the last rounding.
		{Unary{Op: HardSwish}, -5, 5, func(x float64) float64 { return x * math.Max(0, math.Min(1, x/6+0.5)) },
			func(x, y float64) float64 { ax := math.Abs(x); return ax*(2*u*ax/6+1.01*u) + 1.01*u*math.Abs(y) }},
		{Unary{Op: Floor}, -40, 40, math.Floor, zero},
		{Unary{Op: Ceil}, -40, 40, math.Ceil, zero},
		{Unary{Op: Round}, -40, 40, math.RoundToEven, zero},
		{Unary{Op: Sin}, -40, 40, math.Sin, func(x, y float64) float64 { return u }},
		{Unary{Op: Cos}, -40, 40, math.Cos, func(x, y float64) float64 { return u }},
		{Unary{Op: Sign}, -4, 4, func(x float64) float64 {
			if x == 0 {
				return 0
			}
			return math.Copysign(1, x)
		}, zero},
	}
	for ci, c := range cases {
		for si, sh := range ewShapes {
			name := fmt.Sprintf("%s/n%d-w%d", c.p.Op, sh.n, sh.w)
			if c.p.Op == PowConst {
				name = fmt.Sprintf("%s%g/n%d-w%d", c.p.Op, c.p.Exponent, sh.n, sh.w)
			}
			t.Run(name, func(t *testing.T) {
				p := c.p
				p.N, p.Workers, p.X, p.Y = sh.n, sh.w, ilBuf, ilBuf+0x10000
				if si%3 == 2 {
					p.Y = p.X // in place
				}
				x := randF32(rng(int64(100*ci+si)), p.N, c.lo, c.hi)
				if p.N >= 100 {
					copy(x, specials)
				}
				tl.putF32(p.X, x)
				phase := si % Slots
				k, cycles := tl.runKernel(t, phase, func(b *Builder) (Kernel, error) { return EmitUnary(b, p) })
				got := readF32(tl, p.Y, p.N)
				want := make([]float32, p.N)
				for i, v := range x {
					want[i] = EmulateUnary(p, v)
				}
				if diff := cmp.Diff(f32bits(want), f32bits(got)); diff != "" {
					t.Fatalf("result mismatch (-want +got):\n%s", diff)
				}
				for i, v := range x {
					xv, y := float64(v), float64(got[i])
					ex := c.exact(xv)
					if !finite64(xv, y, ex) {
						continue
					}
					// Plus half the smallest subnormal, for underflow.
					if e := math.Abs(y - ex); e > c.bound(xv, ex)+0x1p-150 {
						t.Errorf("x[%d] = %g: got %g, exact %g: error %g above bound %g", i, xv, y, ex, e, c.bound(xv, ex))
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

func TestBinary(t *testing.T) {
	tl := newTile()
	type opCase struct {
		op       BinaryOp
		alo, ahi float64
		blo, bhi float64
		exact    func(a, b float64) float64
	}
	cases := []opCase{
		{Add, -4, 4, -4, 4, func(a, b float64) float64 { return a + b }},
		{Sub, -4, 4, -4, 4, func(a, b float64) float64 { return a - b }},
		{Mul, -4, 4, -4, 4, func(a, b float64) float64 { return a * b }},
		{Div, -4, 4, 0.1, 10, func(a, b float64) float64 { return a / b }},
		{Max, -4, 4, -4, 4, math.Max},
		{Min, -4, 4, -4, 4, math.Min},
		{Pow, 0.1, 4, -3, 3, math.Pow},
	}
	forms := []struct {
		name string
		a, b func(addr uint32, v float32) Operand
	}{
		{"arrays", arrayOp, arrayOp},
		{"a-scalar", scalarOp, arrayOp},
		{"b-const", arrayOp, constOp},
	}
	for ci, c := range cases {
		for fi, f := range forms {
			for si, sh := range ewShapes {
				if si%2 == 1 && fi > 0 {
					continue
				}
				t.Run(fmt.Sprintf("%s/%s/n%d-w%d", c.op, f.name, sh.n, sh.w), func(t *testing.T) {
					r := rng(int64(1000*ci + 100*fi + si))
					av := randF32(r, sh.n, c.alo, c.ahi)
					bv := randF32(r, sh.n, c.blo, c.bhi)
					if c.op == Div && sh.n > 1 {
						for i := 0; i < sh.n; i += 2 {
							bv[i] = -bv[i]
						}
					}
					if sh.n >= 100 {
						copy(av[1:], specials)
						copy(bv[3:], specials)
					}
					p := Binary{Op: c.op, N: sh.n, Workers: sh.w, Y: ilBuf + 0x10000}
					p.A = f.a(ilBuf, av[0])
					p.B = f.b(nonIlBuf, bv[0])
					if si%3 == 2 && p.A.array() {
						p.Y = p.A.Addr
					}
					tl.putF32(ilBuf, av)
					tl.putF32(nonIlBuf, bv)
					phase := (si + fi) % Slots
					k, cycles := tl.runKernel(t, phase, func(b *Builder) (Kernel, error) { return EmitBinary(b, p) })
					got := readF32(tl, p.Y, p.N)
					want := make([]float32, p.N)
					for i := range want {
						a, b := av[i], bv[i]
						if !p.A.array() {
							a = av[0]
						}
						if !p.B.array() {
							b = bv[0]
						}
						want[i] = EmulateBinary(p.Op, a, b)
						ex := c.exact(float64(a), float64(b))
						if !finite64(float64(a), float64(b), ex) || ex == 0 || math.Abs(ex) < 0x1p-126 || math.Abs(ex) > math.MaxFloat32 {
							continue
						}
						// One rounding: |y - exact| <= u |exact|.
						if e := math.Abs(float64(want[i]) - ex); e > u*math.Abs(ex) {
							t.Errorf("%g %s %g: emulated %g, exact %g: error %g above u|exact|", a, c.op, b, want[i], ex, e)
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
	}
}

func arrayOp(addr uint32, _ float32) Operand { return Operand{Addr: addr} }
func scalarOp(addr uint32, _ float32) Operand {
	return Operand{Addr: addr, Scalar: true}
}
func constOp(_ uint32, v float32) Operand { return Operand{Const: true, Value: v} }

// Floor, Ceil and Round bit for bit against Go's math (the definition)
// at the values where a rounding goes wrong: halves, both signed zeros
// and the zeros the sum rounds to, the ends of the 2^23 range where the
// integers begin, subnormals, the largest values, NaNs and infinities,
// and values of every magnitude, as FP32 and as FP16.
func TestUnaryRounding(t *testing.T) {
	tl := newTile()
	var x []float32
	for _, v := range []float64{0.5, 1.5, 2.5, 0.49999997, 0.50000006, 1, 0.25, 0.75, 0x1p23 - 0.5, 0x1p23 - 1.5, 0x1p23, 0x1p23 + 1,
		0x1p22 + 0.5, 0x1p22 + 1.5, 0x1p24 + 2, 1e-40, 0x1p-126, 3.4e38, 65504, 1023.5, 1024.5, 2047.5, 0.99999994, 7.0000005} {
		x = append(x, float32(v), float32(-v))
	}
	x = append(x, 0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)),
		math.Float32frombits(0x7FC00000), math.Float32frombits(0xFFC00123), math.Float32frombits(0x7F800001))
	r := rng(77)
	for len(x) < 601 {
		x = append(x, float32(r.NormFloat64()*math.Ldexp(1, r.Intn(60)-30)))
	}
	for _, op := range []UnaryOp{Floor, Ceil, Round} {
		def := map[UnaryOp]func(float64) float64{Floor: math.Floor, Ceil: math.Ceil, Round: math.RoundToEven}[op]
		t.Run(op.String()+"/f32", func(t *testing.T) {
			p := Unary{Op: op, N: len(x), Workers: 5, X: ilBuf, Y: ilBuf + 0x10000}
			tl.putF32(p.X, x)
			k, cycles := tl.runKernel(t, 1, func(b *Builder) (Kernel, error) { return EmitUnary(b, p) })
			for i, g := range tl.getBits(p.Y, p.N) {
				want := math.Float32bits(float32(def(float64(x[i]))))
				if x[i] != x[i] {
					want = math.Float32bits(x[i])
				}
				if g != want {
					t.Errorf("%s(%g) (%#08x): got %#08x, want %#08x", op, x[i], math.Float32bits(x[i]), g, want)
				}
			}
			checkCycles(t, k, cycles, 1)
		})
		t.Run(op.String()+"/f16", func(t *testing.T) {
			h := make([]uint16, 0, 1<<16)
			for c := 0; c < 1<<16; c++ {
				if c&0x7C00 != 0x7C00 || c&0x3FF == 0 { // every code but the NaNs (as FP32 above)
					h = append(h, uint16(c))
				}
			}
			p := Unary{Op: op, Type: F16, N: len(h), Workers: 6, X: nonIlBuf, Y: nonIlBuf + 0x20000}
			raw := make([]byte, 2*len(h))
			for i, c := range h {
				binary.LittleEndian.PutUint16(raw[2*i:], c)
			}
			tl.put(p.X, raw)
			k, cycles := tl.runKernel(t, 2, func(b *Builder) (Kernel, error) { return EmitUnary(b, p) })
			got := tl.get(p.Y, 2*len(h))
			for i, c := range h {
				v := numfmt.F16ToF64(c)
				want := numfmt.F64ToF16(def(v))
				if def(v) == 0 && math.Signbit(v) {
					want = 0x8000
				}
				if g := binary.LittleEndian.Uint16(got[2*i:]); g != want {
					t.Errorf("%s(%g) (%#04x): got %#04x, want %#04x", op, v, c, g, want)
				}
			}
			checkCycles(t, k, cycles, 2)
		})
	}
}
