package graph

// Check's inference of the operators that predate the shared one
// (opinfer.go): from Inputs and Attrs, as Build resolves them.

import (
	"slices"

	"ipu.local/libs/onnx"
)

// irChecks maps each operator to its check.
var irChecks map[string]func(c *irCheck) ([]onnx.DataType, [][]int64, error)

func init() {
	irChecks = map[string]func(c *irCheck) ([]onnx.DataType, [][]int64, error){
		"Neg":                (*irCheck).checkUnary,
		"Abs":                (*irCheck).checkUnary,
		"Relu":               (*irCheck).checkUnary,
		"Tanh":               (*irCheck).checkUnary,
		"Sigmoid":            (*irCheck).checkUnary,
		"Exp":                (*irCheck).checkUnary,
		"Sqrt":               (*irCheck).checkUnary,
		"Add":                (*irCheck).checkBinary,
		"Sub":                (*irCheck).checkBinary,
		"Mul":                (*irCheck).checkBinary,
		"Div":                (*irCheck).checkBinary,
		"Pow":                (*irCheck).checkBinary,
		"Max":                (*irCheck).checkVariadic,
		"Min":                (*irCheck).checkVariadic,
		"MatMul":             (*irCheck).checkMatMul,
		"Gemm":               (*irCheck).checkGemm,
		"Transpose":          (*irCheck).checkTranspose,
		"Cast":               (*irCheck).checkCast,
		"Clip":               (*irCheck).checkClip,
		"Gelu":               (*irCheck).checkGelu,
		"Softmax":            (*irCheck).checkSoftmax,
		"LogSoftmax":         (*irCheck).checkSoftmax,
		"LayerNormalization": (*irCheck).checkLayerNorm,
		"ReduceMean":         (*irCheck).checkReduce,
		"ReduceSum":          (*irCheck).checkReduce,
		"ReduceMax":          (*irCheck).checkReduce,
		"ReduceMin":          (*irCheck).checkReduce,
		"Reshape":            (*irCheck).checkReshape,
		"Flatten":            (*irCheck).checkFlatten,
	}
}

func (c *irCheck) checkUnary() ([]onnx.DataType, [][]int64, error) {
	fail := failCheck
	if err := c.arity(1, 1); err != nil {
		return fail(err)
	}
	x, err := c.arith(0)
	if err != nil {
		return fail(err)
	}
	return one(x.DType, x.Shape)
}

func (c *irCheck) checkBinary() ([]onnx.DataType, [][]int64, error) {
	n := c.n
	fail := failCheck
	if err := c.arity(2, 2); err != nil {
		return fail(err)
	}
	operand := c.numeric
	if n.Op == "Pow" {
		operand = c.arith
	}
	a, err := operand(0)
	if err != nil {
		return fail(err)
	}
	b, err := operand(1)
	if err == nil && n.Op != "Pow" && b.DType != a.DType { // the exponent's type may differ (opset 12)
		err = c.errf("input 1: element type %v does not match %v", b.DType, a.DType)
	}
	if err != nil {
		return fail(err)
	}
	s, err := Broadcast(a.Shape, b.Shape)
	if err != nil {
		return fail(c.errf("input 1: shape %s does not broadcast with %s", ShapeString(b.Shape), ShapeString(a.Shape)))
	}
	return one(a.DType, s)
}

func (c *irCheck) checkVariadic() ([]onnx.DataType, [][]int64, error) {
	n := c.n
	fail := failCheck
	if err := c.arity(1, -1); err != nil {
		return fail(err)
	}
	// Max and Min compare integers too (ArgMax's and the integer
	// ReduceMax's trees).
	operand := c.arith
	if n.Op == "Max" || n.Op == "Min" {
		operand = c.numeric
	}
	first, err := operand(0)
	if err != nil {
		return fail(err)
	}
	shapes := [][]int64{first.Shape}
	for k := 1; k < len(n.Inputs); k++ {
		v, err := operand(k)
		if err != nil {
			return fail(err)
		}
		if v.DType != first.DType {
			return fail(c.errf("input %d: element type %v does not match %v", k, v.DType, first.DType))
		}
		shapes = append(shapes, v.Shape)
	}
	s, err := Broadcast(shapes...)
	if err != nil {
		return fail(c.errf("%v", err))
	}
	return one(first.DType, s)
}

