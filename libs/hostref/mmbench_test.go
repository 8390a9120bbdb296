package hostref

import (
	"math"
	"math/rand/v2"
	"testing"

	"ipu.local/libs/numfmt"
)

// BenchmarkDeviceMM is the device-precision product of 384^3 FP16-valued
// operands (the products exact in FP32) on one thread.
func BenchmarkDeviceMM(b *testing.B) {
	const n = 384
	r := rand.New(rand.NewPCG(1, 2))
	x, y := make([]float64, n*n), make([]float64, n*n)
	for i := range x {
		x[i], y[i] = numfmt.F16ToF64(numfmt.F64ToF16(r.Float64()-0.5)), numfmt.F16ToF64(numfmt.F64ToF16(r.Float64()-0.5))
	}
	out := make([]float64, n*n)
	ev := &evaluator{opt: Options{Precision: Device, Threads: 1}}
	for b.Loop() {
		ev.mm(n, n, n, x, y, out)
	}
}

// The blocked device product sums every element in k order: bit for bit
// the plain triple loop, at shapes that do not divide the blocks, with
// signed zeros, infinities, NaNs and values whose sums round.
func TestDeviceMMOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, sh := range [][3]int{{1, 1, 1}, {17, 33, 65}, {40, 7, 131}, {3, 200, 5}, {70, 300, 260}} {
		m, k, n := sh[0], sh[1], sh[2]
		a, b := make([]float64, m*k), make([]float64, k*n)
		for i := range a {
			a[i] = float64(float32((r.Float64() - 0.5) * 1e3))
		}
		for i := range b {
			b[i] = float64(float32((r.Float64() - 0.5) * 1e-3))
			if i%2 == 0 { // FP16 values: their products are exact in FP32
				b[i] = numfmt.F16ToF64(numfmt.F64ToF16(b[i] * 1e3))
				a[i%len(a)] = numfmt.F16ToF64(numfmt.F64ToF16(a[i%len(a)] / 1e3))
			}
		}
		special := []float64{0, math.Copysign(0, -1), math.Inf(1), math.NaN(), 65504, -65504}
		for i := 0; i < len(a); i += 7 {
			a[i] = special[i%len(special)]
		}
		got := make([]float64, m*n)
		ev := &evaluator{opt: Options{Precision: Device, Threads: 2}}
		ev.mm(m, k, n, a, b, got)
		for i := 0; i < m; i++ {
			for j := 0; j < n; j++ {
				var acc float32
				for p := 0; p < k; p++ {
					acc = float32(numfmt.SumRTO(a[i*k+p]*b[p*n+j], float64(acc)))
				}
				if w, g := math.Float64bits(float64(acc)), math.Float64bits(got[i*n+j]); w != g && !(math.IsNaN(float64(acc)) && math.IsNaN(got[i*n+j])) {
					t.Fatalf("%v: y[%d][%d] = %v, want %v", sh, i, j, got[i*n+j], acc)
				}
			}
		}
	}
}

// The short-significand product (FP16 and FP8 operands) is bit for bit
// the plain triple loop, at shapes that do not divide its blocks or its
// four columns, with signed zeros, the largest and the smallest FP16
// values and sums that round.
func TestDeviceMMShort(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	f16 := func(v float64) float64 { return numfmt.F16ToF64(numfmt.F64ToF16(v)) }
	special := []float64{0, math.Copysign(0, -1), 65504, -65504, 0x1p-24, -0x1p-14, 1}
	for _, sh := range [][3]int{{1, 1, 1}, {5, 33, 7}, {19, 64, 130}, {3, 300, 9}, {70, 300, 260}, {260, 300, 9}} {
		m, k, n := sh[0], sh[1], sh[2]
		a, b := make([]float64, m*k), make([]float64, k*n)
		for i := range a {
			a[i] = f16((r.Float64() - 0.5) * 8)
			if i%5 == 0 {
				a[i] = special[i%len(special)]
			}
		}
		for i := range b {
			b[i] = f16((r.Float64() - 0.5) * 1e-2)
		}
		if !shortSignificands(a) || !shortSignificands(b) {
			t.Fatalf("%v: FP16 operands not taken as short", sh)
		}
		got := make([]float64, m*n)
		ev := &evaluator{opt: Options{Precision: Device, Threads: 2}}
		ev.mm(m, k, n, a, b, got)
		for i := 0; i < m; i++ {
			for j := 0; j < n; j++ {
				var acc float32
				for p := 0; p < k; p++ {
					acc = float32(numfmt.SumRTO(a[i*k+p]*b[p*n+j], float64(acc)))
				}
				if w, g := math.Float64bits(float64(acc)), math.Float64bits(got[i*n+j]); w != g {
					t.Fatalf("%v: y[%d][%d] = %v, want %v", sh, i, j, got[i*n+j], acc)
				}
			}
		}
	}
	for _, v := range []float64{math.Inf(1), math.NaN(), 1 + 0x1p-20, 0x1p-70, 0x1p70} {
		if shortSignificands([]float64{v}) {
			t.Errorf("%v taken as short", v)
		}
	}
}

// allShort, cut into bands on several threads, is shortSignificands of
// the whole: one value that is not short, in any band, makes it false.
func TestAllShortBands(t *testing.T) {
	vs := make([]float64, 100003)
	for i := range vs {
		vs[i] = numfmt.F16ToF64(uint16(i % 0x7C00))
	}
	for _, threads := range []int{1, 2, 3, 8} {
		if !allShort(vs, threads) {
			t.Errorf("%d threads: FP16 values not taken as short", threads)
		}
		for _, at := range []int{0, 40000, len(vs) - 1} {
			old := vs[at]
			vs[at] = 1 + 0x1p-20
			if allShort(vs, threads) {
				t.Errorf("%d threads: a long significand at %d taken as short", threads, at)
			}
			vs[at] = old
		}
	}
}
