package hostref

// Error bounds of the data-movement, selection, comparison, logic,
// integer and activation operators, and of If (see bounds.go for the
// accuracy model). A bool or integer result has error 0 where every
// implementation meeting the model computes the same value; a bool that
// a perturbed input can flip has error 1.

import (
	"math"

	"ipu.local/libs/graph"
	"ipu.local/libs/onnx"
)

// move applies a movement node's index maps to its inputs' errors; a
// Gather whose indices are not exactly determined is unbounded.
func (bd *bounder) move(n *graph.Node) [][]float64 {
	maps, err := bd.ev.moveMaps(n)
	out := make([][]float64, len(n.Outputs))
	if err != nil { // the evaluation succeeded with the same maps
		return out
	}
	ins := make([][]float64, len(n.Inputs))
	for i, v := range n.Inputs {
		if v != nil {
			ins[i] = bd.errs[v.Index]
		}
	}
	uncertain := false
	if n.Op == "Gather" {
		for _, e := range ins[1] {
			uncertain = uncertain || e != 0
		}
	}
	for k, m := range maps {
		out[k] = take(ins, m)
		if uncertain {
			for i := range out[k] {
				out[k][i] = math.Inf(1)
			}
		}
	}
	return out
}

// more bounds the operators this file adds; ok is false for the others.
func (bd *bounder) more(n *graph.Node, y []float64) ([][]float64, bool) {
	e := make([]float64, len(y))
	x := func(i int) []float64 { return bd.ref(n.Inputs[i]) }
	ex := func(i int) []float64 { return bd.errs[n.Inputs[i].Index] }
	switch n.Op {
	case "Add", "Sub", "Mul", "Div":
		if !isIntType(n.Inputs[0].DType) {
			return nil, false
		}
		bd.intArith(n, y, e)
	case "Cast":
		if !isIntType(n.Inputs[0].DType) && !isIntType(n.Outputs[0].DType) {
			return nil, false
		}
		bd.intCast(n, x(0), ex(0), e)
	case "Equal", "Greater", "GreaterOrEqual", "Less", "LessOrEqual", "And", "Or", "Xor":
		ia, ib := graph.BroadcastIndex(n.Inputs[0].Shape, n.Outputs[0].Shape), graph.BroadcastIndex(n.Inputs[1].Shape, n.Outputs[0].Shape)
		a, b, ea, eb := x(0), x(1), ex(0), ex(1)
		for k := range e {
			d := ea[ia[k]] + eb[ib[k]]
			if d > 0 && !(math.Abs(a[ia[k]]-b[ib[k]]) > d) {
				e[k] = 1 // a perturbed input may flip the result
			}
		}
	case "Not":
		for k, v := range ex(0) {
			e[k] = math.Min(v, 1)
		}
	case "Where":
		ic, ix, iy, err := whereIndex(n)
		if err != nil {
			return [][]float64{e}, true
		}
		c, ec, a, b, ea, eb := bd.ev.ints[n.Inputs[0].Index], ex(0), x(1), x(2), ex(1), ex(2)
		for k := range e {
			sel, other := ea[ix[k]], eb[iy[k]]
			if c[ic[k]] == 0 {
				sel, other = other, sel
			}
			e[k] = sel
			if ec[ic[k]] != 0 {
				e[k] = max(sel, math.Abs(a[ix[k]]-b[iy[k]])+other)
			}
		}
	case "ReduceMax", "ReduceMin":
		idx, _, err := reduceGroups(n)
		if err != nil {
			return [][]float64{e}, true
		}
		for i, v := range ex(0) {
			e[idx[i]] = max(e[idx[i]], v)
		}
		for k := range e {
			e[k] = finish(y[k], e[k], e[k] == 0)
		}
	case "Shape", "ConstantOfShape":
	case "Range":
		for i := 0; i < 3; i++ {
			if ex(i)[0] != 0 {
				for k := range e {
					e[k] = math.Inf(1)
				}
			}
		}
		if !isIntType(n.Outputs[0].DType) {
			for k := range e {
				e[k] += float64(k) * rnd(y[k]) // one rounding per accumulation
			}
		}
	case "Sum", "Mean":
		bd.sum(n, y, e)
	case "Erf", "Log", "Softplus", "HardSwish", "LeakyRelu", "Elu", "Selu", "HardSigmoid", "Floor", "Ceil", "Round", "Sign", "Sin", "Cos":
		bd.activation(n, x(0), ex(0), y, e)
	case "If":
		return bd.ifNode(n), true
	default:
		return nil, false
	}
	return [][]float64{e}, true
}

