package graph

import (
	"container/heap"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	"ipu.local/libs/onnx"
)

// BuildOptions changes what Build accepts.
type BuildOptions struct {
	// DowncastFP64 computes DOUBLE tensors in float: DOUBLE inputs,
	// initializers, Constant values, Cast targets and declared outputs
	// become FLOAT (constant data rounded to nearest), and Graph.Downcast
	// names them. Without it DOUBLE is refused.
	DowncastFP64 bool
	// Dims binds symbolic input dimensions by name (an exporter's
	// dynamic axes, "batch" = 2); InputShapes gives whole input shapes by
	// input name, which must agree with the model's fixed dimensions and
	// bind its symbolic ones. A symbolic dimension neither binds is an
	// error: the device program is compiled for static shapes.
	Dims        map[string]int64
	InputShapes map[string][]int64
}

// source says where a name of a graph comes from.
type source struct {
	input *onnx.ValueInfo
	init  *onnx.Tensor
	node  int // index in the graph's node list, or -1
}

// scope is one graph being built: the model's graph or an If branch,
// whose names shadow the enclosing scope's.
type scope struct {
	parent  *scope
	mg      *onnx.Graph
	sources map[string]source
	values  map[string]*Value
	// consts holds the constant tensors by name: initializers and the
	// outputs of Constant nodes built so far.
	consts map[string]*onnx.Tensor
	nodes  []*Node
}

// builder holds the state of one Build.
type builder struct {
	m     *onnx.Model
	opset int64
	opt   BuildOptions
	g     *Graph
	sc    *scope // the scope being built
	// reserved are the names of the model's graph; taken, the names of
	// the values made so far. A branch value whose name either holds is
	// renamed, so that value names stay unique.
	reserved, taken map[string]bool
	downcast        map[string]bool
	// bound says whether an input dimension the model leaves symbolic
	// or unknown took a value (BuildOptions.Dims or InputShapes): the
	// declared shapes of the other values may then be a trace's.
	bound bool
}

// Build checks m against the supported operators and types and returns
// its graph, with constants folded (see the package doc).
func Build(m *onnx.Model) (*Graph, error) { return BuildWith(m, BuildOptions{}) }

// BuildWith is Build with options.
func BuildWith(m *onnx.Model, opt BuildOptions) (*Graph, error) {
	if m == nil || m.Graph == nil {
		return nil, fmt.Errorf("model has no graph")
	}
	if err := m.CheckLoaded(); err != nil {
		return nil, err
	}
	opt.Dims = maps.Clone(opt.Dims) // bindings the inputs make go here
	b := &builder{
		m:        m,
		opset:    m.Opset(""),
		opt:      opt,
		g:        &Graph{Name: m.Graph.Name, Opset: m.Opset("")},
		reserved: map[string]bool{},
		taken:    map[string]bool{},
		downcast: map[string]bool{},
	}
	b.sc = newScope(nil, m.Graph)
	if err := b.collectSources(b.sc); err != nil {
		return nil, err
	}
	for name := range b.sc.sources {
		b.reserved[name] = true
	}
	if err := b.checkDims(opt.Dims); err != nil {
		return nil, err
	}
	if err := b.inputs(); err != nil {
		return nil, err
	}
	if err := b.buildNodes(b.sc); err != nil {
		return nil, err
	}
	b.g.Nodes = b.sc.nodes
	if err := b.outputs(); err != nil {
		return nil, err
	}
	if err := b.checkValueInfo(b.sc); err != nil {
		return nil, err
	}
	b.g.compact()
	for name := range b.downcast {
		b.g.Downcast = append(b.g.Downcast, name)
	}
	sort.Strings(b.g.Downcast)
	return b.g, nil
}

func newScope(parent *scope, mg *onnx.Graph) *scope {
	return &scope{parent: parent, mg: mg, sources: map[string]source{}, values: map[string]*Value{}, consts: map[string]*onnx.Tensor{}}
}

