package graph

import (
	"fmt"
	"slices"

	"ipu.local/libs/onnx"
)

// CheckError is an inconsistency Check found, located by the index and
// name of the node or value at fault (Node and Value -1 when the fault is
// the graph's).
type CheckError struct {
	Node  int
	Value int
	Name  string
	Msg   string
}

func (e *CheckError) Error() string {
	switch {
	case e.Node >= 0:
		return fmt.Sprintf("nodes[%d] (%q): %s", e.Node, e.Name, e.Msg)
	case e.Value >= 0:
		return fmt.Sprintf("values[%d] (%q): %s", e.Value, e.Name, e.Msg)
	}
	return e.Msg
}

func graphErr(format string, args ...any) error {
	return &CheckError{Node: -1, Value: -1, Msg: fmt.Sprintf(format, args...)}
}

func valueErr(i int, v *Value, format string, args ...any) error {
	return &CheckError{Node: -1, Value: i, Name: v.Name, Msg: fmt.Sprintf(format, args...)}
}

func nodeErr(n *Node, format string, args ...any) error {
	return &CheckError{Node: n.Index, Value: -1, Name: n.Name, Msg: fmt.Sprintf(format, args...)}
}

// Check verifies a graph that did not come from Build (one decoded from a
// plan or a package) the way Build checks a model, so that evaluators can
// trust it as they trust Build's graphs: every value a supported element
// type with a bounded shape, constants holding exactly their data, indices
// and producers consistent, nodes in topological order, and for each node
// the operator supported, its inputs present with the element types the
// operator computes on, its Attrs of the operator's struct with values in
// range, and its outputs of the types and shapes the operator infers.
//
// The operators' meaning is the one Build resolves to (numpy
// broadcasting, Attrs already folded): Check accepts every graph Build
// makes, whatever opset it came from. Errors are *CheckError.
func Check(g *Graph) error {
	if g == nil {
		return graphErr("no graph")
	}
	nv := len(g.Values)
	inValues := func(v *Value) bool { return v != nil && v.Index >= 0 && v.Index < nv && g.Values[v.Index] == v }
	inNodes := func(n *Node) bool { return n != nil && n.Index >= 0 && n.Index < len(g.Nodes) && g.Nodes[n.Index] == n }

	for i, v := range g.Values {
		if v == nil {
			return &CheckError{Node: -1, Value: i, Msg: "nil value"}
		}
		if v.Index != i {
			return valueErr(i, v, "index %d, want %d", v.Index, i)
		}
		if !runtimeType(v.DType) {
			return valueErr(i, v, "element type %v is not supported", v.DType)
		}
		n, err := checkedElements(v.Shape)
		if err != nil {
			return valueErr(i, v, "%v", err)
		}
		if c := v.Const; c != nil {
			switch {
			case v.Producer != nil:
				return valueErr(i, v, "a constant with a producer")
			case c.DType != v.DType:
				return valueErr(i, v, "constant data of element type %v, value is %v", c.DType, v.DType)
			case !equalShapes(c.Dims, v.Shape):
				return valueErr(i, v, "constant data of shape %s, value is %s", ShapeString(c.Dims), ShapeString(v.Shape))
			case int64(len(c.Raw)) != n*int64(v.DType.ElemSize()):
				return valueErr(i, v, "constant data of %d bytes, want %d", len(c.Raw), n*int64(v.DType.ElemSize()))
			}
		}
	}

	isInput := make([]bool, nv)
	for k, v := range g.Inputs {
		switch {
		case !inValues(v):
			return graphErr("input %d is not a value of the graph", k)
		case v.Const != nil || v.Producer != nil:
			return valueErr(v.Index, v, "graph input %d is a constant or a node output", k)
		case isInput[v.Index]:
			return valueErr(v.Index, v, "listed twice as a graph input")
		}
		isInput[v.Index] = true
	}

	defined := slices.Clone(isInput) // inputs, constants, outputs of earlier nodes
	for i, v := range g.Values {
		if v.Const != nil {
			defined[i] = true
		}
	}
	for i, n := range g.Nodes {
		if n == nil {
			return &CheckError{Node: i, Value: -1, Msg: "nil node"}
		}
		if n.Index != i {
			return nodeErr(&Node{Index: i, Name: n.Name}, "index %d, want %d", n.Index, i)
		}
		for k, v := range n.Inputs {
			if v == nil {
				continue
			}
			if !inValues(v) {
				return nodeErr(n, "input %d is not a value of the graph", k)
			}
			if !defined[v.Index] {
				return nodeErr(n, "input %d: %q is not defined before the node", k, v.Name)
			}
		}
		if len(n.Outputs) == 0 || n.Outputs[0] == nil {
			return nodeErr(n, "no output")
		}
		for k, v := range n.Outputs {
			if v == nil {
				continue
			}
			if !inValues(v) || v.Producer != n {
				return nodeErr(n, "output %d is not a value of the graph that the node produces", k)
			}
			if defined[v.Index] {
				return nodeErr(n, "output %d: %q is defined twice", k, v.Name)
			}
			defined[v.Index] = true
		}
		if err := checkNode(n); err != nil {
			return err
		}
	}
	for i, v := range g.Values {
		if p := v.Producer; p != nil && (!inNodes(p) || !slices.Contains(p.Outputs, v)) {
			return valueErr(i, v, "its producer is not a node of the graph listing it as an output")
		}
		if !defined[i] {
			return valueErr(i, v, "not a graph input, a constant or a node output")
		}
	}

	if len(g.Outputs) == 0 {
		return graphErr("graph has no outputs")
	}
	for k, v := range g.Outputs {
		if !inValues(v) {
			return graphErr("output %d is not a value of the graph", k)
		}
	}
	return nil
}

