package fmath

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// funcs are the functions with their exact (math/big) forms.
var funcs = []struct {
	name  string
	fast  func(float32) float32
	exact func(*big.Float) *big.Float
	lo    float64 // arguments from -lo·2^k... (see args)
}{
	{"exp", Exp, bigExp, 0},
	{"log", Log, bigLog, 0},
	{"tanh", Tanh, bigTanh, 0},
	{"erf", Erf, bigErf, 0},
	{"sin", Sin, func(x *big.Float) *big.Float { return bigSinCos(x, false) }, 0},
	{"cos", Cos, func(x *big.Float) *big.Float { return bigSinCos(x, true) }, 0},
}

// args returns n FP32 arguments of the function: every magnitude where
// its value is finite and not trivially rounded (exp's range, log's
// positive numbers, erf below 6, sin and cos out to 2^30 and some huge).
func args(name string, r *rand.Rand, n int) []float32 {
	xs := make([]float32, n)
	for i := range xs {
		var v float64
		switch name {
		case "exp":
			v = (r.Float64()*2 - 1) * 100
		case "log":
			v = math.Ldexp(1+r.Float64(), r.IntN(270)-145)
		case "tanh":
			v = (r.Float64()*2 - 1) * math.Ldexp(1, r.IntN(10)-6)
		case "erf":
			v = (r.Float64()*2 - 1) * 5.9
		default:
			v = (r.Float64()*2 - 1) * math.Ldexp(1, r.IntN(36)-5)
			if i%5 == 0 {
				// the FP32 values nearest multiples of pi/2, where the
				// results are small
				v = float64(r.IntN(1<<20)) * math.Pi / 2
			}
			if i%50 == 0 {
				v = math.Ldexp(1+r.Float64(), r.IntN(100)+27)
			}
		}
		xs[i] = float32(v)
	}
	return xs
}

// Every function equals its exact value rounded once, on arguments of
// every magnitude: the float64 path and the math/big path agree
// wherever the float64 path is taken, and the math/big forms are
// checked against an independent computation (Go's float64 functions,
// away from rounding boundaries).
func TestCorrectlyRounded(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, f := range funcs {
		t.Run(f.name, func(t *testing.T) {
			gof := map[string]func(float64) float64{"exp": math.Exp, "log": math.Log, "tanh": math.Tanh, "erf": math.Erf,
				"sin": func(v float64) float64 { return sinCos64(v, false) }, "cos": func(v float64) float64 { return sinCos64(v, true) }}[f.name]
			for _, x := range args(f.name, r, 2000) {
				got := f.fast(x)
				ex := f.exact(exact(x))
				want := round32(ex)
				e64, _ := ex.Float64()
				if g := gof(float64(x)); math.Abs(float64(x)) < 0x1p20 && math.Abs(e64-g) > 4*math.Abs(math.Nextafter(g, math.Inf(1))-g) {
					t.Errorf("%s(%g): exact %.17g, Go's float64 %.17g: more than 4 ulps apart", f.name, x, e64, g)
				}
				if math.Float32bits(got) != math.Float32bits(want) {
					t.Errorf("%s(%g): %g (%#08x), exact value rounds to %g (%#08x)", f.name, x, got, math.Float32bits(got), want, math.Float32bits(want))
				}
			}
		})
	}
	t.Run("pow", func(t *testing.T) {
		for range 600 {
			x := float32(math.Ldexp(1+r.Float64(), r.IntN(20)-10))
			y := float32((r.Float64()*2 - 1) * 12)
			switch r.IntN(3) {
			case 0:
				y = float32(math.Round(float64(y)))
			case 1:
				y = float32(math.Round(float64(2*y)) / 2)
				x = -x
			}
			got, want := Pow(x, y), round32(bigPow(x, y))
			if x < 0 && y != float32(math.Trunc(float64(y))) {
				continue // NaN
			}
			if math.Float32bits(got) != math.Float32bits(want) {
				t.Errorf("pow(%g, %g): %g, exact value rounds to %g", x, y, got, want)
			}
		}
	})
}

// Results exactly on a rounding boundary round to even: squares of
// 25-bit odd integers' roots, a cube, a half-integer power.
func TestPowTies(t *testing.T) {
	for _, c := range []struct{ x, y, want float32 }{
		{4097, 2, 16785408},      // 2^24 + 8193 -> the even neighbour 2^24 + 8192
		{4099, 2, 16801800},      // 2^24 + 16393 + ... : 16801801 -> 16801800
		{-4097, 3, -68769824768}, // 68769820673 = 8192 * 8394753.5001: up; the sign kept
		{16785409, 0.5, 4097},    // not a tie: exact root
	} {
		if got := Pow(c.x, c.y); got != c.want {
			// the wanted values are the exact powers rounded by hand
			t.Errorf("pow(%g, %g) = %.10g, want %.10g", c.x, c.y, got, c.want)
		}
	}
}

// near covers every float64 value within 250 ulps of an FP32
// rounding boundary: the midpoints at magnitudes from subnormal to the
// overflow threshold, in both directions.
func TestNearCoversBoundaries(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	check := func(m float64) {
		for _, d := range []int{-250, -7, -1, 0, 1, 7, 250} {
			y := m
			for range abs(d) {
				y = math.Nextafter(y, math.Copysign(math.Inf(1), float64(d)))
			}
			if !near(y) || !near(-y) {
				t.Errorf("%g (boundary %g %+d ulps) is not near", y, m, d)
			}
		}
	}
	check(float64(math.MaxFloat32) + 0x1p103)
	check(0x1p-150)
	check(1 - 0x1p-25)
	check(1 + 0x1p-24)
	for range 2000 {
		f := math.Float32frombits(r.Uint32() & 0x7FFFFFFF)
		if f != f || math.IsInf(float64(f), 0) {
			continue
		}
		up := math.Nextafter32(f, float32(math.Inf(1)))
		if math.IsInf(float64(up), 1) {
			continue
		}
		check((float64(f) + float64(up)) / 2)
	}
	// and values far from boundaries are not
	for _, y := range []float64{1, 0.5, 3, 1 + 0x1p-23, 0x1p-149, math.MaxFloat32} {
		if near(y) {
			t.Errorf("%g is near", y)
		}
	}
}

func abs(d int) int {
	if d < 0 {
		return -d
	}
	return d
}

// round32 agrees with Go's conversion from float64 on values float64
// holds, subnormals and overflow included.
func TestRound32(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 20000 {
		v := math.Float64frombits(r.Uint64())
		e := math.Ilogb(v)
		if v != v || math.IsInf(v, 0) || e < -160 || e > 130 {
			continue
		}
		b := new(big.Float).SetPrec(53).SetFloat64(v)
		if got, want := round32(b), float32(v); math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("round32(%g) = %g, want %g", v, got, want)
		}
	}
}

// The cost of host independence: Exp against Go's float64 exp rounded.
func BenchmarkExp(b *testing.B) {
	xs := args("exp", rand.New(rand.NewPCG(7, 8)), 1024)
	b.Run("fmath", func(b *testing.B) {
		var s float32
		for i := range b.N {
			s += Exp(xs[i&1023])
		}
		_ = s
	})
	b.Run("go", func(b *testing.B) {
		var s float32
		for i := range b.N {
			s += float32(math.Exp(float64(xs[i&1023])))
		}
		_ = s
	})
}