// buildNodes builds the nodes of the scope's graph in topological order.
func (b *builder) buildNodes(sc *scope) error {
	order, err := b.topoOrder(sc)
	if err != nil {
		return err
	}
	for _, k := range order {
		if err := b.node(&sc.mg.Nodes[k]); err != nil {
			return err
		}
	}
	for i, n := range sc.nodes {
		n.Index = i
	}
	return nil
}

// nodeName is a node's name for messages and for Node.Name.
func nodeName(n *onnx.Node) string {
	if n.Name != "" || len(n.Outputs) == 0 {
		return n.Name
	}
	return n.Outputs[0]
}

func (b *builder) collectSources(sc *scope) error {
	mg := sc.mg
	for i := range mg.Initializers {
		t := mg.Initializers[i]
		if _, dup := sc.sources[t.Name]; dup {
			return fmt.Errorf("initializer %q: name defined twice", t.Name)
		}
		if t.DType == onnx.Double && b.opt.DowncastFP64 {
			var err error
			if t, err = b.downcastTensor(t); err != nil {
				return fmt.Errorf("initializer %q: %w", t.Name, err)
			}
		}
		sc.sources[t.Name] = source{init: t, node: -1}
		sc.consts[t.Name] = t
	}
	for i := range mg.Inputs {
		in := &mg.Inputs[i]
		if s, ok := sc.sources[in.Name]; ok {
			if s.init != nil && s.input == nil {
				// IR version 3: initializers are listed as inputs too.
				s.input = in
				sc.sources[in.Name] = s
				continue
			}
			return fmt.Errorf("input %q: name defined twice", in.Name)
		}
		sc.sources[in.Name] = source{input: in, node: -1}
	}
	for i := range mg.Nodes {
		n := &mg.Nodes[i]
		for _, out := range n.Outputs {
			if out == "" {
				continue
			}
			if _, dup := sc.sources[out]; dup {
				return fmt.Errorf("node %q (%s) output %q: name defined twice", nodeName(n), printable(n.OpType), out)
			}
			sc.sources[out] = source{node: i}
		}
	}
	return nil
}

func (b *builder) inputs() error {
	for i := range b.m.Graph.Inputs {
		in := &b.m.Graph.Inputs[i]
		if b.sc.sources[in.Name].init != nil {
			continue
		}
		if in.NotTensor {
			return fmt.Errorf("input %q: not a tensor", in.Name)
		}
		d, err := b.valueType(in.Name, in.DType)
		if err != nil {
			return fmt.Errorf("input %q: %w", in.Name, err)
		}
		if !in.HasShape {
			return fmt.Errorf("input %q: no shape; graph inputs need static shapes", in.Name)
		}
		shape, err := b.inputShape(in)
		if err != nil {
			return err
		}
		if _, err := checkedElements(shape); err != nil {
			return fmt.Errorf("input %q: %w", in.Name, err)
		}
		v := b.newValue(in.Name, d, shape)
		b.g.Inputs = append(b.g.Inputs, v)
	}
	return nil
}

// InputShapesOf names the shapes of tensors given for m's graph inputs
// (those no initializer backs), in order: BuildOptions.InputShapes for a
// model with symbolic dimensions and its test data.
func InputShapesOf(m *onnx.Model, inputs []*onnx.Tensor) map[string][]int64 {
	inits := map[string]bool{}
	for _, t := range m.Graph.Initializers {
		inits[t.Name] = true
	}
	shapes := map[string][]int64{}
	k := 0
	for _, in := range m.Graph.Inputs {
		if inits[in.Name] || k >= len(inputs) {
			continue
		}
		shapes[in.Name] = inputs[k].Dims
		k++
	}
	return shapes
}