// irCheck is the state of checking one node.
type irCheck struct {
	n *Node
}

func (c *irCheck) errf(format string, args ...any) error { return nodeErr(c.n, format, args...) }

// arity checks the number of inputs, absent ones included.
func (c *irCheck) arity(minIn, maxIn int) error {
	if k := len(c.n.Inputs); k < minIn || (maxIn >= 0 && k > maxIn) {
		if minIn == maxIn {
			return c.errf("%d inputs, want %d", k, minIn)
		}
		if maxIn < 0 {
			return c.errf("%d inputs, want at least %d", k, minIn)
		}
		return c.errf("%d inputs, want %d to %d", k, minIn, maxIn)
	}
	return nil
}

// input returns input k, which must be present.
func (c *irCheck) input(k int) (*Value, error) {
	if v := c.n.Inputs[k]; v != nil {
		return v, nil
	}
	return nil, c.errf("input %d: missing", k)
}

// arith returns input k, present and of a type arithmetic computes on.
func (c *irCheck) arith(k int) (*Value, error) {
	v, err := c.input(k)
	if err != nil {
		return nil, err
	}
	if v.DType != onnx.Float && v.DType != onnx.Float16 {
		return nil, c.errf("input %d: element type %v of %q is not supported by %s", k, v.DType, v.Name, c.n.Op)
	}
	return v, nil
}

// arithSame returns input k, present, of the type of first.
func (c *irCheck) arithSame(k int, first *Value) (*Value, error) {
	v, err := c.arith(k)
	if err != nil {
		return nil, err
	}
	if v.DType != first.DType {
		return nil, c.errf("input %d: element type %v does not match %v", k, v.DType, first.DType)
	}
	return v, nil
}

// attrs returns n.Attrs as *T, or an error naming what it is.
func attrsOf[T any](c *irCheck) (*T, error) {
	a, ok := c.n.Attrs.(*T)
	if !ok || a == nil {
		var want *T
		return nil, c.errf("attributes %T, want %T", c.n.Attrs, want)
	}
	return a, nil
}

// checkNode infers the output types and shapes of n from its inputs and
// Attrs and compares them with its outputs.
func checkNode(n *Node) error {
	c := &irCheck{n: n}
	types, shapes, err := c.infer()
	if err != nil {
		return err
	}
	if len(n.Outputs) > len(types) {
		return c.errf("%d outputs, want at most %d", len(n.Outputs), len(types))
	}
	for k, v := range n.Outputs {
		if v == nil {
			continue
		}
		if v.DType != types[k] || !equalShapes(v.Shape, shapes[k]) {
			return c.errf("output %d: %q is %v%s, the operator gives %v%s", k, v.Name, v.DType, ShapeString(v.Shape), types[k], ShapeString(shapes[k]))
		}
	}
	return nil
}

func one(d onnx.DataType, s []int64) ([]onnx.DataType, [][]int64, error) {
	return []onnx.DataType{d}, [][]int64{s}, nil
}

