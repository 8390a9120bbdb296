package graph

// Shape inference of the arithmetic operators: elementwise, products,
// normalizations, reductions.

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"ipu.local/libs/onnx"
)

func inferUnary(c *nodeCtx) error {
	if err := c.arity(1, 1); err != nil {
		return err
	}
	x, err := c.arith(0)
	if err != nil {
		return err
	}
	c.node.Inputs = []*Value{x}
	return c.one(x.DType, copyShape(x.Shape))
}

func inferBinary(c *nodeCtx) error {
	if err := c.arity(2, 2); err != nil {
		return err
	}
	// Add, Sub, Mul and Div compute on integers too; Pow on floats.
	operand := c.numeric
	if c.n.OpType == "Pow" {
		operand = c.arith
	}
	a, err := operand(0)
	if err != nil {
		return err
	}
	b, err := operand(1)
	if err != nil {
		return err
	}
	// Pow takes any numeric exponent type from opset 12.
	if c.n.OpType != "Pow" || c.b.opset < 12 {
		if err := c.sameType(1, b, a); err != nil {
			return err
		}
	}
	c.node.Inputs = []*Value{a, b}
	var shape []int64
	if c.b.opset < 7 {
		shape, err = c.legacyBroadcast(a, b)
	} else {
		shape, err = Broadcast(a.Shape, b.Shape)
		if err != nil {
			err = c.inErrf(1, "shape %s does not broadcast with %s", ShapeString(b.Shape), ShapeString(a.Shape))
		}
	}
	if err != nil {
		return err
	}
	return c.one(a.DType, shape)
}

// legacyBroadcast applies the broadcast and axis attributes of the binary
// operators before opset 7: B is broadcast onto A with its axes starting
// at axis (suffix matching without axis). Only the cases numpy
// broadcasting computes the same way are accepted.
func (c *nodeCtx) legacyBroadcast(a, b *Value) ([]int64, error) {
	bc, err := c.attrBool("broadcast", false)
	if err != nil {
		return nil, err
	}
	if !bc {
		if !equalShapes(a.Shape, b.Shape) {
			return nil, c.inErrf(1, "shape %s does not match %s (no broadcasting before opset 7 without broadcast=1)", ShapeString(b.Shape), ShapeString(a.Shape))
		}
		return copyShape(a.Shape), nil
	}
	if axis := c.n.Attr("axis"); axis != nil {
		ax, err := c.attrInt("axis", 0)
		if err != nil {
			return nil, err
		}
		start, err := normAxis(ax, len(a.Shape), false)
		if err != nil {
			return nil, c.errf("%v", err)
		}
		if start+len(b.Shape) > len(a.Shape) {
			return nil, c.inErrf(1, "shape %s does not fit in %s at axis %d", ShapeString(b.Shape), ShapeString(a.Shape), ax)
		}
		if start+len(b.Shape) != len(a.Shape) && NumElements(b.Shape) != 1 {
			return nil, c.inErrf(1, "legacy broadcast of %s into %s at axis %d is not supported (it differs from numpy broadcasting)", ShapeString(b.Shape), ShapeString(a.Shape), ax)
		}
	}
	if !Unidirectional(b.Shape, a.Shape) {
		return nil, c.inErrf(1, "shape %s does not broadcast to %s", ShapeString(b.Shape), ShapeString(a.Shape))
	}
	return copyShape(a.Shape), nil
}

func inferVariadic(c *nodeCtx) error {
	if err := c.arity(1, -1); err != nil {
		return err
	}
	var (
		first  *Value
		shapes [][]int64
	)
	// Max and Min compare integers too (opset 12 and later).
	operand := c.arith
	if (c.n.OpType == "Max" || c.n.OpType == "Min") && c.b.opset >= 12 {
		operand = c.numeric
	}
	for i := range c.n.Inputs {
		v, err := operand(i)
		if err != nil {
			return err
		}
		if first == nil {
			first = v
		} else if err := c.sameType(i, v, first); err != nil {
			return err
		}
		if c.b.opset < 8 && !equalShapes(v.Shape, first.Shape) {
			return c.inErrf(i, "shape %s does not match %s (no broadcasting before opset 8)", ShapeString(v.Shape), ShapeString(first.Shape))
		}
		c.node.Inputs = append(c.node.Inputs, v)
		shapes = append(shapes, v.Shape)
	}
	shape, err := Broadcast(shapes...)
	if err != nil {
		var be *broadcastError
		if errors.As(err, &be) {
			return c.inErrf(be.input, "%v", err)
		}
		return c.errf("%v", err)
	}
	return c.one(first.DType, shape)
}