// inputShape is a graph input's static shape: the model's, with its
// symbolic dimensions bound by BuildOptions (the same name the same
// value in every input).
func (b *builder) inputShape(in *onnx.ValueInfo) ([]int64, error) {
	given, hasGiven := b.opt.InputShapes[in.Name]
	if hasGiven && len(given) != len(in.Shape) {
		return nil, fmt.Errorf("input %q: given shape %s has rank %d, the model's has %d", in.Name, ShapeString(given), len(given), len(in.Shape))
	}
	shape := make([]int64, len(in.Shape))
	for k, d := range in.Shape {
		v := d.Value
		if hasGiven {
			if given[k] < 0 || v >= 0 && given[k] != v {
				return nil, fmt.Errorf("input %q: given shape %s, the model's dimension %d is %s", in.Name, ShapeString(given), k, d)
			}
			v = given[k]
		}
		if d.Param != "" {
			bound, ok := b.opt.Dims[d.Param]
			switch {
			case ok && hasGiven && bound != v:
				return nil, fmt.Errorf("input %q: dimension %d (%q) is %d, bound to %d elsewhere", in.Name, k, d.Param, v, bound)
			case ok:
				v = bound
			case hasGiven:
				if b.opt.Dims == nil {
					b.opt.Dims = map[string]int64{}
				}
				b.opt.Dims[d.Param] = v
			}
		}
		switch {
		case v < 0 && d.Param != "":
			return nil, fmt.Errorf("input %q: dimension %d is symbolic (%q); the device program needs static shapes (ipu-plan --dim %s=N, or --input-shapes DIR)", in.Name, k, d.Param, d.Param)
		case v < 0:
			return nil, fmt.Errorf("input %q: dimension %d is unknown; the device program needs static shapes (ipu-plan --input-shapes DIR)", in.Name, k)
		}
		if d.Value < 0 {
			b.bound = true
		}
		shape[k] = v
	}
	return shape, nil
}

