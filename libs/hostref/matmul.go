package hostref

import (
	"math"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"
	"gonum.org/v1/gonum/blas/blas64"

	"ipu.local/libs/graph"
	"ipu.local/libs/numfmt"
	"ipu.local/libs/par"
)

// matmul computes numpy matmul(a, b) for shapes the graph builder
// accepted: 1-D operands promoted, batch axes broadcast.
func (ev *evaluator) matmul(as, bs []int64, a, b []float64) []float64 {
	pa, pb := as, bs
	if len(as) == 1 {
		pa = []int64{1, as[0]}
	}
	if len(bs) == 1 {
		pb = []int64{bs[0], 1}
	}
	m, k := int(pa[len(pa)-2]), int(pa[len(pa)-1])
	n := int(pb[len(pb)-1])
	batch, _ := graph.Broadcast(pa[:len(pa)-2], pb[:len(pb)-2])
	ia := graph.BroadcastIndex(pa[:len(pa)-2], batch)
	ib := graph.BroadcastIndex(pb[:len(pb)-2], batch)
	y := make([]float64, len(ia)*m*n)
	for bi := range ia {
		ev.mm(m, k, n, a[int(ia[bi])*m*k:][:m*k], b[int(ib[bi])*k*n:][:k*n], y[bi*m*n:][:m*n])
	}
	return y
}

// gemm computes Alpha * A' * B' + Beta * C.
func (ev *evaluator) gemm(n *graph.Node, in [][]float64) []float64 {
	attrs := n.Attrs.(*graph.Gemm)
	a, b := in[0], in[1]
	as, bs := n.Inputs[0].Shape, n.Inputs[1].Shape
	if attrs.TransA {
		a, as = transpose(as, []int{1, 0}, a), []int64{as[1], as[0]}
	}
	if attrs.TransB {
		b, bs = transpose(bs, []int{1, 0}, b), []int64{bs[1], bs[0]}
	}
	m, k, nn := int(as[0]), int(as[1]), int(bs[1])
	y := make([]float64, m*nn)
	ev.mm(m, k, nn, a, b, y)
	alpha, beta := float64(attrs.Alpha), float64(attrs.Beta)
	var cIdx []int64
	if n.Inputs[2] != nil && beta != 0 {
		cIdx = graph.BroadcastIndex(n.Inputs[2].Shape, n.Outputs[0].Shape)
	}
	for i, v := range y {
		if alpha != 1 {
			v = ev.r(alpha * v)
		}
		if cIdx != nil {
			c := in[2][cIdx[i]]
			if beta != 1 {
				c = ev.r(beta * c)
			}
			v = ev.r(v + c)
		}
		y[i] = v
	}
	return y
}

// mm computes the m×n product of row-major a (m×k) and b (k×n) into y,
// splitting the rows among Threads goroutines. Every element sums in k
// order whatever the split, so the result does not depend on Threads.
func (ev *evaluator) mm(m, k, n int, a, b, y []float64) {
	if m == 0 || n == 0 {
		return
	}
	var compute func(r0, r1 int)
	switch ev.opt.Precision {
	case FP64:
		compute = func(r0, r1 int) {
			if k == 0 {
				return
			}
			blas64.Gemm(blas.NoTrans, blas.NoTrans, 1,
				blas64.General{Rows: r1 - r0, Cols: k, Stride: k, Data: a[r0*k : r1*k]},
				blas64.General{Rows: k, Cols: n, Stride: n, Data: b},
				0, blas64.General{Rows: r1 - r0, Cols: n, Stride: n, Data: y[r0*n : r1*n]})
		}
	case FP32:
		b32 := to32(b, ev.opt.Threads)
		compute = func(r0, r1 int) {
			if k == 0 {
				return
			}
			y32 := make([]float32, (r1-r0)*n)
			blas32.Gemm(blas.NoTrans, blas.NoTrans, 1,
				blas32.General{Rows: r1 - r0, Cols: k, Stride: k, Data: to32(a[r0*k:r1*k], 1)},
				blas32.General{Rows: k, Cols: n, Stride: n, Data: b32},
				0, blas32.General{Rows: r1 - r0, Cols: n, Stride: n, Data: y32})
			for i, v := range y32 {
				y[r0*n+i] = float64(v)
			}
		}
	default:
		// b transposed: each output element's k run contiguous; as
		// float32 straight away when every value fits one exactly.
		th := ev.opt.Threads
		if allShort(a[:m*k], th) && allShort(b[:k*n], th) {
			a32, bt32 := to32(a[:m*k], th), transposeKN[float32](k, n, b, th)
			compute = func(r0, r1 int) { deviceMMShort(r0, r1, k, n, a32, bt32, y) }
		} else {
			bt := transposeKN[float64](k, n, b, th)
			compute = func(r0, r1 int) { deviceMM(r0, r1, k, n, a, bt, y) }
		}
	}
	threads := min(ev.opt.Threads, m)
	if threads <= 1 {
		compute(0, m)
		return
	}
	par.For(threads, threads, func(_, t int) { compute(t*m/threads, (t+1)*m/threads) })
}

