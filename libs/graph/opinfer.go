package graph

// Shape inference from a node's Inputs and parsed Attrs, shared by Build
// (after it parses the attributes and folds the constant operands) and
// Check (for graphs that did not come from Build): one inference per
// operator. Each function validates everything it reads, so that a
// hostile graph gives an error, never a panic.

import (
	"errors"
	"fmt"

	"ipu.local/libs/onnx"
)

// opError is an inconsistency the shared inference found, at input In or
// at the node (In -1).
type opError struct {
	In  int
	Msg string
}

func (e *opError) Error() string {
	if e.In >= 0 {
		return fmt.Sprintf("input %d: %s", e.In, e.Msg)
	}
	return e.Msg
}

func nodeFail(format string, args ...any) error {
	return &opError{In: -1, Msg: fmt.Sprintf(format, args...)}
}

func inputFail(i int, format string, args ...any) error {
	return &opError{In: i, Msg: fmt.Sprintf(format, args...)}
}

// shapeFn gives the types and shapes of a node's outputs.
type shapeFn func(n *Node) ([]onnx.DataType, [][]int64, error)

var shapeFns map[string]shapeFn

func init() {
	shapeFns = map[string]shapeFn{
		"Identity":       shapeIdentity,
		"Gather":         shapeGather,
		"Concat":         shapeConcat,
		"Slice":          shapeSlice,
		"Split":          shapeSplit,
		"Squeeze":        shapeSqueeze,
		"Unsqueeze":      shapeUnsqueeze,
		"Expand":         shapeExpand,
		"Tile":           shapeTile,
		"Where":          shapeWhere,
		"Trilu":          shapeWhere, // built as Where(mask, x, 0)
		"Equal":          shapeCompare,
		"Greater":        shapeCompare,
		"GreaterOrEqual": shapeCompare,
		"Less":           shapeCompare,
		"LessOrEqual":    shapeCompare,
		"And":            shapeCompare,
		"Xor":            shapeCompare,
		"Or":             shapeCompare,
		"Not":            shapeNot,
		"Erf":            shapeFloatUnary,
		"Log":            shapeFloatUnary,
		"Softplus":       shapeFloatUnary,
		"HardSwish":      shapeFloatUnary,
		"Floor":          shapeFloatUnary,
		"Ceil":           shapeFloatUnary,
		"Round":          shapeFloatUnary,
		"Sign":           shapeFloatUnary,
		"Sin":            shapeFloatUnary,
		"Cos":            shapeFloatUnary,
		"LeakyRelu":      shapeActivation,
		"Elu":            shapeActivation,
		"Selu":           shapeActivation,
		"HardSigmoid":    shapeActivation,
		"Sum":            shapeVariadic,
		"Mean":           shapeVariadic,
		"If":             shapeIf,
	}
}

func single(d onnx.DataType, s []int64) ([]onnx.DataType, [][]int64, error) {
	return []onnx.DataType{d}, [][]int64{s}, nil
}

func fail(err error) ([]onnx.DataType, [][]int64, error) { return nil, nil, err }

// inputsOf checks the input count (absent inputs included).
func inputsOf(n *Node, lo, hi int) error {
	k := len(n.Inputs)
	switch {
	case k < lo && lo == hi:
		return nodeFail("%d inputs, want %d", k, lo)
	case k < lo:
		return nodeFail("%d inputs, want at least %d", k, lo)
	case hi >= 0 && k > hi:
		return nodeFail("%d inputs, want at most %d", k, hi)
	}
	return nil
}

// inputOf returns input i, which must be present and of a type ok
// accepts (nil: any).
func inputOf(n *Node, i int, ok func(onnx.DataType) bool) (*Value, error) {
	v := n.Inputs[i]
	if v == nil {
		return nil, inputFail(i, "missing")
	}
	if ok != nil && !ok(v.DType) {
		return nil, inputFail(i, "element type %v of %q is not supported by %s", v.DType, v.Name, n.Op)
	}
	return v, nil
}

