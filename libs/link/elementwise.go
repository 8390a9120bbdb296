package link

// Lowering of the nodes that are not matrix products: elementwise
// operators, casts, row operators (softmax, log-softmax, layer
// normalization, reductions) and data movement without data movement
// (Reshape, Flatten, order-preserving Transpose).
//
// # Layouts
//
// A value computed on the tiles has a layout: a view of its row-major
// elements as a matrix of rows of cols elements (any cols dividing the
// element count: the flat data is the same whatever the value's shape)
// and regions, each a rectangle of that view held by one tile from an
// address with a row stride. A node's output layout is
//
//   - the layout of its first input computed on the tiles with as many
//     elements (elementwise nodes and casts), when that suits the
//     output's consumers;
//   - rows of L elements for a row operator's input and output (and every
//     value that reaches it through elementwise nodes and reshapes with
//     as many elements): cost.RowDist over min(rows, tiles) tiles, the
//     row stride padded to even so that every row starts 8-byte aligned;
//   - otherwise the rows of its matrix view (the last axis) spread with
//     cost.RowDist when there are at least as many rows as tiles (and a
//     row is whole 32-bit words), else its elements in pieces of 4 over
//     min(tiles, elements/4) tiles.
//
// A row operator runs on whole rows: an input in another layout is
// brought to its rows first.
//
// # Operands
//
// Graph inputs are in their host page once, row-major (one block over
// the whole tensor); a tile fetches its part of an operand, broadcast to
// the output's shape, with one hin per stretch contiguous on both sides
// (a broadcast row is fetched once per output row, a broadcast column
// element once per run of it). Constants are in the tile images the same
// way. A one-element constant operand of a binary kernel is an immediate
// (codegen.Operand Const), a one-element graph input or node output a
// value in tile memory (Scalar). A node output in another layout moves
// in an exchange superstep (one transfer per stretch contiguous on both
// tiles, identical stretches multicast to contiguous tiles), or, where
// source and destination are the same tile, with a copy kernel (FP32
// multiplication by 1, exact but for NaN payloads). A node output that a
// binary operator broadcasts is not expanded: the output goes in rows of
// its last axis and each row gets its own kernel, whose operand is the
// row of that input it needs (an array) or its one element (a scalar),
// read in place when the tile holds it, else gathered to the tile.
//
// # Supersteps
//
// A node whose operands are all in place runs in the compute superstep
// of the previous such node; one that needs an exchange gets an exchange
// superstep and a new compute superstep. Graph outputs go back to the
// host in the result superstep, one hout per stretch.
//
// # Accumulate
//
// Each value carries the number of FP32 roundings on its longest chain
// from the graph inputs (0 for inputs and constants, exact operations add
// none, a sum of L terms adds L); a graph output's Accumulate is that
// number when it is 2 or more, else 0: one correctly rounded operation
// (or a copy) must match bit for bit.

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"ipu.local/formats/obj"
	"ipu.local/formats/plan"
	"ipu.local/libs/codegen"
	"ipu.local/libs/cost"
	"ipu.local/libs/graph"
	"ipu.local/libs/onnx"
	"ipu.local/libs/planner"
	"ipu.local/libs/sched"
)

// region is a rectangle [r0,r1) x [c0,c1) of a layout's view on one
// tile: element (r, c) at addr + size*((r-r0)*stride + c-c0).
type region struct {
	tile           int
	r0, r1, c0, c1 int
	addr           uint32
	stride         int // elements
}

// span is the elements from the region's first to its last, padding
// between rows included: what an elementwise kernel walks.
func (r region) span() int { return (r.r1-r.r0-1)*r.stride + r.c1 - r.c0 }

// layout is where a value's elements are: a view of its row-major
// elements as rows of cols elements, and the regions covering it, each
// element exactly once.
type layout struct {
	cols    int
	regions []region
}

// sameGeometry reports whether a and b hold the same elements the same
// way on the same tiles (addresses aside).
func sameGeometry(a, b *layout) bool {
	if a.cols != b.cols || len(a.regions) != len(b.regions) {
		return false
	}
	for i, r := range a.regions {
		s := b.regions[i]
		r.addr, s.addr = 0, 0
		if r != s {
			return false
		}
	}
	return true
}

// rowsOf reports whether every region of y is whole rows of cols
// elements starting 8-byte aligned at an even stride (or a single row):
// what codegen.Rows reads and writes.
func (y *layout) rowsOf(cols int) bool {
	if y.cols != cols {
		return false
	}
	for _, r := range y.regions {
		if r.c0 != 0 || r.c1 != cols || r.addr%8 != 0 || r.stride%2 != 0 && r.r1-r.r0 > 1 {
			return false
		}
	}
	return true
}

// key identifies y's geometry.
func (y *layout) key() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d", y.cols)
	for _, r := range y.regions {
		fmt.Fprintf(&b, ";%d,%d,%d,%d,%d,%d", r.tile, r.r0, r.r1, r.c0, r.c1, r.stride)
	}
	return b.String()
}

func (y *layout) tiles() []int {
	seen := map[int]bool{}
	var ts []int
	for _, r := range y.regions {
		if !seen[r.tile] {
			seen[r.tile] = true
			ts = append(ts, r.tile)
		}
	}
	sort.Ints(ts)
	return ts
}

// seg is a stretch of elements contiguous both in the row-major order
// and on its tile.
type seg struct {
	tile int
	flat int // first element
	n    int
	addr uint32
}

// segs returns y's stretches in row-major order.
func (y *layout) segs(size int) []seg {
	var out []seg
	for _, r := range y.regions {
		w := r.c1 - r.c0
		if r.r1-r.r0 == 1 || w == y.cols && r.stride == w {
			out = append(out, seg{r.tile, r.r0*y.cols + r.c0, (r.r1 - r.r0) * w, r.addr})
			continue
		}
		for row := r.r0; row < r.r1; row++ {
			out = append(out, seg{r.tile, row*y.cols + r.c0, w, r.addr + uint32(size*(row-r.r0)*r.stride)})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].flat < out[j].flat })
	return out
}

// placed is a value computed on the tiles.
type placed struct {
	lay  *layout
	size int // bytes per element
	acc  int // FP32 roundings behind each element
}

// nodeState is the lowering state of the non-product nodes.
type nodeState struct {
	vals   map[*graph.Value]*placed
	alias  map[*graph.Value]*graph.Value // value -> graph input or constant with the same row-major data
	rowsL  map[*graph.Value]int          // row length a row operator wants a value in
	align  map[*graph.Value]int          // row alignment a product operand wants a value's pieces in
	inOff  map[*graph.Value]uint32       // page offset of a graph input's whole-tensor block
	cached map[string]*layout            // fetched or expanded sources
	cur    *superstep                    // the compute superstep of the last node
}

// nodeIO collects what a node needs before its kernels: transfers of
// one word stream to one tile each (merged into multicasts later) and
// local copies.
type nodeIO struct {
	xfers  []sched.Transfer
	copies map[int][]*kernel
}

