package hostref

import (
	"math"

	"ipu.local/libs/graph"
	"ipu.local/libs/onnx"
)

// Bound is the reference for one graph output with a per-element error
// bound: any implementation meeting the accuracy model below computes y
// with |y - Ref| <= Err. Err 0 means the element is exactly determined
// (compare bit for bit, NaN for NaN); +Inf means no bound (the result can
// legitimately be anything, e.g. an overflow that may or may not happen).
//
// Two implementations that both meet the model differ by at most 2*Err.
type Bound struct {
	Ref []float64
	Err []float64
}

// The accuracy model. An implementation computes in float32 (the float16
// results of an operator are rounded once more, to float16), and:
//
//   - each addition, subtraction, multiplication, division and square
//     root rounds once: relative error at most U32 (plus Tiny32 absolute,
//     for subnormals);
//   - exp, log, pow are within TranscendentalUlps ulps (relative
//     2*TranscendentalUlps*U32); tanh, sigmoid and erf, whose range is
//     bounded by 1, within TranscendentalUlps ulps of 1 (absolute): the
//     vectorized approximations of onnxruntime (MLAS) clamp their
//     arguments and are accurate in absolute, not relative, terms;
//   - a sum of n terms, in any order, with or without fused
//     multiply-adds, is within gamma(n) = n*U32/(1-n*U32) times the sum of
//     the terms' magnitudes (Higham, Accuracy and Stability of Numerical
//     Algorithms, 2nd ed., section 3.1); matrix products and reductions
//     are such sums;
//   - casts round once to nearest even; a cast's reference is itself
//     rounded, so a perturbed input can land one whole ulp of the target
//     type away from it.
//
// Errors of the inputs of an operator propagate through it by its
// Lipschitz constant or, for monotone functions, exactly over the
// interval of possible inputs. The bounds are first order in U32, which
// is standard and below the precision at which they are stated.
const (
	U32                = 0x1p-24
	Tiny32             = 0x1p-149
	U16                = 0x1p-11
	Tiny16             = 0x1p-24
	TranscendentalUlps = 4
)

// ct is the transcendental functions' error in units of relative (exp,
// pow, log) or absolute (tanh, sigmoid, erf) error.
const ct = 2 * TranscendentalUlps * U32

func gamma(n int) float64 {
	x := float64(n) * U32
	if x >= 1 {
		return math.Inf(1)
	}
	return x / (1 - x)
}

// rnd is the error of one rounding of a result of magnitude |y|.
func rnd(y float64) float64 { return U32*math.Abs(y) + Tiny32 }

// ErrorBounds evaluates g in FP64 and bounds, per output element, how far
// any implementation meeting the accuracy model can land from it.
func ErrorBounds(g *graph.Graph, inputs []*onnx.Tensor) ([]Bound, error) {
	ev, err := run(g, inputs, Options{Precision: FP64, Threads: 1})
	if err != nil {
		return nil, err
	}
	bd := &bounder{ev: ev, errs: make([][]float64, len(g.Values))}
	for _, v := range g.Values {
		if v.Producer == nil {
			bd.errs[v.Index] = make([]float64, v.NumElements())
		}
	}
	bd.nodes(g.Nodes)
	out := make([]Bound, len(g.Outputs))
	for i, v := range g.Outputs {
		out[i] = Bound{Ref: bd.ref(v), Err: bd.errs[v.Index]}
	}
	return out, nil
}

// nodes bounds the outputs of nodes in order (the graph's, or the
// nodes of the branch an If took).
func (bd *bounder) nodes(list []*graph.Node) {
	for _, n := range list {
		outs := bd.node(n)
		for i, v := range n.Outputs {
			if v == nil || i >= len(outs) {
				continue
			}
			e := outs[i]
			y := bd.ref(v)
			if v.DType == onnx.Float16 && n.Op != "Cast" && !movement(n.Op) {
				for k := range e {
					e[k] += U16*math.Abs(y[k]) + Tiny16
				}
			}
			for k := range e {
				if math.IsNaN(e[k]) {
					e[k] = math.Inf(1)
				}
			}
			bd.errs[v.Index] = e
		}
	}
}

// ref is a value's reference (FP64) elements, integers converted.
func (bd *bounder) ref(v *graph.Value) []float64 {
	if ints := bd.ev.ints[v.Index]; ints != nil {
		return toFloats(ints)
	}
	return bd.ev.vals[v.Index]
}

