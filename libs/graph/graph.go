// Package graph is the compiler's intermediate form of an ONNX model: a
// topologically ordered list of operator nodes over tensors whose element
// types and shapes are all static and known.
//
// Build checks a decoded model against the operator subset the toolchain
// compiles and resolves every ONNX opset difference while doing so, so
// that later phases (planner, code generator, host reference) see one
// meaning per operator:
//
//   - attributes are parsed into one struct per operator (Gemm, Cast,
//     Softmax, Slice, ...), defaults filled in, axes made non-negative;
//   - operands ONNX passes as constant inputs (Reshape's shape, Reduce*,
//     Squeeze and Unsqueeze axes, Slice's starts/ends/axes/steps, Split's
//     sizes, Expand's shape, Tile's repeats, Clip bounds) are folded into
//     those structs, so Node.Inputs holds only the data inputs; such an
//     operand must be constant once constants are folded;
//   - initializers and Constant nodes become constant values carrying
//     their data; Constant nodes do not appear in Graph.Nodes;
//   - constants are folded while building: a node whose inputs are all
//     constant is evaluated (fold.go says which operators and types) and
//     its outputs become constants; so does Shape, whose input's shape is
//     static, and an If on a constant condition is replaced by the nodes
//     of the branch it takes. Graph.Folded lists what folding did;
//   - operators that are other operators put together (Trilu, CumSum,
//     ScatterND, Einsum, ArgMax and ArgMin, Pad, Dropout, Reciprocal,
//     IsNaN, IsInf, a Cast from float16 or FP8 to an integer, Conv, the
//     pools, BatchNormalization, integer Abs and Neg: built.go) become
//     those operators' nodes, each built and folded in turn; Graph.Built
//     lists them;
//   - declared shapes that the bound symbolic input dimensions
//     contradict (an exporter's traced sizes) give way to the bound
//     shapes, listed in Graph.Redeclared;
//   - legacy (opset < 7) broadcasting is accepted where it means what
//     numpy broadcasting means, and refused otherwise.
//
// Element types: float, float16 and the FP8 types compute; bool, int32
// and int64 tensors are values too (token ids, shapes, masks). DOUBLE is
// not a device type: Build refuses it, unless BuildOptions.DowncastFP64
// asks to compute such tensors in float (Graph.Downcast names them).
//
// After Build, Simplify runs the graph passes (passes.go): identity
// removal, dead-node elimination, and the fusion of LayerNorm and GELU
// written out into LayerNormalization and Gelu; Canonicalize runs it
// before its own rewrites.
//
// An If whose condition is computed stays a node with Attrs *If: each
// branch is a Branch, its own node list in topological order, whose
// values are in Graph.Values like all others. A branch node reads values
// of the enclosing graph (defined before the If) as those very Values;
// values a branch defines are read only inside it, and the If's outputs
// are new values of the types and shapes both branches agree on. Nodes
// of a branch are numbered (Node.Index) within the branch.
package graph

import (
	"fmt"
	"strings"

	"ipu.local/libs/onnx"
)

// Value is a tensor of the graph: a graph input, a constant, or a node
// output.
type Value struct {
	Name  string
	DType onnx.DataType
	Shape []int64
	// Const holds the data of constants (initializers, Constant outputs,
	// folded values); nil for graph inputs and node outputs.
	Const *onnx.Tensor
	// Producer is the node computing the value; nil for graph inputs and
	// constants.
	Producer *Node
	// Index is the value's position in Graph.Values.
	Index int
}

// NumElements returns the value's element count.
func (v *Value) NumElements() int64 { return NumElements(v.Shape) }

// Node is one operator application.
type Node struct {
	Name string // the model's node name, or its first output's name when empty
	Op   string // ONNX op_type
	// Inputs are the data inputs in ONNX order; an omitted optional input
	// is nil. Constant operands are folded into Attrs (see the package doc).
	Inputs []*Value
	// Outputs in ONNX order, as many as the model lists (LayerNormalization
	// may list one to three); an omitted optional output is nil. Outputs[0]
	// is always present.
	Outputs []*Value
	// Attrs is the operator's parsed attributes: *Gemm, *Transpose, *Cast,
	// *Clip, *Softmax (Softmax, LogSoftmax), *LayerNorm, *Gelu, *Reduce
	// (ReduceMean, ReduceSum, ReduceMax, ReduceMin), *Flatten, *Reshape,
	// *Gather, *Concat, *Slice, *Split, *Squeeze, *Unsqueeze, *Expand,
	// *Tile, *LeakyRelu, *Elu, *Selu, *HardSigmoid, *If; nil for
	// operators without attributes (the elementwise arithmetic, Where,
	// Equal, Greater, GreaterOrEqual, Less, LessOrEqual, Not, And, Or,
	// Erf, Log, Sum, Mean, Softplus, HardSwish, Floor, Ceil, Round, Sign,
	// Sin, Cos, Identity). Shape,
	// ConstantOfShape and Range always fold, and never appear as nodes.
	Attrs any
	// Index is the node's position in Graph.Nodes (or in its Branch).
	Index int
	// If and Side tag a node PredicateIfs spliced out of an If (the If
	// node's name, and which side): the device runs the then side's nodes
	// only when the condition holds, the else side's only when it does
	// not, and each Select (a Where) is the If's output taken from the
	// side that ran. Side is Outer (If empty) for every other node.
	If   string
	Side Side
}