// oneInput returns the attributes of a node of one data input, and the
// input (any type).
func oneInput[T any](n *Node) (*T, *Value, error) {
	a, err := attrsAs[T](n)
	if err != nil {
		return nil, nil, err
	}
	if err := inputsOf(n, 1, 1); err != nil {
		return nil, nil, err
	}
	x, err := inputOf(n, 0, nil)
	if err != nil {
		return nil, nil, err
	}
	return a, x, nil
}

// attrsAs returns n.Attrs as *T.
func attrsAs[T any](n *Node) (*T, error) {
	a, ok := n.Attrs.(*T)
	if !ok || a == nil {
		var want *T
		return nil, nodeFail("attributes %T, want %T", n.Attrs, want)
	}
	return a, nil
}

func noAttrs(n *Node) error {
	if n.Attrs != nil {
		return nodeFail("attributes %T, want none", n.Attrs)
	}
	return nil
}

func isBool(d onnx.DataType) bool { return d == onnx.Bool }

// sameTypeAs checks that input i has first's element type.
func sameTypeAs(i int, v, first *Value) error {
	if v.DType != first.DType {
		return inputFail(i, "element type %v does not match %v", v.DType, first.DType)
	}
	return nil
}

// broadcastInputs returns the numpy broadcast of the inputs' shapes.
func broadcastInputs(vs []*Value) ([]int64, error) {
	shapes := make([][]int64, len(vs))
	for i, v := range vs {
		shapes[i] = v.Shape
	}
	s, err := Broadcast(shapes...)
	if err != nil {
		var be *broadcastError
		if errors.As(err, &be) {
			return nil, inputFail(be.input, "%v", err)
		}
		return nil, nodeFail("%v", err)
	}
	return s, nil
}

func shapeIdentity(n *Node) ([]onnx.DataType, [][]int64, error) {
	if err := noAttrs(n); err != nil {
		return fail(err)
	}
	if err := inputsOf(n, 1, 1); err != nil {
		return fail(err)
	}
	x, err := inputOf(n, 0, nil)
	if err != nil {
		return fail(err)
	}
	return single(x.DType, copyShape(x.Shape))
}

func shapeFloatUnary(n *Node) ([]onnx.DataType, [][]int64, error) {
	if err := noAttrs(n); err != nil {
		return fail(err)
	}
	return floatUnary(n)
}

func floatUnary(n *Node) ([]onnx.DataType, [][]int64, error) {
	if err := inputsOf(n, 1, 1); err != nil {
		return fail(err)
	}
	x, err := inputOf(n, 0, isFloat)
	if err != nil {
		return fail(err)
	}
	return single(x.DType, copyShape(x.Shape))
}

func shapeActivation(n *Node) ([]onnx.DataType, [][]int64, error) {
	var err error
	switch n.Op {
	case "LeakyRelu":
		_, err = attrsAs[LeakyRelu](n)
	case "Elu":
		_, err = attrsAs[Elu](n)
	case "Selu":
		_, err = attrsAs[Selu](n)
	case "HardSigmoid":
		_, err = attrsAs[HardSigmoid](n)
	}
	if err != nil {
		return fail(err)
	}
	return floatUnary(n)
}

func shapeVariadic(n *Node) ([]onnx.DataType, [][]int64, error) {
	if err := noAttrs(n); err != nil {
		return fail(err)
	}
	if err := inputsOf(n, 1, -1); err != nil {
		return fail(err)
	}
	first, err := inputOf(n, 0, isFloat)
	if err != nil {
		return fail(err)
	}
	for i := 1; i < len(n.Inputs); i++ {
		v, err := inputOf(n, i, isFloat)
		if err != nil {
			return fail(err)
		}
		if err := sameTypeAs(i, v, first); err != nil {
			return fail(err)
		}
	}
	s, err := broadcastInputs(n.Inputs)
	if err != nil {
		return fail(err)
	}
	return single(first.DType, s)
}