// deviceMM computes rows r0..r1 as the device's matrix units do: each
// product exact, accumulated with one FP32 rounding per k, in k order.
// A fused multiply-add in float64 then rounded to float32 equals that
// when the product fits in float32 (FP16 and FP8 inputs), and is what
// the device's FP32 fma instruction computes otherwise. bt is b
// transposed (n×k), so that both operands of an element are read in
// order; columns go in blocks that stay in cache while a block of rows
// passes over them. The order of every element's sum is k order
// whatever the blocking.
func deviceMM(r0, r1, k, n int, a, bt, y []float64) {
	const rowBlock, colBlock = 16, 64
	for i0 := r0; i0 < r1; i0 += rowBlock {
		i1 := min(i0+rowBlock, r1)
		for j0 := 0; j0 < n; j0 += colBlock {
			j1 := min(j0+colBlock, n)
			for i := i0; i < i1; i++ {
				row := a[i*k : i*k+k]
				for j := j0; j < j1; j++ {
					col := bt[j*k : j*k+k]
					var acc float32
					for p, av := range row {
						prod := float64(av * col[p])
						if f := float32(prod); float64(f) == prod {
							// The product of two FP16 or FP8 values is
							// exact in FP32: one FP32 addition rounds the
							// exact sum once, as the AMP does.
							acc += f
							continue
						}
						acc = float32(numfmt.SumRTO(prod, float64(acc)))
					}
					y[i*n+j] = float64(acc)
				}
			}
		}
	}
}

// shortSignificands reports whether every value is zero or an FP32
// value of at most 12 significant bits between 2^-60 and 2^60 in
// magnitude (every FP16 and FP8 value is): the product of two such
// values is exact in FP32 (at most 24 bits, a normal number).
func shortSignificands(vs []float64) bool {
	for _, v := range vs {
		if v == 0 {
			continue
		}
		f := float32(v)
		if float64(f) != v || math.Abs(v) < 0x1p-60 || math.Abs(v) > 0x1p60 || math.Float32bits(f)&0xFFF != 0 {
			return false
		}
	}
	return true
}

// deviceMMShort is deviceMM for operands whose products are all exact in
// FP32 (shortSignificands): every product added to its FP32 accumulator
// with one rounding, in k order, four output elements at a time.
func deviceMMShort(r0, r1, k, n int, a, bt []float32, y []float64) {
	const rowBlock, colBlock = 16, 64
	for i0 := r0; i0 < r1; i0 += rowBlock {
		i1 := min(i0+rowBlock, r1)
		for j0 := 0; j0 < n; j0 += colBlock {
			j1 := min(j0+colBlock, n)
			for i := i0; i < i1; i++ {
				row := a[i*k : i*k+k]
				j := j0
				for ; j+4 <= j1; j += 4 {
					c0, c1 := bt[j*k : j*k+k][:len(row)], bt[(j+1)*k : (j+1)*k+k][:len(row)]
					c2, c3 := bt[(j+2)*k : (j+2)*k+k][:len(row)], bt[(j+3)*k : (j+3)*k+k][:len(row)]
					var s0, s1, s2, s3 float32
					for p, av := range row {
						// Exact products: a fused add would round the same.
						s0 += float32(av * c0[p])
						s1 += float32(av * c1[p])
						s2 += float32(av * c2[p])
						s3 += float32(av * c3[p])
					}
					y[i*n+j], y[i*n+j+1], y[i*n+j+2], y[i*n+j+3] = float64(s0), float64(s1), float64(s2), float64(s3)
				}
				for ; j < j1; j++ {
					col := bt[j*k : j*k+k][:len(row)]
					var s float32
					for p, av := range row {
						s += float32(av * col[p])
					}
					y[i*n+j] = float64(s)
				}
			}
		}
	}
}

// transposeKN returns the k×n row-major b as n×k, each value converted
// to T, on up to threads goroutines (each a band of b's columns).
func transposeKN[T float32 | float64](k, n int, b []float64, threads int) []T {
	t := make([]T, k*n)
	const blk = 32
	inBands(n, k*n, threads, func(_, j0, j1 int) {
		for p0 := 0; p0 < k; p0 += blk {
			for j := j0; j < j1; j++ {
				for p := p0; p < min(p0+blk, k); p++ {
					t[j*k+p] = T(b[p*n+j])
				}
			}
		}
	})
	return t
}

// to32 converts v to float32, on up to threads goroutines.
func to32(v []float64, threads int) []float32 {
	out := make([]float32, len(v))
	inBands(len(v), len(v), threads, func(_, lo, hi int) {
		for i := lo; i < hi; i++ {
			out[i] = float32(v[i])
		}
	})
	return out
}

// allShort is shortSignificands of all of vs, on up to threads
// goroutines.
func allShort(vs []float64, threads int) bool {
	var short [maxBands]bool
	n := inBands(len(vs), len(vs), threads, func(i, lo, hi int) { short[i] = shortSignificands(vs[lo:hi]) })
	for _, ok := range short[:n] {
		if !ok {
			return false
		}
	}
	return true
}

// inBands cuts [0, n) into bands, one a thread (at most maxBands), and
// calls fn(i, lo, hi) on band i side by side; it returns the number of
// bands. Less than bandWork elements of work run as one band in the
// caller's goroutine.
func inBands(n, work, threads int, fn func(i, lo, hi int)) int {
	const bandWork = 1 << 16
	b := 1
	if threads > 1 && work >= bandWork {
		b = min(n, threads, maxBands)
	}
	if b <= 1 {
		fn(0, 0, n)
		return 1
	}
	par.For(b, b, func(_, i int) { fn(i, i*n/b, (i+1)*n/b) })
	return b
}

// maxBands bounds inBands' bands.
const maxBands = 64
