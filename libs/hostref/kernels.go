package hostref

import (
	"fmt"
	"math"

	"ipu.local/libs/fmath"
	"ipu.local/libs/graph"
	"ipu.local/libs/numfmt"
	"ipu.local/libs/onnx"
)

// node computes a node's outputs from its inputs' values (nil data for
// omitted inputs). Kernels take what Build guarantees (types, shapes,
// attributes) only after checking it: a graph that did not come from
// Build gives an error naming the node, never a panic.
func (ev *evaluator) node(n *graph.Node, in []data) (outs []data, err error) {
	if err := checkKernelInputs(n, in); err != nil {
		return nil, err
	}
	defer func() {
		// A kernel indexing out of range on a graph inconsistent with its
		// own shapes reports it as an error.
		if p := recover(); p != nil {
			outs, err = nil, fmt.Errorf("node %q (%s): inconsistent graph: %v", n.Name, n.Op, p)
		}
	}()
	f := make([][]float64, len(in))
	for i, d := range in {
		f[i] = d.f
	}
	one := func(v []float64) ([]data, error) { return []data{floatData(v)}, nil }
	switch n.Op {
	case "Neg", "Abs", "Relu", "Tanh", "Sigmoid", "Exp", "Sqrt":
		return one(ev.unary(n.Op, f[0]))
	case "Add", "Sub", "Mul", "Div":
		if in[0].i != nil {
			return ev.intArith(n, in)
		}
		return one(ev.binary(n, f[0], f[1]))
	case "Pow":
		return one(ev.binary(n, f[0], f[1]))
	case "Max", "Min":
		return one(ev.variadic(n, f))
	case "Clip":
		a, err := attrs[graph.Clip](n)
		if err != nil {
			return nil, err
		}
		y := make([]float64, len(f[0]))
		for i, x := range f[0] {
			y[i] = math.Min(math.Max(x, a.Min), a.Max)
			if x != x {
				y[i] = x
			}
		}
		return one(y)
	case "MatMul":
		return one(ev.matmul(n.Inputs[0].Shape, n.Inputs[1].Shape, f[0], f[1]))
	case "Gemm":
		return one(ev.gemm(n, f))
	case "Cast":
		return ev.castNode(n, in[0])
	case "Softmax", "LogSoftmax":
		return one(ev.softmax(n, f[0]))
	case "LayerNormalization":
		var out []data
		for _, v := range ev.layerNorm(n, f) {
			out = append(out, floatData(v))
		}
		return out, nil
	case "Gelu":
		a, err := attrs[graph.Gelu](n)
		if err != nil {
			return nil, err
		}
		return one(ev.gelu(a.Tanh, f[0]))
	case "ReduceMean", "ReduceSum":
		return one(ev.reduce(n, f[0]))
	case "ReduceMax", "ReduceMin":
		return ev.reduceExtreme(n, in[0])
	case "If":
		return ev.ifNode(n, in)
	}
	if isMove(n.Op) {
		return ev.move(n, in)
	}
	if out, ok, err := ev.logic(n, in); ok {
		return out, err
	}
	if out, ok, err := ev.activation(n, f); ok {
		return out, err
	}
	return nil, fmt.Errorf("node %q (%s): no host kernel (output %q)", n.Name, n.Op, n.Outputs[0].Name)
}

// attrs returns n.Attrs as *T, or an error naming the node.
func attrs[T any](n *graph.Node) (*T, error) {
	a, ok := n.Attrs.(*T)
	if !ok || a == nil {
		var want *T
		return nil, fmt.Errorf("node %q (%s): attributes %T, want %T", n.Name, n.Op, n.Attrs, want)
	}
	return a, nil
}

