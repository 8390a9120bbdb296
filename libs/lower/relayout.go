package lower

// Data movement: re-layouts (a value from one mapping to another),
// transposes (any permutation), reshapes and views. The runs of
// libs/layout become exchange transfers between tiles and copy kernels
// on a tile; a transpose that moves the innermost axis gathers each
// destination piece's source box to its tile first, then permutes it
// there (codegen.Gather).

import (
	"sort"
	"strings"

	"ipu.local/formats/plan"
	"ipu.local/libs/codegen"
	"ipu.local/libs/graph"
	"ipu.local/libs/layout"
	"ipu.local/libs/prog"
)

// runMoves turns runs from src to dst into transfers and local copies.
// Runs of whole aligned 32-bit words move as they are: a transfer
// between tiles, a Copy kernel on one tile. Any other run (2- or 1-byte
// elements starting or ending inside a word) is copied element by
// element on the destination tile (codegen.Gather, which keeps the
// other bytes of a word it writes part of); a run from another tile
// first sends the whole words holding its elements into a staging
// buffer on the destination tile. Many short word runs from one tile's
// buffer go the same way, gaps included (stagedGroups), then a Copy.
func (l *lowerer) runMoves(src, dst *layout.Tensor, srcRefs, dstRefs []prog.Ref, runs []layout.Run) (*moves, error) {
	m := newMoves()
	m.reserve(len(runs)) // at most one a run
	return m, l.addMoves(m, src, dst, srcRefs, dstRefs, runs)
}

// addMoves is runMoves adding to m (its transfers after m's, its copies
// after m's on each tile).
func (l *lowerer) addMoves(m *moves, src, dst *layout.Tensor, srcRefs, dstRefs []prog.Ref, runs []layout.Run) error {
	size := src.Size
	locals := map[int][]localRun{}
	gathers := map[int][]elemRun{}
	words := map[wordKey][][2]uint32{}
	staged := stagedGroups(src, dst, srcRefs, dstRefs, runs)
	wordRuns := map[int][]elemRun{} // whole-word runs through staging (n in words)
	for _, r := range runs {
		s, t, from, to, bytes := runAt(src, dst, srcRefs, dstRefs, r)
		if !wholeWords(from, to, bytes) {
			if size != 2 {
				return l.notLowered(nil, "moving %d elements of %q from element %d of a piece on tile %d to tile %d: %d-byte elements not in whole aligned 32-bit words (tensor %d to tensor %d)", r.N, src.Name, r.SrcOff, s, t, size, src.ID, dst.ID)
			}
			e := elemRun{from: from, to: to, n: r.N, src: -1}
			if s != t {
				e.src = s
				k := wordKey{t, s, from.Buf}
				words[k] = append(words[k], [2]uint32{from.Off &^ 3, (from.Off + uint32(bytes) + 3) &^ 3})
			} else if from == to {
				continue
			}
			gathers[t] = append(gathers[t], e)
			continue
		}
		if s != t {
			if k := (wordKey{t, s, from.Buf}); staged[k] != nil {
				wordRuns[t] = append(wordRuns[t], elemRun{from: from, to: to, n: bytes / 4, src: s})
				continue
			}
			m.xfers = append(m.xfers, prog.Transfer{Src: s, Dst: t, DstN: 1, Words: bytes / 4, From: from, To: to})
			continue
		}
		if from == to {
			continue
		}
		locals[t] = append(locals[t], localRun{from, to, bytes})
	}
	for k, spans := range staged {
		words[k] = append(words[k], spans...)
	}
	if len(words) > 0 {
		l.stageWords(m, dst.Name+".staged-words", words, gathers, wordRuns)
	}
	for t, es := range wordRuns {
		for _, e := range es {
			locals[t] = append(locals[t], localRun{e.from, e.to, 4 * e.n})
		}
	}
	gatherKernels(m, "copy:"+dst.Name, size, gathers)
	copyKernels(m, "copy:"+dst.Name, locals)
	return nil
}

// runAt returns run r's source and destination tiles, its addresses and
// its bytes.
func runAt(src, dst *layout.Tensor, srcRefs, dstRefs []prog.Ref, r layout.Run) (s, t int, from, to prog.Ref, bytes int) {
	size := src.Size
	return src.Pieces[r.Src].Tile, dst.Pieces[r.Dst].Tile, srcRefs[r.Src].Add(r.SrcOff * size), dstRefs[r.Dst].Add(r.DstOff * size), r.N * size
}