func (c *irCheck) checkMatMul() ([]onnx.DataType, [][]int64, error) {
	fail := failCheck
	if err := c.arity(2, 2); err != nil {
		return fail(err)
	}
	a, err := c.arith(0)
	if err != nil {
		return fail(err)
	}
	b, err := c.arithSame(1, a)
	if err != nil {
		return fail(err)
	}
	s, err := MatMulShape(a.Shape, b.Shape)
	if err != nil {
		return fail(c.errf("input 1: shape %s does not match %s: %v", ShapeString(b.Shape), ShapeString(a.Shape), err))
	}
	return one(a.DType, s)
}

func (c *irCheck) checkGemm() ([]onnx.DataType, [][]int64, error) {
	n := c.n
	fail := failCheck
	at, err := attrsOf[Gemm](c)
	if err != nil {
		return fail(err)
	}
	if err := c.arity(3, 3); err != nil {
		return fail(err)
	}
	a, err := c.arith(0)
	if err != nil {
		return fail(err)
	}
	b, err := c.arithSame(1, a)
	if err != nil {
		return fail(err)
	}
	if len(a.Shape) != 2 || len(b.Shape) != 2 {
		return fail(c.errf("shapes %s and %s: want matrices", ShapeString(a.Shape), ShapeString(b.Shape)))
	}
	m, k := a.Shape[0], a.Shape[1]
	if at.TransA {
		m, k = k, m
	}
	k2, nn := b.Shape[0], b.Shape[1]
	if at.TransB {
		k2, nn = nn, k2
	}
	if k != k2 {
		return fail(c.errf("input 1: shape %s does not match %s: inner dimensions %d and %d differ%s", ShapeString(b.Shape), ShapeString(a.Shape), k, k2, gemmTransposes(at.TransA, at.TransB)))
	}
	out := []int64{m, nn}
	if n.Inputs[2] != nil {
		cv, err := c.arithSame(2, a)
		if err != nil {
			return fail(err)
		}
		if !Unidirectional(cv.Shape, out) {
			return fail(c.errf("input 2: shape %s does not broadcast to %s", ShapeString(cv.Shape), ShapeString(out)))
		}
	}
	return one(a.DType, out)
}

func (c *irCheck) checkTranspose() ([]onnx.DataType, [][]int64, error) {
	fail := failCheck
	at, x, err := oneInputOf[Transpose](c)
	if err != nil {
		return fail(err)
	}
	r := len(x.Shape)
	if len(at.Perm) != r {
		return fail(c.errf("perm %v has %d entries, input rank is %d", at.Perm, len(at.Perm), r))
	}
	seen := make([]bool, r)
	s := make([]int64, r)
	for i, ax := range at.Perm {
		if ax < 0 || ax >= r || seen[ax] {
			return fail(c.errf("perm %v is not a permutation of 0..%d", at.Perm, r-1))
		}
		seen[ax] = true
		s[i] = x.Shape[ax]
	}
	return one(x.DType, s)
}

func (c *irCheck) checkCast() ([]onnx.DataType, [][]int64, error) {
	fail := failCheck
	at, x, err := oneInputOf[Cast](c)
	if err != nil {
		return fail(err)
	}
	if !runtimeType(at.To) {
		return fail(c.errf("cast to %v is not supported", at.To))
	}
	return one(at.To, x.Shape)
}

func (c *irCheck) checkClip() ([]onnx.DataType, [][]int64, error) {
	fail := failCheck
	if _, err := attrsOf[Clip](c); err != nil {
		return fail(err)
	}
	return c.unaryArith()
}

func (c *irCheck) checkGelu() ([]onnx.DataType, [][]int64, error) {
	fail := failCheck
	if _, err := attrsOf[Gelu](c); err != nil {
		return fail(err)
	}
	return c.unaryArith()
}