func inferMatMul(c *nodeCtx) error {
	if err := c.arity(2, 2); err != nil {
		return err
	}
	a, err := c.arith(0)
	if err != nil {
		return err
	}
	b, err := c.arith(1)
	if err != nil {
		return err
	}
	if err := c.sameType(1, b, a); err != nil {
		return err
	}
	c.node.Inputs = []*Value{a, b}
	shape, err := MatMulShape(a.Shape, b.Shape)
	if err != nil {
		if len(a.Shape) == 0 || len(b.Shape) == 0 {
			return c.errf("%v", err)
		}
		return c.inErrf(1, "shape %s does not match %s: %v", ShapeString(b.Shape), ShapeString(a.Shape), err)
	}
	return c.one(a.DType, shape)
}

// MatMulShape returns the shape of numpy matmul(a, b): 1-D operands are
// promoted to matrices and the promoted axis removed again, leading (batch)
// axes broadcast.
func MatMulShape(a, b []int64) ([]int64, error) {
	if len(a) == 0 || len(b) == 0 {
		return nil, fmt.Errorf("matmul of a scalar")
	}
	pa, pb := a, b
	if len(a) == 1 {
		pa = []int64{1, a[0]}
	}
	if len(b) == 1 {
		pb = []int64{b[0], 1}
	}
	m, k := pa[len(pa)-2], pa[len(pa)-1]
	k2, n := pb[len(pb)-2], pb[len(pb)-1]
	if k != k2 {
		return nil, fmt.Errorf("inner dimensions %d and %d differ", k, k2)
	}
	batch, err := Broadcast(pa[:len(pa)-2], pb[:len(pb)-2])
	if err != nil {
		return nil, fmt.Errorf("batch dimensions: %w", err)
	}
	out := append([]int64{}, batch...)
	if len(a) != 1 {
		out = append(out, m)
	}
	if len(b) != 1 {
		out = append(out, n)
	}
	return out, nil
}

// gemmTransposes names a Gemm's transposed operands for an error, or is
// empty.
func gemmTransposes(a, b bool) string {
	switch {
	case a && b:
		return " (transA and transB)"
	case a:
		return " (transA)"
	case b:
		return " (transB)"
	}
	return ""
}

func inferGemm(c *nodeCtx) error {
	minIn := 3
	if c.b.opset >= 11 {
		minIn = 2
	}
	if err := c.arity(minIn, 3); err != nil {
		return err
	}
	a, err := c.arith(0)
	if err != nil {
		return err
	}
	b, err := c.arith(1)
	if err != nil {
		return err
	}
	if err := c.sameType(1, b, a); err != nil {
		return err
	}
	var attrs Gemm
	if attrs.Alpha, err = c.attrFloat("alpha", 1); err != nil {
		return err
	}
	if attrs.Beta, err = c.attrFloat("beta", 1); err != nil {
		return err
	}
	if attrs.TransA, err = c.attrBool("transA", false); err != nil {
		return err
	}
	if attrs.TransB, err = c.attrBool("transB", false); err != nil {
		return err
	}
	if len(a.Shape) != 2 {
		return c.inErrf(0, "shape %s, want a matrix", ShapeString(a.Shape))
	}
	if len(b.Shape) != 2 {
		return c.inErrf(1, "shape %s, want a matrix", ShapeString(b.Shape))
	}
	m, k := a.Shape[0], a.Shape[1]
	if attrs.TransA {
		m, k = k, m
	}
	k2, n := b.Shape[0], b.Shape[1]
	if attrs.TransB {
		k2, n = n, k2
	}
	if k != k2 {
		return c.inErrf(1, "shape %s does not match %s: inner dimensions %d and %d differ%s", ShapeString(b.Shape), ShapeString(a.Shape), k, k2, gemmTransposes(attrs.TransA, attrs.TransB))
	}
	out := []int64{m, n}
	c.node.Inputs = []*Value{a, b, nil}
	if c.has(2) {
		cv, err := c.arith(2)
		if err != nil {
			return err
		}
		if err := c.sameType(2, cv, a); err != nil {
			return err
		}
		bc := true
		if c.b.opset < 7 {
			if bc, err = c.attrBool("broadcast", false); err != nil {
				return err
			}
		}
		if (bc && !Unidirectional(cv.Shape, out)) || (!bc && !equalShapes(cv.Shape, out)) {
			return c.inErrf(2, "shape %s does not broadcast to %s", ShapeString(cv.Shape), ShapeString(out))
		}
		c.node.Inputs[2] = cv
	}
	c.node.Attrs = &attrs
	return c.one(a.DType, out)
}

