package graph

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"unicode"

	"ipu.local/libs/numfmt"
	"ipu.local/libs/onnx"
)

// opSpec describes one supported operator.
type opSpec struct {
	since int64 // first opset of the default domain that has the operator
	infer func(c *nodeCtx) error
}

var ops map[string]opSpec

func init() {
	ops = map[string]opSpec{
		"MatMul":             {1, inferMatMul},
		"Gemm":               {1, inferGemm},
		"Transpose":          {1, inferTranspose},
		"Cast":               {1, inferCast},
		"Add":                {1, inferBinary},
		"Sub":                {1, inferBinary},
		"Mul":                {1, inferBinary},
		"Div":                {1, inferBinary},
		"Pow":                {1, inferBinary},
		"Neg":                {1, inferUnary},
		"Abs":                {1, inferUnary},
		"Relu":               {1, inferUnary},
		"Tanh":               {1, inferUnary},
		"Sigmoid":            {1, inferUnary},
		"Exp":                {1, inferUnary},
		"Sqrt":               {1, inferUnary},
		"Max":                {1, inferVariadic},
		"Min":                {1, inferVariadic},
		"Clip":               {1, inferClip},
		"Softmax":            {1, inferSoftmax},
		"LogSoftmax":         {1, inferSoftmax},
		"LayerNormalization": {17, inferLayerNorm},
		"Gelu":               {20, inferGelu},
		"ReduceMean":         {1, inferReduce},
		"ReduceSum":          {1, inferReduce},
		"Reshape":            {5, inferReshape},
		"Flatten":            {1, inferFlatten},
		"Constant":           {1, inferConstant},
	}
}