// wholeWords reports whether a run of bytes from from to to is whole
// aligned 32-bit words on both sides.
func wholeWords(from, to prog.Ref, bytes int) bool {
	return from.Off%4 == 0 && to.Off%4 == 0 && bytes%4 == 0
}

// localRun is a run of whole aligned words within a tile.
type localRun struct {
	from, to prog.Ref
	bytes    int
}

// elemRun is a run of 2-byte elements not in whole aligned words, copied
// on its destination tile; from another tile (src, else -1), from the
// words staged there (stageWords).
type elemRun struct {
	from, to prog.Ref
	n        int
	src      int
}

// wordKey keys the source words remote element runs need: by
// destination tile, source tile and buffer.
type wordKey struct {
	dst, src int
	buf      *prog.Buffer
}

// stageWords moves the source words remote element runs need (words,
// by key, as byte ranges) to their destination tiles: each key's ranges
// merged, the tiles' areas in one buffer at one address. The remote
// runs in runs (each a map by destination tile: element runs, staged
// word runs) then read them there.
func (l *lowerer) stageWords(m *moves, name string, words map[wordKey][][2]uint32, runs ...map[int][]elemRun) {
	keys := make([]wordKey, 0, len(words))
	for k := range words {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.dst != b.dst {
			return a.dst < b.dst
		}
		if a.src != b.src {
			return a.src < b.src
		}
		return a.buf.ID < b.buf.ID
	})
	type span struct {
		lo, hi uint32 // source bytes
		at     int    // staging offset
	}
	spans := map[wordKey][]span{}
	used := map[int]int{}
	for _, k := range keys {
		ws := words[k]
		sort.Slice(ws, func(i, j int) bool { return ws[i][0] < ws[j][0] })
		var ss []span
		for _, w := range ws {
			if n := len(ss); n > 0 && w[0] <= ss[n-1].hi {
				ss[n-1].hi = max(ss[n-1].hi, w[1])
				continue
			}
			ss = append(ss, span{lo: w[0], hi: w[1]})
		}
		for i := range ss {
			ss[i].at = used[k.dst]
			used[k.dst] += int(ss[i].hi - ss[i].lo)
		}
		spans[k] = ss
	}
	most := 0
	tiles := make([]int, 0, len(used))
	for t, n := range used {
		most = max(most, n)
		tiles = append(tiles, t)
	}
	sort.Ints(tiles)
	stage := l.out.NewBuffer(name, tiles, most, 8, prog.AnyRegion)
	for _, k := range keys {
		for _, sp := range spans[k] {
			m.xfers = append(m.xfers, prog.Transfer{Src: k.src, Dst: k.dst, DstN: 1, Words: int(sp.hi-sp.lo) / 4,
				From: prog.Ref{Buf: k.buf, Off: sp.lo}, To: prog.Ref{Buf: stage, Off: uint32(sp.at)}})
		}
	}
	for _, gathers := range runs {
		for t, es := range gathers {
			for i, e := range es {
				if e.src < 0 {
					continue
				}
				ss := spans[wordKey{t, e.src, e.from.Buf}]
				j := sort.Search(len(ss), func(j int) bool { return ss[j].hi > e.from.Off })
				es[i].from = prog.Ref{Buf: stage, Off: uint32(ss[j].at) + e.from.Off - ss[j].lo}
			}
		}
	}
}

// gatherKernels adds the element runs' Gathers, by tile in tile order:
// one per nested regular pattern (mergeBlocks: runs of equal lengths
// with constant strides on both sides, within one buffer each, as its
// rows; sequences of those as its blocks, whole words of Y).
func gatherKernels(m *moves, what string, size int, gathers map[int][]elemRun) {
	gts := make([]int, 0, len(gathers))
	for t := range gathers {
		gts = append(gts, t)
	}
	sort.Ints(gts)
	for _, t := range gts {
		es := gathers[t]
		bs := make([]copyBlock, len(es))
		for i, e := range es {
			bs[i] = copyBlock{from: e.from, to: e.to, n: e.n, size: size}
		}
		for _, b := range mergeBlocks(bs, wordBlock) {
			m.copies[t] = append(m.copies[t], gatherKernel(what, b))
		}
	}
}

