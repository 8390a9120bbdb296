package numfmt

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// fmaExact is the oracle: the exact value in big.Float, rounded once.
func fmaExact(a, b, c float32) float32 {
	if math.IsNaN(float64(a)) || math.IsNaN(float64(b)) || math.IsNaN(float64(c)) ||
		math.IsInf(float64(a), 0) || math.IsInf(float64(b), 0) || math.IsInf(float64(c), 0) {
		return float32(float64(a)*float64(b) + float64(c))
	}
	x := new(big.Float).SetPrec(2000).SetFloat64(float64(a))
	x.Mul(x, new(big.Float).SetPrec(2000).SetFloat64(float64(b)))
	x.Add(x, new(big.Float).SetPrec(2000).SetFloat64(float64(c)))
	if x.Sign() == 0 {
		// The sign of an exact zero sum follows IEEE: -0 only if both are -0.
		return float32(float64(a)*float64(b) + float64(c))
	}
	f, _ := x.Float32()
	return f
}

func TestFMA32(t *testing.T) {
	cases := [][3]uint32{
		{0x3f800000, 0x33800800, 0x3f7ff001}, // double rounding would give 1.0
		{0x3f800000, 0x3f800000, 0x3f800000},
		{0x7f7fffff, 0x40000000, 0xff7fffff},
		{0x00000001, 0x00000001, 0x00000000},
		{0x80000000, 0x3f800000, 0x00000000},
	}
	for _, c := range cases {
		a, b, cc := math.Float32frombits(c[0]), math.Float32frombits(c[1]), math.Float32frombits(c[2])
		if got, want := FMA32(a, b, cc), fmaExact(a, b, cc); math.Float32bits(got) != math.Float32bits(want) {
			t.Errorf("FMA32(%#x, %#x, %#x) = %#x, want %#x", c[0], c[1], c[2], math.Float32bits(got), math.Float32bits(want))
		}
	}
	r := rand.New(rand.NewPCG(7, 7))
	n := 200000
	if testing.Short() {
		n = 20000
	}
	for i := 0; i < n; i++ {
		// Operands near each other in magnitude, where cancellation and
		// ties happen, and random bit patterns.
		var a, b, c float32
		if i%2 == 0 {
			a = math.Float32frombits(r.Uint32())
			b = math.Float32frombits(r.Uint32())
			c = math.Float32frombits(r.Uint32())
		} else {
			a = float32(r.NormFloat64())
			b = math.Float32frombits(0x33800000 | r.Uint32()&0xfff)
			c = float32(1 + r.NormFloat64()*1e-7)
		}
		got, want := FMA32(a, b, c), fmaExact(a, b, c)
		if math.Float32bits(got) != math.Float32bits(want) && !(got != got && want != want) {
			t.Fatalf("FMA32(%#x, %#x, %#x) = %#x, want %#x", math.Float32bits(a), math.Float32bits(b), math.Float32bits(c), math.Float32bits(got), math.Float32bits(want))
		}
	}
}

func TestFMA16(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	for i := 0; i < 100000; i++ {
		a, b, c := uint16(r.Uint32()), uint16(r.Uint32()), uint16(r.Uint32())
		if math.IsNaN(F16ToF64(a)) || math.IsNaN(F16ToF64(b)) || math.IsNaN(F16ToF64(c)) ||
			math.IsInf(F16ToF64(a), 0) || math.IsInf(F16ToF64(b), 0) || math.IsInf(F16ToF64(c), 0) {
			continue
		}
		x := new(big.Float).SetPrec(200).SetFloat64(F16ToF64(a))
		x.Mul(x, new(big.Float).SetPrec(200).SetFloat64(F16ToF64(b)))
		x.Add(x, new(big.Float).SetPrec(200).SetFloat64(F16ToF64(c)))
		if x.Sign() == 0 {
			continue
		}
		// Oracle: round the exact value to FP16 by rounding to 11
		// significant bits in big.Float, then converting exactly.
		want := oracleF16(x)
		if got := FMA16(a, b, c); got != want {
			t.Fatalf("FMA16(%#04x, %#04x, %#04x) = %#04x, want %#04x", a, b, c, got, want)
		}
	}
}

// oracleF16 rounds x (nonzero, finite) to FP16 with one rounding.
func oracleF16(x *big.Float) uint16 {
	// Subnormal FP16 values have a fixed exponent of -24 for the last bit.
	exp := x.MantExp(nil) // x = m * 2^exp, 0.5 <= |m| < 1
	prec := uint(11)
	if exp-1 < -14 {
		p := 11 - (-14 - (exp - 1))
		if p <= 0 {
			// Below half the smallest subnormal, or a tie at it.
			y := new(big.Float).SetPrec(200).Abs(x)
			half := new(big.Float).SetMantExp(big.NewFloat(1), -25)
			neg := x.Sign() < 0
			var h uint16
			if y.Cmp(half) > 0 {
				h = 1
			}
			if neg {
				h |= 0x8000
			}
			return h
		}
		prec = uint(p)
	}
	y := new(big.Float).SetPrec(prec).SetMode(big.ToNearestEven).Set(x)
	f, _ := y.Float64()
	return F64ToF16(f)
}
