package lower

// Tensors that come from outside the program: graph inputs the host
// delivers, constants in the tile images, and the graph outputs the host
// collects. Either may be seen through data movement (Reshape,
// Transpose, ...): the element of a tensor comes from the element of the
// root value the view's index map names.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"slices"

	"ipu.local/formats/obj"
	"ipu.local/libs/codegen"
	"ipu.local/libs/graph"
	"ipu.local/libs/layout"
	"ipu.local/libs/onnx"
	"ipu.local/libs/prog"
)

// indexMap maps an index of a tensor (its own coordinates) to the flat
// row-major index of its view root.
type indexMap struct {
	root   *graph.Value
	stages []func(idx []int) []int // each maps an index of one value to its input's
	t      *layout.Tensor
	rshape []int
}

func shapeInts(s []int64) []int {
	out := make([]int, len(s))
	for i, d := range s {
		out[i] = int(d)
	}
	return out
}

func newIndexMap(t *layout.Tensor, v *graph.Value) *indexMap {
	m := &indexMap{t: t}
	for v.Producer != nil {
		n := v.Producer
		in := n.Inputs[0]
		switch n.Op {
		case "Transpose":
			perm := n.Attrs.(*graph.Transpose).Perm
			m.stages = append(m.stages, func(idx []int) []int {
				out := make([]int, len(idx))
				for i, p := range perm {
					out[p] = idx[i]
				}
				return out
			})
		default: // a reshape: the row-major order is kept
			from, to := shapeInts(v.Shape), shapeInts(in.Shape)
			m.stages = append(m.stages, func(idx []int) []int {
				f := 0
				for d := range from {
					f = f*from[d] + idx[d]
				}
				out := make([]int, len(to))
				for d := len(to) - 1; d >= 0; d-- {
					out[d] = f % to[d]
					f /= to[d]
				}
				return out
			})
		}
		v = in
	}
	m.root = v
	m.rshape = shapeInts(v.Shape)
	return m
}

// flat returns the root flat index of tensor index idx.
func (m *indexMap) flat(idx []int) int {
	x := idx
	if m.t.Transposed {
		x = append([]int(nil), idx...)
		r := len(x)
		x[r-1], x[r-2] = x[r-2], x[r-1]
	}
	for _, st := range m.stages {
		x = st(x)
	}
	f := 0
	for d := range m.rshape {
		f = f*m.rshape[d] + x[d]
	}
	return f
}

// direct reports whether the map is the identity (no views, not
// transposed).
func (m *indexMap) direct() bool { return len(m.stages) == 0 && !m.t.Transposed }

// eachRun calls f for indexes of box b in row-major order: f handles the
// elements from idx along the last axis and returns how many (at least
// one); the next call is at the first element it did not handle.
func eachRun(b layout.Box, f func(idx []int) int) {
	r := len(b)
	if r == 0 {
		f(nil)
		return
	}
	idx := make([]int, r)
	for d := range idx {
		if b[d].Hi <= b[d].Lo {
			return // an empty box
		}
		idx[d] = b[d].Lo
	}
	for {
		idx[r-1] += max(f(idx), 1)
		if idx[r-1] < b[r-1].Hi {
			continue
		}
		d := r - 1
		for d >= 0 {
			if idx[d] < b[d].Hi {
				break
			}
			idx[d] = b[d].Lo
			if d > 0 {
				idx[d-1]++
			}
			d--
		}
		if d < 0 {
			return
		}
	}
}

// eachIndex calls f for every index of box b in row-major order.
func eachIndex(b layout.Box, f func(idx []int)) {
	r := len(b)
	idx := make([]int, r)
	for d := range idx {
		idx[d] = b[d].Lo
	}
	for {
		f(idx)
		d := r - 1
		for d >= 0 {
			idx[d]++
			if idx[d] < b[d].Hi {
				break
			}
			idx[d] = b[d].Lo
			d--
		}
		if d < 0 {
			return
		}
	}
}