func (l *linker) nodes() *nodeState {
	if l.ew == nil {
		l.ew = &nodeState{vals: map[*graph.Value]*placed{}, alias: map[*graph.Value]*graph.Value{},
			rowsL: map[*graph.Value]int{}, align: map[*graph.Value]int{}, inOff: map[*graph.Value]uint32{}, cached: map[string]*layout{}}
		l.markRows()
	}
	return l.ew
}

// recordResult makes a value computed by other code (a matrix product)
// available to the nodes: its regions in a view of cols columns, size
// bytes per element, behind each element accumulate FP32 roundings.
func (l *linker) recordResult(v *graph.Value, cols, size, accumulate int, regions []region) {
	l.nodes().vals[v] = &placed{lay: &layout{cols: cols, regions: regions}, size: size, acc: accumulate}
}

// resultOf returns where a node left a value: its view's row length,
// its regions and its element size (ok false: not computed on the
// tiles, or not yet).
func (l *linker) resultOf(v *graph.Value) (cols int, regions []region, size int, ok bool) {
	p := l.nodes().vals[v]
	if p == nil {
		return 0, nil, 0, false
	}
	return p.lay.cols, p.lay.regions, p.size, true
}

func elems(v *graph.Value) int { return int(graph.NumElements(v.Shape)) }

func prod(s []int64) int { return int(graph.NumElements(s)) }

// softmaxLen returns the row length a Softmax or LogSoftmax works along.
func softmaxLen(n *graph.Node) (int, bool) {
	a, ok := n.Attrs.(*graph.Softmax)
	if !ok {
		return 0, false
	}
	s := n.Inputs[0].Shape
	if a.Coerce2D {
		return prod(s[a.Axis:]), true
	}
	if a.Axis == len(s)-1 {
		return int(s[a.Axis]), true
	}
	return 0, false
}

// reduceAxes classifies a reduction: the reduced axes are the block
// [a, b] of the input's axes; outer, count and inner are the products of
// the axes before, in and after it.
func reduceAxes(n *graph.Node) (outer, count, inner int, ok bool) {
	r := n.Attrs.(*graph.Reduce)
	s := n.Inputs[0].Shape
	if len(r.Axes) == 0 {
		return 0, 0, 0, false
	}
	a, b := r.Axes[0], r.Axes[len(r.Axes)-1]
	if b-a+1 != len(r.Axes) {
		return 0, 0, 0, false
	}
	return prod(s[:a]), prod(s[a : b+1]), prod(s[b+1:]), true
}

// markRows records the row length each row operator wants its input
// and output in, and carries it back through the elementwise nodes,
// casts and reshapes that feed them with as many elements.
func (l *linker) markRows() {
	mark := func(v *graph.Value, n int) {
		if v != nil && l.ew.rowsL[v] == 0 {
			l.ew.rowsL[v] = n
		}
	}
	for _, n := range l.g.Nodes {
		switch n.Op {
		case "Softmax", "LogSoftmax":
			if L, ok := softmaxLen(n); ok {
				mark(n.Inputs[0], L)
				mark(n.Outputs[0], L)
			}
		case "LayerNormalization":
			a := n.Attrs.(*graph.LayerNorm)
			L := prod(n.Inputs[0].Shape[a.Axis:])
			mark(n.Inputs[0], L)
			mark(n.Outputs[0], L)
		case "ReduceMean", "ReduceSum":
			if _, count, inner, ok := reduceAxes(n); ok {
				mark(n.Inputs[0], count*inner)
			}
		}
	}
	for i := len(l.g.Nodes) - 1; i >= 0; i-- {
		n := l.g.Nodes[i]
		L := l.ew.rowsL[n.Outputs[0]]
		if L == 0 || !elementwise(n.Op) {
			continue
		}
		for _, v := range n.Inputs {
			if v != nil && v.Producer != nil && elems(v) == elems(n.Outputs[0]) {
				mark(v, L)
			}
		}
	}
	// A product operand computed by a node is packed from its pieces
	// (fed.go), whose rows must start on the operand's group boundaries
	// when the rows are the group axis; the elementwise nodes before it
	// share its layout, so they get the alignment too.
	for _, n := range l.g.Nodes {
		pr, err := cost.ProductOf(n)
		if err != nil {
			continue
		}
		for k, c := range []cost.Chain{pr.A, pr.B} {
			if c.Root.Producer == nil {
				continue
			}
			if a := planner.SourceAlign(k == 0, c.Transpose); a > l.ew.align[c.Root] {
				l.ew.align[c.Root] = a
			}
		}
	}
	for i := len(l.g.Nodes) - 1; i >= 0; i-- {
		n := l.g.Nodes[i]
		a := l.ew.align[n.Outputs[0]]
		keeps := elementwise(n.Op) || n.Op == "Softmax" || n.Op == "LogSoftmax" || n.Op == "LayerNormalization"
		if a <= 1 || !keeps {
			continue
		}
		for _, v := range n.Inputs {
			if v != nil && v.Producer != nil && elems(v) == elems(n.Outputs[0]) && a > l.ew.align[v] {
				l.ew.align[v] = a
			}
		}
	}
}

func elementwise(op string) bool {
	switch op {
	case "Neg", "Abs", "Relu", "Tanh", "Sigmoid", "Exp", "Sqrt", "Gelu", "Clip",
		"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Cast", "Reshape", "Flatten", "Transpose":
		return true
	}
	return false
}

// lowerNode lowers one node that is not a matrix product.
func (l *linker) lowerNode(_ plan.Step, n *graph.Node) error {
	l.nodes()
	for _, v := range n.Inputs {
		if v == nil {
			continue
		}
		if err := l.available(n, v); err != nil {
			return err
		}
	}
	for _, v := range n.Outputs {
		if v != nil && elems(v) == 0 {
			return notLowered(n, "output %q has no elements", v.Name)
		}
	}
	switch n.Op {
	case "Reshape", "Flatten":
		return l.lowerAlias(n)
	case "Transpose":
		if !orderKept(n.Inputs[0].Shape, n.Attrs.(*graph.Transpose).Perm) {
			return notLowered(n, "a transpose that moves elements (the linker lowers transposes folded into a product, and those that only move axes of size 1)")
		}
		return l.lowerAlias(n)
	case "Cast":
		return l.lowerCast(n)
	case "Neg", "Abs", "Relu", "Tanh", "Sigmoid", "Exp", "Sqrt", "Gelu", "Clip":
		return l.lowerUnary(n)
	case "Add", "Sub", "Mul", "Div", "Pow", "Max", "Min":
		return l.lowerBinary(n)
	case "Softmax", "LogSoftmax", "LayerNormalization":
		return l.lowerRows(n)
	case "ReduceMean", "ReduceSum":
		return l.lowerReduce(n)
	}
	return notLowered(n, "no lowering for this operator outside matrix products")
}

// available checks that an input is a graph input, a constant, or a
// value computed on the tiles.
func (l *linker) available(n *graph.Node, v *graph.Value) error {
	if v.Producer == nil || l.ew.vals[v] != nil || l.ew.alias[v] != nil {
		return nil
	}
	return notLowered(n, "input %q comes from node %q (%s), whose result the linker does not place on the tiles", v.Name, v.Producer.Name, v.Producer.Op)
}