func (c *irCheck) infer() ([]onnx.DataType, [][]int64, error) {
	n := c.n
	fail := func(err error) ([]onnx.DataType, [][]int64, error) { return nil, nil, err }
	switch n.Op {
	case "Gemm", "Transpose", "Cast", "Clip", "Softmax", "LogSoftmax", "LayerNormalization", "Gelu",
		"ReduceMean", "ReduceSum", "Reshape", "Flatten":
	case "Neg", "Abs", "Relu", "Tanh", "Sigmoid", "Exp", "Sqrt", "Add", "Sub", "Mul", "Div", "Pow",
		"Max", "Min", "MatMul":
		if n.Attrs != nil {
			return fail(c.errf("attributes %T, want none", n.Attrs))
		}
	default:
		return fail(c.errf("unsupported operator %s", printable(n.Op)))
	}
	switch n.Op {
	case "Neg", "Abs", "Relu", "Tanh", "Sigmoid", "Exp", "Sqrt":
		if err := c.arity(1, 1); err != nil {
			return fail(err)
		}
		x, err := c.arith(0)
		if err != nil {
			return fail(err)
		}
		return one(x.DType, x.Shape)

	case "Add", "Sub", "Mul", "Div", "Pow":
		if err := c.arity(2, 2); err != nil {
			return fail(err)
		}
		a, err := c.arith(0)
		if err != nil {
			return fail(err)
		}
		var b *Value
		if n.Op == "Pow" { // the exponent's type may differ (opset 12)
			b, err = c.arith(1)
		} else {
			b, err = c.arithSame(1, a)
		}
		if err != nil {
			return fail(err)
		}
		s, err := Broadcast(a.Shape, b.Shape)
		if err != nil {
			return fail(c.errf("input 1: shape %s does not broadcast with %s", ShapeString(b.Shape), ShapeString(a.Shape)))
		}
		return one(a.DType, s)

	case "Max", "Min":
		if err := c.arity(1, -1); err != nil {
			return fail(err)
		}
		first, err := c.arith(0)
		if err != nil {
			return fail(err)
		}
		shapes := [][]int64{first.Shape}
		for k := 1; k < len(n.Inputs); k++ {
			v, err := c.arithSame(k, first)
			if err != nil {
				return fail(err)
			}
			shapes = append(shapes, v.Shape)
		}
		s, err := Broadcast(shapes...)
		if err != nil {
			return fail(c.errf("%v", err))
		}
		return one(first.DType, s)

	case "MatMul":
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

	case "Gemm":
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
			return fail(c.errf("input 1: shape %s does not match %s", ShapeString(b.Shape), ShapeString(a.Shape)))
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

	case "Transpose":
		at, err := attrsOf[Transpose](c)
		if err != nil {
			return fail(err)
		}
		if err := c.arity(1, 1); err != nil {
			return fail(err)
		}
		x, err := c.input(0)
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

	case "Cast":
		at, err := attrsOf[Cast](c)
		if err != nil {
			return fail(err)
		}
		if err := c.arity(1, 1); err != nil {
			return fail(err)
		}
		x, err := c.input(0)
		if err != nil {
			return fail(err)
		}
		if !runtimeType(at.To) {
			return fail(c.errf("cast to %v is not supported", at.To))
		}
		return one(at.To, x.Shape)

	case "Clip":
		if _, err := attrsOf[Clip](c); err != nil {
			return fail(err)
		}
		return c.unaryArith()

	case "Gelu":
		if _, err := attrsOf[Gelu](c); err != nil {
			return fail(err)
		}
		return c.unaryArith()

	case "Softmax", "LogSoftmax":
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

	case "LayerNormalization":
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

	case "ReduceMean", "ReduceSum":
		at, err := attrsOf[Reduce](c)
		if err != nil {
			return fail(err)
		}
		types, shapes, err := c.unaryArith()
		if err != nil {
			return fail(err)
		}
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

	case "Reshape":
		at, err := attrsOf[Reshape](c)
		if err != nil {
			return fail(err)
		}
		if err := c.arity(1, 1); err != nil {
			return fail(err)
		}
		x, err := c.input(0)
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

	case "Flatten":
		at, err := attrsOf[Flatten](c)
		if err != nil {
			return fail(err)
		}
		if err := c.arity(1, 1); err != nil {
			return fail(err)
		}
		x, err := c.input(0)
		if err != nil {
			return fail(err)
		}
		if r := len(x.Shape); at.Axis < 0 || at.Axis > r {
			return fail(c.errf("axis %d out of range [0,%d] for rank %d", at.Axis, r, r))
		}
		return one(x.DType, []int64{NumElements(x.Shape[:at.Axis]), NumElements(x.Shape[at.Axis:])})
	}
	return fail(c.errf("unsupported operator %s", printable(n.Op)))
}

// unaryArith checks one arithmetic input and gives its type and shape.
func (c *irCheck) unaryArith() ([]onnx.DataType, [][]int64, error) {
	if err := c.arity(1, 1); err != nil {
		return nil, nil, err
	}
	x, err := c.arith(0)
	if err != nil {
		return nil, nil, err
	}
	return one(x.DType, x.Shape)
}
