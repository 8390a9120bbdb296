package fmath

import (
	"math"
	"math/big"
	"sync"
)

// The exact values, at prec bits: enough that a value rounds to FP32 as
// the true one does (an FP32 argument's function value is never closer
// to a rounding boundary than about 2^-60 of itself, and only pow has
// exact boundary cases, which it computes exactly).
const prec = 512

func newF() *big.Float { return new(big.Float).SetPrec(prec) }

func intF(v int64) *big.Float { return newF().SetInt64(v) }

var (
	constOnce sync.Once
	ln2       *big.Float // ln 2 at prec
	pi        *big.Float // pi at 4*prec bits, for the reduction of FP32 arguments up to 2^128
)

// constants computes ln 2 = 2 atanh(1/3) and pi = 16 atan(1/5) -
// 4 atan(1/239) (Machin).
func constants() {
	constOnce.Do(func() {
		third := newF().Quo(intF(1), intF(3))
		ln2 = atanhSeries(third, prec)
		ln2.Mul(ln2, intF(2))
		p := uint(4 * prec)
		a := atanInv(5, p)
		b := atanInv(239, p)
		pi = new(big.Float).SetPrec(p).Mul(a, new(big.Float).SetPrec(p).SetInt64(16))
		pi.Sub(pi, new(big.Float).SetPrec(p).Mul(b, new(big.Float).SetPrec(p).SetInt64(4)))
	})
}

// atanhSeries returns atanh t = t + t^3/3 + t^5/5 + ... at p bits, |t|
// at most 1/2.
func atanhSeries(t *big.Float, p uint) *big.Float {
	sum := new(big.Float).SetPrec(p).Set(t)
	pow := new(big.Float).SetPrec(p).Set(t)
	t2 := new(big.Float).SetPrec(p).Mul(t, t)
	term := new(big.Float).SetPrec(p)
	for k := int64(3); ; k += 2 {
		pow.Mul(pow, t2)
		term.Quo(pow, new(big.Float).SetPrec(p).SetInt64(k))
		if small(term, sum, p) {
			return sum
		}
		sum.Add(sum, term)
	}
}

// atanInv returns atan(1/n) = sum (-1)^k / ((2k+1) n^(2k+1)) at p bits.
func atanInv(n int64, p uint) *big.Float {
	x := new(big.Float).SetPrec(p).Quo(new(big.Float).SetPrec(p).SetInt64(1), new(big.Float).SetPrec(p).SetInt64(n))
	sum := new(big.Float).SetPrec(p).Set(x)
	n2 := new(big.Float).SetPrec(p).SetInt64(n * n)
	term := new(big.Float).SetPrec(p)
	for k := int64(1); ; k++ {
		x.Quo(x, n2)
		term.Quo(x, new(big.Float).SetPrec(p).SetInt64(2*k+1))
		if small(term, sum, p) {
			return sum
		}
		if k%2 == 1 {
			sum.Sub(sum, term)
		} else {
			sum.Add(sum, term)
		}
	}
}

// small reports whether term no longer changes sum at p bits.
func small(term, sum *big.Float, p uint) bool {
	return term.Sign() == 0 || sum.Sign() != 0 && term.MantExp(nil) < sum.MantExp(nil)-int(p)-2
}

// bigExp returns e^x: x = k ln 2 + r, e^r by Taylor's series of r/2^8
// squared 8 times, scaled by 2^k.
func bigExp(x *big.Float) *big.Float {
	constants()
	xf, _ := x.Float64()
	k := int64(math.Round(xf / math.Ln2))
	r := newF().Sub(x, newF().Mul(ln2, intF(k)))
	r.SetMantExp(r, -8)
	sum, term := intF(1), intF(1)
	for n := int64(1); ; n++ {
		term.Mul(term, r)
		term.Quo(term, intF(n))
		if small(term, sum, prec) {
			break
		}
		sum.Add(sum, term)
	}
	for range 8 {
		sum.Mul(sum, sum)
	}
	return sum.SetMantExp(sum, int(k))
}

// bigLog returns ln x for x > 0: x = m 2^e, m in [1/2, 1), ln x = e ln 2
// + 2 atanh((m-1)/(m+1)).
func bigLog(x *big.Float) *big.Float {
	constants()
	m := newF()
	e := x.MantExp(m)
	t := newF().Quo(newF().Sub(m, intF(1)), newF().Add(m, intF(1)))
	l := atanhSeries(t, prec)
	l.Mul(l, intF(2))
	return l.Add(l, newF().Mul(ln2, intF(int64(e))))
}