// orderKept reports whether a transpose keeps the row-major order of
// the elements: the axes of size above 1 stay in order.
func orderKept(shape []int64, perm []int) bool {
	last := -1
	for _, ax := range perm {
		if shape[ax] == 1 {
			continue
		}
		if ax < last {
			return false
		}
		last = ax
	}
	return true
}

// source returns the graph input or constant whose row-major data v
// is, or nil when v is computed on the tiles.
func (l *linker) source(v *graph.Value) *graph.Value {
	if v.Producer == nil {
		return v
	}
	return l.ew.alias[v]
}

func (l *linker) accOf(v *graph.Value) int {
	if p := l.ew.vals[v]; p != nil {
		return p.acc
	}
	return 0
}

func (l *linker) lowerAlias(n *graph.Node) error {
	in, out := n.Inputs[0], n.Outputs[0]
	if p := l.ew.vals[in]; p != nil {
		l.ew.vals[out] = p
		return nil
	}
	l.ew.alias[out] = l.source(in)
	return nil
}

// defaultLayout is the layout a value gets when no input gives one (no
// addresses yet).
func (l *linker) defaultLayout(v *graph.Value) *layout {
	E := elems(v)
	if L := l.ew.rowsL[v]; L > 0 && E%L == 0 {
		return l.rowsLayout(E, L, max(1, l.ew.align[v]))
	}
	cols := 1
	if len(v.Shape) > 0 {
		cols = int(v.Shape[len(v.Shape)-1])
	}
	// Rows when there are enough, and they are whole 32-bit words (host
	// transfers move words).
	if rows := E / cols; rows >= l.pl.Tiles && cols*v.DType.ElemSize()%4 == 0 {
		d := cost.AlignedRowDist(rows, cols, 4, 0, min(rows, l.pl.Tiles), max(1, l.ew.align[v]))
		y := &layout{cols: cols}
		for _, pc := range d.Pieces {
			y.regions = append(y.regions, region{tile: pc.Tile, r0: pc.R0, r1: pc.R1, c0: 0, c1: cols, stride: cols})
		}
		return y
	}
	n := max(1, min(l.pl.Tiles, cost.Units(E, 4)))
	y := &layout{cols: E}
	for b := 0; b < n; b++ {
		c0, c1 := cost.AlignedBlock(E, n, b, 4)
		if c0 < c1 {
			y.regions = append(y.regions, region{tile: b, r0: 0, r1: 1, c0: c0, c1: c1, stride: c1 - c0})
		}
	}
	return y
}

// rowsLayout spreads the rows of L elements of E elements over the
// tiles, each row 8-byte aligned.
func (l *linker) rowsLayout(E, L, align int) *layout {
	rows := E / L
	d := cost.AlignedRowDist(rows, L, 4, 0, min(rows, l.pl.Tiles), align)
	y := &layout{cols: L}
	for _, pc := range d.Pieces {
		y.regions = append(y.regions, region{tile: pc.Tile, r0: pc.R0, r1: pc.R1, c0: 0, c1: L, stride: pad(L, 2)})
	}
	return y
}

// outLayout chooses an elementwise node's output layout: its first
// input computed on the tiles with as many elements, when it suits the
// output's row operator, else the default.
func (l *linker) outLayout(n *graph.Node) *layout {
	out := n.Outputs[0]
	L := l.ew.rowsL[out]
	for _, v := range n.Inputs {
		p := l.ew.vals[v]
		if v == nil || p == nil || elems(v) != elems(out) {
			continue
		}
		if L == 0 || p.lay.rowsOf(L) {
			return p.lay
		}
	}
	return l.defaultLayout(out)
}

// place allocates a buffer holding the regions of geometry g, size bytes
// per element, on every tile of g at one address, and returns g with
// the regions' addresses.
func (l *linker) place(n *graph.Node, g *layout, name string, size int) (*layout, error) {
	per := map[int]uint32{}
	out := &layout{cols: g.cols, regions: make([]region, len(g.regions))}
	offs := make([]uint32, len(g.regions))
	var most uint32
	for i, r := range g.regions {
		b := (uint32(size*r.span()) + 7) &^ 7
		offs[i] = per[r.tile]
		per[r.tile] += b
		most = max(most, per[r.tile])
	}
	ts := g.tiles()
	base, err := l.allocate(ts, name, most, 8, true)
	if err != nil {
		base, err = l.allocate(ts, name, most, 8, false)
		if err != nil {
			return nil, l.memErr(n, err)
		}
	}
	for i, r := range g.regions {
		r.addr = base + offs[i]
		out.regions[i] = r
	}
	return out, nil
}

// inputBlock returns the page offset of a graph input's whole-tensor
// row-major block, adding the block on first use.
func (l *linker) inputBlock(v *graph.Value) (uint32, error) {
	if off, ok := l.ew.inOff[v]; ok {
		return off, nil
	}
	in := &l.inputs[l.inIndex[v]]
	rows, cols, err := in.Matrix()
	if err != nil {
		return 0, fmt.Errorf("input %q: %w", v.Name, err)
	}
	whole := obj.Block{R1: uint32(rows), C1: uint32(cols), Rows: uint32(rows), Cols: uint32(cols), Order: obj.RowMajor}
	for _, b := range in.Blocks {
		if off := b.Offset; b == (obj.Block{Offset: off, R1: whole.R1, C1: whole.C1, Rows: whole.Rows, Cols: whole.Cols}) {
			l.ew.inOff[v] = off // another lowering's copy of the whole tensor
			return off, nil
		}
	}
	off, err := l.pageAlloc(in.Page, uint32(rows*cols)*uint32(v.DType.ElemSize()))
	if err != nil {
		return 0, err
	}
	in.Blocks = append(in.Blocks, obj.Block{Offset: off, R1: uint32(rows), C1: uint32(cols), Rows: uint32(rows), Cols: uint32(cols), Order: obj.RowMajor})
	l.ew.inOff[v] = off
	return off, nil
}

// fill places the source src (graph input or constant) of the operand v,
// broadcast to shape out, into the regions of y (addresses set): host
// transfers into the fetch superstep, or data in the tile images.
func (l *linker) fill(n *graph.Node, src, v *graph.Value, out []int64, y *layout) error {
	size := v.DType.ElemSize()
	var idx []int64
	if elems(v) != prod(out) {
		idx = graph.BroadcastIndex(v.Shape, out)
	}
	type run struct {
		tile     int
		addr     uint32
		from, nn int
	}
	var runs []run
	for _, s := range y.segs(size) {
		if idx == nil {
			runs = append(runs, run{s.tile, s.addr, s.flat, s.n})
			continue
		}
		for k := 0; k < s.n; {
			j := k + 1
			for j < s.n && idx[s.flat+j] == idx[s.flat+j-1]+1 {
				j++
			}
			runs = append(runs, run{s.tile, s.addr + uint32(size*k), int(idx[s.flat+k]), j - k})
			k = j
		}
	}
	if src.Const != nil {
		raw := src.Const.Raw
		if len(raw) != elems(src)*size {
			return fmt.Errorf("node %q: constant %q: %d bytes of data, want %d", n.Name, src.Name, len(raw), elems(src)*size)
		}
		for _, r := range runs {
			l.setDataAt(r.tile, r.addr, raw[r.from*size:(r.from+r.nn)*size])
		}
		return nil
	}
	off, err := l.inputBlock(src)
	if err != nil {
		return err
	}
	page := l.inputs[l.inIndex[src]].Page
	for _, r := range runs {
		h := hostOp{in: true, page: page, off: off + uint32(r.from*size), addr: r.addr, bytes: uint32(r.nn * size)}
		if h.off%4 != 0 || h.addr%4 != 0 || h.bytes%4 != 0 {
			return notLowered(n, "input %q: a stretch of %d %s elements at element %d is not a whole number of aligned 32-bit words (host transfers move words)", v.Name, r.nn, v.DType, r.from)
		}
		l.steps[0].host[r.tile] = append(l.steps[0].host[r.tile], h)
	}
	return nil
}