// movement reports whether op's results are its inputs' elements
// (no rounding to the output type).
func movement(op string) bool {
	switch op {
	case "Where", "If", "ReduceMax", "ReduceMin":
		return true
	}
	return isMove(op)
}

type bounder struct {
	ev   *evaluator
	errs [][]float64
}

// finish settles elements whose reference is not finite: exactly
// determined when the inputs were, unbounded otherwise.
func finish(y, e float64, exact bool) float64 {
	if math.IsInf(y, 0) || math.IsNaN(y) {
		if exact {
			return 0
		}
		return math.Inf(1)
	}
	return e
}

// monotone bounds the propagated error of a monotone function f at a
// with input error ea.
func monotone(f func(float64) float64, a, ea, y float64) float64 {
	if ea == 0 {
		return 0
	}
	return max(math.Abs(f(a+ea)-y), math.Abs(f(a-ea)-y))
}

func (bd *bounder) node(n *graph.Node) [][]float64 {
	ev := bd.ev
	val := func(v *graph.Value) []float64 { return ev.vals[v.Index] }
	er := func(v *graph.Value) []float64 { return bd.errs[v.Index] }
	out := n.Outputs[0]
	y := bd.ref(out)
	e := make([]float64, len(y))
	if isMove(n.Op) {
		return bd.move(n)
	}
	if outs, ok := bd.more(n, y); ok {
		return outs
	}
	switch n.Op {
	case "Neg", "Abs", "Relu", "Clip":
		copy(e, er(n.Inputs[0]))
	case "Tanh", "Sigmoid", "Exp", "Sqrt":
		bd.unary(n.Op, val(n.Inputs[0]), er(n.Inputs[0]), y, e)
	case "Add", "Sub", "Mul", "Div", "Pow":
		bd.binary(n, y, e)
	case "Max", "Min":
		for _, in := range n.Inputs {
			idx := graph.BroadcastIndex(in.Shape, out.Shape)
			ek := er(in)
			for i := range e {
				e[i] = max(e[i], ek[idx[i]])
			}
		}
		for i := range e {
			e[i] = finish(y[i], e[i], e[i] == 0)
		}
	case "MatMul":
		e = bd.matmul(n.Inputs[0].Shape, n.Inputs[1].Shape, val(n.Inputs[0]), val(n.Inputs[1]), er(n.Inputs[0]), er(n.Inputs[1]), y)
	case "Gemm":
		e = bd.gemm(n, y)
	case "Cast":
		bd.cast(n, y, e)
	case "Softmax", "LogSoftmax":
		bd.softmax(n, y, e)
	case "LayerNormalization":
		return bd.layerNorm(n)
	case "Gelu":
		x, ex := val(n.Inputs[0]), er(n.Inputs[0])
		// GELU's derivative lies in [-0.13, 1.13]. Rounding: erf or tanh
		// of bounded range (ct absolute), scaled by 0.5|x|, plus the
		// few multiplications and additions around it; the argument's
		// own rounding moves erf by at most 0.3*U32 times |x| at the
		// worst x.
		for i := range e {
			e[i] = finish(y[i], 1.13*ex[i]+math.Abs(x[i])*(ct+5*U32)+rnd(y[i])+0.3*U32, ex[i] == 0)
		}
	case "ReduceMean", "ReduceSum":
		bd.reduce(n, y, e)
	}
	return [][]float64{e}
}

func (bd *bounder) unary(op string, x, ex, y, e []float64) {
	for i, a := range x {
		var v float64
		switch op {
		case "Tanh":
			v = monotone(math.Tanh, a, ex[i], y[i]) + ct
		case "Sigmoid":
			v = monotone(func(t float64) float64 { return 1 / (1 + math.Exp(-t)) }, a, ex[i], y[i]) + ct
		case "Exp":
			v = monotone(math.Exp, a, ex[i], y[i]) + ct*math.Exp(a+ex[i]) + Tiny32
		case "Sqrt":
			switch {
			case a+ex[i] < 0:
				v = 0 // NaN in every implementation
			case a-ex[i] < 0:
				v = math.Inf(1)
			default:
				v = monotone(math.Sqrt, a, ex[i], y[i]) + rnd(y[i])
			}
		}
		e[i] = finish(y[i], v, ex[i] == 0)
	}
}