// typeMax is the largest finite value of a float element type.
func typeMax(d onnx.DataType) float64 {
	if d == onnx.Float16 {
		return 65504
	}
	return math.MaxFloat32
}

func inferClip(c *nodeCtx) error {
	maxIn := 1
	if c.b.opset >= 11 {
		maxIn = 3
	}
	if err := c.arity(1, maxIn); err != nil {
		return err
	}
	x, err := c.arith(0)
	if err != nil {
		return err
	}
	attrs := Clip{Min: -typeMax(x.DType), Max: typeMax(x.DType)}
	if c.b.opset < 11 {
		lo, err := c.attrFloat("min", float32(attrs.Min))
		if err != nil {
			return err
		}
		hi, err := c.attrFloat("max", float32(attrs.Max))
		if err != nil {
			return err
		}
		attrs.Min, attrs.Max = float64(lo), float64(hi)
	} else {
		for i, dst := range []*float64{&attrs.Min, &attrs.Max} {
			what := [...]string{"min", "max"}[i]
			t, err := c.constInput(i+1, what)
			if err != nil || t == nil {
				if err != nil {
					return err
				}
				continue
			}
			if t.DType != x.DType {
				return c.inErrf(i+1, "%s %q: element type %v does not match %v", what, t.Name, t.DType, x.DType)
			}
			if NumElements(t.Dims) != 1 {
				return c.inErrf(i+1, "%s %q: shape %s, want a scalar", what, t.Name, ShapeString(t.Dims))
			}
			v, err := DecodeFloats(t)
			if err != nil {
				return c.inErrf(i+1, "%v", err)
			}
			*dst = v[0]
		}
	}
	c.node.Inputs = []*Value{x}
	c.node.Attrs = &attrs
	return c.one(x.DType, copyShape(x.Shape))
}

func inferSoftmax(c *nodeCtx) error {
	if err := c.arity(1, 1); err != nil {
		return err
	}
	x, err := c.arith(0)
	if err != nil {
		return err
	}
	coerce := c.b.opset < 13
	def := int64(-1)
	if coerce {
		def = 1
	}
	ax, err := c.attrInt("axis", def)
	if err != nil {
		return err
	}
	axis, err := normAxis(ax, len(x.Shape), false)
	if err != nil {
		if len(x.Shape) == 0 {
			return c.inErrf(0, "scalar input")
		}
		return c.errf("%v", err)
	}
	c.node.Inputs = []*Value{x}
	c.node.Attrs = &Softmax{Axis: axis, Coerce2D: coerce}
	return c.one(x.DType, copyShape(x.Shape))
}

func inferLayerNorm(c *nodeCtx) error {
	if err := c.arity(2, 3); err != nil {
		return err
	}
	x, err := c.arith(0)
	if err != nil {
		return err
	}
	ax, err := c.attrInt("axis", -1)
	if err != nil {
		return err
	}
	axis, err := normAxis(ax, len(x.Shape), false)
	if err != nil {
		return c.errf("%v", err)
	}
	eps, err := c.attrFloat("epsilon", 1e-5)
	if err != nil {
		return err
	}
	stash, err := c.attrInt("stash_type", 1)
	if err != nil {
		return err
	}
	if stash != int64(onnx.Float) {
		return c.errf("stash_type %v is not supported (only float)", onnx.DataType(int32(stash)))
	}
	norm := x.Shape[axis:]
	c.node.Inputs = []*Value{x, nil, nil}
	for i := 1; i <= 2; i++ {
		if !c.has(i) {
			continue
		}
		v, err := c.arith(i)
		if err != nil {
			return err
		}
		if err := c.sameType(i, v, x); err != nil {
			return err
		}
		if !Unidirectional(v.Shape, norm) {
			return c.inErrf(i, "shape %s does not broadcast to the normalized shape %s", ShapeString(v.Shape), ShapeString(norm))
		}
		c.node.Inputs[i] = v
	}
	stat := copyShape(x.Shape)
	for i := axis; i < len(stat); i++ {
		stat[i] = 1
	}
	c.node.Attrs = &LayerNorm{Axis: axis, Epsilon: eps}
	return c.outputs([]onnx.DataType{x.DType, onnx.Float, onnx.Float}, [][]int64{copyShape(x.Shape), stat, copyShape(stat)})
}