func shapeWhere(n *Node) ([]onnx.DataType, [][]int64, error) {
	if err := noAttrs(n); err != nil {
		return fail(err)
	}
	if err := inputsOf(n, 3, 3); err != nil {
		return fail(err)
	}
	if _, err := inputOf(n, 0, isBool); err != nil {
		return fail(err)
	}
	x, err := inputOf(n, 1, nil)
	if err != nil {
		return fail(err)
	}
	y, err := inputOf(n, 2, nil)
	if err != nil {
		return fail(err)
	}
	if err := sameTypeAs(2, y, x); err != nil {
		return fail(err)
	}
	s, err := broadcastInputs(n.Inputs)
	if err != nil {
		return fail(err)
	}
	return single(x.DType, s)
}

// compareTypes is what each comparison and logic operator compares.
func compareTypes(op string) func(onnx.DataType) bool {
	switch op {
	case "Equal":
		return func(d onnx.DataType) bool { return isNumeric(d) || d == onnx.Bool }
	case "And", "Or", "Xor":
		return isBool
	}
	return isNumeric
}

func shapeCompare(n *Node) ([]onnx.DataType, [][]int64, error) {
	if err := noAttrs(n); err != nil {
		return fail(err)
	}
	if err := inputsOf(n, 2, 2); err != nil {
		return fail(err)
	}
	ok := compareTypes(n.Op)
	a, err := inputOf(n, 0, ok)
	if err != nil {
		return fail(err)
	}
	b, err := inputOf(n, 1, ok)
	if err != nil {
		return fail(err)
	}
	if err := sameTypeAs(1, b, a); err != nil {
		return fail(err)
	}
	s, err := broadcastInputs(n.Inputs)
	if err != nil {
		return fail(err)
	}
	return single(onnx.Bool, s)
}

func shapeNot(n *Node) ([]onnx.DataType, [][]int64, error) {
	if err := noAttrs(n); err != nil {
		return fail(err)
	}
	if err := inputsOf(n, 1, 1); err != nil {
		return fail(err)
	}
	x, err := inputOf(n, 0, isBool)
	if err != nil {
		return fail(err)
	}
	return single(onnx.Bool, copyShape(x.Shape))
}

func shapeIf(n *Node) ([]onnx.DataType, [][]int64, error) {
	a, err := attrsAs[If](n)
	if err != nil {
		return fail(err)
	}
	if err := inputsOf(n, 1, 1); err != nil {
		return fail(err)
	}
	cond, err := inputOf(n, 0, isBool)
	if err != nil {
		return fail(err)
	}
	if NumElements(cond.Shape) != 1 {
		return fail(inputFail(0, "condition %q has shape %s, want one element", cond.Name, ShapeString(cond.Shape)))
	}
	if a.Then == nil || a.Else == nil {
		return fail(nodeFail("a branch is missing"))
	}
	if len(a.Then.Outputs) != len(a.Else.Outputs) {
		return fail(nodeFail("then branch has %d outputs, else branch %d", len(a.Then.Outputs), len(a.Else.Outputs)))
	}
	if len(n.Outputs) != len(a.Then.Outputs) {
		return fail(nodeFail("%d outputs, the branches give %d", len(n.Outputs), len(a.Then.Outputs)))
	}
	var types []onnx.DataType
	var shapes [][]int64
	for i, t := range a.Then.Outputs {
		e := a.Else.Outputs[i]
		if t == nil || e == nil {
			return fail(nodeFail("output %d: a branch gives no value", i))
		}
		if t.DType != e.DType || !equalShapes(t.Shape, e.Shape) {
			return fail(nodeFail("output %d: then branch gives %v%s, else branch %v%s", i, t.DType, ShapeString(t.Shape), e.DType, ShapeString(e.Shape)))
		}
		types = append(types, t.DType)
		shapes = append(shapes, copyShape(t.Shape))
	}
	return types, shapes, nil
}
