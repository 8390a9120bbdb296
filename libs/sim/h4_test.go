package sim

import (
	"math"
	"math/rand/v2"
	"testing"

	"ipu.local/libs/isa"
)

// interesting16 returns FP16 bits biased towards the edges: zeros,
// subnormals, the normal range's ends, Inf and NaN.
func interesting16(r *rand.Rand) uint16 {
	edges := []uint16{0, 0x8000, 1, 0x3FF, 0x400, 0x7BFF, 0x7C00, 0xFC00, 0x7E00, 0x7C01, 0x3C00, 0xBC00, 0x0200}
	if r.IntN(4) == 0 {
		return edges[r.IntN(len(edges))] ^ uint16(r.IntN(2))<<15
	}
	return uint16(r.Uint32())
}

func TestH4FastEqualsGeneric(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	lanes := func() uint64 {
		var v uint64
		for i := 0; i < 64; i += 16 {
			v |= uint64(interesting16(r)) << i
		}
		return v
	}
	for n := 0; n < 400000; n++ {
		a, b, d := lanes(), lanes(), lanes()
		for _, op := range []isa.Op{isa.H4ADD, isa.H4SUB, isa.H4MUL, isa.H4FMA} {
			if got, want := h4arith(op, a, b, d, halfTable()), h4op(op, a, b, d); got != want {
				t.Fatalf("%s(%016x, %016x, %016x) = %016x, want %016x", opName(op), a, b, d, got, want)
			}
		}
		if got, want := h4maxmin(a, b, true), h4op(isa.H4MAX, a, b, 0); got != want {
			t.Fatalf("max(%016x, %016x) = %016x, want %016x", a, b, got, want)
		}
		if got, want := h4maxmin(a, b, false), h4op(isa.H4MIN, a, b, 0); got != want {
			t.Fatalf("min(%016x, %016x) = %016x, want %016x", a, b, got, want)
		}
	}
}

func TestRound4(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	val := func(n int) float64 {
		if r.IntN(8) == 0 {
			return math.Copysign(0, float64(1-2*r.IntN(2)))
		}
		// Exponents around FP16's range, every mantissa pattern.
		e := uint64(1000 + r.IntN(50))
		x := math.Float64frombits(uint64(r.IntN(2))<<63 | e<<52 | r.Uint64()&(1<<52-1))
		if n%3 == 0 { // exact halfway cases
			x = math.Float64frombits(math.Float64bits(x)&^(1<<42-1) | 1<<41)
		}
		return x
	}
	for n := 0; n < 1000000; n++ {
		var s [4]float64
		var want uint64
		for i := range s {
			s[i] = val(n)
			want |= uint64(f64to16(s[i])) << (16 * i)
		}
		if got := round4(s[0], s[1], s[2], s[3]); got != want {
			t.Fatalf("round4(%v) = %016x, want %016x", s, got, want)
		}
	}
}

func TestHalfTable(t *testing.T) {
	for h, got := range halfTable() {
		want := h16f(uint16(h))
		if math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("halfTable()[%04x] = %v, want %v", h, got, want)
		}
	}
}

func TestMac64(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	val := func() float32 {
		switch r.IntN(8) {
		case 0:
			return math.Float32frombits(r.Uint32()) // any bits: NaN, Inf, subnormal
		case 1:
			return float32(math.Inf(1 - 2*r.IntN(2)))
		case 2:
			return math.Float32frombits(r.Uint32() & 0x807FFFFF) // subnormal
		}
		return float32(r.NormFloat64())
	}
	for n := 0; n < 20000; n++ {
		var acc, want [64]float32
		var x [4]float32
		var w [16]float32
		for i := range acc {
			acc[i] = val()
		}
		for i := range x {
			x[i] = val()
		}
		for i := range w {
			w[i] = val()
		}
		want = acc
		mac64Go(&want, &x, &w)
		mac64(&acc, &x, &w)
		for i := range acc {
			g, e := acc[i], want[i]
			if math.Float32bits(g) != math.Float32bits(e) && !(g != g && e != e) {
				t.Fatalf("case %d: acc[%d] = %v (%08x), want %v (%08x)", n, i, g, math.Float32bits(g), e, math.Float32bits(e))
			}
		}
	}
}