// fromConst places a const tensor's data in the tile images.
func (l *lowerer) fromConst(t *layout.Tensor) ([]prog.Ref, error) {
	v := l.g.Values[t.Value]
	m := newIndexMap(t, v)
	raw := m.root.Const.Raw
	if m.root.DType == onnx.Bool {
		raw = BoolWords(raw)
	}
	size := t.Size
	if m.root.DType == onnx.Int64 {
		var err error
		if raw, err = narrowInt64(fmt.Sprintf("constant %q", m.root.Name), raw); err != nil {
			return nil, err
		}
	}
	if len(raw) != int(graph.NumElements(m.root.Shape))*size {
		return nil, planErr("constant %q: %d bytes of data for %d elements", m.root.Name, len(raw), graph.NumElements(m.root.Shape))
	}
	refs := l.alloc(t, prog.AnyRegion)
	buf := refs[0].Buf
	buf.Permanent = true
	if l.opt.NoData {
		return refs, nil
	}
	buf.Data = map[int][]byte{}
	// Each tile's bytes are put together in a scratch buffer; a tile
	// whose bytes some tile before it has already (a copy of a
	// replicated constant) shares that tile's slice, so that memory is
	// touched once per distinct content (fresh pages cost more than
	// the copy; constant data is never written after this).
	byTile := map[int][]int{}
	var order []int
	for i, pc := range t.Pieces {
		if byTile[pc.Tile] == nil {
			order = append(order, pc.Tile)
		}
		byTile[pc.Tile] = append(byTile[pc.Tile], i)
	}
	direct := m.direct()
	seen := map[uint64][][]byte{}
	seed := maphash.MakeSeed()
	// Tiles whose pieces have the same boxes at the same offsets (the
	// copies of a replicated constant) have the same bytes: they share
	// the first one's, built once.
	sameAs := map[string]int{}
	var sig []byte
	var scratch []byte
	for _, tile := range order {
		sig = sig[:0]
		for _, i := range byTile[tile] {
			sig = binary.AppendUvarint(sig, uint64(refs[i].Off))
			for _, r := range t.Pieces[i].Box {
				sig = binary.AppendUvarint(sig, uint64(r.Lo))
				sig = binary.AppendUvarint(sig, uint64(r.Hi))
			}
		}
		if first, ok := sameAs[string(sig)]; ok {
			buf.Data[tile] = buf.Data[first]
			continue
		}
		sameAs[string(sig)] = tile
		if scratch == nil {
			scratch = make([]byte, buf.Size)
		} else {
			clear(scratch)
		}
		for _, i := range byTile[tile] {
			g := t.Geometry(i)
			base := int(refs[i].Off)
			eachRun(t.Pieces[i].Box, func(idx []int) int {
				n := 1
				if direct {
					n = g.Run(idx) // the source's row is contiguous too
				}
				f := m.flat(idx)
				copy(scratch[base+size*g.Offset(idx):], raw[size*f:size*(f+n)])
				return n
			})
		}
		h := maphash.Bytes(seed, scratch)
		if k := slices.IndexFunc(seen[h], func(d []byte) bool { return bytes.Equal(d, scratch) }); k >= 0 {
			buf.Data[tile] = seen[h][k]
			continue
		}
		buf.Data[tile] = scratch
		seen[h] = append(seen[h], scratch)
		scratch = nil
	}
	return refs, nil
}

// inputBlock returns the page offset of graph input v's whole row-major
// block, adding it on first use.
func (l *lowerer) inputBlock(v *graph.Value) (uint32, error) {
	k := l.inIndex[v]
	if off, ok := l.inBlock[k]; ok {
		return off, nil
	}
	in := &l.out.Inputs[k]
	rows, cols, err := in.Matrix()
	if err != nil {
		return 0, fmt.Errorf("input %q: %w", v.Name, err)
	}
	off, err := l.pageAlloc(in.Page, uint32(rows*cols)*uint32(DeviceSize(v.DType)))
	if err != nil {
		return 0, err
	}
	in.Blocks = append(in.Blocks, obj.Block{Offset: off, R1: uint32(rows), C1: uint32(cols), Rows: uint32(rows), Cols: uint32(cols), Order: obj.RowMajor})
	l.inBlock[k] = off
	return off, nil
}