func inferGelu(c *nodeCtx) error {
	if err := c.arity(1, 1); err != nil {
		return err
	}
	x, err := c.arith(0)
	if err != nil {
		return err
	}
	approx, err := c.n.AttrString("approximate", "none")
	if err != nil {
		return c.errf("%v", err)
	}
	if approx != "none" && approx != "tanh" {
		return c.errf("approximate %q, want \"none\" or \"tanh\"", approx)
	}
	c.node.Inputs = []*Value{x}
	c.node.Attrs = &Gelu{Tanh: approx == "tanh"}
	return c.one(x.DType, copyShape(x.Shape))
}

// reduceAxes returns a reduction's axes operand (an attribute, or from
// the opsets that moved it, an input), whether it lists any axis, and
// noop_with_empty_axes.
func (c *nodeCtx) reduceAxes(axesInput bool) (axes []int64, given, noopOK bool, err error) {
	if !axesInput {
		axes, given, err = c.attrInts("axes")
		return axes, given && len(axes) > 0, false, err
	}
	if noopOK, err = c.attrBool("noop_with_empty_axes", false); err != nil {
		return nil, false, false, err
	}
	t, err := c.constInput(1, "axes")
	if err != nil || t == nil {
		return nil, false, noopOK, err
	}
	if axes, err = c.int64s(1, t, "axes"); err != nil {
		return nil, false, false, err
	}
	return axes, len(axes) > 0, noopOK, nil
}

func inferReduce(c *nodeCtx) error {
	// The axes moved from an attribute to an input in these opsets.
	axesInput := (c.n.OpType == "ReduceSum" && c.b.opset >= 13) || (c.n.OpType != "ReduceSum" && c.b.opset >= 18)
	maxIn := 1
	if axesInput {
		maxIn = 2
	}
	if err := c.arity(1, maxIn); err != nil {
		return err
	}
	// ReduceMax and ReduceMin compare integers too.
	operand := c.arith
	if c.n.OpType == "ReduceMax" || c.n.OpType == "ReduceMin" {
		operand = c.numeric
	}
	x, err := operand(0)
	if err != nil {
		return err
	}
	keep, err := c.attrBool("keepdims", true)
	if err != nil {
		return err
	}
	axes, given, noopOK, err := c.reduceAxes(axesInput)
	if err != nil {
		return err
	}
	r := len(x.Shape)
	attrs := &Reduce{KeepDims: keep}
	switch {
	case given:
		seen := make([]bool, r)
		for _, a := range axes {
			ax, err := normAxis(a, r, false)
			if err != nil {
				return c.errf("axes %v: %v", axes, err)
			}
			if seen[ax] {
				return c.errf("axes %v name axis %d twice", axes, ax)
			}
			seen[ax] = true
			attrs.Axes = append(attrs.Axes, ax)
		}
		slices.Sort(attrs.Axes)
	case noopOK:
		// identity: Axes stays empty
	default:
		for i := 0; i < r; i++ {
			attrs.Axes = append(attrs.Axes, i)
		}
	}
	var shape []int64
	for i, d := range x.Shape {
		switch {
		case !slices.Contains(attrs.Axes, i):
			shape = append(shape, d)
		case keep:
			shape = append(shape, 1)
		}
	}
	if shape == nil {
		shape = []int64{}
	}
	c.node.Inputs = []*Value{x}
	c.node.Attrs = attrs
	return c.one(x.DType, shape)
}
