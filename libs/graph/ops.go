package graph

import (
	"fmt"
	"slices"
	"strconv"
	"unicode"

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
		"MatMul":                {1, inferMatMul},
		"Gemm":                  {1, inferGemm},
		"Transpose":             {1, inferTranspose},
		"Cast":                  {1, inferCast},
		"Add":                   {1, inferBinary},
		"Sub":                   {1, inferBinary},
		"Mul":                   {1, inferBinary},
		"Div":                   {1, inferBinary},
		"Pow":                   {1, inferBinary},
		"Neg":                   {1, inferAbsNeg},
		"Abs":                   {1, inferAbsNeg},
		"Relu":                  {1, inferUnary},
		"Tanh":                  {1, inferUnary},
		"Sigmoid":               {1, inferUnary},
		"Exp":                   {1, inferUnary},
		"Sqrt":                  {1, inferUnary},
		"Erf":                   {9, inferUnary},
		"Log":                   {1, inferUnary},
		"Softplus":              {1, inferUnary},
		"HardSwish":             {14, inferUnary},
		"Floor":                 {6, inferUnary},
		"Ceil":                  {6, inferUnary},
		"Round":                 {11, inferUnary},
		"Sign":                  {9, inferUnary},
		"Sin":                   {7, inferUnary},
		"Cos":                   {7, inferUnary},
		"LeakyRelu":             {1, inferActivation},
		"Elu":                   {1, inferActivation},
		"Selu":                  {1, inferActivation},
		"HardSigmoid":           {1, inferActivation},
		"Max":                   {1, inferVariadic},
		"Min":                   {1, inferVariadic},
		"Sum":                   {1, inferVariadic},
		"Mean":                  {1, inferVariadic},
		"Clip":                  {1, inferClip},
		"Softmax":               {1, inferSoftmax},
		"LogSoftmax":            {1, inferSoftmax},
		"LayerNormalization":    {17, inferLayerNorm},
		"Gelu":                  {20, inferGelu},
		"ReduceMean":            {1, inferReduce},
		"ReduceSum":             {1, inferReduce},
		"ReduceMax":             {1, inferReduce},
		"ReduceMin":             {1, inferReduce},
		"ReduceSumSquare":       {1, inferReduceBuilt},
		"ReduceL2":              {1, inferReduceBuilt},
		"ReduceL1":              {1, inferReduceBuilt},
		"ReduceLogSum":          {1, inferReduceBuilt},
		"ReduceLogSumExp":       {1, inferReduceBuilt},
		"PRelu":                 {1, inferPRelu},
		"Reshape":               {5, inferReshape},
		"Flatten":               {1, inferFlatten},
		"Constant":              {1, inferConstant},
		"Identity":              {1, inferIdentity},
		"Shape":                 {1, inferShape},
		"Gather":                {1, inferGather},
		"Concat":                {4, inferConcat},
		"Slice":                 {1, inferSlice},
		"Split":                 {2, inferSplit},
		"Squeeze":               {1, inferSqueeze},
		"Unsqueeze":             {1, inferUnsqueeze},
		"Expand":                {8, inferExpand},
		"Tile":                  {6, inferTile},
		"ConstantOfShape":       {9, inferConstantOfShape},
		"Range":                 {11, inferRange},
		"Where":                 {9, inferWhere},
		"Trilu":                 {14, inferTrilu},
		"CumSum":                {11, inferCumSum},
		"Dropout":               {1, inferDropout},
		"Reciprocal":            {1, inferReciprocal},
		"ScatterND":             {11, inferScatterND},
		"Einsum":                {12, inferEinsum},
		"Conv":                  {1, inferConv},
		"ConvTranspose":         {1, inferConvTranspose},
		"MaxPool":               {1, inferPool},
		"AveragePool":           {1, inferPool},
		"GlobalAveragePool":     {1, inferGlobalPool},
		"GlobalMaxPool":         {1, inferGlobalPool},
		"BatchNormalization":    {1, inferBatchNorm},
		"InstanceNormalization": {6, inferInstanceNorm},
		"GroupNormalization":    {18, inferGroupNorm},
		"ArgMax":                {1, inferArgMax},
		"ArgMin":                {1, inferArgMax},
		"Pad":                   {2, inferPad},
		"Resize":                {10, inferResize},
		"DepthToSpace":          {1, inferDepthToSpace},
		"SpaceToDepth":          {1, inferDepthToSpace},
		"Upsample":              {7, inferResize},
		"IsNaN":                 {9, inferIsNaN},
		"IsInf":                 {10, inferIsInf},
		"Equal":                 {1, inferCompare},
		"Greater":               {1, inferCompare},
		"GreaterOrEqual":        {12, inferCompare},
		"Less":                  {1, inferCompare},
		"LessOrEqual":           {12, inferCompare},
		"And":                   {1, inferCompare},
		"Xor":                   {1, inferCompare},
		"Or":                    {1, inferCompare},
		"Not":                   {1, inferNot},
		"If":                    {1, inferIf},
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
	// done is set when the node's outputs are already defined and the
	// node is not to be added (Constant, Shape, an If inlined).
	done bool
}