// pageAlloc appends bytes to a host page and returns their offset.
func (l *lowerer) pageAlloc(page uint8, bytes uint32) (uint32, error) {
	for len(l.out.Pages) <= int(page) {
		l.out.Pages = append(l.out.Pages, obj.Page{ID: uint8(len(l.out.Pages))})
	}
	off := l.out.Pages[page].Bytes
	end := uint64(off) + uint64((bytes+7)&^7)
	if end > 1<<24 {
		return 0, fmt.Errorf("host page %d: %d bytes exceed the 16 MiB of a page", page, end)
	}
	l.out.Pages[page].Bytes = uint32(end)
	return off, nil
}

// fromHost has the host deliver a host tensor in the fetch superstep.
func (l *lowerer) fromHost(t *layout.Tensor) ([]prog.Ref, error) {
	v := l.g.Values[t.Value]
	m := newIndexMap(t, v)
	refs := l.alloc(t, prog.AnyRegion)
	if l.opt.NoData {
		return refs, nil // pricing only: host transfers are outside final_cycles
	}
	if t.Kind != layout.RowMajor {
		return refs, l.panelBlocks(t, m, refs)
	}
	if m.direct() {
		return refs, l.rowBlocks(t, refs, true, &l.out.Inputs[l.inIndex[m.root]], l.fetch.Host)
	}
	off, err := l.inputBlock(m.root)
	if err != nil {
		return nil, err
	}
	page := l.out.Inputs[l.inIndex[m.root]].Page
	size := t.Size
	for i, pc := range t.Pieces {
		var odd []hostRun // runs that are not whole words
		err := l.storageRuns(t, i, m, func(so, f, n int) error {
			h := prog.HostOp{In: true, Page: page, Off: off + uint32(f*size), Ref: refs[i].Add(so * size), Bytes: uint32(n * size)}
			if h.Off%4 != 0 || (h.Ref.Off)%4 != 0 || h.Bytes%4 != 0 {
				if size != 2 {
					return l.notLowered(nil, "input %q: %d %s elements from element %d to tile %d are not whole aligned 32-bit words (host transfers move words)", m.root.Name, n, elemType(v.DType), f, pc.Tile)
				}
				odd = append(odd, hostRun{so, f, n})
				return nil
			}
			l.fetch.Host[pc.Tile] = append(l.fetch.Host[pc.Tile], h)
			return nil
		})
		if err != nil {
			return nil, err
		}
		if len(odd) > 0 {
			l.stagedHalves(t, i, page, off, refs[i], odd)
		}
	}
	return refs, nil
}

// hostRun is n elements of a host tensor from flat element f of its page
// block to element so of a piece's storage.
type hostRun struct{ so, f, n int }

// stagedHalves delivers the 2-byte runs of piece i that are not whole
// words: the host writes the whole words of the page holding them into a
// staging buffer on the piece's tile in the fetch superstep, and a
// codegen.Gather per run copies the halves into place, in the compute
// superstep of the step reading the tensor, before its own kernels.
func (l *lowerer) stagedHalves(t *layout.Tensor, i int, page uint8, off uint32, ref prog.Ref, runs []hostRun) {
	lo, hi := runs[0].f, runs[0].f+runs[0].n
	for _, r := range runs {
		lo, hi = min(lo, r.f), max(hi, r.f+r.n)
	}
	lo &^= 1           // whole words of the page block (it starts on a word)
	hi = (hi + 1) &^ 1 // the block's allocation is rounded up to 8 bytes
	tile := t.Pieces[i].Tile
	stage := l.out.NewBuffer(fmt.Sprintf("t%d.%s.stage%d", t.ID, t.Name, i), []int{tile}, 2*(hi-lo), 8, prog.AnyRegion)
	sref := prog.Ref{Buf: stage}
	l.fetch.Host[tile] = append(l.fetch.Host[tile], prog.HostOp{In: true, Page: page, Off: off + uint32(2*lo), Ref: sref, Bytes: uint32(2 * (hi - lo))})
	s := l.compute("unpack:" + t.Name)
	for _, r := range runs {
		g := &codegen.Gather{Size: 2, R: 1, C: r.n, YStride: r.n, CStride: 1, Workers: codegen.Slots}
		s.Work[tile] = append(s.Work[tile], &prog.Kernel{What: "unpack:" + t.Name, Params: g, Fixes: []prog.Fix{
			{Field: &g.X, Ref: sref.Add(2 * (r.f - lo))}, {Field: &g.Y, Ref: ref.Add(2 * r.so), Write: true}}})
	}
}

