package numfmt

import (
	"math"
	"math/rand/v2"
	"testing"
)

// sumRTORef is SumRTO as first written, with math.Nextafter.
func sumRTORef(p, c float64) float64 {
	s := p + c
	if math.IsInf(s, 0) || math.IsNaN(s) {
		return s
	}
	bb := s - p
	e := (p - (s - bb)) + (c - bb)
	if e != 0 && math.Float64bits(s)&1 == 0 {
		if e > 0 {
			s = math.Nextafter(s, math.Inf(1))
		} else {
			s = math.Nextafter(s, math.Inf(-1))
		}
	}
	return s
}

// SumRTO's bit step equals Nextafter on random sums of every sign and
// scale, near the overflow threshold, on subnormals and at zero.
func TestSumRTOSteps(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	pick := func() float64 {
		switch r.IntN(6) {
		case 0:
			return math.Float64frombits(r.Uint64())
		case 1:
			return (r.Float64() - 0.5) * math.MaxFloat64
		case 2:
			return (r.Float64() - 0.5) * 1e-310
		case 3:
			return 0
		}
		return (r.Float64() - 0.5) * math.Pow(2, float64(r.IntN(200)-100))
	}
	for i := 0; i < 2_000_000; i++ {
		p, c := pick(), pick()
		if r.IntN(4) == 0 {
			c = -p * (1 + (r.Float64()-0.5)*1e-15)
		}
		got, want := SumRTO(p, c), sumRTORef(p, c)
		if math.Float64bits(got) != math.Float64bits(want) && !(math.IsNaN(got) && math.IsNaN(want)) {
			t.Fatalf("SumRTO(%v, %v) = %v, want %v", p, c, got, want)
		}
	}
}