// relayout brings the placed value p into the regions of y (addresses
// set): transfers between tiles, copy kernels on one tile.
func (l *linker) relayout(n *graph.Node, v *graph.Value, p *placed, y *layout, io *nodeIO) error {
	size := p.size
	src, dst := p.lay.segs(size), y.segs(size)
	for i, j := 0, 0; i < len(src) && j < len(dst); {
		s, d := src[i], dst[j]
		a, b := max(s.flat, d.flat), min(s.flat+s.n, d.flat+d.n)
		if a < b {
			sa, da, nn := s.addr+uint32(size*(a-s.flat)), d.addr+uint32(size*(a-d.flat)), b-a
			if s.tile != d.tile {
				if sa%4 != 0 || da%4 != 0 || (nn*size)%4 != 0 {
					return notLowered(n, "input %q: moving %d elements from element %d between tiles %d and %d is not a whole number of aligned 32-bit words", v.Name, nn, a, s.tile, d.tile)
				}
				io.xfers = append(io.xfers, sched.Transfer{Src: s.tile, Dst: d.tile, DstN: 1, Words: nn * size / 4, SrcAddr: sa, DstAddr: da})
			} else {
				if size != 4 || sa%8 != 0 || da%8 != 0 {
					return notLowered(n, "input %q: a copy of %d elements from element %d on tile %d is not of 8-byte aligned FP32 (the copy kernel's)", v.Name, nn, a, s.tile)
				}
				io.copies[s.tile] = append(io.copies[s.tile], &kernel{what: n.Name + ".copy", bin: &codegen.Binary{
					Op: codegen.Mul, N: nn, A: codegen.Operand{Addr: sa}, B: codegen.Operand{Const: true, Value: 1}, Y: da, Workers: codegen.Slots}})
			}
		}
		if s.flat+s.n <= d.flat+d.n {
			i++
		} else {
			j++
		}
	}
	return nil
}

// array returns v, broadcast to shape out, in the geometry of y: the
// address of each region's elements.
func (l *linker) array(n *graph.Node, v *graph.Value, out []int64, y *layout, io *nodeIO) ([]uint32, error) {
	size := v.DType.ElemSize()
	addrs := func(z *layout) []uint32 {
		a := make([]uint32, len(z.regions))
		for i, r := range z.regions {
			a[i] = r.addr
		}
		return a
	}
	if p := l.ew.vals[v]; p != nil {
		if elems(v) != prod(out) {
			return nil, notLowered(n, "input %q of node %q is broadcast (the linker broadcasts node outputs into binary operators only)", v.Name, v.Producer.Name)
		}
		if sameGeometry(p.lay, y) {
			return addrs(p.lay), nil
		}
		z, err := l.place(n, y, n.Name+"."+v.Name, size)
		if err != nil {
			return nil, err
		}
		if err := l.relayout(n, v, p, z, io); err != nil {
			return nil, err
		}
		return addrs(z), nil
	}
	src := l.source(v)
	key := fmt.Sprintf("%d:%s:%s", v.Index, graph.ShapeString(out), y.key())
	if z := l.ew.cached[key]; z != nil {
		return addrs(z), nil
	}
	z, err := l.place(n, y, n.Name+"."+v.Name, size)
	if err != nil {
		return nil, err
	}
	if err := l.fill(n, src, v, out, z); err != nil {
		return nil, err
	}
	l.ew.cached[key] = z
	return addrs(z), nil
}

// operand returns a binary kernel's operand for each region of y: v
// broadcast to out, as an array, or as a scalar when scalar is set and
// v has one element.
func (l *linker) operand(n *graph.Node, v *graph.Value, out []int64, y *layout, scalar bool, io *nodeIO) ([]codegen.Operand, error) {
	ops := make([]codegen.Operand, len(y.regions))
	if !scalar || elems(v) != 1 {
		if v.DType != onnx.Float {
			return nil, notLowered(n, "input %q of type %s (the kernels compute in float)", v.Name, v.DType)
		}
		a, err := l.array(n, v, out, y, io)
		if err != nil {
			return nil, err
		}
		for i := range ops {
			ops[i] = codegen.Operand{Addr: a[i]}
		}
		return ops, nil
	}
	if src := l.source(v); src != nil && src.Const != nil {
		f, err := graph.DecodeFloats(src.Const)
		if err != nil || len(f) != 1 {
			return nil, fmt.Errorf("node %q: constant %q: %v", n.Name, src.Name, err)
		}
		x := float32(f[0])
		if float64(x) != f[0] && !math.IsNaN(f[0]) {
			return nil, notLowered(n, "constant %q = %g is not a float", src.Name, f[0])
		}
		for i := range ops {
			ops[i] = codegen.Operand{Const: true, Value: x}
		}
		return ops, nil
	}
	if v.DType != onnx.Float {
		return nil, notLowered(n, "input %q of type %s (the kernels compute in float)", v.Name, v.DType)
	}
	one := &layout{cols: 1}
	for _, t := range y.tiles() {
		one.regions = append(one.regions, region{tile: t, r0: 0, r1: 1, c0: 0, c1: 1, stride: 1})
	}
	at := map[int]uint32{}
	if p := l.ew.vals[v]; p != nil {
		// A one-element node output: where it is, else received there.
		owner := p.lay.regions[0]
		recv := &layout{cols: 1}
		for _, r := range one.regions {
			if r.tile != owner.tile {
				recv.regions = append(recv.regions, r)
			}
		}
		if len(recv.regions) > 0 {
			z, err := l.place(n, recv, n.Name+"."+v.Name, 4)
			if err != nil {
				return nil, err
			}
			for _, r := range z.regions {
				io.xfers = append(io.xfers, sched.Transfer{Src: owner.tile, Dst: r.tile, DstN: 1, Words: 1, SrcAddr: owner.addr, DstAddr: r.addr})
				at[r.tile] = r.addr
			}
		}
		at[owner.tile] = owner.addr
	} else {
		a, err := l.array(n, v, []int64{1}, one, io)
		if err != nil {
			return nil, err
		}
		for i, r := range one.regions {
			at[r.tile] = a[i]
		}
	}
	for i, r := range y.regions {
		ops[i] = codegen.Operand{Addr: at[r.tile], Scalar: true}
	}
	return ops, nil
}

