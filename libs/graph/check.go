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
	ck := &graphCheck{inValues: inValues, ever: slices.Clone(defined), seen: map[*Node]bool{}}
	if err := ck.nodes(g.Nodes, defined); err != nil {
		return err
	}
	defined = ck.ever
	inNodes := func(n *Node) bool { return ck.seen[n] }
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

// graphCheck is the state of checking a graph's node lists.
type graphCheck struct {
	inValues func(v *Value) bool
	ever     []bool         // values defined anywhere so far
	seen     map[*Node]bool // nodes checked so far
}

// nodes checks a node list (the graph's or a branch's): defined holds
// the values defined before its first node, and gains its outputs.
func (ck *graphCheck) nodes(nodes []*Node, defined []bool) error {
	for i, n := range nodes {
		if n == nil {
			return &CheckError{Node: i, Value: -1, Msg: "nil node"}
		}
		if n.Index != i {
			return nodeErr(&Node{Index: i, Name: n.Name}, "index %d, want %d", n.Index, i)
		}
		if ck.seen[n] {
			return nodeErr(n, "listed twice")
		}
		ck.seen[n] = true
		for k, v := range n.Inputs {
			if v == nil {
				continue
			}
			if !ck.inValues(v) {
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
			if !ck.inValues(v) || v.Producer != n {
				return nodeErr(n, "output %d is not a value of the graph that the node produces", k)
			}
			if ck.ever[v.Index] {
				return nodeErr(n, "output %d: %q is defined twice", k, v.Name)
			}
			defined[v.Index], ck.ever[v.Index] = true, true
		}
		if err := checkNode(n); err != nil {
			return err
		}
		if a, ok := n.Attrs.(*If); ok {
			if err := ck.branches(n, a, defined); err != nil {
				return err
			}
		}
	}
	return nil
}

// branches checks an If's branches: each sees what is defined before the
// If, and what it defines itself.
func (ck *graphCheck) branches(n *Node, a *If, defined []bool) error {
	for _, br := range []struct {
		name string
		b    *Branch
	}{{"then", a.Then}, {"else", a.Else}} {
		local := slices.Clone(defined)
		if err := ck.nodes(br.b.Nodes, local); err != nil {
			return err
		}
		for k, v := range br.b.Outputs {
			if !ck.inValues(v) {
				return nodeErr(n, "%s branch output %d is not a value of the graph", br.name, k)
			}
			if !local[v.Index] {
				return nodeErr(n, "%s branch output %d: %q is not defined in the branch or before the node", br.name, k, v.Name)
			}
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

// numeric returns input k, present and of a float or integer type.
func (c *irCheck) numeric(k int) (*Value, error) {
	v, err := c.input(k)
	if err != nil {
		return nil, err
	}
	if !isNumeric(v.DType) {
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

// oneInputOf checks a node of one input and attributes T: its
// attributes, its arity, and the input.
func oneInputOf[T any](c *irCheck) (*T, *Value, error) {
	a, err := attrsOf[T](c)
	if err != nil {
		return nil, nil, err
	}
	if err := c.arity(1, 1); err != nil {
		return nil, nil, err
	}
	x, err := c.input(0)
	if err != nil {
		return nil, nil, err
	}
	return a, x, nil
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
	if fn, ok := shapeFns[n.Op]; ok {
		types, shapes, err := fn(n)
		if err != nil {
			return failCheck(c.errf("%v", err))
		}
		return types, shapes, nil
	}
	check, ok := irChecks[n.Op]
	if !ok {
		return failCheck(c.errf("unsupported operator %s", printable(n.Op)))
	}
	switch n.Op {
	case "Neg", "Abs", "Relu", "Tanh", "Sigmoid", "Exp", "Sqrt", "Add", "Sub", "Mul", "Div", "Pow",
		"Max", "Min", "MatMul":
		if n.Attrs != nil {
			return failCheck(c.errf("attributes %T, want none", n.Attrs))
		}
	}
	return check(c)
}

func failCheck(err error) ([]onnx.DataType, [][]int64, error) { return nil, nil, err }

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