// checkKernelInputs checks what every kernel relies on: the inputs
// present where the operator needs them, of one kind (float or integer)
// per operator family.
func checkKernelInputs(n *graph.Node, in []data) error {
	need := 1
	switch n.Op {
	case "Add", "Sub", "Mul", "Div", "Pow", "MatMul", "Gemm", "Gather", "LayerNormalization",
		"Equal", "Greater", "GreaterOrEqual", "Less", "LessOrEqual", "And", "Or", "Xor":
		need = 2
	case "Where", "Range":
		need = 3
	}
	if len(in) < need {
		return fmt.Errorf("node %q (%s): %d inputs, want at least %d", n.Name, n.Op, len(in), need)
	}
	for i := 0; i < need; i++ {
		if n.Inputs[i] == nil && !(n.Op == "LayerNormalization" && i > 0) {
			return fmt.Errorf("node %q (%s): input %d is missing", n.Name, n.Op, i)
		}
	}
	switch n.Op {
	case "Neg", "Abs", "Relu", "Tanh", "Sigmoid", "Exp", "Sqrt", "Pow", "Max", "Min", "Clip",
		"MatMul", "Gemm", "Softmax", "LogSoftmax", "LayerNormalization", "Gelu", "ReduceMean", "ReduceSum",
		"Erf", "Log", "Softplus", "HardSwish", "LeakyRelu", "Elu", "Selu", "HardSigmoid", "Sum", "Mean",
		"Floor", "Ceil", "Round", "Sign", "Sin", "Cos":
		for i, d := range in {
			if n.Inputs[i] != nil && d.f == nil {
				return fmt.Errorf("node %q (%s) input %d: element type %v is not a float type", n.Name, n.Op, i, n.Inputs[i].DType)
			}
		}
	case "Add", "Sub", "Mul", "Div":
		if (in[0].i == nil) != (in[1].i == nil) {
			return fmt.Errorf("node %q (%s): element types %v and %v differ", n.Name, n.Op, n.Inputs[0].DType, n.Inputs[1].DType)
		}
	}
	return nil
}

func (ev *evaluator) unary(op string, x []float64) []float64 {
	y := make([]float64, len(x))
	r := ev.r
	for i, a := range x {
		var v float64
		switch op {
		case "Neg":
			v = -a
		case "Abs":
			v = math.Abs(a)
		case "Relu":
			v = a
			if a < 0 {
				v = 0
			}
		case "Tanh":
			v = ev.fn(fmath.Tanh, math.Tanh, a)
		case "Sigmoid":
			v = r(1 / r(1+ev.fn(fmath.Exp, math.Exp, -a)))
		case "Exp":
			v = ev.fn(fmath.Exp, math.Exp, a)
		case "Sqrt":
			v = r(math.Sqrt(a))
		}
		y[i] = v
	}
	return y
}

func (ev *evaluator) binary(n *graph.Node, a, b []float64) []float64 {
	out := n.Outputs[0].Shape
	ia := graph.BroadcastIndex(n.Inputs[0].Shape, out)
	ib := graph.BroadcastIndex(n.Inputs[1].Shape, out)
	y := make([]float64, len(ia))
	for i := range y {
		x, z := a[ia[i]], b[ib[i]]
		var v float64
		switch n.Op {
		case "Add":
			v = x + z
		case "Sub":
			v = x - z
		case "Mul":
			v = x * z
		case "Div":
			v = x / z
		case "Pow":
			v = math.Pow(x, z)
			if ev.opt.Precision != FP64 {
				v = float64(fmath.Pow(float32(x), float32(z)))
			}
		}
		y[i] = ev.r(v)
	}
	return y
}

func (ev *evaluator) variadic(n *graph.Node, in [][]float64) []float64 {
	out := n.Outputs[0].Shape
	y := make([]float64, graph.NumElements(out))
	for k, x := range in {
		idx := graph.BroadcastIndex(n.Inputs[k].Shape, out)
		for i := range y {
			v := x[idx[i]]
			switch {
			case k == 0 || v != v:
				y[i] = v
			case y[i] != y[i]:
			case n.Op == "Max":
				y[i] = math.Max(y[i], v)
			default:
				y[i] = math.Min(y[i], v)
			}
		}
	}
	return y
}