// rects splits a row-major box into rectangles of its value's matrix
// view (rows: the leading axes flattened, columns: the last axis) whose
// rows lie at one pitch in the piece's storage: one per index of the
// leading axes before the first axis past which the box is whole.
func rects(b layout.Box, shape []int, f func(outer []int, r0, r1, c0, c1 int)) {
	r := len(b)
	if r == 0 {
		f(nil, 0, 1, 0, 1)
		return
	}
	if r == 1 {
		f(nil, 0, 1, b[0].Lo, b[0].Hi)
		return
	}
	// j: the first axis such that the axes after it (but the last) are
	// whole.
	j := r - 2
	for j > 0 && b[j].Lo == 0 && b[j].Hi == shape[j] {
		j--
	}
	inner := 1 // matrix rows per index of axis j
	for d := j + 1; d < r-1; d++ {
		inner *= shape[d]
	}
	outer := append(b[:j].Clone(), layout.Range{Lo: 0, Hi: 1})
	eachIndex(outer, func(idx []int) {
		row := 0
		for d := 0; d < j; d++ {
			row = row*shape[d] + idx[d]
		}
		base := row * shape[j] * inner
		f(idx[:j], base+b[j].Lo*inner, base+b[j].Hi*inner, b[r-1].Lo, b[r-1].Hi)
	})
}