// step returns the compute superstep a node's kernels go to, after an
// exchange superstep for its transfers when it has any, with its local
// copies added.
func (l *linker) step(n *graph.Node, io *nodeIO) *superstep {
	if len(io.xfers) > 0 {
		x := l.addStep(obj.Exchange, "exchange:"+n.Name)
		x.xfers = multicast(io.xfers)
		l.ew.cur = l.addStep(obj.Compute, "compute:"+n.Name)
	} else if l.ew.cur == nil || l.steps[len(l.steps)-1] != l.ew.cur {
		l.ew.cur = l.addStep(obj.Compute, "compute:"+n.Name)
	}
	ts := make([]int, 0, len(io.copies))
	for t := range io.copies {
		ts = append(ts, t)
	}
	sort.Ints(ts)
	for _, t := range ts {
		l.ew.cur.work[t] = append(l.ew.cur.work[t], io.copies[t]...)
	}
	return l.ew.cur
}

// multicast merges transfers of the same words to the same address into
// one per run of contiguous destination tiles.
func multicast(xs []sched.Transfer) []sched.Transfer {
	type key struct {
		src            int
		srcAddr, dAddr uint32
		words          int
	}
	dests := map[key][]int{}
	var keys []key
	for _, x := range xs {
		k := key{x.Src, x.SrcAddr, x.DstAddr, x.Words}
		if _, ok := dests[k]; !ok {
			keys = append(keys, k)
		}
		dests[k] = append(dests[k], x.Dst)
	}
	var out []sched.Transfer
	for _, k := range keys {
		ts := dests[k]
		sort.Ints(ts)
		for a := 0; a < len(ts); {
			b := a + 1
			for b < len(ts) && ts[b] == ts[b-1]+1 && !(k.src > ts[a] && k.src < ts[b]) {
				b++
			}
			out = append(out, sched.Transfer{Src: k.src, Dst: ts[a], DstN: b - a, Words: k.words, SrcAddr: k.srcAddr, DstAddr: k.dAddr})
			a = b
		}
	}
	return out
}

func newIO() *nodeIO { return &nodeIO{copies: map[int][]*kernel{}} }

// floatNode checks that a node computes in float.
func floatNode(n *graph.Node) error {
	for _, v := range n.Outputs {
		if v != nil && v.DType != onnx.Float {
			return notLowered(n, "output %q of type %s (the kernels compute in float)", v.Name, v.DType)
		}
	}
	return nil
}

// result records a node's output and its roundings.
func (l *linker) result(v *graph.Value, y *layout, size, acc int) {
	l.ew.vals[v] = &placed{lay: y, size: size, acc: acc}
}

var unaryOps = map[string]codegen.UnaryOp{
	"Neg": codegen.Neg, "Abs": codegen.Abs, "Relu": codegen.Relu, "Tanh": codegen.Tanh,
	"Sigmoid": codegen.Sigmoid, "Exp": codegen.Exp, "Sqrt": codegen.Sqrt, "Clip": codegen.Clip,
}

// unaryRoundings is the FP32 roundings of each unary kernel (codegen's
// arithmetic): exact operations none. A transcendental function (exp,
// tanh, erf, pow) counts one more: IEEE 754 does not require it to be
// correctly rounded, and the libraries that compute reference outputs
// are not (their tanh and exp err by up to an ulp), so the device's
// correctly rounded result and a reference may differ in the last bit.
// Sqrt and the arithmetic operations are correctly rounded everywhere.
var unaryRoundings = map[codegen.UnaryOp]int{
	codegen.Neg: 0, codegen.Abs: 0, codegen.Relu: 0, codegen.Clip: 0,
	codegen.Exp: 2, codegen.Sqrt: 1, codegen.Tanh: 2, codegen.Sigmoid: 4,
	codegen.GeluErf: 6, codegen.GeluTanh: 10,
}

func (l *linker) lowerUnary(n *graph.Node) error {
	if err := floatNode(n); err != nil {
		return err
	}
	x, out := n.Inputs[0], n.Outputs[0]
	p := codegen.Unary{Workers: codegen.Slots}
	switch n.Op {
	case "Gelu":
		p.Op = codegen.GeluErf
		if n.Attrs.(*graph.Gelu).Tanh {
			p.Op = codegen.GeluTanh
		}
	case "Clip":
		a := n.Attrs.(*graph.Clip)
		p.Op, p.Min, p.Max = codegen.Clip, float32(a.Min), float32(a.Max)
		if float64(p.Min) != a.Min || float64(p.Max) != a.Max {
			return notLowered(n, "bounds %g, %g are not floats", a.Min, a.Max)
		}
	default:
		p.Op = unaryOps[n.Op]
	}
	g := l.outLayout(n)
	io := newIO()
	xs, err := l.array(n, x, out.Shape, g, io)
	if err != nil {
		return err
	}
	s := l.step(n, io)
	y, err := l.place(n, g, n.Name+".out", 4)
	if err != nil {
		return err
	}
	for i, r := range y.regions {
		k := p
		k.N, k.X, k.Y = r.span(), xs[i], r.addr
		s.work[r.tile] = append(s.work[r.tile], &kernel{what: n.Name, un: &k})
	}
	l.result(out, y, 4, l.accOf(x)+unaryRoundings[p.Op])
	return nil
}

var binaryOps = map[string]codegen.BinaryOp{
	"Add": codegen.Add, "Sub": codegen.Sub, "Mul": codegen.Mul, "Div": codegen.Div,
	"Pow": codegen.Pow, "Max": codegen.Max, "Min": codegen.Min,
}

