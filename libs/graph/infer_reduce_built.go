package graph

import "slices"

// inferReduceBuilt builds the reductions the device has no kernel for
// from those it has: ReduceSumSquare as ReduceSum of x*x, ReduceL2 its
// Sqrt (F.normalize's norm), ReduceL1 as ReduceSum of Abs, ReduceLogSum
// as Log of ReduceSum, and ReduceLogSumExp as onnxruntime computes it,
// shifted by the maximum: m + Log(ReduceSum(Exp(x - m))). Axes and
// keepdims as the operator's opset gives them; no axes reduce every
// axis, or with noop_with_empty_axes leave x as it is.
func inferReduceBuilt(c *nodeCtx) error {
	axesInput := c.b.opset >= 18
	maxIn := 1
	if axesInput {
		maxIn = 2
	}
	if err := c.arity(1, maxIn); err != nil {
		return err
	}
	x, err := c.arith(0)
	if err != nil {
		return err
	}
	keep, err := c.attrBool("keepdims", true)
	if err != nil {
		return err
	}
	raw, given, noop, err := c.reduceAxes(axesInput)
	if err != nil {
		return err
	}
	op := c.n.OpType
	in := c.n.Inputs[0]
	if !given && noop {
		st := c.built("%s with no axes and noop_with_empty_axes as Identity", op)
		return st.last("Identity", []string{in})
	}
	r := len(x.Shape)
	var axes []int64
	seen := make([]bool, r)
	for _, a := range raw {
		ax, err := normAxis(a, r, false)
		if err != nil {
			return c.errf("axes %v: %v", raw, err)
		}
		if seen[ax] {
			return c.errf("axes %v name axis %d twice", raw, ax)
		}
		seen[ax] = true
		axes = append(axes, int64(ax))
	}
	if !given {
		for a := range r {
			axes = append(axes, int64(a))
		}
	}
	slices.Sort(axes)
	st := c.built("%s over axes %v from ReduceSum and elementwise operators", op, axes)
	sum := func(v string) (string, error) { return st.reduce("ReduceSum", v, axes, keep, "") }
	switch op {
	case "ReduceSumSquare", "ReduceL2":
		sq, err := st.node("Mul", "squared", []string{in, in}, "")
		if err != nil {
			return err
		}
		if op == "ReduceSumSquare" {
			_, err := st.reduce("ReduceSum", sq, axes, keep, c.n.Outputs[0])
			return err
		}
		s, err := sum(sq)
		if err != nil {
			return err
		}
		return st.last("Sqrt", []string{s})
	case "ReduceL1":
		a, err := st.node("Abs", "magnitude", []string{in}, "")
		if err != nil {
			return err
		}
		_, err = st.reduce("ReduceSum", a, axes, keep, c.n.Outputs[0])
		return err
	case "ReduceLogSum":
		s, err := sum(in)
		if err != nil {
			return err
		}
		return st.last("Log", []string{s})
	}
	// ReduceLogSumExp: the maximum kept for the shift, then taken to the
	// output's shape.
	m, err := st.reduce("ReduceMax", in, axes, true, "")
	if err != nil {
		return err
	}
	d, err := st.node("Sub", "shifted", []string{in, m}, "")
	if err != nil {
		return err
	}
	if d, err = st.node("Exp", "exp", []string{d}, ""); err != nil {
		return err
	}
	if d, err = sum(d); err != nil {
		return err
	}
	if d, err = st.node("Log", "log", []string{d}, ""); err != nil {
		return err
	}
	if !keep {
		shape := make([]int64, 0, r)
		for a := range r {
			if !slices.Contains(axes, int64(a)) {
				shape = append(shape, x.Shape[a])
			}
		}
		sh, err := st.ints("shape", shape...)
		if err != nil {
			return err
		}
		if m, err = st.node("Reshape", "max", []string{m, sh}, ""); err != nil {
			return err
		}
	}
	return st.last("Add", []string{d, m})
}

// inferPRelu builds PRelu as Where(x < 0, x * slope, x): the slope
// broadcast to x (unidirectionally), NaN and both zeros passed through.
func inferPRelu(c *nodeCtx) error {
	if err := c.arity(2, 2); err != nil {
		return err
	}
	x, err := c.arith(0)
	if err != nil {
		return err
	}
	slope, err := c.arith(1)
	if err != nil {
		return err
	}
	if err := c.sameType(1, slope, x); err != nil {
		return err
	}
	if !Unidirectional(slope.Shape, x.Shape) {
		return c.inErrf(1, "slope shape %s does not broadcast to the input's %s", ShapeString(slope.Shape), ShapeString(x.Shape))
	}
	st := c.built("PRelu as Where(x < 0, x * slope, x)")
	in := c.n.Inputs
	zero, err := st.constant("zero", floatTensor(x.DType, []int64{}, []float64{0}))
	if err != nil {
		return err
	}
	neg, err := st.node("Less", "negative", []string{in[0], zero}, "")
	if err != nil {
		return err
	}
	scaled, err := st.node("Mul", "scaled", []string{in[0], in[1]}, "")
	if err != nil {
		return err
	}
	return st.last("Where", []string{neg, scaled, in[0]})
}
