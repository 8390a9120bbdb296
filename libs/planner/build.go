package planner

// Building a plan from the search's decisions: every value's tensors and
// every step. The products' splits come from the decisions; every other
// layout follows from them by the rules below, so that a point of the
// search is one complete, consistent program.
//
//   - A product's operands are its split's blocks in panel layout; its
//     result is the split's result pieces. An operand the host or the
//     tile images hold is delivered in its blocks directly (cast on the
//     product's tiles when the chain casts); one a node computes (or one
//     cast before the exchange) is packed from a row-major tensor into
//     the blocks, re-laid out first when its pieces do not start on the
//     panel's groups.
//   - An elementwise node runs where its first input of the output's
//     shape that a node computes lies; its other inputs are brought to
//     the boxes its pieces read (broadcast projection), the host or
//     tile-image ones delivered there.
//   - A row operator runs where its input lies when the input's pieces
//     hold whole rows, else on the default layout (input re-laid out);
//     a layer normalization with few rows spreads them over groups of
//     tiles (rowspread.go).
//   - A transpose keeps its input's tiles (each piece permuted in place);
//     a reshape is a view of its input when the pieces allow, else a
//     re-layout onto the default layout.
//   - The default layout spreads the leading axes over the tiles, the
//     trailing axes a row operator needs whole, rows aligned as the
//     value's product readers need (prefs.go).

import (
	"fmt"
	"strings"

	"ipu.local/formats/plan"
	"ipu.local/libs/graph"
	"ipu.local/libs/layout"
	"ipu.local/libs/lower"
)

// builder holds one plan's construction.
type builder struct {
	pl      *planner
	dec     map[int]plan.Decision
	tensors []*layout.Tensor
	steps   []plan.Step
	home    map[int]int    // value -> the tensor its producer writes
	cache   map[string]int // value and layout -> tensor
	// cut marks the tensors whose pieces a split cut in two made (or an
	// elementwise step took from one): their projections onto a
	// broadcast input may overlap.
	cut map[int]bool
	// halved are the row operators' inputs laid out on a halved row
	// alignment (rowLayout), their pieces by value.
	halved map[int][]layout.Piece
}

func (pl *planner) newBuilder(pt point) *builder {
	b := &builder{pl: pl, dec: map[int]plan.Decision{}, home: map[int]int{}, cache: map[string]int{}, cut: map[int]bool{}, halved: map[int][]layout.Piece{}}
	for _, d := range pt {
		b.dec[d.Node] = d
	}
	return b
}

func shapeOf(v *graph.Value) []int {
	out := make([]int, len(v.Shape))
	for i, d := range v.Shape {
		out[i] = int(d)
	}
	return out
}

func sourceOf(v *graph.Value) layout.Source {
	switch {
	case isHost(v):
		return layout.FromHost
	case isConst(v):
		return layout.FromConst
	}
	return layout.FromStep
}

// add makes a tensor.
func (b *builder) add(v *graph.Value, kind layout.Kind, pad int, src layout.Source, transposed bool, pieces []layout.Piece) *layout.Tensor {
	shape := shapeOf(v)
	if transposed {
		r := len(shape)
		shape[r-1], shape[r-2] = shape[r-2], shape[r-1]
	}
	if kind != layout.RowMajor {
		pad = 0
	}
	t := &layout.Tensor{ID: len(b.tensors), Value: v.Index, Name: v.Name, Size: lower.DeviceSize(v.DType), Shape: shape,
		Transposed: transposed, Kind: kind, Pad: pad, Source: src, Pieces: append([]layout.Piece(nil), pieces...)}
	t.SortPieces()
	b.tensors = append(b.tensors, t)
	return t
}

// external returns a host or const tensor of v with the given layout,
// one per layout.
func (b *builder) external(v *graph.Value, kind layout.Kind, pad int, transposed bool, pieces []layout.Piece) int {
	probe := &layout.Tensor{Kind: kind, Pad: pad, Size: lower.DeviceSize(v.DType), Transposed: transposed, Pieces: append([]layout.Piece(nil), pieces...)}
	probe.SortPieces()
	key := fmt.Sprintf("%d:%s", v.Index, probe.Key())
	if id, ok := b.cache[key]; ok {
		return id
	}
	t := b.add(v, kind, pad, sourceOf(v), transposed, pieces)
	b.cache[key] = t.ID
	return t.ID
}