// intArith: integer results are exact; an uncertain operand propagates
// (a quotient of uncertain operands is unbounded).
func (bd *bounder) intArith(n *graph.Node, y, e []float64) {
	ia, ib := graph.BroadcastIndex(n.Inputs[0].Shape, n.Outputs[0].Shape), graph.BroadcastIndex(n.Inputs[1].Shape, n.Outputs[0].Shape)
	a, b := bd.ref(n.Inputs[0]), bd.ref(n.Inputs[1])
	ea, eb := bd.errs[n.Inputs[0].Index], bd.errs[n.Inputs[1].Index]
	for k := range e {
		p, q := ea[ia[k]], eb[ib[k]]
		if p == 0 && q == 0 {
			continue
		}
		switch n.Op {
		case "Add", "Sub":
			e[k] = p + q
		case "Mul":
			e[k] = math.Abs(a[ia[k]])*q + math.Abs(b[ib[k]])*p + p*q
		default:
			e[k] = math.Inf(1)
		}
	}
}

// intCast bounds casts from or to the integer types: exact inputs give
// exact results; a float interval truncates to an integer interval, and
// to bool flips where it holds 0; an uncertain integer cast to float
// may round to a neighbour.
func (bd *bounder) intCast(n *graph.Node, x, ex, e []float64) {
	to := n.Outputs[0].DType
	fromInt := isIntType(n.Inputs[0].DType)
	for k, v := range x {
		d := ex[k]
		if d == 0 {
			continue
		}
		switch {
		case to == onnx.Bool:
			if math.Abs(v) <= d || v != v {
				e[k] = 1
			}
		case isIntType(to) && fromInt:
			e[k] = d
		case isIntType(to):
			t := math.Trunc(v)
			e[k] = max(math.Abs(math.Trunc(v+d)-t), math.Abs(math.Trunc(v-d)-t))
		case to == onnx.Float:
			e[k] = d + ulpAt(math.Abs(v)+d, 23, -126)
		case to == onnx.Float16:
			e[k] = d + ulpAt(math.Min(math.Abs(v)+d, 65504), 10, -14)
			if math.Abs(v)+d >= 65520 {
				e[k] = math.Inf(1)
			}
		default:
			mant, emin, maxVal := fp8Spec(to)
			e[k] = d + ulpAt(math.Min(math.Abs(v)+d, maxVal), mant, emin)
			if math.Abs(v)+d > maxVal {
				e[k] = math.Inf(1)
			}
		}
	}
}

// sum bounds Sum and Mean: the inputs' errors, plus gamma(K) times the
// sum of the magnitudes (and Mean's division).
func (bd *bounder) sum(n *graph.Node, y, e []float64) {
	out := n.Outputs[0].Shape
	mag := make([]float64, len(e))
	exact := make([]bool, len(e))
	for i := range exact {
		exact[i] = true
	}
	for _, v := range n.Inputs {
		idx := graph.BroadcastIndex(v.Shape, out)
		x, ex := bd.ref(v), bd.errs[v.Index]
		for i := range e {
			e[i] += ex[idx[i]]
			mag[i] += math.Abs(x[idx[i]])
			exact[i] = exact[i] && ex[idx[i]] == 0
		}
	}
	cnt := len(n.Inputs)
	if cnt == 1 && n.Op == "Sum" {
		return // a copy
	}
	g, div := gamma(cnt-1), 1.0
	if n.Op == "Mean" {
		g, div = gamma(cnt), float64(cnt)
	}
	for i := range e {
		e[i] = finish(y[i], (e[i]+g*mag[i])/div+float64(cnt)*Tiny32, exact[i])
	}
}

