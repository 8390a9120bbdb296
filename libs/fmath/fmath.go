// Package fmath computes the device's FP32 functions (exp, log, tanh,
// erf, pow, sin, cos of FP32 arguments) with the same bits on every
// host: each is the exact function value rounded once to FP32, nearest
// even.
//
// Go's math package differs between hosts in the last bits of its
// float64 results: exp and log have amd64 assembly that takes a fused
// multiply-add path only on CPUs with FMA, arm64 has assembly of its
// own, and the compiler may fuse the pure Go functions' multiply-adds on
// some architectures. Rounding such a result to FP32 hides the
// difference unless the float64 value lies near the middle between two
// FP32 values. So each function takes Go's float64 result when it lies
// farther than 2^-44 of its magnitude (at least 256 float64 ulps, far
// beyond any host's error) from every FP32 rounding boundary: every host
// then rounds it, and the exact value, the same way. Otherwise (about
// one argument in 10^5 at random) it computes the value in math/big at
// several hundred bits, which is exact integer arithmetic, and rounds
// that. Specials (NaN, infinities, exact zeros and ones) are Go's, which
// the ONNX functions share.
//
// Pow's float64 result loses accuracy for huge integer exponents
// (Go squares repeatedly); there a result may be misrounded, but it is
// still the same on every host, since only exp and log, inside pow,
// differ between hosts, by a few ulps.
package fmath

import (
	"math"
	"math/big"
)

// rel is the distance from a rounding boundary, relative to the value,
// within which the float64 result is not trusted.
const rel = 0x1p-44

// Exp returns e^x rounded to FP32.
func Exp(x float32) float32 {
	if y := math.Exp(float64(x)); !near(y) {
		return float32(y)
	}
	return round32(bigExp(exact(x)))
}

// Log returns the natural logarithm of x rounded to FP32.
func Log(x float32) float32 {
	if y := math.Log(float64(x)); !near(y) {
		return float32(y)
	}
	return round32(bigLog(exact(x)))
}

// Tanh returns tanh x rounded to FP32.
func Tanh(x float32) float32 {
	if y := math.Tanh(float64(x)); !near(y) {
		return float32(y)
	}
	return round32(bigTanh(exact(x)))
}

// Erf returns the error function of x rounded to FP32.
func Erf(x float32) float32 {
	if y := math.Erf(float64(x)); !near(y) {
		return float32(y)
	}
	return round32(bigErf(exact(x)))
}

// Pow returns x^y rounded to FP32 (Go's special cases).
func Pow(x, y float32) float32 {
	if v := math.Pow(float64(x), float64(y)); !near(v) {
		return float32(v)
	}
	return round32(bigPow(x, y))
}

// Sin returns sin x rounded to FP32.
func Sin(x float32) float32 { return sinCos(x, false) }

// Cos returns cos x rounded to FP32.
func Cos(x float32) float32 { return sinCos(x, true) }

// pio2 is pi/2 in three parts: the first two of at most 30 bits, so
// that k times each is exact for |k| < 2^22, the third the rest rounded.
const (
	pio2a = 0x1.921fb54p+0       // 29 bits
	pio2b = 0x1.10b46118p-30     // 30 bits
	pio2c = 0x1.313198a2e037p-61 // the rest, rounded
)

// sinCos computes sin x or cos x. Go's float64 sin reduces large
// arguments with too few bits of pi to keep sin's small values accurate
// relative to themselves, so the reduction is done here: x - k pi/2 with
// pi/2 in three parts (the first two products exact, the subtraction of
// the first exact by Sterbenz's lemma), then Go's sin or cos of the
// remainder, within pi/4 of zero, which it does not reduce. Arguments
// of 2^20 or more take the exact path.
func sinCos(x float32, cos bool) float32 {
	v := float64(x)
	if v != v || math.IsInf(v, 0) {
		return float32(math.NaN())
	}
	if math.Abs(v) < 0x1p20 {
		if y := sinCos64(v, cos); !near(y) {
			return float32(y)
		}
	}
	return round32(bigSinCos(exact(x), cos))
}

// sinCos64 is sin v or cos v in float64 for |v| < 2^20, as sinCos says.
func sinCos64(v float64, cos bool) float64 {
	k := math.Round(v * (2 / math.Pi))
	r := float64(v-float64(k*pio2a)) - float64(k*pio2b)
	r = float64(r - float64(k*pio2c))
	q := int64(k) & 3
	if cos {
		q = (q + 1) & 3
	}
	switch q {
	case 0:
		return math.Sin(r)
	case 1:
		return math.Cos(r)
	case 2:
		return -math.Sin(r)
	}
	return -math.Cos(r)
}

// near reports whether y lies within rel of a boundary between two FP32
// roundings: the midpoints between float32(y) and its neighbours (the
// overflow threshold above the largest FP32). NaN, infinities and zero
// are exact results of the functions here.
func near(y float64) bool {
	if y != y || y == 0 || math.IsInf(y, 0) {
		return false
	}
	a := math.Abs(y)
	tol := a * rel
	f := float32(a)
	bits := math.Float32bits(f)
	e := int(bits >> 23) // biased exponent, 0 for subnormals
	if e == 255 {
		// rounded past the largest FP32: the threshold is its midpoint
		// with 2^128
		return a-(math.MaxFloat32+0x1p103) <= tol
	}
	ulp := math.Float64frombits(uint64(max(e, 1)-150+1023) << 52) // f's spacing above, 2^(e-150)
	d := a - float64(f)                                           // exact, within half a spacing
	below := ulp / 2                                              // to the midpoint under f
	if bits&0x7FFFFF == 0 && e > 1 {
		below = ulp / 4 // a power of two: the spacing under it is half
	}
	return ulp/2-d <= tol || d+below <= tol
}

// round32 rounds x to FP32, nearest even, subnormals and overflow
// included.
func round32(x *big.Float) float32 {
	if x.Sign() == 0 || x.IsInf() {
		f, _ := x.Float32()
		return f
	}
	e := x.MantExp(nil) // |x| in [2^(e-1), 2^e)
	p := min(e+149, 24) // the bits FP32 keeps at this magnitude
	switch {
	case p < 0:
		return float32(math.Copysign(0, float64(x.Sign())))
	case p == 0:
		// |x| in [2^-150, 2^-149): the smallest subnormal above the
		// midpoint, 0 at it (even)
		half := new(big.Float).SetMantExp(big.NewFloat(1), -150)
		if new(big.Float).Abs(x).Cmp(half) > 0 {
			return float32(math.Copysign(0x1p-149, float64(x.Sign())))
		}
		return float32(math.Copysign(0, float64(x.Sign())))
	}
	z := new(big.Float).SetPrec(uint(p)).SetMode(big.ToNearestEven).Set(x)
	f, _ := z.Float32() // exact, or ±Inf past the largest FP32
	return f
}

// exact is x as a big.Float.
func exact(x float32) *big.Float { return new(big.Float).SetPrec(prec).SetFloat64(float64(x)) }