// need returns a row-major tensor of v with exactly the given pieces:
// the home tensor when it is such, a host or const tensor, or a
// re-layout of the home tensor.
func (b *builder) need(v *graph.Value, pieces []layout.Piece, pad int) (int, error) {
	return b.needAs(v, pieces, pad, false)
}

// needDense is need for a reader that walks each piece as one array
// (a run-time Gather's indices): the home tensor serves only when its
// pad leaves no gap between rows.
func (b *builder) needDense(v *graph.Value, pieces []layout.Piece) (int, error) {
	return b.needAs(v, pieces, 1, true)
}

// needAs is need, refusing, when dense, a home tensor whose rows have
// gaps.
func (b *builder) needAs(v *graph.Value, pieces []layout.Piece, pad int, dense bool) (int, error) {
	if sourceOf(v) != layout.FromStep {
		return b.external(v, layout.RowMajor, pad, false, pieces), nil
	}
	h, ok := b.home[v.Index]
	if !ok {
		return 0, fmt.Errorf("value %q is read before a step writes it", v.Name)
	}
	probe := &layout.Tensor{Pieces: append([]layout.Piece(nil), pieces...)}
	probe.SortPieces()
	if home := b.tensors[h]; samePieces(home.Pieces, probe.Pieces) && !realigns(home, pad) && !(dense && gaps(home)) {
		return h, nil
	}
	probe.Kind, probe.Pad, probe.Size = layout.RowMajor, pad, lower.DeviceSize(v.DType)
	key := fmt.Sprintf("%d:%s", v.Index, probe.Key())
	if id, ok := b.cache[key]; ok {
		return id, nil
	}
	t := b.add(v, layout.RowMajor, pad, layout.FromStep, false, pieces)
	b.steps = append(b.steps, plan.Step{Node: -1, Name: "relayout:" + v.Name, Kernel: "relayout", Inputs: []int{h}, Outputs: []int{t.ID}})
	b.cache[key] = t.ID
	return t.ID, nil
}

// misalignedRows reports whether a row-major tensor of pieces at pad,
// of elements of size bytes, has a piece of more than one row whose row
// pitch is no multiple of 8 bytes: the row and stream kernels start
// every row they walk on an 8-byte boundary (a keepdims=0 reduction's
// output, pad 1, 9 FP32 elements a row and two rows on a tile). Rows of
// one element are read one value a row, from any boundary.
func misalignedRows(pieces []layout.Piece, pad, size int) bool {
	for _, p := range pieces {
		r := len(p.Box)
		if r < 2 {
			continue
		}
		rows := 1
		for _, x := range p.Box[:r-1] {
			rows *= x.Len()
		}
		if n := p.Box[r-1].Len(); rows > 1 && n > 1 && layout.Pad(n, max(pad, 1))*size%8 != 0 {
			return true
		}
	}
	return false
}

// realigns reports whether a re-layout of t to pad would align rows
// that t's own pad leaves misaligned (misalignedRows): then t does not
// serve a reader asking for pad, although its pieces are the reader's.
func realigns(t *layout.Tensor, pad int) bool {
	return t.Kind == layout.RowMajor && pad != t.Pad && misalignedRows(t.Pieces, t.Pad, t.Size) && !misalignedRows(t.Pieces, pad, t.Size)
}

// gaps reports whether a piece of t has rows padded past their length.
func gaps(t *layout.Tensor) bool {
	for _, p := range t.Pieces {
		if r := len(p.Box); r > 1 {
			if n := p.Box[r-1].Len(); layout.Pad(n, max(t.Pad, 1)) != n {
				return true
			}
		}
	}
	return false
}

func samePieces(a, b []layout.Piece) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Tile != b[i].Tile || !a[i].Box.Equal(b[i].Box) {
			return false
		}
	}
	return true
}

// input returns a row-major tensor of v wherever it is: its home tensor,
// or a host or const tensor in the default layout.
func (b *builder) input(v *graph.Value) (int, error) {
	if h, ok := b.home[v.Index]; ok {
		return h, nil
	}
	if sourceOf(v) == layout.FromStep {
		return 0, fmt.Errorf("value %q is read before a step writes it", v.Name)
	}
	return b.external(v, layout.RowMajor, layout.DefaultPad(lower.DeviceSize(v.DType)), false, b.pl.defaultPieces(v, 0)), nil
}