// lowerBinary lowers the binary operators and the variadic Max and Min
// (a chain of binary kernels, in place after the first). When an input
// computed by a node is broadcast, the output is in rows of its last
// axis and every row gets its own kernels, that input's row or element
// for the row as the operand (broadcastRows).
func (l *linker) lowerBinary(n *graph.Node) error {
	if err := floatNode(n); err != nil {
		return err
	}
	out := n.Outputs[0]
	ins := n.Inputs
	if len(ins) == 1 {
		return l.lowerAlias(n)
	}
	op := binaryOps[n.Op]
	rounds := 1
	switch op {
	case codegen.Max, codegen.Min:
		rounds = 0
	case codegen.Pow:
		rounds = 2 // transcendental: see unaryRoundings
	}
	if n.Op == "Pow" && ins[1].DType != onnx.Float {
		src := l.source(ins[1])
		if src == nil || src.Const == nil || elems(ins[1]) != 1 {
			return notLowered(n, "exponent %q of type %s that is not a one-element constant", ins[1].Name, ins[1].DType)
		}
	}
	E := elems(out)
	perRow := false
	for _, v := range ins {
		if l.ew.vals[v] != nil && elems(v) != E && elems(v) != 1 {
			perRow = true
		}
	}
	g := l.outLayout(n)
	if perRow {
		g = l.lastAxisLayout(n)
		for _, t := range g.tiles() {
			rows := 0
			for _, r := range g.regions {
				if r.tile == t {
					rows += r.r1 - r.r0
				}
			}
			if k := rows * (len(ins) - 1); k > maxRowKernels {
				return notLowered(n, "broadcasting a node's output takes a kernel per row: %d on tile %d (at most %d)", k, t, maxRowKernels)
			}
		}
	}
	io := newIO()
	// Operands by input, region and row (one row in region mode). The
	// first kernel takes the first two inputs, one of them a scalar
	// when it has one element and the other does not.
	one := func(v *graph.Value) bool { return elems(v) == 1 }
	bcast := func(v *graph.Value) bool { return perRow && l.ew.vals[v] != nil && elems(v) != E && !one(v) }
	// A broadcast node output gives each row a scalar when it has one
	// element per row.
	rowScalar := func(v *graph.Value) bool {
		return bcast(v) && g.cols > 1 && (len(v.Shape) == 0 || int(v.Shape[len(v.Shape)-1]) != g.cols)
	}
	if rowScalar(ins[0]) && (rowScalar(ins[1]) || one(ins[1]) && l.ew.vals[ins[1]] != nil) ||
		rowScalar(ins[1]) && one(ins[0]) && l.ew.vals[ins[0]] != nil {
		return notLowered(n, "both operands of its first kernel are single values in each row")
	}
	aScalar := one(ins[0]) && !one(ins[1]) && !rowScalar(ins[1])
	ops := make([][][]codegen.Operand, len(ins))
	for k, v := range ins {
		if bcast(v) {
			o, err := l.broadcastRows(n, v, out.Shape, g, io)
			if err != nil {
				return err
			}
			ops[k] = o
			continue
		}
		scalar := k >= 2 || k == 1 && !aScalar && !rowScalar(ins[0]) || k == 0 && aScalar
		o, err := l.operand(n, v, out.Shape, g, scalar, io)
		if err != nil {
			return err
		}
		ops[k] = make([][]codegen.Operand, len(g.regions))
		for i, r := range g.regions {
			rows := 1
			if perRow {
				rows = r.r1 - r.r0
			}
			ops[k][i] = make([]codegen.Operand, rows)
			for row := range rows {
				x := o[i]
				if !x.Scalar && !x.Const {
					x.Addr += uint32(4 * row * r.stride)
				}
				ops[k][i][row] = x
			}
		}
	}
	s := l.step(n, io)
	y, err := l.place(n, g, n.Name+".out", 4)
	if err != nil {
		return err
	}
	acc := 0
	for _, v := range ins {
		acc = max(acc, l.accOf(v))
	}
	for i, r := range y.regions {
		for row := range ops[0][i] {
			dst, N := r.addr+uint32(4*row*r.stride), r.c1-r.c0
			if !perRow {
				dst, N = r.addr, r.span()
			}
			s.work[r.tile] = append(s.work[r.tile], &kernel{what: n.Name, bin: &codegen.Binary{
				Op: op, N: N, A: ops[0][i][row], B: ops[1][i][row], Y: dst, Workers: codegen.Slots}})
			for _, o := range ops[2:] {
				s.work[r.tile] = append(s.work[r.tile], &kernel{what: n.Name, bin: &codegen.Binary{
					Op: op, N: N, A: codegen.Operand{Addr: dst}, B: o[i][row], Y: dst, Workers: codegen.Slots}})
			}
		}
	}
	l.result(out, y, 4, acc+rounds*(len(ins)-1))
	return nil
}

// maxRowKernels bounds the kernels per tile of a node that broadcasts a
// node's output (one per output row and input).
const maxRowKernels = 512

// lastAxisLayout is an output layout in whole rows of the output's last
// axis, every row 8-byte aligned: an input's with as many elements when
// it is such, else rowsLayout.
func (l *linker) lastAxisLayout(n *graph.Node) *layout {
	out := n.Outputs[0]
	C := 1
	if len(out.Shape) > 0 {
		C = int(out.Shape[len(out.Shape)-1])
	}
	for _, v := range n.Inputs {
		if p := l.ew.vals[v]; p != nil && elems(v) == elems(out) && p.lay.rowsOf(C) {
			return p.lay
		}
	}
	return l.rowsLayout(elems(out), C, max(1, l.ew.align[out]))
}

// broadcastRows returns, for each row of each region of g (rows of the
// output's last axis), what the node output v broadcast to out gives the
// row: a row of v (an array) or one element of v (a scalar), read where
// it is when the row's tile holds it, else gathered to the tile by the
// exchange (local pieces of a gathered row by copy kernels).
func (l *linker) broadcastRows(n *graph.Node, v *graph.Value, out []int64, g *layout, io *nodeIO) ([][]codegen.Operand, error) {
	p := l.ew.vals[v]
	if p.size != 4 {
		return nil, notLowered(n, "input %q of %d-byte elements (the kernels compute in float)", v.Name, p.size)
	}
	C := g.cols
	idx := graph.BroadcastIndex(v.Shape, out)
	width := 1 // v's elements a row needs
	if len(v.Shape) > 0 && int(v.Shape[len(v.Shape)-1]) == C {
		width = C
	}
	array := width > 1 || C == 1 // else a scalar operand (4-byte aligned)
	src := p.lay.segs(4)
	find := func(e int) seg {
		return src[sort.Search(len(src), func(i int) bool { return src[i].flat+src[i].n > e })]
	}
	type need struct {
		tile, base int
		slot       int // byte offset in the tile's gather buffer, -1: read in place
		addr       uint32
	}
	needs := map[[2]int]*need{}
	var order []*need
	slots := map[int]int{}
	for _, r := range g.regions {
		for row := r.r0; row < r.r1; row++ {
			key := [2]int{r.tile, int(idx[row*C])}
			if needs[key] != nil {
				continue
			}
			nd := &need{tile: r.tile, base: key[1], slot: -1}
			s := find(nd.base)
			nd.addr = s.addr + uint32(4*(nd.base-s.flat))
			if s.tile != r.tile || nd.base+width > s.flat+s.n || array && nd.addr%8 != 0 {
				nd.addr, nd.slot = 0, slots[r.tile]
				slots[r.tile] += 4 * pad(width, 2)
			}
			needs[key] = nd
			order = append(order, nd)
		}
	}
	if len(slots) > 0 {
		var ts []int
		most := 0
		for t, b := range slots {
			ts = append(ts, t)
			most = max(most, b)
		}
		sort.Ints(ts)
		base, err := l.allocate(ts, n.Name+"."+v.Name, uint32(most), 8, true)
		if err != nil {
			if base, err = l.allocate(ts, n.Name+"."+v.Name, uint32(most), 8, false); err != nil {
				return nil, l.memErr(n, err)
			}
		}
		for _, nd := range order {
			if nd.slot < 0 {
				continue
			}
			nd.addr = base + uint32(nd.slot)
			for e := nd.base; e < nd.base+width; {
				s := find(e)
				m := min(nd.base+width, s.flat+s.n) - e
				sa, da := s.addr+uint32(4*(e-s.flat)), nd.addr+uint32(4*(e-nd.base))
				if s.tile != nd.tile {
					io.xfers = append(io.xfers, sched.Transfer{Src: s.tile, Dst: nd.tile, DstN: 1, Words: m, SrcAddr: sa, DstAddr: da})
				} else if sa%8 == 0 && da%8 == 0 {
					io.copies[nd.tile] = append(io.copies[nd.tile], &kernel{what: n.Name + ".copy", bin: &codegen.Binary{
						Op: codegen.Mul, N: m, A: codegen.Operand{Addr: sa}, B: codegen.Operand{Const: true, Value: 1}, Y: da, Workers: codegen.Slots}})
				} else {
					return nil, notLowered(n, "input %q: a copy of %d elements from element %d on tile %d is not of 8-byte aligned FP32 (the copy kernel's)", v.Name, m, e, s.tile)
				}
				e += m
			}
		}
	}
	res := make([][]codegen.Operand, len(g.regions))
	for i, r := range g.regions {
		res[i] = make([]codegen.Operand, r.r1-r.r0)
		for row := r.r0; row < r.r1; row++ {
			nd := needs[[2]int{r.tile, int(idx[row*C])}]
			res[i][row-r.r0] = codegen.Operand{Addr: nd.addr, Scalar: !array}
		}
	}
	return res, nil
}