func (bd *bounder) binary(n *graph.Node, y, e []float64) {
	out := n.Outputs[0].Shape
	ia := graph.BroadcastIndex(n.Inputs[0].Shape, out)
	ib := graph.BroadcastIndex(n.Inputs[1].Shape, out)
	av, bv := bd.ev.vals[n.Inputs[0].Index], bd.ev.vals[n.Inputs[1].Index]
	ae, be := bd.errs[n.Inputs[0].Index], bd.errs[n.Inputs[1].Index]
	for i := range e {
		a, b, ea, eb := av[ia[i]], bv[ib[i]], ae[ia[i]], be[ib[i]]
		var v float64
		switch n.Op {
		case "Add", "Sub":
			v = ea + eb + rnd(y[i])
		case "Mul":
			v = math.Abs(a)*eb + math.Abs(b)*ea + ea*eb + rnd(y[i])
		case "Div":
			if math.Abs(b) <= eb {
				v = math.Inf(1)
			} else {
				v = (ea+math.Abs(y[i])*eb)/(math.Abs(b)-eb) + rnd(y[i])
			}
		case "Pow":
			v = powBound(a, ea, b, eb, y[i])
		}
		e[i] = finish(y[i], v, ea == 0 && eb == 0)
	}
}

// powBound bounds pow over the box of possible inputs: with a positive
// base, a^b = exp(b ln a) takes its extremes at the box's corners; with
// an integer exponent, a^b is monotone on each side of 0.
func powBound(a, ea, b, eb, y float64) float64 {
	if ea == 0 && eb == 0 {
		return ct*math.Abs(y) + Tiny32
	}
	lo, hi := a-ea, a+ea
	cand := []float64{}
	switch {
	case lo > 0:
	case eb == 0 && b == math.Trunc(b):
		if lo < 0 && hi > 0 {
			cand = append(cand, math.Pow(0, b))
		}
	default:
		return math.Inf(1)
	}
	for _, p := range []float64{lo, hi} {
		for _, q := range []float64{b - eb, b + eb} {
			cand = append(cand, math.Pow(p, q))
		}
	}
	var dev, mag float64
	for _, c := range cand {
		dev = max(dev, math.Abs(c-y))
		mag = max(mag, math.Abs(c))
	}
	return dev + ct*mag + Tiny32
}

// matmul bounds numpy matmul(a, b): |A||Eb| + |Ea||B| + |Ea||Eb|
// propagated, plus gamma(K)|A||B| for the sums.
func (bd *bounder) matmul(as, bs []int64, a, b, ea, eb, y []float64) []float64 {
	x64 := &evaluator{opt: Options{Precision: FP64, Threads: 1}}
	absA, absB := absAll(a), absAll(b)
	k := int(as[len(as)-1])
	s := x64.matmul(as, bs, absA, absB)
	p1 := x64.matmul(as, bs, absA, eb)
	p2 := x64.matmul(as, bs, ea, absB)
	p3 := x64.matmul(as, bs, ea, eb)
	g := gamma(k)
	e := make([]float64, len(s))
	for i := range e {
		exact := p1[i] == 0 && p2[i] == 0 && p3[i] == 0
		e[i] = finish(y[i], p1[i]+p2[i]+p3[i]+g*s[i]+float64(k)*Tiny32, exact)
	}
	return e
}

func absAll(v []float64) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = math.Abs(x)
	}
	return out
}

func (bd *bounder) gemm(n *graph.Node, y []float64) []float64 {
	attrs := n.Attrs.(*graph.Gemm)
	a, b := bd.ev.vals[n.Inputs[0].Index], bd.ev.vals[n.Inputs[1].Index]
	ea, eb := bd.errs[n.Inputs[0].Index], bd.errs[n.Inputs[1].Index]
	as, bs := n.Inputs[0].Shape, n.Inputs[1].Shape
	if attrs.TransA {
		a, ea = transpose(as, []int{1, 0}, a), transpose(as, []int{1, 0}, ea)
		as = []int64{as[1], as[0]}
	}
	if attrs.TransB {
		b, eb = transpose(bs, []int{1, 0}, b), transpose(bs, []int{1, 0}, eb)
		bs = []int64{bs[1], bs[0]}
	}
	x64 := &evaluator{opt: Options{Precision: FP64, Threads: 1}}
	absA, absB := absAll(a), absAll(b)
	k := int(as[1])
	s := x64.matmul(as, bs, absA, absB)
	p := x64.matmul(as, bs, absA, eb)
	p2 := x64.matmul(as, bs, ea, absB)
	p3 := x64.matmul(as, bs, ea, eb)
	alpha, beta := math.Abs(float64(attrs.Alpha)), math.Abs(float64(attrs.Beta))
	var cIdx []int64
	var cv, ce []float64
	if c := n.Inputs[2]; c != nil {
		cIdx = graph.BroadcastIndex(c.Shape, n.Outputs[0].Shape)
		cv, ce = bd.ev.vals[c.Index], bd.errs[c.Index]
	}
	g := gamma(k + 3)
	e := make([]float64, len(y))
	for i := range e {
		prop := alpha * (p[i] + p2[i] + p3[i])
		mag := alpha * s[i]
		if cIdx != nil {
			prop += beta * ce[cIdx[i]]
			mag += beta * math.Abs(cv[cIdx[i]])
		}
		e[i] = finish(y[i], prop+g*mag+float64(k+3)*Tiny32, prop == 0)
	}
	return e
}