// copyKernels adds the local runs' copies: one Copy per nested regular
// pattern (mergeBlocks, as gatherKernels).
func copyKernels(m *moves, what string, locals map[int][]localRun) {
	for t, ls := range locals {
		bs := make([]copyBlock, len(ls))
		for i, r := range ls {
			bs[i] = copyBlock{from: r.from, to: r.to, n: r.bytes / 4, size: 4}
		}
		for _, b := range mergeBlocks(bs, anyBlock) {
			m.copies[t] = append(m.copies[t], copyKernel(what, b))
		}
	}
}

// relayout lowers an inserted re-layout step: values from tensors to
// other tensors, input i to output i (several: the operands of a product
// cast before the exchange), in one exchange superstep.
func (l *lowerer) relayout(st *plan.Step) error {
	if len(st.Inputs) == 0 || len(st.Inputs) != len(st.Outputs) {
		return l.stepErr("a re-layout reads as many tensors as it writes, at least one")
	}
	// Every pair's runs first (they are pure: a pair's error is still
	// reported in pair order), so that the transfers go into one array
	// sized once.
	pairs := make([]relayoutPair, len(st.Inputs))
	errs := make([]error, len(st.Inputs))
	n := 0
	for i := range st.Inputs {
		pairs[i], errs[i] = l.relayoutRuns(st.Inputs[i], st.Outputs[i])
		n += len(pairs[i].runs)
	}
	all := newMoves()
	all.reserve(n)
	for i, p := range pairs {
		if errs[i] != nil {
			return errs[i]
		}
		if err := l.addMoveOps(all, p.src, p.dst, p.runs); err != nil {
			return err
		}
	}
	names := make([]string, len(st.Outputs))
	for i, id := range st.Outputs {
		names[i] = l.tensors[id].Name
	}
	l.exchange("relayout:"+strings.Join(names, "+"), all)
	return nil
}

// relayoutPair is one input and output of a re-layout and the runs
// between them.
type relayoutPair struct {
	src, dst *layout.Tensor
	runs     []layout.Run
}

// relayoutRuns returns the runs that re-lay tensor in out as tensor
// out.
func (l *lowerer) relayoutRuns(in, out int) (relayoutPair, error) {
	src, err := l.tensor(in, nil, "input")
	if err != nil {
		return relayoutPair{}, err
	}
	dst, err := l.tensor(out, nil, "output")
	if err != nil {
		return relayoutPair{}, err
	}
	if src.Value != dst.Value || src.Transposed != dst.Transposed || src.Size != dst.Size {
		return relayoutPair{}, l.stepErr("tensor %d (%q) and tensor %d (%q) are not the same value in the same orientation", src.ID, src.Name, dst.ID, dst.Name)
	}
	var runs []layout.Run
	switch {
	case src.Kind == layout.RowMajor && dst.Kind == layout.RowMajor:
		runs, err = layout.PermuteRuns(src, dst, layout.Identity(len(src.Shape)))
	case src.Kind == dst.Kind:
		runs, err = layout.PanelRuns(src, dst)
	default:
		return relayoutPair{}, l.stepErr("a re-layout from %s to %s (a pack step converts row-major data to panels)", src.Kind, dst.Kind)
	}
	if err != nil {
		return relayoutPair{}, l.stepErr("%v", err)
	}
	return relayoutPair{src, dst, runs}, nil
}

// move runs the transfers and copies that fill dst from src.
func (l *lowerer) move(name string, src, dst *layout.Tensor, runs []layout.Run) error {
	m, err := l.moveOps(src, dst, runs)
	if err != nil {
		return err
	}
	l.exchange(name, m)
	return nil
}

// moveOps returns the transfers and copies that fill dst from src.
func (l *lowerer) moveOps(src, dst *layout.Tensor, runs []layout.Run) (*moves, error) {
	m := newMoves()
	m.reserve(len(runs)) // at most one a run
	return m, l.addMoveOps(m, src, dst, runs)
}

// addMoveOps is moveOps adding to m.
func (l *lowerer) addMoveOps(m *moves, src, dst *layout.Tensor, runs []layout.Run) error {
	srcRefs, err := l.read(src)
	if err != nil {
		return err
	}
	dstRefs, err := l.write(dst)
	if err != nil {
		return err
	}
	if err := l.addMoves(m, src, dst, srcRefs, dstRefs, runs); err != nil {
		return err
	}
	if dst.Kind != layout.RowMajor {
		for j := range dst.Pieces {
			l.zeroKPad(m, dst.Name, dst, j, dstRefs[j])
		}
	}
	return nil
}