// checkDims refuses a binding (BuildOptions.Dims) no input uses: a
// misspelt name would otherwise leave the dimension it meant unbound,
// or change nothing.
func (b *builder) checkDims(dims map[string]int64) error {
	have := map[string]bool{}
	var names []string
	for _, in := range b.m.Graph.Inputs {
		for _, d := range in.Shape {
			if d.Param != "" && !have[d.Param] {
				have[d.Param] = true
				names = append(names, strconv.Quote(d.Param))
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(dims)) {
		if have[name] {
			continue
		}
		if len(names) == 0 {
			return fmt.Errorf("symbolic dimension %q is bound, but the model's inputs have no symbolic dimension", name)
		}
		return fmt.Errorf("symbolic dimension %q is bound, but no input of the model has it (theirs: %s)", name, strings.Join(names, ", "))
	}
	return nil
}

// newValue makes a value of the current scope. A branch value whose name
// the model's graph or an earlier value already holds is renamed.
func (b *builder) newValue(name string, d onnx.DataType, shape []int64) *Value {
	return b.newValueIn(b.sc, name, d, shape)
}

func (b *builder) newValueIn(sc *scope, name string, d onnx.DataType, shape []int64) *Value {
	unique := b.uniqueName(sc, name)
	v := &Value{Name: unique, DType: d, Shape: shape, Index: len(b.g.Values)}
	b.g.Values = append(b.g.Values, v)
	sc.values[name] = v
	return v
}

// uniqueName returns the name a new value of scope sc called name gets,
// and takes it.
func (b *builder) uniqueName(sc *scope, name string) string {
	unique := name
	if sc.parent != nil {
		for i := 2; b.reserved[unique] || b.taken[unique]; i++ {
			unique = fmt.Sprintf("%s_%d", name, i)
		}
	}
	b.taken[unique] = true
	return unique
}

// nodeHeap orders ready nodes by their index in the model, so that a
// model already in topological order keeps its order.
type nodeHeap []int

func (h nodeHeap) Len() int           { return len(h) }
func (h nodeHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h nodeHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *nodeHeap) Push(x any)        { *h = append(*h, x.(int)) }
func (h *nodeHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// definedOutside reports whether an enclosing scope defines name.
func definedOutside(sc *scope, name string) bool {
	for s := sc.parent; s != nil; s = s.parent {
		if _, ok := s.sources[name]; ok {
			return true
		}
	}
	return false
}

// topoOrder returns the scope's node indices in topological order, or an
// error naming an undefined input or a node on a cycle. The names a
// node's branches read from this scope count as its inputs.
func (b *builder) topoOrder(sc *scope) ([]int, error) {
	nodes := sc.mg.Nodes
	pending := make([]int, len(nodes))
	users := make([][]int, len(nodes))
	for i := range nodes {
		n := &nodes[i]
		deps := n.Inputs
		implicit := len(deps)
		if hasGraphAttr(n) {
			deps = append(append([]string(nil), deps...), n.OuterRefs()...)
		}
		for k, in := range deps {
			if in == "" {
				continue
			}
			s, ok := sc.sources[in]
			if !ok {
				if k >= implicit || definedOutside(sc, in) {
					continue // read from an enclosing scope, or reported by the branch
				}
				return nil, fmt.Errorf("node %q (%s) input %d: %q is not defined by any node, input or initializer", nodeName(n), printable(n.OpType), k, in)
			}
			if s.node >= 0 {
				if s.node == i {
					if k >= implicit {
						return nil, fmt.Errorf("node %q (%s): a branch reads %q, the node's own output", nodeName(n), printable(n.OpType), in)
					}
					return nil, fmt.Errorf("node %q (%s) input %d: %q is the node's own output", nodeName(n), printable(n.OpType), k, in)
				}
				pending[i]++
				users[s.node] = append(users[s.node], i)
			}
		}
	}
	h := &nodeHeap{}
	for i := range nodes {
		if pending[i] == 0 {
			*h = append(*h, i)
		}
	}
	heap.Init(h)
	order := make([]int, 0, len(nodes))
	for h.Len() > 0 {
		i := heap.Pop(h).(int)
		order = append(order, i)
		for _, u := range users[i] {
			pending[u]--
			if pending[u] == 0 {
				heap.Push(h, u)
			}
		}
	}
	if len(order) < len(nodes) {
		for i := range nodes {
			if pending[i] > 0 {
				return nil, fmt.Errorf("node %q (%s): on a cycle", nodeName(&nodes[i]), printable(nodes[i].OpType))
			}
		}
	}
	return order, nil
}

func hasGraphAttr(n *onnx.Node) bool {
	for i := range n.Attrs {
		if n.Attrs[i].G != nil || len(n.Attrs[i].Graphs) > 0 {
			return true
		}
	}
	return false
}

// constValue returns the value of a constant tensor of scope sc, creating
// it on first use.
func (b *builder) constValue(sc *scope, name string, t *onnx.Tensor) (*Value, error) {
	if v, ok := sc.values[name]; ok {
		return v, nil
	}
	if t.DType == onnx.Double {
		return nil, fmt.Errorf("constant %q: %s", name, doubleMsg)
	}
	if !runtimeType(t.DType) {
		return nil, fmt.Errorf("constant %q: element type %v is not supported as data", name, t.DType)
	}
	if _, err := checkedElements(t.Dims); err != nil {
		return nil, fmt.Errorf("constant %q: %w", name, err)
	}
	v := b.newValueIn(sc, name, t.DType, append([]int64{}, t.Dims...))
	v.Const = t
	return v, nil
}

// lookup resolves a data input name to its value, in the current scope or
// an enclosing one.
func (b *builder) lookup(name string) (*Value, error) {
	for s := b.sc; s != nil; s = s.parent {
		if v, ok := s.values[name]; ok {
			return v, nil
		}
		if t, ok := s.consts[name]; ok {
			return b.constValue(s, name, t)
		}
		if _, ok := s.sources[name]; ok {
			// Nodes run in topological order, so a missing value is an
			// input whose producer failed to define it (an omitted
			// optional output).
			return nil, fmt.Errorf("%q has no value", name)
		}
	}
	return nil, fmt.Errorf("%q is not defined by any node, input or initializer", name)
}

// constTensor returns the data of a constant name (an initializer, a
// Constant output or a folded value), or false when the name is not a
// constant.
func (b *builder) constTensor(name string) (*onnx.Tensor, bool) {
	for s := b.sc; s != nil; s = s.parent {
		if v, ok := s.values[name]; ok {
			return v.Const, v.Const != nil
		}
		if t, ok := s.consts[name]; ok {
			return t, true
		}
		if _, ok := s.sources[name]; ok {
			return nil, false
		}
	}
	return nil, false
}

func (b *builder) outputs() error {
	for _, out := range b.m.Graph.Outputs {
		v, err := b.lookup(out.Name)
		if err != nil {
			if _, ok := b.sc.sources[out.Name]; !ok {
				return fmt.Errorf("output %q: not defined by any node, input or initializer", out.Name)
			}
			return fmt.Errorf("output %q: %w", out.Name, err)
		}
		if err := b.checkDeclared("output", &out, v); err != nil {
			return err
		}
		b.g.Outputs = append(b.g.Outputs, v)
	}
	if len(b.g.Outputs) == 0 {
		return fmt.Errorf("graph has no outputs")
	}
	return nil
}

func (b *builder) checkValueInfo(sc *scope) error {
	for _, vi := range sc.mg.ValueInfo {
		if v, ok := sc.values[vi.Name]; ok {
			if err := b.checkDeclared("value_info", &vi, v); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkDeclared compares a value's inferred type and shape with what the
// model declares, where it declares them.
func (b *builder) checkDeclared(what string, vi *onnx.ValueInfo, v *Value) error {
	if vi.NotTensor {
		return fmt.Errorf("%s %q: declared as a non-tensor type", what, vi.Name)
	}
	declared := vi.DType
	if declared == onnx.Double && b.opt.DowncastFP64 {
		declared = onnx.Float
		b.downcast[vi.Name] = true
	}
	if declared != onnx.Undefined && declared != v.DType {
		return fmt.Errorf("%s %q: element type %v, model declares %v", what, vi.Name, v.DType, vi.DType)
	}
	if !vi.HasShape {
		return nil
	}
	mismatch := len(vi.Shape) != len(v.Shape)
	for i := 0; !mismatch && i < len(vi.Shape); i++ {
		mismatch = vi.Shape[i].Value >= 0 && vi.Shape[i].Value != v.Shape[i]
	}
	if !mismatch {
		return nil
	}
	dims := make([]string, len(vi.Shape))
	for i, d := range vi.Shape {
		dims[i] = d.String()
	}
	declaredShape := "[" + strings.Join(dims, ",") + "]"
	if b.bound && len(vi.Shape) == len(v.Shape) {
		b.g.Redeclared = append(b.g.Redeclared, Redeclared{What: what, Name: vi.Name, Shape: slices.Clone(v.Shape), Declared: declaredShape})
		return nil
	}
	return fmt.Errorf("%s %q: shape %s, model declares %s", what, vi.Name, ShapeString(v.Shape), declaredShape)
}

// compact drops the values nothing reads (constants only folding used,
// outputs of folded nodes) and numbers the rest, in order.
func (g *Graph) compact() {
	used := map[*Value]bool{}
	for _, v := range g.Inputs {
		used[v] = true
	}
	for _, v := range g.Outputs {
		used[v] = true
	}
	walkNodes(g.Nodes, func(n *Node) {
		for _, v := range n.Inputs {
			used[v] = true
		}
		for _, v := range n.Outputs {
			used[v] = true
		}
		if a, ok := n.Attrs.(*If); ok {
			for _, br := range []*Branch{a.Then, a.Else} {
				for _, v := range br.Outputs {
					used[v] = true
				}
			}
		}
	})
	kept := g.Values[:0]
	for _, v := range g.Values {
		if used[v] {
			v.Index = len(kept)
			kept = append(kept, v)
		}
	}
	for i := len(kept); i < len(g.Values); i++ {
		g.Values[i] = nil
	}
	g.Values = kept
}

// walkNodes calls fn on every node of nodes and of their branches, a
// node before its branches' nodes.
func walkNodes(nodes []*Node, fn func(n *Node)) {
	for _, n := range nodes {
		fn(n)
		if a, ok := n.Attrs.(*If); ok {
			for _, br := range []*Branch{a.Then, a.Else} {
				if br != nil {
					walkNodes(br.Nodes, fn)
				}
			}
		}
	}
}