// ulpAt is the spacing of a float format (mant fraction bits, smallest
// normal exponent emin) at magnitude x.
func ulpAt(x float64, mant, emin int) float64 {
	_, exp := math.Frexp(x) // x = f * 2^exp, f in [0.5, 1)
	return math.Ldexp(1, max(exp-1, emin)-mant)
}

// fp8Spec is what the bound needs of an FP8 type: fraction bits,
// smallest normal exponent, largest finite value.
func fp8Spec(d onnx.DataType) (mant, emin int, maxVal float64) {
	switch d {
	case onnx.Float8E4M3FN:
		return 3, -6, 448
	case onnx.Float8E4M3FNUZ:
		return 3, -7, 240
	case onnx.Float8E5M2:
		return 2, -14, 57344
	default: // Float8E5M2FNUZ
		return 2, -15, 57344
	}
}

func (bd *bounder) cast(n *graph.Node, y, e []float64) {
	a := n.Attrs.(*graph.Cast)
	x, ex := bd.ev.vals[n.Inputs[0].Index], bd.errs[n.Inputs[0].Index]
	var mant, emin int
	var maxVal float64
	switch a.To {
	case onnx.Float:
		copy(e, ex)
		return
	case onnx.Float16:
		mant, emin, maxVal = 10, -14, 65504
	default:
		mant, emin, maxVal = fp8Spec(a.To)
	}
	overflow := maxVal + ulpAt(maxVal, mant, emin)/2
	for i := range e {
		if ex[i] == 0 {
			continue // one rounding of an exact input: exactly determined
		}
		m := math.Abs(x[i]) + ex[i]
		switch {
		case math.IsNaN(x[i]):
			e[i] = math.Inf(1)
		case m >= overflow && (!a.Saturate || a.To == onnx.Float16):
			e[i] = math.Inf(1)
		default:
			e[i] = ex[i] + ulpAt(min(m, maxVal), mant, emin)
		}
	}
}

func (bd *bounder) softmax(n *graph.Node, y, e []float64) {
	a := n.Attrs.(*graph.Softmax)
	x, ex := bd.ev.vals[n.Inputs[0].Index], bd.errs[n.Inputs[0].Index]
	rs := softmaxRows(n.Inputs[0].Shape, a)
	logSoftmax := n.Op == "LogSoftmax"
	g := gamma(rs.n)
	rs.each(func(base, stride int) {
		m, maxErr := math.Inf(-1), 0.0
		for j := 0; j < rs.n; j++ {
			m = max(m, x[base+j*stride])
			maxErr = max(maxErr, ex[base+j*stride])
		}
		spread, sum := 0.0, 0.0
		for j := 0; j < rs.n; j++ {
			d := x[base+j*stride] - m
			spread = max(spread, math.Abs(d))
			sum += math.Exp(d)
		}
		// Relative error of the computed sum of exponentials: the
		// arguments' roundings, exp's accuracy, the summation.
		sumRel := U32*spread + ct + g
		for j := 0; j < rs.n; j++ {
			k := base + j*stride
			d := math.Abs(x[k] - m)
			var v float64
			if logSoftmax {
				// log-sum-exp is 1-Lipschitz in the max norm.
				v = ex[k] + maxErr + U32*d + sumRel + ct*math.Abs(math.Log(sum)) + 2*rnd(y[k])
			} else {
				// Perturbing the inputs scales y by at most
				// exp(ex[k] + maxErr); roundings: the argument, exp,
				// the sum, and a division (or a reciprocal and a
				// product).
				v = y[k]*math.Expm1(ex[k]+maxErr) + y[k]*(U32*d+ct+sumRel+2*U32) + 2*Tiny32
			}
			e[k] = finish(y[k], v, ex[k] == 0 && maxErr == 0)
		}
	})
}