// transpose lowers a Transpose node.
func (l *lowerer) transpose(st *plan.Step, n *graph.Node) error {
	ins, outs, err := l.ioTensors(st, n)
	if err != nil {
		return err
	}
	x, y := ins[0], outs[0]
	if x == nil {
		return l.stepErr("input 0 has no tensor")
	}
	if x.Kind != layout.RowMajor || y.Kind != layout.RowMajor || x.Transposed || y.Transposed {
		return l.stepErr("a transpose between row-major tensors (tensor %d is %s, tensor %d %s)", x.ID, x.Kind, y.ID, y.Kind)
	}
	perm := n.Attrs.(*graph.Transpose).Perm
	l.acc[n.Outputs[0].Index] = l.acc[n.Inputs[0].Index]
	if layout.KeepsInner(perm) {
		runs, err := layout.PermuteRuns(x, y, perm)
		if err != nil {
			return l.stepErr("%v", err)
		}
		return l.move(n.Name, x, y, runs)
	}
	if x.Size != 4 && x.Size != 2 {
		return l.notLowered(n, "a transpose of %d-byte elements that moves the innermost axis", x.Size)
	}
	// Gather each output piece's source box to its tile, then permute.
	stage, direct := transposeStage(x, y, perm)
	runs, err := layout.PermuteRuns(x, stage, layout.Identity(len(x.Shape)))
	if err != nil {
		return l.stepErr("%v", err)
	}
	xRefs, err := l.read(x)
	if err != nil {
		return err
	}
	sRefs := l.stageRefs(n.Name+".staged", stage)
	m, err := l.runMoves(x, stage, xRefs, sRefs, runs)
	if err != nil {
		return err
	}
	yRefs, err := l.write(y)
	if err != nil {
		return err
	}
	s := l.exchange(n.Name, m)
	for i, p := range y.Pieces {
		var sg layout.Geometry
		var from prog.Ref
		if j := direct[i]; j >= 0 {
			sg, from = x.Geometry(j), xRefs[j]
		} else {
			si := pieceOn(stage, p.Tile, layout.PermuteBox(p.Box, perm, true))
			sg, from = stage.Geometry(si), sRefs[si]
		}
		if err := l.transposeGathers(s, n, y, i, yRefs[i], sg, from, perm); err != nil {
			return err
		}
	}
	return nil
}

// transposeStage returns the staging tensor of a transpose of x into y
// by perm: on each output piece's tile, the box of x it permutes, unless
// a piece of x on that tile holds it, whose index is then its direct
// (else -1).
func transposeStage(x, y *layout.Tensor, perm []int) (stage *layout.Tensor, direct []int) {
	stage = &layout.Tensor{ID: -1, Value: x.Value, Name: x.Name + ".staged", Size: x.Size, Shape: x.Shape, Kind: layout.RowMajor, Pad: layout.DefaultPad(x.Size), Source: layout.FromStep}
	direct = make([]int, len(y.Pieces))
	for i, p := range y.Pieces {
		b := layout.PermuteBox(p.Box, perm, true)
		direct[i] = -1
		for _, j := range x.OnTile(p.Tile) {
			if x.Pieces[j].Box.Contains(b) {
				direct[i] = j
				break
			}
		}
		if direct[i] < 0 {
			stage.Pieces = append(stage.Pieces, layout.Piece{Tile: p.Tile, Box: b})
		}
	}
	stage.SortPieces()
	return stage, direct
}

// stageRefs allocates a staging tensor's pieces in one buffer (each
// tile's at their offsets) and returns their storage.
func (l *lowerer) stageRefs(name string, stage *layout.Tensor) []prog.Ref {
	offs, per := stage.PieceOffsets()
	most := 0
	for _, b := range per {
		most = max(most, b)
	}
	refs := make([]prog.Ref, len(stage.Pieces))
	if len(stage.Pieces) > 0 {
		buf := l.out.NewBuffer(name, stage.Tiles(), most, 8, prog.AnyRegion)
		for i := range refs {
			refs[i] = prog.Ref{Buf: buf, Off: uint32(offs[i])}
		}
	}
	return refs
}

