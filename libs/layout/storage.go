package layout

// Storage of pieces on their tiles (see the package doc).

// Group widths of the panel layouts: A panels hold 4 rows per group, B
// panels 16 columns.
const (
	AGroup = 4
	BGroup = 16
)

// Geometry is how one piece is stored.
type Geometry struct {
	Kind  Kind
	Size  int // bytes per element
	Box   Box // the piece
	Pitch int // RowMajor: elements between rows of the last axis
	// Strides[d] is the element distance between consecutive indices of
	// axis d (RowMajor); for panels, of the batch axes only.
	Strides []int
	// Panels: the padded group and k extents, and elements per batch
	// panel.
	GP, KP, PanelElems int
	Elems              int // elements the piece's storage spans
}

// Geometry returns the storage of piece i.
func (t *Tensor) Geometry(i int) Geometry { return t.GeometryOf(t.Pieces[i].Box) }

// GeometryOf returns the storage a box of t would have.
func (t *Tensor) GeometryOf(b Box) Geometry {
	g := Geometry{Kind: t.Kind, Size: t.Size, Box: b}
	r := len(b)
	switch t.Kind {
	case RowMajor:
		g.Strides = make([]int, r)
		if r == 0 {
			g.Elems = 1
			g.Pitch = 1
			return g
		}
		g.Pitch = pad(b[r-1].Len(), max(t.Pad, 1))
		acc := 1
		for d := r - 1; d >= 0; d-- {
			g.Strides[d] = acc
			if d == r-1 {
				acc = g.Pitch
			} else {
				acc *= b[d].Len()
			}
		}
		if r == 1 {
			acc = b[0].Len()
		}
		g.Elems = acc
	case APanel, BPanel:
		gAx, kAx, w := r-2, r-1, AGroup
		if t.Kind == BPanel {
			gAx, kAx, w = r-1, r-2, BGroup
		}
		g.GP = pad(b[gAx].Len(), w)
		// k padded to even for every element type (FP8 products take
		// two k per instruction), so that one panel's element order is
		// the same whatever its type.
		g.KP = pad(b[kAx].Len(), 2)
		g.PanelElems = g.GP * g.KP
		g.Strides = make([]int, r-2)
		acc := g.PanelElems
		for d := r - 3; d >= 0; d-- {
			g.Strides[d] = acc
			acc *= b[d].Len()
		}
		g.Elems = acc
	}
	return g
}

// Bytes is the piece's storage in bytes, rounded up to 8.
func (g Geometry) Bytes() int { return pad(g.Elems*g.Size, 8) }

// Run is the number of elements from index idx along the box's last
// axis, up to its end, that are stored one after the other from
// Offset(idx).
func (g Geometry) Run(idx []int) int {
	r := len(g.Box)
	if r == 0 {
		return 1
	}
	left := g.Box[r-1].Hi - idx[r-1]
	switch g.Kind {
	case RowMajor:
		return left // the last axis' stride is 1
	case APanel:
		return 1 // the last axis is k: AGroup elements apart
	default:
		n := idx[r-1] - g.Box[r-1].Lo
		return min(left, BGroup-n%BGroup)
	}
}

// Offset is the element offset of the value's element at index idx (in
// the value's coordinates, inside the box).
func (g Geometry) Offset(idx []int) int {
	r := len(g.Box)
	switch g.Kind {
	case RowMajor:
		off := 0
		for d := 0; d < r; d++ {
			off += (idx[d] - g.Box[d].Lo) * g.Strides[d]
		}
		return off
	case APanel:
		off := 0
		for d := 0; d < r-2; d++ {
			off += (idx[d] - g.Box[d].Lo) * g.Strides[d]
		}
		m, k := idx[r-2]-g.Box[r-2].Lo, idx[r-1]-g.Box[r-1].Lo
		return off + m/AGroup*AGroup*g.KP + AGroup*k + m%AGroup
	default:
		off := 0
		for d := 0; d < r-2; d++ {
			off += (idx[d] - g.Box[d].Lo) * g.Strides[d]
		}
		k, n := idx[r-2]-g.Box[r-2].Lo, idx[r-1]-g.Box[r-1].Lo
		return off + n/BGroup*BGroup*g.KP + BGroup*k + n%BGroup
	}
}

// BatchOffset is the element offset of the panel of batch index idx
// (batch axes only, in the value's coordinates).
func (g Geometry) BatchOffset(idx []int) int {
	off := 0
	for d := range g.Strides {
		off += (idx[d] - g.Box[d].Lo) * g.Strides[d]
	}
	return off
}

// PieceOffsets returns, for every piece, its byte offset in its tile's
// storage of the tensor (pieces of a tile one after the other, each
// 8-byte aligned), and the bytes each tile's storage takes.
func (t *Tensor) PieceOffsets() (offs []int, perTile map[int]int) {
	offs = make([]int, len(t.Pieces))
	perTile = make(map[int]int, len(t.Pieces))
	for i, p := range t.Pieces {
		offs[i] = perTile[p.Tile]
		perTile[p.Tile] += t.Geometry(i).Bytes()
	}
	return offs, perTile
}

// MaxTileBytes is the largest storage of the tensor on one tile.
func (t *Tensor) MaxTileBytes() int {
	_, per := t.PieceOffsets()
	m := 0
	for _, b := range per {
		m = max(m, b)
	}
	return m
}