// layerNorm bounds Y, Mean and InvStdDev. The variance bound covers both
// the two-pass algorithm and the one-pass E[x^2] - E[x]^2 that
// onnxruntime uses.
func (bd *bounder) layerNorm(n *graph.Node) [][]float64 {
	a := n.Attrs.(*graph.LayerNorm)
	ev := bd.ev
	xv := n.Inputs[0]
	x, ex := ev.vals[xv.Index], bd.errs[xv.Index]
	norm := xv.Shape[a.Axis:]
	cnt := int(graph.NumElements(norm))
	outer := int(graph.NumElements(xv.Shape[:a.Axis]))
	var gv, ge, bv, be []float64
	var gIdx, bIdx []int64
	if s := n.Inputs[1]; s != nil {
		gIdx, gv, ge = graph.BroadcastIndex(s.Shape, norm), ev.vals[s.Index], bd.errs[s.Index]
	}
	if b := n.Inputs[2]; b != nil {
		bIdx, bv, be = graph.BroadcastIndex(b.Shape, norm), ev.vals[b.Index], bd.errs[b.Index]
	}
	y := ev.vals[n.Outputs[0].Index]
	ey := make([]float64, len(y))
	eMean := make([]float64, outer)
	eInv := make([]float64, outer)
	eps := float64(a.Epsilon)
	N := float64(cnt)
	for o := 0; o < outer; o++ {
		row, erow := x[o*cnt:(o+1)*cnt], ex[o*cnt:(o+1)*cnt]
		var mu, absMean, msq, maxErr float64
		for j, v := range row {
			mu += v
			absMean += math.Abs(v)
			msq += v * v
			maxErr = max(maxErr, erow[j])
		}
		mu, absMean, msq = mu/N, absMean/N, msq/N
		var variance, dvar float64
		for j, v := range row {
			d := v - mu
			D := erow[j] + maxErr
			variance += d * d
			dvar += 2*math.Abs(d)*D + D*D
		}
		variance, dvar = variance/N, dvar/N
		meanRound := gamma(cnt+1) * absMean
		dvar += 2 * gamma(cnt+3) * (msq + mu*mu)
		s2 := variance + eps
		ds2 := dvar + rnd(s2)
		rinv := 1 / math.Sqrt(s2)
		eMean[o] = maxErr + meanRound
		if s2-ds2 <= 0 {
			eInv[o] = math.Inf(1)
			for j := range row {
				ey[o*cnt+j] = math.Inf(1)
			}
			continue
		}
		rHi, rLo := 1/math.Sqrt(s2-ds2), 1/math.Sqrt(s2+ds2)
		dr := max(rHi-rinv, rinv-rLo) + 2*rnd(rHi)
		eInv[o] = dr
		for j, v := range row {
			d := v - mu
			dd := erow[j] + maxErr + meanRound + rnd(d)
			z := d * rinv
			dz := math.Abs(d)*dr + rinv*dd + dd*dr + rnd(z)
			gj, egj, bj, ebj := 1.0, 0.0, 0.0, 0.0
			if gIdx != nil {
				gj, egj = gv[gIdx[j]], ge[gIdx[j]]
			}
			if bIdx != nil {
				bj, ebj = bv[bIdx[j]], be[bIdx[j]]
			}
			k := o*cnt + j
			ey[k] = finish(y[k], math.Abs(gj)*dz+math.Abs(z)*egj+dz*egj+ebj+2*(rnd(z*gj)+rnd(bj)), false)
		}
	}
	return [][]float64{ey, eMean, eInv}
}

func (bd *bounder) reduce(n *graph.Node, y, e []float64) {
	a := n.Attrs.(*graph.Reduce)
	in := n.Inputs[0].Shape
	x, ex := bd.ev.vals[n.Inputs[0].Index], bd.errs[n.Inputs[0].Index]
	if len(a.Axes) == 0 {
		copy(e, ex)
		return
	}
	keep := append([]int64{}, in...)
	count := int64(1)
	for _, ax := range a.Axes {
		keep[ax] = 1
		count *= in[ax]
	}
	idx := graph.BroadcastIndex(keep, in)
	mag := make([]float64, len(y))
	for i, v := range x {
		e[idx[i]] += ex[i]
		mag[idx[i]] += math.Abs(v)
	}
	g := gamma(int(count))
	div := 1.0
	if n.Op == "ReduceMean" {
		g, div = gamma(int(count)+1), float64(count)
	}
	for i := range e {
		exact := e[i] == 0
		e[i] = finish(y[i], (e[i]+g*mag[i])/div+float64(count)*Tiny32, exact)
	}
}