// castKind returns the cast kernel of a conversion.
func castKind(from, to onnx.DataType) (codegen.CastKind, bool) {
	_, f8 := graph.FP8Format(from)
	_, t8 := graph.FP8Format(to)
	switch {
	case from == onnx.Float && to == onnx.Float16:
		return codegen.F32ToF16, true
	case from == onnx.Float16 && to == onnx.Float:
		return codegen.F16ToF32, true
	case from == onnx.Float && t8:
		return codegen.F32ToF8, true
	case f8 && to == onnx.Float:
		return codegen.F8ToF32, true
	case from == onnx.Float16 && t8:
		return codegen.F16ToF8, true
	}
	return 0, false
}

func (l *linker) lowerCast(n *graph.Node) error {
	x, out := n.Inputs[0], n.Outputs[0]
	a := n.Attrs.(*graph.Cast)
	if x.DType == a.To {
		return l.lowerAlias(n)
	}
	kind, ok := castKind(x.DType, a.To)
	if !ok {
		return notLowered(n, "a cast from %s to %s (the cast kernels convert float to and from float16 and FP8, and float16 to FP8)", x.DType, a.To)
	}
	c := codegen.Cast{Kind: kind, Saturate: a.Saturate, Workers: codegen.Slots}
	switch kind {
	case codegen.F32ToF8, codegen.F16ToF8:
		c.Format, _ = graph.FP8Format(a.To)
	case codegen.F8ToF32:
		c.Format, _ = graph.FP8Format(x.DType)
	}
	g := l.outLayout(n)
	io := newIO()
	xs, err := l.array(n, x, out.Shape, g, io)
	if err != nil {
		return err
	}
	s := l.step(n, io)
	y, err := l.place(n, g, n.Name+".out", out.DType.ElemSize())
	if err != nil {
		return err
	}
	for i, r := range y.regions {
		k := c
		k.N, k.X, k.Y = r.span(), xs[i], r.addr
		s.work[r.tile] = append(s.work[r.tile], &kernel{what: n.Name, cast: &k})
	}
	acc := l.accOf(x)
	if kind != codegen.F16ToF32 && kind != codegen.F8ToF32 {
		acc++ // a narrowing rounds
	}
	l.result(out, y, out.DType.ElemSize(), acc)
	return nil
}

// rowsInput returns a row operator's input in rows of L elements: where
// it is when its layout is such rows, else brought to rowsLayout.
func (l *linker) rowsInput(n *graph.Node, L int, io *nodeIO) (*layout, []uint32, error) {
	x := n.Inputs[0]
	if x.DType != onnx.Float {
		return nil, nil, notLowered(n, "input %q of type %s (the kernels compute in float)", x.Name, x.DType)
	}
	if p := l.ew.vals[x]; p != nil && p.lay.rowsOf(L) {
		a := make([]uint32, len(p.lay.regions))
		for i, r := range p.lay.regions {
			a[i] = r.addr
		}
		return p.lay, a, nil
	}
	g := l.rowsLayout(elems(x), L, max(1, l.ew.align[x]))
	a, err := l.array(n, x, x.Shape, g, io)
	return g, a, err
}

// rowStride is the stride a Rows kernel gets for a region: its own, or
// any even one for a single row.
func rowStride(r region) int {
	if r.r1-r.r0 == 1 {
		return pad(r.c1-r.c0, 2)
	}
	return r.stride
}

// statLayout is one value per row of the regions of g.
func statLayout(g *layout) *layout {
	y := &layout{cols: 1}
	for _, r := range g.regions {
		y.regions = append(y.regions, region{tile: r.tile, r0: r.r0, r1: r.r1, c0: 0, c1: 1, stride: 1})
	}
	return y
}

// lowerRows lowers Softmax, LogSoftmax and LayerNormalization: one
// codegen.Rows per region of whole rows.
func (l *linker) lowerRows(n *graph.Node) error {
	if err := floatNode(n); err != nil {
		return err
	}
	x, out := n.Inputs[0], n.Outputs[0]
	var L int
	p := codegen.Rows{Workers: codegen.Slots}
	var rounds int
	switch n.Op {
	case "Softmax", "LogSoftmax":
		var ok bool
		if L, ok = softmaxLen(n); !ok {
			return notLowered(n, "along axis %d of %d (the row kernels work along the last axes)", n.Attrs.(*graph.Softmax).Axis, len(x.Shape))
		}
		p.Op, rounds = codegen.Softmax, L+4
		if n.Op == "LogSoftmax" {
			p.Op, rounds = codegen.LogSoftmax, L+5
		}
	default:
		a := n.Attrs.(*graph.LayerNorm)
		L = prod(x.Shape[a.Axis:])
		p.Op, p.Epsilon, rounds = codegen.LayerNorm, a.Epsilon, 2*L+7
	}
	io := newIO()
	g, xs, err := l.rowsInput(n, L, io)
	if err != nil {
		return err
	}
	// LayerNorm's scale and bias: L elements on every tile.
	var vecs [2]uint32
	if p.Op == codegen.LayerNorm {
		norm := x.Shape[n.Attrs.(*graph.LayerNorm).Axis:]
		for k, v := range n.Inputs[1:] {
			if v == nil {
				continue
			}
			src := l.source(v)
			if src == nil {
				return notLowered(n, "%s %q comes from node %q (the linker takes scale and bias from graph inputs and constants)", []string{"scale", "bias"}[k], v.Name, v.Producer.Name)
			}
			one := &layout{cols: L}
			for _, t := range g.tiles() {
				one.regions = append(one.regions, region{tile: t, r0: 0, r1: 1, c0: 0, c1: L, stride: L})
			}
			a, err := l.array(n, v, norm, one, io)
			if err != nil {
				return err
			}
			vecs[k] = a[0]
		}
	}
	s := l.step(n, io)
	y, err := l.place(n, &layout{cols: g.cols, regions: g.regions}, n.Name+".out", 4)
	if err != nil {
		return err
	}
	var stats [2]*layout
	for k := 1; k < len(n.Outputs); k++ {
		if n.Outputs[k] != nil {
			if stats[k-1], err = l.place(n, statLayout(g), n.Outputs[k].Name, 4); err != nil {
				return err
			}
		}
	}
	for i, r := range y.regions {
		k := p
		k.R, k.C, k.X, k.Y, k.XStride, k.YStride = r.r1-r.r0, L, xs[i], r.addr, rowStride(g.regions[i]), rowStride(r)
		k.Scale, k.Bias = vecs[0], vecs[1]
		if stats[0] != nil {
			k.Mean = stats[0].regions[i].addr
		}
		if stats[1] != nil {
			k.InvStdDev = stats[1].regions[i].addr
		}
		s.work[r.tile] = append(s.work[r.tile], &kernel{what: n.Name, rows: &k})
	}
	acc := l.accOf(x)
	for _, v := range n.Inputs[1:] {
		if v != nil {
			acc = max(acc, l.accOf(v))
		}
	}
	l.result(out, y, 4, acc+rounds)
	if stats[0] != nil {
		l.result(n.Outputs[1], stats[0], 4, l.accOf(x)+L+1)
	}
	if stats[1] != nil {
		l.result(n.Outputs[2], stats[1], 4, l.accOf(x)+2*L+5)
	}
	return nil
}