// SupportedOps returns the operators Build accepts, sorted.
func SupportedOps() []string {
	names := make([]string, 0, len(ops))
	for k := range ops {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

// UnsupportedError reports an operator outside the supported set.
type UnsupportedError struct {
	Op   string // op_type, prefixed with its domain outside the default one
	Node string
}

func (e *UnsupportedError) Error() string {
	return fmt.Sprintf("unsupported operator %s (node %q)", printable(e.Op), e.Node)
}

// printable returns an operator name as is, or quoted when it holds
// spaces or unprintable characters, so that errors stay on one line.
func printable(op string) string {
	for _, r := range op {
		if !unicode.IsPrint(r) || unicode.IsSpace(r) {
			return strconv.Quote(op)
		}
	}
	return op
}

// nodeCtx is the state of building one node.
type nodeCtx struct {
	b    *builder
	n    *onnx.Node
	name string
	node *Node
}

func (c *nodeCtx) errf(format string, args ...any) error {
	return fmt.Errorf("node %q (%s): %s", c.name, c.n.OpType, fmt.Sprintf(format, args...))
}

func (c *nodeCtx) inErrf(i int, format string, args ...any) error {
	return fmt.Errorf("node %q (%s) input %d: %s", c.name, c.n.OpType, i, fmt.Sprintf(format, args...))
}

func (b *builder) node(n *onnx.Node, idx int) error {
	name := nodeName(n)
	if n.Domain != "" && n.Domain != "ai.onnx" {
		return &UnsupportedError{Op: n.Domain + "." + n.OpType, Node: name}
	}
	spec, ok := ops[n.OpType]
	if !ok {
		return &UnsupportedError{Op: n.OpType, Node: name}
	}
	c := &nodeCtx{b: b, n: n, name: name, node: &Node{Name: name, Op: n.OpType}}
	if b.opset < spec.since {
		return c.errf("operator needs opset %d, the model imports %d", spec.since, b.opset)
	}
	if len(n.Outputs) == 0 || n.Outputs[0] == "" {
		return c.errf("no output")
	}
	if err := spec.infer(c); err != nil {
		return err
	}
	if n.OpType == "Constant" {
		return nil
	}
	c.node.Index = len(b.g.Nodes)
	b.g.Nodes = append(b.g.Nodes, c.node)
	return nil
}

// arity checks the number of inputs the model gives (trailing omitted
// inputs count as absent).
func (c *nodeCtx) arity(minIn, maxIn int) error {
	n := len(c.n.Inputs)
	for n > 0 && c.n.Inputs[n-1] == "" {
		n--
	}
	switch {
	case n < minIn && minIn == maxIn:
		return c.errf("%d inputs, want %d", n, minIn)
	case n < minIn:
		return c.errf("%d inputs, want at least %d", n, minIn)
	case maxIn >= 0 && n > maxIn:
		return c.errf("%d inputs, want at most %d", n, maxIn)
	}
	return nil
}

// has reports whether the model gives input i.
func (c *nodeCtx) has(i int) bool {
	return i < len(c.n.Inputs) && c.n.Inputs[i] != ""
}

// input returns data input i, which must be present.
func (c *nodeCtx) input(i int) (*Value, error) {
	if !c.has(i) {
		return nil, c.inErrf(i, "missing")
	}
	v, err := c.b.lookup(c.n.Inputs[i])
	if err != nil {
		return nil, c.inErrf(i, "%v", err)
	}
	return v, nil
}

// arith returns data input i after checking that the operator can compute
// on its element type (float or float16: ONNX arithmetic has no FP8).
func (c *nodeCtx) arith(i int) (*Value, error) {
	v, err := c.input(i)
	if err != nil {
		return nil, err
	}
	if v.DType != onnx.Float && v.DType != onnx.Float16 {
		return nil, c.inErrf(i, "element type %v of %q is not supported by %s", v.DType, v.Name, c.n.OpType)
	}
	return v, nil
}

// sameType checks that input i has the element type of input 0.
func (c *nodeCtx) sameType(i int, v, first *Value) error {
	if v.DType != first.DType {
		return c.inErrf(i, "element type %v does not match %v", v.DType, first.DType)
	}
	return nil
}

// constInput returns constant operand i (an initializer or a Constant
// output), or nil when the input is omitted.
func (c *nodeCtx) constInput(i int, what string) (*onnx.Tensor, error) {
	if !c.has(i) {
		return nil, nil
	}
	name := c.n.Inputs[i]
	t, ok := c.b.consts[name]
	if !ok {
		return nil, c.inErrf(i, "%s %q must be a constant (initializer or Constant)", what, name)
	}
	return t, nil
}

// int64s decodes a constant int64 operand.
func (c *nodeCtx) int64s(i int, t *onnx.Tensor, what string) ([]int64, error) {
	if t.DType != onnx.Int64 {
		return nil, c.inErrf(i, "%s %q: element type %v, want int64", what, t.Name, t.DType)
	}
	if len(t.Dims) != 1 {
		return nil, c.inErrf(i, "%s %q: shape %s, want a 1-D tensor", what, t.Name, ShapeString(t.Dims))
	}
	return t.Int64s()
}

// output defines output i of the node.
func (c *nodeCtx) output(i int, d onnx.DataType, shape []int64) error {
	if i >= len(c.n.Outputs) || c.n.Outputs[i] == "" {
		c.node.Outputs = append(c.node.Outputs, nil)
		return nil
	}
	if _, err := checkedElements(shape); err != nil {
		return c.errf("output %d: %v", i, err)
	}
	v := c.b.newValue(c.n.Outputs[i], d, shape)
	v.Producer = c.node
	c.node.Outputs = append(c.node.Outputs, v)
	return nil
}

// outputs checks the output count, then defines the outputs.
func (c *nodeCtx) outputs(types []onnx.DataType, shapes [][]int64) error {
	if len(c.n.Outputs) > len(types) {
		return c.errf("%d outputs, want at most %d", len(c.n.Outputs), len(types))
	}
	n := len(c.n.Outputs)
	for i := 0; i < n; i++ {
		if err := c.output(i, types[i], shapes[i]); err != nil {
			return err
		}
	}
	return nil
}

func (c *nodeCtx) one(d onnx.DataType, shape []int64) error {
	return c.outputs([]onnx.DataType{d}, [][]int64{shape})
}

// Attribute getters that name the node in their errors.

func (c *nodeCtx) attrInt(name string, def int64) (int64, error) {
	v, err := c.n.AttrInt(name, def)
	if err != nil {
		return 0, c.errf("%v", err)
	}
	return v, nil
}

func (c *nodeCtx) attrBool(name string, def bool) (bool, error) {
	d := int64(0)
	if def {
		d = 1
	}
	v, err := c.attrInt(name, d)
	if err != nil {
		return false, err
	}
	if v != 0 && v != 1 {
		return false, c.errf("attribute %q is %d, want 0 or 1", name, v)
	}
	return v == 1, nil
}

func (c *nodeCtx) attrFloat(name string, def float32) (float32, error) {
	v, err := c.n.AttrFloat(name, def)
	if err != nil {
		return 0, c.errf("%v", err)
	}
	return v, nil
}

func (c *nodeCtx) attrInts(name string) ([]int64, bool, error) {
	v, ok, err := c.n.AttrInts(name)
	if err != nil {
		return nil, false, c.errf("%v", err)
	}
	return v, ok, nil
}

func copyShape(s []int64) []int64 { return append([]int64{}, s...) }

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
	a, err := c.arith(0)
	if err != nil {
		return err
	}
	b, err := c.arith(1)
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
	for i := range c.n.Inputs {
		v, err := c.arith(i)
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
		return c.inErrf(1, "shape %s does not match %s", ShapeString(b.Shape), ShapeString(a.Shape))
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
		return nil, err
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
		return c.inErrf(1, "shape %s does not match %s", ShapeString(b.Shape), ShapeString(a.Shape))
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

func inferTranspose(c *nodeCtx) error {
	if err := c.arity(1, 1); err != nil {
		return err
	}
	x, err := c.input(0)
	if err != nil {
		return err
	}
	r := len(x.Shape)
	perm := make([]int, r)
	p, ok, err := c.attrInts("perm")
	if err != nil {
		return err
	}
	if !ok {
		for i := range perm {
			perm[i] = r - 1 - i
		}
	} else {
		if len(p) != r {
			return c.errf("perm %v has %d entries, input rank is %d", p, len(p), r)
		}
		seen := make([]bool, r)
		for i, v := range p {
			if v < 0 || v >= int64(r) || seen[v] {
				return c.errf("perm %v is not a permutation of 0..%d", p, r-1)
			}
			seen[v] = true
			perm[i] = int(v)
		}
	}
	shape := make([]int64, r)
	for i, ax := range perm {
		shape[i] = x.Shape[ax]
	}
	c.node.Inputs = []*Value{x}
	c.node.Attrs = &Transpose{Perm: perm}
	return c.one(x.DType, shape)
}

func inferCast(c *nodeCtx) error {
	if err := c.arity(1, 1); err != nil {
		return err
	}
	x, err := c.input(0)
	if err != nil {
		return err
	}
	if c.n.Attr("to") == nil {
		return c.errf("missing attribute \"to\"")
	}
	to, err := c.attrInt("to", 0)
	if err != nil {
		return err
	}
	d := onnx.DataType(to)
	if int64(d) != to || !runtimeType(d) {
		return c.errf("cast to %v is not supported", onnx.DataType(int32(to)))
	}
	if isFP8(d) && c.b.opset < 19 {
		return c.errf("cast to %v needs opset 19, the model imports %d", d, c.b.opset)
	}
	sat, err := c.attrBool("saturate", true)
	if err != nil {
		return err
	}
	c.node.Inputs = []*Value{x}
	c.node.Attrs = &Cast{To: d, Saturate: sat}
	return c.one(d, copyShape(x.Shape))
}

func isFP8(d onnx.DataType) bool {
	switch d {
	case onnx.Float8E4M3FN, onnx.Float8E4M3FNUZ, onnx.Float8E5M2, onnx.Float8E5M2FNUZ:
		return true
	}
	return false
}

// FP8Format returns the numfmt format of an FP8 element type.
func FP8Format(d onnx.DataType) (numfmt.Format, bool) {
	switch d {
	case onnx.Float8E4M3FN:
		return numfmt.E4M3FN, true
	case onnx.Float8E4M3FNUZ:
		return numfmt.E4M3FNUZ, true
	case onnx.Float8E5M2:
		return numfmt.E5M2, true
	case onnx.Float8E5M2FNUZ:
		return numfmt.E5M2FNUZ, true
	}
	return 0, false
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

func inferReduce(c *nodeCtx) error {
	// The axes moved from an attribute to an input in these opsets.
	axesInput := (c.n.OpType == "ReduceSum" && c.b.opset >= 13) || (c.n.OpType == "ReduceMean" && c.b.opset >= 18)
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
	var (
		axes   []int64
		given  bool
		noopOK bool
	)
	if axesInput {
		if noopOK, err = c.attrBool("noop_with_empty_axes", false); err != nil {
			return err
		}
		t, err := c.constInput(1, "axes")
		if err != nil {
			return err
		}
		if t != nil {
			if axes, err = c.int64s(1, t, "axes"); err != nil {
				return err
			}
			given = len(axes) > 0
		}
	} else {
		if axes, given, err = c.attrInts("axes"); err != nil {
			return err
		}
		given = given && len(axes) > 0
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

func inferReshape(c *nodeCtx) error {
	if err := c.arity(2, 2); err != nil {
		return err
	}
	x, err := c.input(0)
	if err != nil {
		return err
	}
	t, err := c.constInput(1, "shape")
	if err != nil {
		return err
	}
	want, err := c.int64s(1, t, "shape")
	if err != nil {
		return err
	}
	allowZero := false
	if c.b.opset >= 14 {
		if allowZero, err = c.attrBool("allowzero", false); err != nil {
			return err
		}
	}
	shape, err := ReshapeShape(x.Shape, want, allowZero)
	if err != nil {
		return c.inErrf(1, "%v", err)
	}
	c.node.Inputs = []*Value{x}
	c.node.Attrs = &Reshape{Shape: copyShape(shape)}
	return c.one(x.DType, shape)
}

// ReshapeShape resolves an ONNX Reshape shape operand against the input
// shape: 0 copies the input's dimension (unless allowZero), one -1 takes
// what remains.
func ReshapeShape(in, want []int64, allowZero bool) ([]int64, error) {
	total, err := checkedElements(in)
	if err != nil {
		return nil, err
	}
	out := make([]int64, len(want))
	infer := -1
	known := int64(1)
	for i, d := range want {
		switch {
		case d == -1:
			if infer >= 0 {
				return nil, fmt.Errorf("shape %v has more than one -1", want)
			}
			infer = i
			continue
		case d < -1:
			return nil, fmt.Errorf("shape %v has a negative dimension %d", want, d)
		case d == 0 && !allowZero:
			if i >= len(in) {
				return nil, fmt.Errorf("shape %v copies dimension %d, input %s has rank %d", want, i, ShapeString(in), len(in))
			}
			d = in[i]
		case d == 0 && slices.Contains(want, -1):
			return nil, fmt.Errorf("shape %v has both 0 and -1 with allowzero", want)
		}
		out[i] = d
		if d > MaxElements {
			return nil, fmt.Errorf("shape %v has a dimension above %d", want, MaxElements)
		}
		if known *= d; known > MaxElements {
			return nil, fmt.Errorf("shape %v has more than %d elements", want, MaxElements)
		}
	}
	if infer >= 0 {
		if known == 0 || total%known != 0 {
			return nil, fmt.Errorf("cannot reshape %s (%d elements) to %v", ShapeString(in), total, want)
		}
		out[infer] = total / known
		known = total
	}
	if known != total {
		return nil, fmt.Errorf("cannot reshape %s (%d elements) to %v (%d elements)", ShapeString(in), total, want, known)
	}
	return out, nil
}

func inferFlatten(c *nodeCtx) error {
	if err := c.arity(1, 1); err != nil {
		return err
	}
	x, err := c.input(0)
	if err != nil {
		return err
	}
	ax, err := c.attrInt("axis", 1)
	if err != nil {
		return err
	}
	if ax < 0 && c.b.opset < 11 {
		return c.errf("negative axis %d needs opset 11", ax)
	}
	axis, err := normAxis(ax, len(x.Shape), true)
	if err != nil {
		return c.errf("%v", err)
	}
	shape := []int64{NumElements(x.Shape[:axis]), NumElements(x.Shape[axis:])}
	c.node.Inputs = []*Value{x}
	c.node.Attrs = &Flatten{Axis: axis}
	return c.one(x.DType, shape)
}

func inferConstant(c *nodeCtx) error {
	if err := c.arity(0, 0); err != nil {
		return err
	}
	if len(c.n.Outputs) != 1 {
		return c.errf("%d outputs, want 1", len(c.n.Outputs))
	}
	if len(c.n.Attrs) != 1 {
		return c.errf("%d attributes, want exactly one value", len(c.n.Attrs))
	}
	a := &c.n.Attrs[0]
	out := c.n.Outputs[0]
	var t *onnx.Tensor
	switch {
	case a.Name == "value" && a.Type == onnx.AttrTensor && a.T != nil:
		t = &onnx.Tensor{Name: out, DType: a.T.DType, Dims: copyShape(a.T.Dims), Raw: a.T.Raw}
	case a.Name == "value_float" && a.Type == onnx.AttrFloat:
		t = onnx.NewFloat32(out, []int64{}, []float32{a.F})
	case a.Name == "value_floats" && a.Type == onnx.AttrFloats:
		t = onnx.NewFloat32(out, []int64{int64(len(a.Floats))}, a.Floats)
	case a.Name == "value_int" && a.Type == onnx.AttrInt:
		t = newInt64(out, []int64{}, []int64{a.I})
	case a.Name == "value_ints" && a.Type == onnx.AttrInts:
		t = newInt64(out, []int64{int64(len(a.Ints))}, a.Ints)
	default:
		return c.errf("constant attribute %q of type %v is not supported", a.Name, a.Type)
	}
	if t.Dims == nil {
		t.Dims = []int64{}
	}
	c.b.consts[out] = t
	return nil
}

func newInt64(name string, dims, v []int64) *onnx.Tensor {
	raw := make([]byte, 0, 8*len(v))
	for _, x := range v {
		u := uint64(x)
		raw = append(raw, byte(u), byte(u>>8), byte(u>>16), byte(u>>24), byte(u>>32), byte(u>>40), byte(u>>48), byte(u>>56))
	}
	return &onnx.Tensor{Name: name, DType: onnx.Int64, Dims: dims, Raw: raw}
}

// DecodeFloats returns the elements of a float, float16 or FP8 tensor as
// exact float64 values.
func DecodeFloats(t *onnx.Tensor) ([]float64, error) {
	switch t.DType {
	case onnx.Float:
		v, err := t.Float32s()
		if err != nil {
			return nil, err
		}
		out := make([]float64, len(v))
		for i, x := range v {
			out[i] = float64(x)
		}
		return out, nil
	case onnx.Float16:
		v, err := t.Float16Bits()
		if err != nil {
			return nil, err
		}
		out := make([]float64, len(v))
		for i, h := range v {
			out[i] = numfmt.F16ToF64(h)
		}
		return out, nil
	}
	if f, ok := FP8Format(t.DType); ok {
		out := make([]float64, len(t.Raw))
		for i, b := range t.Raw {
			out[i] = numfmt.F8ToF64(b, f, 0)
		}
		return out, nil
	}
	return nil, fmt.Errorf("tensor %q: element type %v is not a float type", t.Name, t.DType)
}