// transposeGathers adds to s the gathers that permute output piece i of
// y from its source (geometry sg at from) by perm: Y's rows along axis
// r-2, its columns along r-1, the outer axes launch by launch.
func (l *lowerer) transposeGathers(s *prog.Superstep, n *graph.Node, y *layout.Tensor, i int, yRef prog.Ref, sg layout.Geometry, from prog.Ref, perm []int) error {
	p, yg, r := y.Pieces[i], y.Geometry(i), len(y.Shape)
	outerBox := append(p.Box[:r-2].Clone(), layout.Range{Lo: 0, Hi: 1}, layout.Range{Lo: 0, Hi: 1})
	var gerr error
	eachIndex(outerBox, func(idx []int) {
		if gerr != nil {
			return
		}
		yi := append(append([]int(nil), idx[:r-2]...), p.Box[r-2].Lo, p.Box[r-1].Lo)
		xi := make([]int, r)
		for k, pk := range perm {
			xi[pk] = yi[k]
		}
		g := &codegen.Gather{Size: y.Size, R: p.Box[r-2].Len(), C: p.Box[r-1].Len(), YStride: yg.Strides[r-2],
			RStride: sg.Strides[perm[r-2]], CStride: sg.Strides[perm[r-1]], Workers: codegen.Slots}
		k := &prog.Kernel{What: n.Name + ".gather", Params: g, Fixes: []prog.Fix{
			{Field: &g.X, Ref: from.Add(sg.Offset(xi) * sg.Size)}, {Field: &g.Y, Ref: yRef.Add(yg.Offset(yi) * y.Size), Write: true}}}
		if _, err := k.Cost(); err != nil {
			gerr = l.notLowered(n, "on tile %d: %v", p.Tile, err)
			return
		}
		s.Work[p.Tile] = append(s.Work[p.Tile], k)
	})
	return gerr
}

// reshape lowers Reshape, Flatten, Identity, Squeeze and Unsqueeze: a
// view when the output tensor stores every element where the input's
// does, else a re-layout by the row-major order.
func (l *lowerer) reshape(st *plan.Step, n *graph.Node) error {
	ins, outs, err := l.ioTensors(st, n)
	if err != nil {
		return err
	}
	if ins[0] == nil {
		return l.stepErr("input 0 has no tensor")
	}
	l.acc[n.Outputs[0].Index] = l.acc[n.Inputs[0].Index]
	return l.copyStep(n, ins[0], outs[0])
}

// copyStep makes y hold x's elements in y's layout: y's storage is x's
// when the layouts store every element alike (a view), else a re-layout
// by the row-major order.
func (l *lowerer) copyStep(n *graph.Node, x, y *layout.Tensor) error {
	if x.Kind != layout.RowMajor || y.Kind != layout.RowMajor || x.Transposed || y.Transposed {
		return l.stepErr("a view of tensor %d (%s) as tensor %d (%s): row-major only", x.ID, x.Kind, y.ID, y.Kind)
	}
	if l.acc[y.Value] == 0 {
		l.acc[y.Value] = l.acc[x.Value]
	}
	if ps, ok := layout.Reshaped(x, y.Shape, max(y.Pad, 1)); ok && x.Size == y.Size && len(ps) == len(y.Pieces) {
		where := make([]int, len(ps))
		same := true
		for i := 0; same && i < len(ps); i++ {
			where[i] = pieceOn(y, ps[i].Tile, ps[i].Box)
			same = where[i] >= 0
		}
		if same {
			refs, err := l.read(x)
			if err != nil {
				return err
			}
			if l.refs[y.ID] != nil {
				return planErr("tensor %d (%q) is written twice", y.ID, y.Name)
			}
			if y.Source != layout.FromStep {
				return planErr("tensor %d (%q) has source %s, a step cannot write it", y.ID, y.Name, y.Source)
			}
			yRefs := make([]prog.Ref, len(ps))
			for i, j := range where {
				yRefs[j] = refs[i]
			}
			l.refs[y.ID] = yRefs
			return nil
		}
	}
	if st := l.step; st != nil && st.Kernel == "view" {
		return l.stepErr("kernel view, but tensor %d (%q) does not store its elements where tensor %d (%q) does", y.ID, y.Name, x.ID, x.Name)
	}
	runs, err := layout.ReshapeRuns(x, y)
	if err != nil {
		return l.stepErr("%v", err)
	}
	return l.move(n.Name, x, y, runs)
}