// bigTanh returns tanh x = (e^2x - 1) / (e^2x + 1).
func bigTanh(x *big.Float) *big.Float {
	e := bigExp(newF().Mul(x, intF(2)))
	return newF().Quo(newF().Sub(e, intF(1)), newF().Add(e, intF(1)))
}

// bigErf returns erf x = 2/sqrt(pi) sum (-1)^n x^(2n+1) / (n! (2n+1)) for
// |x| < 6 (the terms' growth costs under 60 of the bits); beyond, erf
// rounds to +-1 in FP32 far from any boundary, and the caller's float64
// value is used.
func bigErf(x *big.Float) *big.Float {
	constants()
	x2 := newF().Mul(x, x)
	pw := newF().Set(x) // x^(2n+1) / n! with its sign
	sum := newF().Set(x)
	term := newF()
	for n := int64(1); ; n++ {
		pw.Mul(pw, x2)
		pw.Quo(pw, intF(-n))
		term.Quo(pw, intF(2*n+1))
		if small(term, sum, prec+64) && n > 8 {
			break
		}
		sum.Add(sum, term)
	}
	sq := newF().Sqrt(newF().Set(pi))
	sum.Mul(sum, intF(2))
	return sum.Quo(sum, sq)
}

// bigSinCos returns sin x (cos x when cos): x = k pi/2 + r with |r| <=
// pi/4, then the series of sin r or cos r as k mod 4 says.
func bigSinCos(x *big.Float, cos bool) *big.Float {
	constants()
	p := pi.Prec()
	halfPi := new(big.Float).SetPrec(p).SetMantExp(pi, -1)
	q := new(big.Float).SetPrec(p).Quo(new(big.Float).SetPrec(p).Set(x), halfPi)
	// k = q rounded to the nearest integer
	q.Add(q, new(big.Float).SetPrec(p).SetFloat64(math.Copysign(0.5, float64(q.Sign()))))
	ki, _ := q.Int(nil)
	r := new(big.Float).SetPrec(p).Sub(new(big.Float).SetPrec(p).Set(x), new(big.Float).SetPrec(p).Mul(halfPi, new(big.Float).SetPrec(p).SetInt(ki)))
	k := new(big.Int).And(ki, big.NewInt(3)).Int64() // k mod 4 (two's complement And: also for negative k)
	if cos {
		k = (k + 1) % 4 // cos x = sin(x + pi/2)
	}
	rr := newF().Set(r)
	var v *big.Float
	if k%2 == 0 {
		v = series(rr, 1) // sin r
	} else {
		v = series(rr, 0) // cos r
	}
	if k >= 2 {
		v.Neg(v)
	}
	return v
}

// series returns sum (-1)^n r^(2n+s) / (2n+s)!: sin r (s = 1) or cos r
// (s = 0).
func series(r *big.Float, s int64) *big.Float {
	r2 := newF().Mul(r, r)
	term := intF(1)
	if s == 1 {
		term.Set(r)
	}
	sum := newF().Set(term)
	for n := s + 1; ; n += 2 {
		term.Mul(term, r2)
		term.Quo(term, intF(-n*(n+1)))
		if small(term, sum, prec) {
			return sum
		}
		sum.Add(sum, term)
	}
}

// bigPow returns x^y for a finite nonzero result: exactly by repeated
// multiplication when y is an integer (then a square root when y is a
// half-integer), so that results on a rounding boundary round as
// defined; otherwise exp(y ln |x|) with the sign of an odd integer power.
func bigPow(x, y float32) *big.Float {
	ax := exact(float32(math.Abs(float64(x))))
	neg := x < 0 && y == float32(math.Trunc(float64(y))) && math.Mod(float64(y), 2) != 0
	var v *big.Float
	if y2 := 2 * float64(y); y2 == math.Trunc(y2) && math.Abs(y2) <= 1024 {
		n := int64(math.Abs(y2))
		// |x|^n exactly (24 bits of x times n), then its square root.
		p := uint(24*n + 64)
		v = new(big.Float).SetPrec(p).SetInt64(1)
		b := new(big.Float).SetPrec(p).Set(ax)
		for e := n; e > 0; e >>= 1 {
			if e&1 == 1 {
				v.Mul(v, b)
			}
			b.Mul(b, b)
		}
		v.Sqrt(v) // |x|^(n/2): exact whenever it is a p-bit value
		if y < 0 {
			v = newF().Quo(intF(1), v)
		}
	} else {
		v = bigExp(newF().Mul(bigLog(ax), exact(y)))
	}
	if neg {
		v.Neg(v)
	}
	return v
}