func (c *nodeCtx) errf(format string, args ...any) error {
	return fmt.Errorf("node %q (%s): %s", c.name, c.n.OpType, fmt.Sprintf(format, args...))
}

func (c *nodeCtx) inErrf(i int, format string, args ...any) error {
	return fmt.Errorf("node %q (%s) input %d: %s", c.name, c.n.OpType, i, fmt.Sprintf(format, args...))
}

func (b *builder) node(n *onnx.Node) error {
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
	if c.done {
		return nil
	}
	folded, err := b.fold(c)
	if err != nil || folded {
		return err
	}
	b.sc.nodes = append(b.sc.nodes, c.node)
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

// constInput returns constant operand i (an initializer, a Constant
// output or a value folded from constants), or nil when the input is
// omitted.
func (c *nodeCtx) constInput(i int, what string) (*onnx.Tensor, error) {
	if !c.has(i) {
		return nil, nil
	}
	name := c.n.Inputs[i]
	t, ok := c.b.constTensor(name)
	if !ok {
		if _, err := c.b.lookup(name); err != nil {
			return nil, c.inErrf(i, "%v", err)
		}
		return nil, c.inErrf(i, "%s %q must be a constant (an initializer, a Constant or a value computed from them)", what, name)
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

// numeric returns data input i after checking that it is of a float or
// integer type (arithmetic on int32 and int64 included).
func (c *nodeCtx) numeric(i int) (*Value, error) {
	v, err := c.input(i)
	if err != nil {
		return nil, err
	}
	if !isNumeric(v.DType) {
		return nil, c.inErrf(i, "element type %v of %q is not supported by %s", v.DType, v.Name, c.n.OpType)
	}
	return v, nil
}

// intList decodes constant operand i, a 1-D int32 or int64 tensor
// (starts, axes, sizes...); ok is false when the input is omitted.
func (c *nodeCtx) intList(i int, what string) (v []int64, ok bool, err error) {
	t, err := c.constInput(i, what)
	if err != nil || t == nil {
		return nil, false, err
	}
	if t.DType != onnx.Int64 && t.DType != onnx.Int32 {
		return nil, false, c.inErrf(i, "%s %q: element type %v, want int32 or int64", what, t.Name, t.DType)
	}
	if len(t.Dims) != 1 {
		return nil, false, c.inErrf(i, "%s %q: shape %s, want a 1-D tensor", what, t.Name, ShapeString(t.Dims))
	}
	v, err = constInts(t)
	if err != nil {
		return nil, false, c.inErrf(i, "%s: %v", what, err)
	}
	return v, true, nil
}

// finish infers the outputs from Node.Inputs and Node.Attrs with the
// operator's shared inference (the one Check runs) and defines them.
func (c *nodeCtx) finish() error {
	// The inference counts the outputs (Split, If) before they exist.
	c.node.Outputs = make([]*Value, len(c.n.Outputs))
	types, shapes, err := shapeFns[c.n.OpType](c.node)
	c.node.Outputs = nil
	if err != nil {
		return c.opErr(err)
	}
	return c.outputs(types, shapes)
}

// opErr places an error of the shared inference at the node or input.
func (c *nodeCtx) opErr(err error) error {
	if e, ok := err.(*opError); ok {
		if e.In >= 0 {
			return c.inErrf(e.In, "%s", e.Msg)
		}
		return c.errf("%s", e.Msg)
	}
	return c.errf("%v", err)
}

// constOutput defines output i as a constant holding t (the node is not
// added: see done).
func (c *nodeCtx) constOutput(i int, t *onnx.Tensor) error {
	if i >= len(c.n.Outputs) || c.n.Outputs[i] == "" {
		return nil
	}
	if _, err := checkedElements(t.Dims); err != nil {
		return c.errf("output %d: %v", i, err)
	}
	v := c.b.newValue(c.n.Outputs[i], t.DType, copyShape(t.Dims))
	t.Name = v.Name
	v.Const = t
	c.done = true
	return nil
}