// maxReduceKernels bounds the binary kernels of a reduction over middle
// axes on one tile.
const maxReduceKernels = 256

// lowerReduce lowers ReduceSum and ReduceMean over a block of axes: the
// trailing axes with codegen.Rows (a lane sum per row), others with a
// chain of binary additions of the reduced slices, in order.
func (l *linker) lowerReduce(n *graph.Node) error {
	if err := floatNode(n); err != nil {
		return err
	}
	x, out := n.Inputs[0], n.Outputs[0]
	if len(n.Attrs.(*graph.Reduce).Axes) == 0 {
		return l.lowerAlias(n)
	}
	_, count, inner, ok := reduceAxes(n)
	if !ok {
		return notLowered(n, "axes %v are not consecutive", n.Attrs.(*graph.Reduce).Axes)
	}
	mean := n.Op == "ReduceMean"
	io := newIO()
	L := count * inner
	g, xs, err := l.rowsInput(n, L, io)
	if err != nil {
		return err
	}
	if inner == 1 {
		s := l.step(n, io)
		y, err := l.place(n, statLayout(g), n.Name+".out", 4)
		if err != nil {
			return err
		}
		op := codegen.ReduceSum
		if mean {
			op = codegen.ReduceMean
		}
		for i, r := range y.regions {
			s.work[r.tile] = append(s.work[r.tile], &kernel{what: n.Name, rows: &codegen.Rows{
				Op: op, R: r.r1 - r.r0, C: L, X: xs[i], XStride: rowStride(g.regions[i]), Y: r.addr, Workers: codegen.Slots}})
		}
		acc := l.accOf(x) + L
		if mean {
			acc += 2
		}
		l.result(out, y, 4, acc)
		return nil
	}
	// Middle axes: y[o] = x[o,0] + x[o,1] + ... (inner elements each),
	// then / count for the mean.
	if inner%2 != 0 {
		return notLowered(n, "a reduction over middle axes with an odd inner extent %d (its slices are not 8-byte aligned)", inner)
	}
	for _, r := range g.regions {
		if k := (r.r1 - r.r0) * (count - 1 + b2int(mean)); k > maxReduceKernels {
			return notLowered(n, "a reduction over middle axes needs %d kernels on tile %d (at most %d)", k, r.tile, maxReduceKernels)
		}
	}
	s := l.step(n, io)
	og := &layout{cols: inner}
	for _, r := range g.regions {
		og.regions = append(og.regions, region{tile: r.tile, r0: r.r0, r1: r.r1, c0: 0, c1: inner, stride: inner})
	}
	y, err := l.place(n, og, n.Name+".out", 4)
	if err != nil {
		return err
	}
	for i, r := range y.regions {
		stride := g.regions[i].stride
		for o := 0; o < r.r1-r.r0; o++ {
			dst := r.addr + uint32(4*o*inner)
			row := xs[i] + uint32(4*o*stride)
			add := func(a codegen.Operand, b codegen.Operand, op codegen.BinaryOp) {
				s.work[r.tile] = append(s.work[r.tile], &kernel{what: n.Name, bin: &codegen.Binary{
					Op: op, N: inner, A: a, B: b, Y: dst, Workers: codegen.Slots}})
			}
			if count == 1 {
				add(codegen.Operand{Addr: row}, codegen.Operand{Const: true, Value: 1}, codegen.Mul)
			}
			for j := 1; j < count; j++ {
				a := codegen.Operand{Addr: dst}
				if j == 1 {
					a.Addr = row
				}
				add(a, codegen.Operand{Addr: row + uint32(4*j*inner)}, codegen.Add)
			}
			if mean {
				add(codegen.Operand{Addr: dst}, codegen.Operand{Const: true, Value: float32(count)}, codegen.Div)
			}
		}
	}
	l.result(out, y, 4, l.accOf(x)+count-1+b2int(mean))
	return nil
}

func b2int(b bool) int {
	if b {
		return 1
	}
	return 0
}

// finishNodes sends the graph outputs the nodes computed (or that are
// graph inputs or constants) back to the host in the result superstep.
func (l *linker) finishNodes() error {
	l.nodes()
	for _, v := range l.g.Outputs {
		ot := &l.outputs[l.outIndex[v]]
		if len(ot.Blocks) > 0 {
			continue // a product's
		}
		if v.Producer != nil && l.ew.vals[v] == nil && l.ew.alias[v] == nil {
			continue // not lowered: planKernels reports it
		}
		p := l.ew.vals[v]
		by := v.Producer // what the output is charged to
		if by == nil {
			by = &graph.Node{Name: v.Name, Op: "(graph output)"}
		}
		if p == nil {
			// A graph input or constant, maybe reshaped: through a tile.
			g := l.defaultLayout(v)
			y, err := l.place(by, g, v.Name+".copy", v.DType.ElemSize())
			if err != nil {
				return err
			}
			if err := l.fill(by, l.source(v), v, v.Shape, y); err != nil {
				return err
			}
			p = &placed{lay: y, size: v.DType.ElemSize()}
		}
		rows, cols, err := ot.Matrix()
		if err != nil {
			return fmt.Errorf("output %q: %w", v.Name, err)
		}
		off, err := l.pageAlloc(ot.Page, uint32(rows*cols)*uint32(p.size))
		if err != nil {
			return err
		}
		for _, s := range p.lay.segs(p.size) {
			h := hostOp{page: ot.Page, off: off + uint32(s.flat*p.size), addr: s.addr, bytes: uint32(s.n * p.size)}
			if h.off%4 != 0 || h.addr%4 != 0 || h.bytes%4 != 0 {
				return notLowered(by, "output %q: a stretch of %d %s elements at element %d is not a whole number of aligned 32-bit words (host transfers move words)", v.Name, s.n, v.DType, s.flat)
			}
			l.later = append(l.later, h)
			l.laterTiles = append(l.laterTiles, s.tile)
		}
		ot.Blocks = []obj.Block{{Offset: off, R1: uint32(rows), C1: uint32(cols), Rows: uint32(rows), Cols: uint32(cols), Order: obj.RowMajor}}
		if p.acc >= 2 {
			ot.Accumulate = int64(p.acc)
		}
	}
	return nil
}