// activation bounds the elementwise functions: the propagated error (by
// monotonicity or a Lipschitz constant) plus the roundings of the
// computation, transcendental functions within ct.
func (bd *bounder) activation(n *graph.Node, x, ex, y, e []float64) {
	for i, a := range x {
		d := ex[i]
		var v float64
		switch n.Op {
		case "Erf":
			v = monotone(math.Erf, a, d, y[i]) + ct
		case "Floor":
			v = monotone(math.Floor, a, d, y[i]) // exact; a step where the interval crosses an integer
		case "Ceil":
			v = monotone(math.Ceil, a, d, y[i])
		case "Round":
			v = monotone(math.RoundToEven, a, d, y[i])
		case "Sign":
			v = monotone(sign, a, d, y[i])
		case "Sin", "Cos":
			// 1-Lipschitz, and the function's own error (|y| <= 1)
			v = d + ct
		case "Log":
			switch {
			case a+d < 0:
				v = 0 // NaN in every implementation
			case a-d <= 0:
				v = math.Inf(1)
			default:
				v = monotone(math.Log, a, d, y[i]) + ct*math.Abs(y[i]) + Tiny32
			}
		case "Softplus":
			// 1-Lipschitz; exp and log1p (or log of 1+exp) each within
			// ct, the argument of log1p below 1 and the result at least
			// as large as log1p's.
			v = d + 3*ct*math.Abs(y[i]) + rnd(y[i]) + Tiny32
		case "HardSwish":
			// slope at most 1.5; the gate x/6+1/2 rounds twice (and 1/6
			// once), then the product.
			v = 1.5*d + d*d/6 + math.Abs(a)*(math.Abs(a)/6*2*U32+U32+2*Tiny32) + rnd(y[i])
		case "LeakyRelu":
			alpha := float64(n.Attrs.(*graph.LeakyRelu).Alpha)
			v = max(1, math.Abs(alpha)) * d
			if a < 0 || a-d < 0 {
				v += rnd(y[i]) + Tiny32
			}
		case "Elu":
			alpha := math.Abs(float64(n.Attrs.(*graph.Elu).Alpha))
			v = max(1, alpha) * d
			if a <= 0 || a-d <= 0 {
				// exp(x) - 1 loses exp's relative error as an absolute
				// one (exp(x) <= 1 here); then the product.
				v += alpha*(ct*math.Exp(math.Min(a+d, 0))+U32) + rnd(y[i]) + Tiny32
			}
		case "Selu":
			s := n.Attrs.(*graph.Selu)
			alpha, gamma := math.Abs(float64(s.Alpha)), math.Abs(float64(s.Gamma))
			v = gamma * max(1, alpha) * d
			if a > 0 || a+d > 0 {
				v += rnd(y[i])
			}
			if a <= 0 || a-d <= 0 {
				v += gamma*alpha*(ct*math.Exp(math.Min(a+d, 0))+2*U32) + 2*rnd(y[i]) + Tiny32
			}
		case "HardSigmoid":
			h := n.Attrs.(*graph.HardSigmoid)
			alpha, beta := math.Abs(float64(h.Alpha)), math.Abs(float64(h.Beta))
			v = alpha*d + U32*(2*alpha*math.Abs(a)+beta) + 2*Tiny32
		}
		e[i] = finish(y[i], v, d == 0)
	}
}

// ifNode bounds the branch the condition took; an uncertain condition
// leaves the outputs unbounded (the other branch was not evaluated).
func (bd *bounder) ifNode(n *graph.Node) [][]float64 {
	out := make([][]float64, len(n.Outputs))
	inf := func() [][]float64 {
		for k, v := range n.Outputs {
			if v != nil {
				out[k] = make([]float64, v.NumElements())
				for i := range out[k] {
					out[k][i] = math.Inf(1)
				}
			}
		}
		return out
	}
	a, ok := n.Attrs.(*graph.If)
	if !ok || bd.errs[n.Inputs[0].Index][0] != 0 {
		return inf()
	}
	br, _, err := takenBranch(n, a, bd.ev.ints[n.Inputs[0].Index])
	if err != nil {
		return inf()
	}
	bd.nodes(br.Nodes)
	for k, v := range n.Outputs {
		if v != nil {
			out[k] = append([]float64{}, bd.errs[br.Outputs[k].Index]...)
		}
	}
	return out
}