func (c *irCheck) checkSoftmax() ([]onnx.DataType, [][]int64, error) {
	fail := failCheck
	at, err := attrsOf[Softmax](c)
	if err != nil {
		return fail(err)
	}
	types, shapes, err := c.unaryArith()
	if err != nil {
		return fail(err)
	}
	if r := len(shapes[0]); at.Axis < 0 || at.Axis >= r {
		return fail(c.errf("axis %d out of range [0,%d) for rank %d", at.Axis, r, r))
	}
	return types, shapes, nil
}

func (c *irCheck) checkLayerNorm() ([]onnx.DataType, [][]int64, error) {
	n := c.n
	fail := failCheck
	at, err := attrsOf[LayerNorm](c)
	if err != nil {
		return fail(err)
	}
	if err := c.arity(3, 3); err != nil {
		return fail(err)
	}
	x, err := c.arith(0)
	if err != nil {
		return fail(err)
	}
	r := len(x.Shape)
	if at.Axis < 0 || at.Axis >= r {
		return fail(c.errf("axis %d out of range [0,%d) for rank %d", at.Axis, r, r))
	}
	norm := x.Shape[at.Axis:]
	for k := 1; k <= 2; k++ {
		if k == 2 && n.Inputs[k] == nil {
			continue // no bias
		}
		v, err := c.arithSame(k, x)
		if err != nil {
			return fail(err)
		}
		if !Unidirectional(v.Shape, norm) {
			return fail(c.errf("input %d: shape %s does not broadcast to the normalized shape %s", k, ShapeString(v.Shape), ShapeString(norm)))
		}
	}
	stat := copyShape(x.Shape)
	for i := at.Axis; i < r; i++ {
		stat[i] = 1
	}
	return []onnx.DataType{x.DType, onnx.Float, onnx.Float}, [][]int64{x.Shape, stat, stat}, nil
}

func (c *irCheck) checkReduce() ([]onnx.DataType, [][]int64, error) {
	n := c.n
	fail := failCheck
	at, err := attrsOf[Reduce](c)
	if err != nil {
		return fail(err)
	}
	if err := c.arity(1, 1); err != nil {
		return fail(err)
	}
	operand := c.arith
	if n.Op == "ReduceMax" || n.Op == "ReduceMin" {
		operand = c.numeric
	}
	x, err := operand(0)
	if err != nil {
		return fail(err)
	}
	types, shapes := []onnx.DataType{x.DType}, [][]int64{x.Shape}
	in := shapes[0]
	for i, ax := range at.Axes {
		if ax < 0 || ax >= len(in) || (i > 0 && at.Axes[i-1] >= ax) {
			return fail(c.errf("axes %v are not increasing axes of rank %d", at.Axes, len(in)))
		}
	}
	s := []int64{}
	for i, d := range in {
		switch {
		case !slices.Contains(at.Axes, i):
			s = append(s, d)
		case at.KeepDims:
			s = append(s, 1)
		}
	}
	return types, [][]int64{s}, nil
}

func (c *irCheck) checkReshape() ([]onnx.DataType, [][]int64, error) {
	fail := failCheck
	at, x, err := oneInputOf[Reshape](c)
	if err != nil {
		return fail(err)
	}
	got, err := checkedElements(at.Shape)
	if err != nil {
		return fail(c.errf("shape: %v", err))
	}
	if want := NumElements(x.Shape); got != want {
		return fail(c.errf("cannot reshape %s (%d elements) to %s (%d elements)", ShapeString(x.Shape), want, ShapeString(at.Shape), got))
	}
	return one(x.DType, at.Shape)
}

func (c *irCheck) checkFlatten() ([]onnx.DataType, [][]int64, error) {
	fail := failCheck
	at, x, err := oneInputOf[Flatten](c)
	if err != nil {
		return fail(err)
	}
	if r := len(x.Shape); at.Axis < 0 || at.Axis > r {
		return fail(c.errf("axis %d out of range [0,%d] for rank %d", at.Axis, r, r))
	}
	return one(x.DType, []int64{NumElements(x.Shape[:at.Axis]), NumElements(x.Shape[at.Axis:])})
}
