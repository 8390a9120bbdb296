package graph

// Building the data-movement operators: attributes and constant operands
// parsed and resolved, then the shared inference (opinfer_move.go).

import (
	"slices"

	"ipu.local/libs/onnx"
)

func inferIdentity(c *nodeCtx) error {
	if err := c.arity(1, 1); err != nil {
		return err
	}
	x, err := c.input(0)
	if err != nil {
		return err
	}
	c.node.Inputs = []*Value{x}
	return c.finish()
}

// inferShape defines the output as a constant: shapes are static.
func inferShape(c *nodeCtx) error {
	if err := c.arity(1, 1); err != nil {
		return err
	}
	x, err := c.input(0)
	if err != nil {
		return err
	}
	r := int64(len(x.Shape))
	start, end := int64(0), r
	if c.b.opset >= 15 {
		if start, err = c.attrInt("start", 0); err != nil {
			return err
		}
		if end, err = c.attrInt("end", r); err != nil {
			return err
		}
	}
	clamp := func(v int64) int64 {
		if v < 0 {
			v = max(v, -r) + r
		}
		return min(v, r)
	}
	start, end = clamp(start), clamp(end)
	dims := []int64{}
	if start < end {
		dims = x.Shape[start:end]
	}
	if len(c.n.Outputs) > 1 {
		return c.errf("%d outputs, want 1", len(c.n.Outputs))
	}
	c.b.g.Folded = append(c.b.g.Folded, Rewrite{Node: c.name, What: "Shape of " + valueString(x) + " folded: " + ShapeString(dims)})
	return c.constOutput(0, intTensor(c.n.Outputs[0], onnx.Int64, []int64{int64(len(dims))}, dims))
}

func inferGather(c *nodeCtx) error {
	if err := c.arity(2, 2); err != nil {
		return err
	}
	data, err := c.input(0)
	if err != nil {
		return err
	}
	idx, err := c.input(1)
	if err != nil {
		return err
	}
	ax, err := c.attrInt("axis", 0)
	if err != nil {
		return err
	}
	if len(data.Shape) == 0 {
		return c.inErrf(0, "%q is a scalar", data.Name)
	}
	axis, err := normAxis(ax, len(data.Shape), false)
	if err != nil {
		return c.errf("%v", err)
	}
	if idx.Const != nil && isInt(idx.DType) {
		v, err := constInts(idx.Const)
		if err != nil {
			return c.inErrf(1, "%v", err)
		}
		d := data.Shape[axis]
		for _, i := range v {
			if i < -d || i >= d {
				return c.inErrf(1, "index %d of %q out of range [%d,%d] for axis %d of %s", i, idx.Name, -d, d-1, axis, ShapeString(data.Shape))
			}
		}
	}
	c.node.Inputs = []*Value{data, idx}
	c.node.Attrs = &Gather{Axis: axis}
	return c.finish()
}

func inferConcat(c *nodeCtx) error {
	if err := c.arity(1, -1); err != nil {
		return err
	}
	for i := range c.n.Inputs {
		v, err := c.input(i)
		if err != nil {
			return err
		}
		c.node.Inputs = append(c.node.Inputs, v)
	}
	if c.n.Attr("axis") == nil {
		return c.errf("missing attribute \"axis\"")
	}
	ax, err := c.attrInt("axis", 0)
	if err != nil {
		return err
	}
	axis, err := normAxis(ax, len(c.node.Inputs[0].Shape), false)
	if err != nil {
		return c.errf("%v", err)
	}
	c.node.Attrs = &Concat{Axis: axis}
	return c.finish()
}

// sliceOperands returns Slice's starts, ends, axes (nil when absent)
// and steps (nil when absent): attributes before opset 10, constant
// inputs from then on.
func (c *nodeCtx) sliceOperands() (starts, ends, axes, steps []int64, err error) {
	if c.b.opset < 10 {
		if err := c.arity(1, 1); err != nil {
			return nil, nil, nil, nil, err
		}
		var ok bool
		for _, name := range []string{"starts", "ends"} {
			v, has, err := c.attrInts(name)
			if err != nil {
				return nil, nil, nil, nil, err
			}
			if !has {
				return nil, nil, nil, nil, c.errf("missing attribute %q", name)
			}
			if name == "starts" {
				starts = v
			} else {
				ends = v
			}
		}
		if axes, ok, err = c.attrInts("axes"); err != nil || !ok {
			axes = nil
		}
		return starts, ends, axes, nil, err
	}
	if err := c.arity(3, 5); err != nil {
		return nil, nil, nil, nil, err
	}
	lists := make([][]int64, 5)
	for i, what := range []string{"", "starts", "ends", "axes", "steps"} {
		if i == 0 {
			continue
		}
		v, ok, err := c.intList(i, what)
		if err != nil {
			return nil, nil, nil, nil, err
		}
		if ok {
			lists[i] = v
		}
	}
	for i := 1; i <= 2; i++ {
		if lists[i] == nil {
			return nil, nil, nil, nil, c.inErrf(i, "missing")
		}
	}
	return lists[1], lists[2], lists[3], lists[4], nil
}