// anchor is the first tile of v's home tensor (0 when it has none): where
// a default layout of v, or of a value computed from it, starts.
func (b *builder) anchor(v *graph.Value) int {
	h, ok := b.home[v.Index]
	if !ok {
		return 0
	}
	lo := -1
	for _, p := range b.tensors[h].Pieces {
		if lo < 0 || p.Tile < lo {
			lo = p.Tile
		}
	}
	return max(lo, 0)
}

// build makes the plan's tensors and steps for point pt.
func (pl *planner) build(pt point) (*builder, error) {
	b := pl.newBuilder(pt)
	for _, n := range pl.g.Nodes {
		var err error
		switch {
		case pl.folded[n.Index] != nil:
			// Folded into its product's pack or cast (steps below).
		case pl.prod[n.Index] != nil:
			err = b.product(pl.prod[n.Index])
		case dataView(n):
			// The output is a graph input or constant seen through data
			// movement: the host or the tile images deliver it as readers
			// need it.
		default:
			err = b.node(n)
		}
		if err != nil {
			return nil, err
		}
	}
	for _, v := range pl.g.Outputs {
		if _, err := b.input(v); err != nil {
			return nil, err
		}
	}
	// Every node without a step of its own is folded into another.
	has := map[int]bool{}
	for _, st := range b.steps {
		if st.Node >= 0 {
			has[st.Node] = true
		}
	}
	for _, n := range pl.g.Nodes {
		if !has[n.Index] {
			b.steps = append(b.steps, plan.Step{Node: n.Index, Name: n.Name, Kernel: "folded", Inputs: []int{}, Outputs: []int{}})
		}
	}
	return b, nil
}

// dataView reports whether a node only moves data of a graph input or
// constant.
func dataView(n *graph.Node) bool {
	switch n.Op {
	case "Reshape", "Flatten", "Identity", "Squeeze", "Unsqueeze", "Transpose":
		return sourceOf(n.Outputs[0]) != layout.FromStep
	}
	return false
}

// node plans a node that is not a product.
func (b *builder) node(n *graph.Node) error {
	switch n.Op {
	case "Softmax", "LogSoftmax", "LayerNormalization", "ReduceMean", "ReduceSum":
		return b.rows(n)
	case "Transpose":
		return b.transpose(n)
	case "Reshape", "Flatten", "Identity", "Squeeze", "Unsqueeze":
		return b.view(n)
	}
	if lower.MoveOps[n.Op] {
		return b.move(n)
	}
	return b.elementwise(n)
}

// padFor keeps a row pitch of pad elements of one type valid for another
// element size: rows 8-byte aligned.
func padFor(pad, size int) int {
	p := max(pad, 1)
	for (p*size)%8 != 0 {
		p += max(pad, 1)
		if p > 64 {
			return layout.DefaultPad(size)
		}
	}
	return p
}

// elementwise plans unary, binary and variadic operators and casts.
func (b *builder) elementwise(n *graph.Node) error {
	out := n.Outputs[0]
	for _, v := range n.Inputs {
		if v != nil && len(v.Shape) > len(out.Shape) {
			// Not an elementwise operator (a reduction with no row kernel):
			// nothing broadcasts an input to a lower rank.
			return &lower.NotLoweredError{Node: n.Name, Op: n.Op, Why: fmt.Sprintf("input %q of rank %d is wider than the output's rank %d: not an elementwise operator", v.Name, len(v.Shape), len(out.Shape))}
		}
	}
	var pieces []layout.Piece
	pad := layout.DefaultPad(lower.DeviceSize(out.DType))
	cut := false
	for _, v := range n.Inputs {
		if v == nil || !sameShape(v.Shape, out.Shape) {
			continue
		}
		if h, ok := b.home[v.Index]; ok {
			t := b.tensors[h]
			pieces = t.Pieces
			pad = padFor(t.Pad, lower.DeviceSize(out.DType))
			if r := len(out.Shape); r > 0 && out.Shape[r-1] == 1 && t.Kind == layout.RowMajor {
				// Rows of one element (a keepdims reduction's [B, S, 1]):
				// the input's pitch, so that both are dense and the
				// kernel walks them as one row; a wider pitch would
				// leave the input's rows unaligned for a 2-D launch.
				pad = max(t.Pad, 1)
			}
			cut = b.cut[h]
			break
		}
	}
	if cut && !b.projectable(n, pieces) {
		// A broadcast input's boxes would overlap: the default layout.
		pieces, cut = nil, false
	}
	if pieces == nil {
		lo := 0
		for _, v := range n.Inputs {
			if v != nil {
				if _, ok := b.home[v.Index]; ok {
					lo = b.anchor(v)
					break
				}
			}
		}
		pieces = b.pl.defaultPieces(out, lo)
	}
	y := b.add(out, layout.RowMajor, pad, layout.FromStep, false, pieces)
	ins := make([]int, len(n.Inputs))
	for k, v := range n.Inputs {
		ins[k] = -1
		if v == nil {
			continue
		}
		if v.Const != nil && v.NumElements() == 1 && n.Op != "Cast" && len(n.Inputs) > 1 {
			continue // an immediate
		}
		want := projected(y.Pieces, shapeOf(v), y.Shape)
		ipad := layout.DefaultPad(lower.DeviceSize(v.DType))
		if h, ok := b.home[v.Index]; ok {
			home := b.tensors[h]
			ipad = home.Pad
			if home.Kind == layout.RowMajor && misalignedRows(home.Pieces, home.Pad, home.Size) {
				ipad = padFor(ipad, lower.DeviceSize(v.DType)) // a re-layout aligns its rows
			}
		}
		id, err := b.need(v, want, ipad)
		if err != nil {
			return err
		}
		ins[k] = id
	}
	b.home[out.Index] = y.ID
	if cut {
		b.cut[y.ID] = true
	}
	b.steps = append(b.steps, plan.Step{Node: n.Index, Name: n.Name, Kernel: strings.ToLower(n.Op), Inputs: ins, Outputs: outputsOf(n, y.ID)})
	return nil
}