// transpose permutes x of shape in: output axis i is input axis perm[i].
func transpose[T any](in []int64, perm []int, x []T) []T {
	st := graph.Strides(in)
	out := make([]int64, len(perm))
	ost := make([]int64, len(perm)) // input stride of each output axis
	for i, ax := range perm {
		out[i] = in[ax]
		ost[i] = st[ax]
	}
	y := make([]T, len(x))
	counter := make([]int64, len(out))
	var src int64
	for e := range y {
		y[e] = x[src]
		for ax := len(out) - 1; ax >= 0; ax-- {
			counter[ax]++
			src += ost[ax]
			if counter[ax] < out[ax] {
				break
			}
			src -= ost[ax] * counter[ax]
			counter[ax] = 0
		}
	}
	return y
}

// cast converts float values to a float type (float, float16, FP8).
func (ev *evaluator) cast(a *graph.Cast, x []float64) []float64 {
	y := make([]float64, len(x))
	mode := numfmt.Saturate
	if !a.Saturate {
		mode = numfmt.NaNOnOverflow
	}
	f, fp8 := graph.FP8Format(a.To)
	for i, v := range x {
		switch {
		case a.To == onnx.Float:
			y[i] = float64(float32(v))
		case a.To == onnx.Float16:
			y[i] = numfmt.F16ToF64(numfmt.F64ToF16(v))
		case fp8 && ev.opt.Precision == FP32:
			// v is a float32 value under FP32 (every float, float16 and
			// FP8 value is).
			y[i] = numfmt.F8ToF64(numfmt.F32ToF8ORT(math.Float32bits(float32(v)), f, mode), f, 0)
		case fp8:
			// The device's conversion (onnxruntime's), at every precision:
			// the cast's rounding is the model's meaning.
			y[i] = numfmt.F8ToF64(numfmt.F64ToF8Dev(v, f, 0, mode), f, 0)
		}
	}
	return y
}

// rows describes the vectors an axis operator works along: outer*inner
// vectors of length n, element j of vector (o, i) at o*n*inner + j*inner + i.
type rows struct {
	outer, n, inner int
}

func (r rows) each(fn func(base, stride int)) {
	for o := 0; o < r.outer; o++ {
		for i := 0; i < r.inner; i++ {
			fn(o*r.n*r.inner+i, r.inner)
		}
	}
}

func softmaxRows(shape []int64, a *graph.Softmax) rows {
	if a.Coerce2D {
		return rows{outer: int(graph.NumElements(shape[:a.Axis])), n: int(graph.NumElements(shape[a.Axis:])), inner: 1}
	}
	return rows{
		outer: int(graph.NumElements(shape[:a.Axis])),
		n:     int(shape[a.Axis]),
		inner: int(graph.NumElements(shape[a.Axis+1:])),
	}
}

// softmax computes Softmax or LogSoftmax the way a float32 program does:
// subtract the maximum, exponentiate, sum in order, then divide (or
// subtract the log of the sum).
func (ev *evaluator) softmax(n *graph.Node, x []float64) []float64 {
	a := n.Attrs.(*graph.Softmax)
	rs := softmaxRows(n.Inputs[0].Shape, a)
	r := ev.r
	y := make([]float64, len(x))
	logSoftmax := n.Op == "LogSoftmax"
	rs.each(func(base, stride int) {
		m := math.Inf(-1)
		for j := 0; j < rs.n; j++ {
			v := x[base+j*stride]
			if v > m || v != v {
				m = v
			}
		}
		sum := 0.0
		for j := 0; j < rs.n; j++ {
			e := ev.fn(fmath.Exp, math.Exp, r(x[base+j*stride]-m))
			if !logSoftmax {
				y[base+j*stride] = e
			}
			sum = r(sum + e)
		}
		if logSoftmax {
			ls := ev.fn(fmath.Log, math.Log, sum)
			for j := 0; j < rs.n; j++ {
				k := base + j*stride
				y[k] = r(r(x[k]-m) - ls)
			}
			return
		}
		for j := 0; j < rs.n; j++ {
			k := base + j*stride
			y[k] = r(y[k] / sum)
		}
	})
	return y
}