func inferSlice(c *nodeCtx) error {
	x, err := c.input(0)
	if err != nil {
		return err
	}
	starts, ends, axes, steps, err := c.sliceOperands()
	if err != nil {
		return err
	}
	k := len(starts)
	if len(ends) != k || (axes != nil && len(axes) != k) || (steps != nil && len(steps) != k) {
		return c.errf("starts %v, ends %v, axes %v, steps %v: want as many of each", starts, ends, axes, steps)
	}
	r := len(x.Shape)
	type axisSlice struct {
		axis             int
		start, end, step int64
	}
	var list []axisSlice
	seen := make([]bool, r)
	for i := 0; i < k; i++ {
		ax := int64(i)
		if axes != nil {
			ax = axes[i]
		}
		axis, err := normAxis(ax, r, false)
		if err != nil {
			return c.errf("axes %v: %v", axes, err)
		}
		if seen[axis] {
			return c.errf("axes %v name axis %d twice", axes, axis)
		}
		seen[axis] = true
		step := int64(1)
		if steps != nil {
			step = steps[i]
		}
		if step == 0 {
			return c.errf("steps %v: a step is 0", steps)
		}
		start, end, step := resolveSlice(x.Shape[axis], starts[i], ends[i], step)
		list = append(list, axisSlice{axis, start, end, step})
	}
	slices.SortFunc(list, func(a, b axisSlice) int { return a.axis - b.axis })
	attrs := &Slice{Axes: []int{}, Starts: []int64{}, Ends: []int64{}, Steps: []int64{}}
	for _, s := range list {
		attrs.Axes = append(attrs.Axes, s.axis)
		attrs.Starts = append(attrs.Starts, s.start)
		attrs.Ends = append(attrs.Ends, s.end)
		attrs.Steps = append(attrs.Steps, s.step)
	}
	c.node.Inputs = []*Value{x}
	c.node.Attrs = attrs
	return c.finish()
}

// resolveSlice applies ONNX's rules to one axis of dimension d: negative
// starts and ends count from the end, then clamp to [0, d] (a positive
// step) or [0, d-1] and [-1, d-1] (a negative one). A step longer than
// the axis takes one element, as a step of d+1 does.
func resolveSlice(d, start, end, step int64) (int64, int64, int64) {
	if d == 0 {
		return 0, 0, max(-1, min(step, 1))
	}
	if start < 0 {
		start = max(start, -d) + d
	}
	if end < 0 {
		end = max(end, -d-1) + d
	}
	if step > 0 {
		return min(start, d), max(min(end, d), 0), min(step, d+1)
	}
	return min(start, d-1), max(min(end, d-1), -1), max(step, -d-1)
}

// splitSizes resolves Split's sizes: the split attribute (before opset
// 13) or input, num_outputs (opset 18), or an equal split among the
// outputs.
func (c *nodeCtx) splitSizes(d int64) ([]int64, error) {
	outs := int64(len(c.n.Outputs))
	var sizes []int64
	var given bool
	var err error
	if c.b.opset < 13 {
		if err := c.arity(1, 1); err != nil {
			return nil, err
		}
		if sizes, given, err = c.attrInts("split"); err != nil {
			return nil, err
		}
	} else {
		if err := c.arity(1, 2); err != nil {
			return nil, err
		}
		if sizes, given, err = c.intList(1, "split"); err != nil {
			return nil, err
		}
	}
	if c.b.opset >= 18 && c.n.Attr("num_outputs") != nil {
		if given {
			return nil, c.errf("both num_outputs and a split input")
		}
		k, err := c.attrInt("num_outputs", 0)
		if err != nil {
			return nil, err
		}
		if k != outs {
			return nil, c.errf("num_outputs %d, the node has %d outputs", k, outs)
		}
		chunk := (d + k - 1) / k
		if last := d - chunk*(k-1); k > 0 && last >= 0 {
			sizes = slices.Repeat([]int64{chunk}, int(k-1))
			return append(sizes, last), nil
		}
		return nil, c.errf("cannot split dimension %d into %d outputs", d, k)
	}
	if !given {
		if outs == 0 || d%outs != 0 {
			return nil, c.errf("cannot split dimension %d equally into %d outputs", d, outs)
		}
		return slices.Repeat([]int64{d / outs}, int(outs)), nil
	}
	if int64(len(sizes)) != outs {
		return nil, c.errf("split %v has %d sizes for %d outputs", sizes, len(sizes), outs)
	}
	var sum int64
	for _, s := range sizes {
		if s < 0 || s > MaxElements {
			return nil, c.errf("split %v: size %d out of range", sizes, s)
		}
		sum += s
	}
	if sum != d {
		return nil, c.errf("split %v sums to %d, the axis has dimension %d", sizes, sum, d)
	}
	return sizes, nil
}