// rowBlocks has the host deliver (in) or collect a row-major tensor
// holding its value directly: per piece (one holder per box for an
// output) and rectangle of the matrix view, a page block laid out as the
// tile stores it (rows at the piece's pitch), moved with one transfer.
func (l *lowerer) rowBlocks(t *layout.Tensor, refs []prog.Ref, in bool, ht *obj.Tensor, ops map[int][]prog.HostOp) error {
	shape := t.Shape
	// Page blocks by box and first row, boxes by their bytes (boxKey).
	type block struct {
		box string
		r0  int
	}
	offs := map[block]uint32{}
	done := map[string]bool{}
	var kb []byte
	idx := make([]int, 0, len(shape)) // a rectangle's first index
	for i, p := range t.Pieces {
		kb = boxKey(kb[:0], p.Box)
		if !in && done[string(kb)] {
			continue // an output is collected from one holder of each box
		}
		key := string(kb)
		done[key] = true
		g := t.Geometry(i)
		var err error
		rects(p.Box, shape, func(outer []int, r0, r1, c0, c1 int) {
			if err != nil {
				return
			}
			idx = append(idx[:0], outer...)
			for d := len(outer); d < len(shape); d++ {
				idx = append(idx, p.Box[d].Lo)
			}
			pitch := g.Pitch
			if len(shape) <= 1 {
				pitch = c1 - c0
			}
			bytes := uint32(((r1-r0-1)*pitch + c1 - c0) * t.Size)
			b := obj.Block{R0: uint32(r0), R1: uint32(r1), C0: uint32(c0), C1: uint32(c1), Rows: uint32(r1 - r0), Cols: uint32(pitch), Order: obj.RowMajor}
			k := block{key, r0}
			off, ok := offs[k]
			if !ok {
				o, e := l.pageAlloc(ht.Page, uint32(b.Bytes(t.Size)))
				if e != nil {
					err = e
					return
				}
				off, b.Offset = o, o
				offs[k] = off
				ht.Blocks = append(ht.Blocks, b)
			}
			ref := refs[i].Add(g.Offset(idx) * t.Size)
			words := (bytes + 3) &^ 3
			if ref.Off%4 != 0 {
				err = l.notLowered(nil, "%s %q: rows of %d %s elements on tile %d are not whole aligned 32-bit words (host transfers move words)", map[bool]string{true: "input", false: "output"}[in], ht.Name, pitch, ht.DType, p.Tile)
				return
			}
			ops[p.Tile] = append(ops[p.Tile], prog.HostOp{In: in, Page: ht.Page, Off: off, Ref: ref, Bytes: words})
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// boxKey appends b's ranges to dst: equal boxes of one rank, equal
// bytes.
func boxKey(dst []byte, b layout.Box) []byte {
	for _, r := range b {
		dst = binary.AppendVarint(dst, int64(r.Lo))
		dst = binary.AppendVarint(dst, int64(r.Hi))
	}
	return dst
}

// storageRuns calls f for every stretch of piece i of t contiguous both
// in the piece's storage (from element so) and in its root's row-major
// order (from element f), n elements long.
func (l *lowerer) storageRuns(t *layout.Tensor, i int, m *indexMap, f func(so, f, n int) error) error {
	g := t.Geometry(i)
	so0, f0, n := -1, -1, 0
	var err error
	eachIndex(t.Pieces[i].Box, func(idx []int) {
		if err != nil {
			return
		}
		so, fl := g.Offset(idx), m.flat(idx)
		if n > 0 && so == so0+n && fl == f0+n {
			n++
			return
		}
		if n > 0 {
			err = f(so0, f0, n)
		}
		so0, f0, n = so, fl, 1
	})
	if err == nil && n > 0 {
		err = f(so0, f0, n)
	}
	return err
}

// panelBlocks has the host deliver a panel tensor: one page block in the
// panel's order per piece and batch index, shared by the pieces holding
// the same box.
func (l *lowerer) panelBlocks(t *layout.Tensor, m *indexMap, refs []prog.Ref) error {
	in := &l.out.Inputs[l.inIndex[m.root]]
	r := len(t.Shape)
	rootCols := 1
	if len(m.rshape) > 0 {
		rootCols = m.rshape[len(m.rshape)-1]
	}
	type key struct {
		box   string
		batch int
	}
	offs := map[key]uint32{}
	x := make([]int, r) // at's index
	for i, pc := range t.Pieces {
		g := t.Geometry(i)
		batch := pc.Box[:r-2]
		bi := 0
		var ferr error
		boxKey := pc.Box.String()
		eachIndex(append(batch.Clone(), layout.Range{Lo: 0, Hi: 1}, layout.Range{Lo: 0, Hi: 1}), func(idx []int) {
			if ferr != nil {
				return
			}
			defer func() { bi++ }()
			k := key{boxKey, bi}
			if off, ok := offs[k]; ok {
				// A copy of a block delivered (and checked) already.
				ref := refs[i].Add(g.BatchOffset(idx[:r-2]) * t.Size)
				l.fetch.Host[pc.Tile] = append(l.fetch.Host[pc.Tile], prog.HostOp{In: true, Page: in.Page, Off: off, Ref: ref, Bytes: uint32(g.PanelElems * t.Size)})
				return
			}
			// The panel's matrix: rows [r0, r1) x cols [c0, c1) of the
			// tensor at this batch index, mapped to the root's matrix
			// view, plainly or transposed.
			r0, r1, c0, c1 := pc.Box[r-2].Lo, pc.Box[r-2].Hi, pc.Box[r-1].Lo, pc.Box[r-1].Hi
			at := func(row, col int) (int, int) {
				copy(x, idx[:r-2])
				x[r-2], x[r-1] = row, col
				f := m.flat(x)
				return f / rootCols, f % rootCols
			}
			br, bc := at(r0, c0)
			transposed := false
			if r1-r0 > 1 {
				nr, nc := at(r0+1, c0)
				transposed = nr == br && nc == bc+1
			} else if c1-c0 > 1 {
				nr, nc := at(r0, c0+1)
				transposed = nr == br+1 && nc == bc
			}
			// A direct map is the root's row-major matrix view: every
			// box is a block of it.
			for row := r0; row < r1 && ferr == nil && !m.direct(); row++ {
				for col := c0; col < c1; col++ {
					gr, gc := at(row, col)
					wr, wc := br+row-r0, bc+col-c0
					if transposed {
						wr, wc = br+col-c0, bc+row-r0
					}
					if gr != wr || gc != wc {
						ferr = l.notLowered(nil, "input %q: tensor %d (%q) is not a block of the input's matrix view", m.root.Name, t.ID, t.Name)
						break
					}
				}
			}
			if ferr != nil {
				return
			}
			var b obj.Block
			R0, R1, C0, C1 := br, br+r1-r0, bc, bc+c1-c0
			if transposed {
				R0, R1, C0, C1 = bc, bc+r1-r0, br, br+c1-c0
			}
			if t.Kind == layout.APanel {
				b = obj.Block{R0: uint32(R0), R1: uint32(R1), C0: uint32(C0), C1: uint32(C1), Rows: uint32(g.GP), Cols: uint32(g.KP), Transpose: transposed, Order: obj.APanel}
			} else {
				b = obj.Block{R0: uint32(R0), R1: uint32(R1), C0: uint32(C0), C1: uint32(C1), Rows: uint32(g.KP), Cols: uint32(g.GP), Transpose: transposed, Order: obj.BPanel}
			}
			bytes := uint32(g.PanelElems * t.Size)
			off, err := l.pageAlloc(in.Page, bytes)
			if err != nil {
				ferr = err
				return
			}
			offs[k] = off
			b.Offset = off
			in.Blocks = append(in.Blocks, b)
			ref := refs[i].Add(g.BatchOffset(idx[:r-2]) * t.Size)
			l.fetch.Host[pc.Tile] = append(l.fetch.Host[pc.Tile], prog.HostOp{In: true, Page: in.Page, Off: off, Ref: ref, Bytes: bytes})
		})
		if ferr != nil {
			return ferr
		}
	}
	return nil
}

// outputs sends every graph output to the host in the result superstep:
// one hout per stretch contiguous in a tile's storage and in the output's
// row-major order, from one holder of each box.
func (l *lowerer) outputs() error {
	for _, v := range l.g.Outputs {
		ot := &l.out.Outputs[l.outIndex[v]]
		t := l.outputTensor(v)
		if t == nil {
			return planErr("output %q has no tensor", v.Name)
		}
		refs, err := l.read(t)
		if err != nil {
			return err
		}
		rows, cols, err := ot.Matrix()
		if err != nil {
			return fmt.Errorf("output %q: %w", v.Name, err)
		}
		_, _ = rows, cols
		if t.Kind != layout.RowMajor || t.Transposed {
			return l.notLowered(nil, "output %q from a %s tensor", v.Name, t.Kind)
		}
		if err := l.rowBlocks(t, refs, false, ot, l.result); err != nil {
			return err
		}
		ot.Accumulate = accumulate(l.acc[v.Index])
	}
	return nil
}

// outputTensor is the tensor of v the host collects: the first row-major
// one a step writes, else the first row-major host or const one.
func (l *lowerer) outputTensor(v *graph.Value) *layout.Tensor {
	var fallback *layout.Tensor
	for _, id := range l.byValue[v.Index] {
		t := l.tensors[id]
		if t.Kind != layout.RowMajor || t.Transposed {
			continue
		}
		if t.Source == layout.FromStep && l.refs[id] != nil {
			return t
		}
		if t.Source != layout.FromStep && fallback == nil {
			fallback = t
		}
	}
	return fallback
}

// accumulate is a graph output's Accumulate for a rounding count: 0 for
// at most one correctly rounded operation.
func accumulate(count int64) int64 {
	if count <= 1 || count == F16Rounding {
		return 0
	}
	return count
}
