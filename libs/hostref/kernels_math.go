package hostref

// The elementwise functions with or without attributes (Erf, Log,
// Softplus, HardSwish, LeakyRelu, Elu, Selu, HardSigmoid, Floor, Ceil,
// Round, Sign, Sin, Cos), Sum and Mean,
// and ReduceMax and ReduceMin. Like the other float kernels, each
// elementary operation rounds through ev.r (float32 under FP32 and
// Device, nothing under FP64); maxima and minima are exact.

import (
	"fmt"
	"math"

	"ipu.local/libs/fmath"
	"ipu.local/libs/graph"
)

// activation evaluates the operators of this file other than the
// reductions; ok is false for any other operator.
func (ev *evaluator) activation(n *graph.Node, in [][]float64) (out []data, ok bool, err error) {
	r := ev.r
	var f func(x float64) float64
	switch n.Op {
	case "Erf":
		f = func(x float64) float64 { return ev.fn(fmath.Erf, math.Erf, x) }
	case "Log":
		f = func(x float64) float64 { return ev.fn(fmath.Log, math.Log, x) }
	case "Softplus":
		// log(1 + exp(x)), in the form that neither overflows nor loses
		// small results: x + log1p(exp(-x)) for x > 0.
		f = func(x float64) float64 {
			if x > 0 {
				return r(x + r(math.Log1p(ev.fn(fmath.Exp, math.Exp, -x))))
			}
			return r(math.Log1p(ev.fn(fmath.Exp, math.Exp, x)))
		}
	case "HardSwish":
		alpha := r(1.0 / 6)
		f = func(x float64) float64 {
			h := math.Max(0, math.Min(1, r(r(alpha*x)+0.5)))
			return r(x * h)
		}
	case "LeakyRelu":
		a, err := attrs[graph.LeakyRelu](n)
		if err != nil {
			return nil, true, err
		}
		alpha := float64(a.Alpha)
		f = func(x float64) float64 {
			if x >= 0 {
				return x
			}
			return r(alpha * x)
		}
	case "Elu":
		a, err := attrs[graph.Elu](n)
		if err != nil {
			return nil, true, err
		}
		alpha := float64(a.Alpha)
		f = func(x float64) float64 {
			if x > 0 {
				return x
			}
			return r(alpha * r(ev.fn(fmath.Exp, math.Exp, x)-1))
		}
	case "Selu":
		a, err := attrs[graph.Selu](n)
		if err != nil {
			return nil, true, err
		}
		alpha, gamma := float64(a.Alpha), float64(a.Gamma)
		f = func(x float64) float64 {
			if x > 0 {
				return r(gamma * x)
			}
			return r(gamma * r(r(alpha*ev.fn(fmath.Exp, math.Exp, x))-alpha))
		}
	case "HardSigmoid":
		a, err := attrs[graph.HardSigmoid](n)
		if err != nil {
			return nil, true, err
		}
		alpha, beta := float64(a.Alpha), float64(a.Beta)
		f = func(x float64) float64 { return math.Max(0, math.Min(1, r(r(alpha*x)+beta))) }
	case "Floor":
		f = math.Floor // exact, at every precision
	case "Ceil":
		f = math.Ceil
	case "Round":
		f = math.RoundToEven
	case "Sign":
		f = sign
	case "Sin":
		f = func(x float64) float64 { return ev.fn(fmath.Sin, math.Sin, x) }
	case "Cos":
		f = func(x float64) float64 { return ev.fn(fmath.Cos, math.Cos, x) }
	case "Sum", "Mean":
		y, err := ev.sum(n, in)
		if err != nil {
			return nil, true, err
		}
		return []data{floatData(y)}, true, nil
	default:
		return nil, false, nil
	}
	x := in[0]
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = f(v)
	}
	return []data{floatData(y)}, true, nil
}

// sum adds the inputs in order, broadcast, one rounding per addition;
// Mean then divides by their count.
func (ev *evaluator) sum(n *graph.Node, in [][]float64) ([]float64, error) {
	out := n.Outputs[0].Shape
	y := make([]float64, graph.NumElements(out))
	for k, x := range in {
		v := n.Inputs[k]
		if v == nil || !graph.Unidirectional(v.Shape, out) {
			return nil, fmt.Errorf("node %q (%s) input %d: missing or not broadcasting to %s", n.Name, n.Op, k, graph.ShapeString(out))
		}
		idx := graph.BroadcastIndex(v.Shape, out)
		for i := range y {
			if k == 0 {
				y[i] = x[idx[i]]
			} else {
				y[i] = ev.r(y[i] + x[idx[i]])
			}
		}
	}
	if n.Op == "Mean" {
		c := float64(len(in))
		for i := range y {
			y[i] = ev.r(y[i] / c)
		}
	}
	return y, nil
}

// reduceGroups returns, for each input element, the output element it
// reduces into, and the output's element count (the reduced axes kept
// as 1: the element order is the same with or without keepdims).
func reduceGroups(n *graph.Node) ([]int64, int64, error) {
	a, err := attrs[graph.Reduce](n)
	if err != nil {
		return nil, 0, err
	}
	in := n.Inputs[0].Shape
	keep := append([]int64{}, in...)
	for _, ax := range a.Axes {
		if ax < 0 || ax >= len(in) {
			return nil, 0, fmt.Errorf("node %q (%s): axis %d for rank %d", n.Name, n.Op, ax, len(in))
		}
		keep[ax] = 1
	}
	count := graph.NumElements(keep)
	if count != n.Outputs[0].NumElements() {
		return nil, 0, fmt.Errorf("node %q (%s): the reduction gives %d elements, output %q has %d", n.Name, n.Op, count, n.Outputs[0].Name, n.Outputs[0].NumElements())
	}
	return graph.BroadcastIndex(keep, in), count, nil
}

// reduceExtreme is ReduceMax and ReduceMin, on floats (a NaN wins, as in
// Max and Min) or integers. An empty reduction gives the identity of the
// operation: -Inf (the type's least integer) for ReduceMax, +Inf (the
// greatest) for ReduceMin, as ONNX specifies from opset 18.
func (ev *evaluator) reduceExtreme(n *graph.Node, x data) ([]data, error) {
	idx, count, err := reduceGroups(n)
	if err != nil {
		return nil, err
	}
	isMax := n.Op == "ReduceMax"
	if x.i != nil {
		lo, hi := int64(math.MinInt64), int64(math.MaxInt64)
		if n.Inputs[0].DType.ElemSize() == 4 {
			lo, hi = math.MinInt32, math.MaxInt32
		}
		y := make([]int64, count)
		for i := range y {
			y[i] = hi
			if isMax {
				y[i] = lo
			}
		}
		for i, v := range x.i {
			j := idx[i]
			if (isMax && v > y[j]) || (!isMax && v < y[j]) {
				y[j] = v
			}
		}
		return []data{intData(y)}, nil
	}
	y := make([]float64, count)
	for i := range y {
		y[i] = math.Inf(1)
		if isMax {
			y[i] = math.Inf(-1)
		}
	}
	for i, v := range x.f {
		j := idx[i]
		switch {
		case y[j] != y[j]:
		case v != v:
			y[j] = v
		case isMax:
			y[j] = math.Max(y[j], v)
		default:
			y[j] = math.Min(y[j], v)
		}
	}
	return []data{floatData(y)}, nil
}

// sign is onnxruntime's Sign: 1 above zero, -1 below, +0 for zeros and
// NaN.
func sign(x float64) float64 {
	switch {
	case x > 0:
		return 1
	case x < 0:
		return -1
	}
	return 0
}