func inferSplit(c *nodeCtx) error {
	x, err := c.input(0)
	if err != nil {
		return err
	}
	ax, err := c.attrInt("axis", 0)
	if err != nil {
		return err
	}
	axis, err := normAxis(ax, len(x.Shape), false)
	if err != nil {
		return c.errf("%v", err)
	}
	sizes, err := c.splitSizes(x.Shape[axis])
	if err != nil {
		return err
	}
	c.node.Inputs = []*Value{x}
	c.node.Attrs = &Split{Axis: axis, Sizes: sizes}
	return c.finish()
}

// axesOperand returns the axes of Squeeze and Unsqueeze: an attribute
// before opset 13, a constant input from then on.
func (c *nodeCtx) axesOperand() ([]int64, bool, error) {
	if c.b.opset < 13 {
		if err := c.arity(1, 1); err != nil {
			return nil, false, err
		}
		return c.attrInts("axes")
	}
	if err := c.arity(1, 2); err != nil {
		return nil, false, err
	}
	return c.intList(1, "axes")
}

// normAxes makes axes non-negative against rank and sorts them.
func (c *nodeCtx) normAxes(axes []int64, rank int) ([]int, error) {
	out := []int{}
	seen := make([]bool, rank)
	for _, a := range axes {
		ax, err := normAxis(a, rank, false)
		if err != nil {
			return nil, c.errf("axes %v: %v", axes, err)
		}
		if seen[ax] {
			return nil, c.errf("axes %v name axis %d twice", axes, ax)
		}
		seen[ax] = true
		out = append(out, ax)
	}
	slices.Sort(out)
	return out, nil
}

func inferSqueeze(c *nodeCtx) error {
	x, err := c.input(0)
	if err != nil {
		return err
	}
	axes, given, err := c.axesOperand()
	if err != nil {
		return err
	}
	var list []int
	if given {
		if list, err = c.normAxes(axes, len(x.Shape)); err != nil {
			return err
		}
		for _, ax := range list {
			if x.Shape[ax] != 1 {
				return c.errf("axes %v: axis %d of %s has dimension %d, not 1", axes, ax, ShapeString(x.Shape), x.Shape[ax])
			}
		}
	} else {
		list = []int{}
		for i, d := range x.Shape {
			if d == 1 {
				list = append(list, i)
			}
		}
	}
	c.node.Inputs = []*Value{x}
	c.node.Attrs = &Squeeze{Axes: list}
	return c.finish()
}

func inferUnsqueeze(c *nodeCtx) error {
	x, err := c.input(0)
	if err != nil {
		return err
	}
	axes, given, err := c.axesOperand()
	if err != nil {
		return err
	}
	if !given {
		if c.b.opset < 13 {
			return c.errf("missing attribute \"axes\"")
		}
		return c.inErrf(1, "missing")
	}
	list, err := c.normAxes(axes, len(x.Shape)+len(axes))
	if err != nil {
		return err
	}
	c.node.Inputs = []*Value{x}
	c.node.Attrs = &Unsqueeze{Axes: list}
	return c.finish()
}

func inferExpand(c *nodeCtx) error {
	if err := c.arity(2, 2); err != nil {
		return err
	}
	x, err := c.input(0)
	if err != nil {
		return err
	}
	want, _, err := c.intList(1, "shape")
	if err != nil {
		return err
	}
	for _, d := range want {
		if d < 0 || d > MaxElements {
			return c.inErrf(1, "shape %v: dimension %d out of range", want, d)
		}
	}
	shape, err := Broadcast(x.Shape, want)
	if err != nil {
		return c.inErrf(1, "shape %v does not broadcast with %s", want, ShapeString(x.Shape))
	}
	c.node.Inputs = []*Value{x}
	c.node.Attrs = &Expand{Shape: shape}
	return c.finish()
}

func inferTile(c *nodeCtx) error {
	if err := c.arity(2, 2); err != nil {
		return err
	}
	x, err := c.input(0)
	if err != nil {
		return err
	}
	reps, _, err := c.intList(1, "repeats")
	if err != nil {
		return err
	}
	if len(reps) != len(x.Shape) {
		return c.inErrf(1, "repeats %v: %d entries, input rank is %d", reps, len(reps), len(x.Shape))
	}
	for _, r := range reps {
		if r < 0 || r > MaxElements {
			return c.inErrf(1, "repeats %v: entry %d out of range [0,%d]", reps, r, MaxElements)
		}
	}
	c.node.Inputs = []*Value{x}
	c.node.Attrs = &Tile{Repeats: reps}
	return c.finish()
}