// layerNorm computes mean and variance in two passes, then
// (x - mean) * invStdDev * scale + bias.
func (ev *evaluator) layerNorm(n *graph.Node, in [][]float64) [][]float64 {
	a := n.Attrs.(*graph.LayerNorm)
	xs := n.Inputs[0].Shape
	norm := xs[a.Axis:]
	rs := rows{outer: int(graph.NumElements(xs[:a.Axis])), n: int(graph.NumElements(norm)), inner: 1}
	x := in[0]
	var scaleIdx, biasIdx []int64
	if n.Inputs[1] != nil {
		scaleIdx = graph.BroadcastIndex(n.Inputs[1].Shape, norm)
	}
	if n.Inputs[2] != nil {
		biasIdx = graph.BroadcastIndex(n.Inputs[2].Shape, norm)
	}
	r := ev.r
	y := make([]float64, len(x))
	mean := make([]float64, rs.outer)
	inv := make([]float64, rs.outer)
	eps := float64(a.Epsilon)
	cnt := float64(rs.n)
	rs.each(func(base, _ int) {
		o := base / rs.n
		row := x[base : base+rs.n]
		s := 0.0
		for _, v := range row {
			s = r(s + v)
		}
		mu := r(s / cnt)
		q := 0.0
		for _, v := range row {
			d := r(v - mu)
			q = r(q + r(d*d))
		}
		variance := r(q / cnt)
		is := r(1 / r(math.Sqrt(r(variance+eps))))
		mean[o], inv[o] = mu, is
		for j, v := range row {
			z := r(r(v-mu) * is)
			if scaleIdx != nil {
				z = r(z * in[1][scaleIdx[j]])
			}
			if biasIdx != nil {
				z = r(z + in[2][biasIdx[j]])
			}
			y[base+j] = z
		}
	})
	return [][]float64{y, mean, inv}
}

func (ev *evaluator) gelu(tanh bool, x []float64) []float64 {
	r := ev.r
	y := make([]float64, len(x))
	if tanh {
		c0 := r(math.Sqrt(2 / math.Pi))
		c1 := r(0.044715)
		for i, v := range x {
			cube := r(r(v*v) * v)
			inner := r(c0 * r(v+r(c1*cube)))
			y[i] = r(r(0.5*v) * r(1+ev.fn(fmath.Tanh, math.Tanh, inner)))
		}
		return y
	}
	c := r(1 / math.Sqrt2)
	for i, v := range x {
		y[i] = r(r(0.5*v) * r(1+ev.fn(fmath.Erf, math.Erf, r(v*c))))
	}
	return y
}

// reduce sums in input order (row-major), one rounding per addition.
func (ev *evaluator) reduce(n *graph.Node, x []float64) []float64 {
	a := n.Attrs.(*graph.Reduce)
	in := n.Inputs[0].Shape
	if len(a.Axes) == 0 {
		return append([]float64(nil), x...)
	}
	keep := append([]int64{}, in...)
	count := int64(1)
	for _, ax := range a.Axes {
		keep[ax] = 1
		count *= in[ax]
	}
	idx := graph.BroadcastIndex(keep, in)
	y := make([]float64, graph.NumElements(keep))
	for i, v := range x {
		y[idx[i]] = ev.r(y[idx[i]] + v)
	}
	if n.Op == "ReduceMean" {
		for i := range y {
			y[i] = ev.r(y[i] / float64(count))
		}
	}
	return y
}