func outputsOf(n *graph.Node, first int) []int {
	out := make([]int, len(n.Outputs))
	for i := range out {
		out[i] = -1
	}
	out[0] = first
	return out
}

func sameShape(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// projected is the pieces of an input of shape in that output pieces
// read under broadcasting, once per tile.
func projected(pieces []layout.Piece, in, out []int) []layout.Piece {
	// The pieces kept, by a hash of tile and box (equal ones compared).
	seen := make(map[uint64][]int, len(pieces))
	res := make([]layout.Piece, 0, len(pieces))
	for _, p := range pieces {
		box := layout.Project(p.Box, in, out)
		h := pieceHash(p.Tile, box)
		dup := false
		for _, j := range seen[h] {
			if res[j].Tile == p.Tile && res[j].Box.Equal(box) {
				dup = true
				break
			}
		}
		if !dup {
			seen[h] = append(seen[h], len(res))
			res = append(res, layout.Piece{Tile: p.Tile, Box: box})
		}
	}
	return res
}

// pieceHash is an FNV-1a hash of a tile and a box's bounds.
func pieceHash(tile int, b layout.Box) uint64 {
	const prime = 1099511628211
	h := uint64(14695981039346656037)
	mix := func(v int) {
		h = (h ^ uint64(v)) * prime
	}
	mix(tile)
	for _, r := range b {
		mix(r.Lo)
		mix(r.Hi)
	}
	return h
}

// rowAxis is the first trailing axis a row operator works along (ok
// false: not trailing axes).
func rowAxis(n *graph.Node) (int, bool) {
	r := len(n.Inputs[0].Shape)
	switch a := n.Attrs.(type) {
	case *graph.Softmax:
		if a.Coerce2D {
			return a.Axis, true
		}
		return a.Axis, a.Axis == r-1
	case *graph.LayerNorm:
		return a.Axis, true
	case *graph.Reduce:
		if len(a.Axes) == 0 {
			return r, true
		}
		for i, ax := range a.Axes {
			if ax != r-len(a.Axes)+i {
				return 0, false
			}
		}
		return a.Axes[0], true
	}
	return 0, false
}

// wholeRows reports whether every piece holds whole rows of axes [axis,
// r) stored contiguously.
func wholeRows(t *layout.Tensor, axis int) bool {
	r := len(t.Shape)
	for i, p := range t.Pieces {
		for d := axis; d < r; d++ {
			if p.Box[d].Lo != 0 || p.Box[d].Hi != t.Shape[d] {
				return false
			}
		}
		if axis < r-1 && t.Geometry(i).Pitch != t.Shape[r-1] {
			return false
		}
	}
	return true
}

// rows plans Softmax, LogSoftmax, LayerNormalization and reductions over
// trailing axes.
func (b *builder) rows(n *graph.Node) error {
	x := n.Inputs[0]
	axis, ok := rowAxis(n)
	if !ok {
		return &lower.NotLoweredError{Node: n.Name, Op: n.Op, Why: "along axes that are not the trailing ones"}
	}
	r := len(x.Shape)
	var xt *layout.Tensor
	spread := b.pl.spreadPieces(n, axis, b.anchor(x))
	if h, ok := b.home[x.Index]; ok && spread == nil && wholeRows(b.tensors[h], axis) {
		xt = b.tensors[h]
	} else if spread != nil {
		id, err := b.need(x, spread, layout.DefaultPad(lower.DeviceSize(x.DType)))
		if err != nil {
			return err
		}
		xt = b.tensors[id]
	} else {
		pieces, halved := b.pl.rowLayout(x, axis, b.anchor(x))
		if halved {
			b.halved[x.Index] = pieces
		}
		pad := layout.DefaultPad(lower.DeviceSize(x.DType))
		if axis < r-1 {
			pad = 1
		}
		id, err := b.need(x, pieces, pad)
		if err != nil {
			return err
		}
		xt = b.tensors[id]
	}
	ins := make([]int, len(n.Inputs))
	ins[0] = xt.ID
	for k := 1; k < len(n.Inputs); k++ {
		ins[k] = -1
		v := n.Inputs[k]
		if v == nil {
			continue
		}
		var pieces []layout.Piece
		for _, t := range xt.Tiles() {
			pieces = append(pieces, layout.Piece{Tile: t, Box: layout.Full(shapeOf(v))})
		}
		if spread != nil {
			pieces = vectorPieces(xt.Pieces)
		}
		id, err := b.need(v, pieces, layout.DefaultPad(lower.DeviceSize(v.DType)))
		if err != nil {
			return err
		}
		ins[k] = id
	}
	outs := make([]int, len(n.Outputs))
	reduces := n.Op == "ReduceMean" || n.Op == "ReduceSum"
	for k, v := range n.Outputs {
		outs[k] = -1
		if v == nil {
			continue
		}
		var pieces []layout.Piece
		pad := xt.Pad
		if k == 0 && !reduces {
			pieces = xt.Pieces
		} else {
			pad = 1
			for _, p := range xt.Pieces {
				box := append(layout.Box(nil), p.Box[:min(axis, len(p.Box))]...)
				for len(box) < len(v.Shape) {
					box = append(box, layout.Range{Lo: 0, Hi: 1})
				}
				pieces = append(pieces, layout.Piece{Tile: p.Tile, Box: box})
			}
		}
		t := b.add(v, layout.RowMajor, pad, layout.FromStep, false, pieces)
		outs[k] = t.ID
		b.home[v.Index] = t.ID
	}
	b.steps = append(b.steps, plan.Step{Node: n.Index, Name: n.Name, Kernel: strings.ToLower(n.Op), Inputs: ins, Outputs: outs})
	return nil
}

// transpose plans a Transpose: each piece permuted on its tile.
func (b *builder) transpose(n *graph.Node) error {
	x, y := n.Inputs[0], n.Outputs[0]
	id, err := b.input(x)
	if err != nil {
		return err
	}
	perm := n.Attrs.(*graph.Transpose).Perm
	yt := b.add(y, layout.RowMajor, layout.DefaultPad(lower.DeviceSize(y.DType)), layout.FromStep, false, layout.Permuted(b.tensors[id].Pieces, perm))
	b.home[y.Index] = yt.ID
	b.steps = append(b.steps, plan.Step{Node: n.Index, Name: n.Name, Kernel: "transpose", Inputs: []int{id}, Outputs: []int{yt.ID}})
	return nil
}

// view plans a reshape: a view of the input when its pieces allow, else
// a re-layout onto the default layout.
func (b *builder) view(n *graph.Node) error {
	x, y := n.Inputs[0], n.Outputs[0]
	id, err := b.input(x)
	if err != nil {
		return err
	}
	xt := b.tensors[id]
	kernel := "view"
	pad := xt.Pad
	pieces, ok := layout.Reshaped(xt, shapeOf(y), pad)
	if !ok {
		pad = layout.DefaultPad(lower.DeviceSize(y.DType))
		if pieces, ok = layout.Reshaped(xt, shapeOf(y), pad); !ok {
			pieces, kernel = b.pl.defaultPieces(y, b.anchor(x)), "reshape"
		}
	}
	yt := b.add(y, layout.RowMajor, pad, layout.FromStep, false, pieces)
	b.home[y.Index] = yt.ID
	b.steps = append(b.steps, plan.Step{Node: n.Index, Name: n.Name, Kernel: kernel, Inputs: []int{id}, Outputs: []int{yt.ID}})
	return nil
}

// move plans a data-movement node (Concat, Split, Slice, Expand, Tile,
// Gather): its inputs where they are, its outputs on the default layout
// from the first input's tiles on. A Gather whose indices are computed
// at run time looks its rows up where the table lies (gatherRows).
func (b *builder) move(n *graph.Node) error {
	if n.Op == "Gather" && n.Inputs[1].Const == nil {
		return b.gatherRows(n)
	}
	// The output starts on the first tile of the first input a step
	// writes (the data a Pad pads, not its fill).
	lo := -1
	for k, v := range n.Inputs {
		if v == nil || n.Op == "Gather" && k == 1 {
			continue
		}
		if _, ok := b.home[v.Index]; ok {
			lo = b.anchor(v)
			break
		}
	}
	outPieces := make([][]layout.Piece, len(n.Outputs))
	for k, v := range n.Outputs {
		if v != nil {
			outPieces[k] = b.pl.defaultPieces(v, max(lo, 0))
		}
	}
	ins := make([]int, len(n.Inputs))
	cat, isConcat := n.Attrs.(*graph.Concat)
	band := 0 // a Concat input's first index along the axis
	for k, v := range n.Inputs {
		ins[k] = -1
		if v == nil || n.Op == "Gather" && k == 1 {
			continue
		}
		var id int
		var err error
		_, homed := b.home[v.Index]
		if isConcat && !homed && sourceOf(v) == layout.FromConst && v.Shape[cat.Axis] > 0 {
			// A constant part (a Pad's fill): the tile images hold it
			// where the output's pieces take it, so that it is copied
			// on its tiles instead of exchanged from its default ones.
			pieces := bandPieces(outPieces[0], cat.Axis, band, int(v.Shape[cat.Axis]))
			id = b.external(v, layout.RowMajor, layout.DefaultPad(lower.DeviceSize(v.DType)), false, pieces)
		} else if id, err = b.input(v); err != nil {
			return err
		}
		ins[k] = id
		if isConcat {
			band += int(v.Shape[cat.Axis])
		}
	}
	outs := make([]int, len(n.Outputs))
	for k, v := range n.Outputs {
		outs[k] = -1
		if v == nil {
			continue
		}
		t := b.add(v, layout.RowMajor, layout.DefaultPad(lower.DeviceSize(v.DType)), layout.FromStep, false, outPieces[k])
		outs[k] = t.ID
		b.home[v.Index] = t.ID
	}
	b.steps = append(b.steps, plan.Step{Node: n.Index, Name: n.Name, Kernel: "move", Inputs: ins, Outputs: outs})
	return nil
}

// bandPieces is the layout of a Concat input whose elements lie in
// [off, off+d) along axis of an output laid out as out: each output
// piece's part of that band, on the piece's tile. The output's pieces
// partition it, so these partition the input.
func bandPieces(out []layout.Piece, axis, off, d int) []layout.Piece {
	var ps []layout.Piece
	for _, p := range out {
		lo, hi := max(p.Box[axis].Lo, off), min(p.Box[axis].Hi, off+d)
		if lo >= hi {
			continue
		}
		box := p.Box.Clone()
		box[axis] = layout.Range{Lo: lo - off, Hi: hi - off}
		ps = append(ps, layout.Piece{Tile: p.Tile, Box: box})
	}
	return ps
}

// check checks every tensor's mapping (its pieces partition the
// value) and names the step that made a faulty one: the planner's own
// defect, reported as such rather than as a plan the linker refuses.
func (b *builder) check() error {
	for _, t := range b.tensors {
		if err := t.Validate(b.pl.tiles); err != nil {
			for _, st := range b.steps {
				for _, id := range append(append([]int(nil), st.Inputs...), st.Outputs...) {
					if id == t.ID {
						return fmt.Errorf("internal error: planning step %q (%s) made a tensor of %q that does not hold the value: %v", st.Name, st.Kernel, t.Name, err)
					}
				}
			}
			return fmt.Errorf("internal error: planned a tensor of %q that does not hold the value: %v", t.Name, err)
		}
	}
	return nil
}