// Side is which part of a predicated If a node is.
type Side uint8

// Sides.
const (
	Outer  Side = iota // not part of a branched If
	Then               // the then branch's node
	Else               // the else branch's node
	Select             // Where(condition, then output, else output): the If's output
)

var sideNames = [...]string{Outer: "", Then: "then", Else: "else", Select: "select"}

// String is the side's name in a plan ("" for Outer).
func (s Side) String() string {
	if int(s) < len(sideNames) {
		return sideNames[s]
	}
	return fmt.Sprintf("side(%d)", int(s))
}

// ParseSide is the inverse of Side.String.
func ParseSide(s string) (Side, bool) {
	for i, n := range sideNames {
		if n == s {
			return Side(i), true
		}
	}
	return Outer, false
}

// Graph is a built model.
type Graph struct {
	Name  string
	Opset int64 // version of the default operator set
	// Inputs are the values fed at run time, in model order. Inputs that
	// an initializer backs (IR version 3 models list them) are constants
	// and not listed here.
	Inputs  []*Value
	Outputs []*Value
	Nodes   []*Node  // topological order
	Values  []*Value // inputs, then constants and node outputs in order of first use
	// Folded lists the nodes Build evaluated (their outputs became
	// constants) and the Ifs it replaced by a branch, in model order.
	Folded []Rewrite
	// Downcast names the DOUBLE tensors (inputs, constants, Cast
	// targets, outputs) computed as float under
	// BuildOptions.DowncastFP64, sorted.
	Downcast []string
	// Built lists the operators built from others (built.go), in model
	// order, and what each became.
	Built []Rewrite
	// Redeclared lists, in model order, the declared shapes that the
	// bound symbolic input dimensions contradict: an exporter traces the
	// outputs' and value_info's shapes at the sizes it ran, and declares
	// them fixed unless told they vary. The graph keeps the shapes the
	// bound inputs give (onnxruntime too runs such a model, with a
	// warning).
	Redeclared []Redeclared
}

// Redeclared is a value whose declared shape the bound input dimensions
// contradict.
type Redeclared struct {
	What     string  // "output" or "value_info"
	Name     string  // the value's name in the model
	Shape    []int64 // its shape, from the bound inputs
	Declared string  // the model's declared shape: [2,11,24]
}

// String returns a canonical multi-line dump of the graph, for tests and
// debugging.
func (g *Graph) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "graph %q opset %d\n", g.Name, g.Opset)
	for _, v := range g.Inputs {
		fmt.Fprintf(&b, "input %s\n", valueString(v))
	}
	for _, v := range g.Values {
		if v.Const != nil {
			fmt.Fprintf(&b, "const %s\n", valueString(v))
		}
	}
	writeNodes(&b, g.Nodes, "")
	for _, v := range g.Outputs {
		fmt.Fprintf(&b, "output %s\n", v.Name)
	}
	return b.String()
}

func valueString(v *Value) string {
	return fmt.Sprintf("%s %v%s", v.Name, v.DType, ShapeString(v.Shape))
}

// writeNodes dumps nodes one a line, an If's branches indented below it.
func writeNodes(b *strings.Builder, nodes []*Node, indent string) {
	for _, n := range nodes {
		fmt.Fprintf(b, "%snode %q %s", indent, n.Name, n.Op)
		if n.Attrs != nil {
			if _, isIf := n.Attrs.(*If); !isIf {
				fmt.Fprintf(b, " %s", strings.TrimPrefix(fmt.Sprintf("%+v", n.Attrs), "&"))
			}
		}
		b.WriteString(" (")
		for i, v := range n.Inputs {
			if i > 0 {
				b.WriteString(", ")
			}
			if v == nil {
				b.WriteString("-")
			} else {
				b.WriteString(v.Name)
			}
		}
		b.WriteString(") -> ")
		for i, v := range n.Outputs {
			if i > 0 {
				b.WriteString(", ")
			}
			if v == nil {
				b.WriteString("-")
			} else {
				b.WriteString(valueString(v))
			}
		}
		if n.Side != Outer {
			fmt.Fprintf(b, " [%s of %q]", n.Side, n.If)
		}
		b.WriteByte('\n')
		if a, ok := n.Attrs.(*If); ok {
			for _, br := range []struct {
				name string
				b    *Branch
			}{{"then", a.Then}, {"else", a.Else}} {
				if br.b == nil {
					continue
				}
				fmt.Fprintf(b, "%s  %s\n", indent, br.name)
				writeNodes(b, br.b.Nodes, indent+"    ")
				for _, v := range br.b.Outputs {
					fmt.Fprintf(b, "%s    output %s\n", indent, v.Name)
				}
			}
		}
	}
}
