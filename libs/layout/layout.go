// Package layout owns where tensors live on the tiles: the tile mapping of
// every value (which elements each tile holds) and how a tile stores them
// (row-major with a padded row pitch, or the matrix kernels' panel
// layouts). The planner chooses mappings with the constructors here, the
// cost model and the linker read them back, and the run computations
// (runs.go) say what moves when a value goes from one mapping to another.
//
// # Mappings
//
// A Tensor is one layout of one graph value: its pieces are boxes (one
// [lo, hi) range per axis) of the value, each held by one tile. The
// distinct boxes of a tensor partition the value: they are disjoint and
// cover every element. A box may be held by several tiles (replication),
// and a tile may hold several boxes.
//
// # Storage
//
// A tile stores each of its pieces contiguously, in the order of
// Tensor.Pieces, each piece from an 8-byte aligned offset:
//
//   - RowMajor: the box row-major, its last axis padded to a pitch that
//     is a multiple of Pad elements (DefaultPad: every row starts 8-byte
//     aligned, as the vector kernels load rows; 1: dense);
//   - APanel (a matrix product's left operand [..., M, K]): per index of
//     the batch axes (row-major), a panel of the box's rows in groups of
//     4, k-major: (m, k) at ((m-m0)/4)*4*KP + 4*(k-k0) + (m-m0)%4, the
//     rows padded to a multiple of 4 and KP the k extent rounded up to
//     even (FP8 products take two k at a time; every type pads alike so
//     that a cast maps a panel onto a panel element for element);
//   - BPanel (the right operand [..., K, N]): per batch index, panels of
//     16 columns, k-major: (k, n) at ((n-n0)/16)*16*KP + 16*(k-k0) +
//     (n-n0)%16, the columns padded to a multiple of 16.
//
// A panel piece starts its group axis on a group boundary (m0 a multiple
// of 4, n0 of 16). This is the layout codegen.MatMul reads.
package layout

import (
	"encoding/binary"
	"fmt"
	"sort"
	"strings"
)

// Range is [Lo, Hi) along one axis.
type Range struct{ Lo, Hi int }

// Len is the range's extent.
func (r Range) Len() int { return r.Hi - r.Lo }

// Box is one range per axis.
type Box []Range

// Volume is the box's element count (1 for a rank-0 box).
func (b Box) Volume() int {
	n := 1
	for _, r := range b {
		n *= r.Len()
	}
	return n
}

// Empty reports whether the box holds no element.
func (b Box) Empty() bool {
	for _, r := range b {
		if r.Lo >= r.Hi {
			return true
		}
	}
	return false
}

// Intersect returns the intersection of a and b (same rank); ok is false
// when it is empty.
func Intersect(a, b Box) (Box, bool) {
	// Most calls (index scans) miss: test before allocating.
	for i := range a {
		if max(a[i].Lo, b[i].Lo) >= min(a[i].Hi, b[i].Hi) {
			return nil, false
		}
	}
	out := make(Box, len(a))
	for i := range a {
		out[i] = Range{max(a[i].Lo, b[i].Lo), min(a[i].Hi, b[i].Hi)}
	}
	return out, true
}

// Equal reports whether two boxes are the same.
func (b Box) Equal(c Box) bool {
	if len(b) != len(c) {
		return false
	}
	for i := range b {
		if b[i] != c[i] {
			return false
		}
	}
	return true
}

// Less orders boxes lexicographically by (lo, hi) per axis.
func (b Box) Less(c Box) bool {
	for i := 0; i < len(b) && i < len(c); i++ {
		if b[i].Lo != c[i].Lo {
			return b[i].Lo < c[i].Lo
		}
		if b[i].Hi != c[i].Hi {
			return b[i].Hi < c[i].Hi
		}
	}
	return len(b) < len(c)
}

// Contains reports whether c lies inside b.
func (b Box) Contains(c Box) bool {
	for i := range b {
		if c[i].Lo < b[i].Lo || c[i].Hi > b[i].Hi {
			return false
		}
	}
	return true
}

func (b Box) String() string {
	var s strings.Builder
	s.WriteByte('[')
	for i, r := range b {
		if i > 0 {
			s.WriteByte(',')
		}
		fmt.Fprintf(&s, "%d:%d", r.Lo, r.Hi)
	}
	s.WriteByte(']')
	return s.String()
}

// Clone copies the box.
func (b Box) Clone() Box { return append(Box(nil), b...) }

// Full is the box of a whole shape.
func Full(shape []int) Box {
	b := make(Box, len(shape))
	for i, d := range shape {
		b[i] = Range{0, d}
	}
	return b
}

// Kind is how a tile stores a piece.
type Kind uint8

// Storage kinds.
const (
	RowMajor Kind = iota
	APanel
	BPanel
)

var kindNames = []string{"rowmajor", "apanel", "bpanel"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// ParseKind reads a kind's name.
func ParseKind(s string) (Kind, bool) {
	for i, n := range kindNames {
		if n == s {
			return Kind(i), true
		}
	}
	return 0, false
}

// Source says where a tensor's data comes from.
type Source uint8

// Sources.
const (
	FromStep  Source = iota // written by a step of the plan
	FromHost                // delivered by the host (a graph input, through views)
	FromConst               // in the tile images (a constant, through views)
)

var sourceNames = []string{"step", "host", "const"}

func (s Source) String() string {
	if int(s) < len(sourceNames) {
		return sourceNames[s]
	}
	return fmt.Sprintf("source(%d)", uint8(s))
}

// ParseSource reads a source's name.
func ParseSource(s string) (Source, bool) {
	for i, n := range sourceNames {
		if n == s {
			return Source(i), true
		}
	}
	return 0, false
}

// Piece is one box of a tensor on one tile.
type Piece struct {
	Tile int
	Box  Box
}

// Tensor is one layout of one value.
type Tensor struct {
	ID    int
	Value int    // the graph value's index
	Name  string // the value's name
	Size  int    // bytes per element
	Shape []int
	// Transposed: the tensor holds the value with its last two axes
	// swapped (a matrix product's transposed operand); Shape and the
	// boxes are in those coordinates.
	Transposed bool
	Kind       Kind
	Pad        int // RowMajor: the row pitch is a multiple of Pad elements
	Source     Source
	Pieces     []Piece // sorted by tile, then box
}

// Rank is the tensor's rank.
func (t *Tensor) Rank() int { return len(t.Shape) }

// Elements is the value's element count.
func (t *Tensor) Elements() int { return Full(t.Shape).Volume() }

// SortPieces puts the pieces in their canonical order and drops exact
// duplicates.
func (t *Tensor) SortPieces() {
	sort.Slice(t.Pieces, func(i, j int) bool { return pieceLess(t.Pieces[i], t.Pieces[j]) })
	out := t.Pieces[:0]
	for i, p := range t.Pieces {
		if i > 0 && p.Tile == t.Pieces[i-1].Tile && p.Box.Equal(t.Pieces[i-1].Box) {
			continue
		}
		out = append(out, p)
	}
	t.Pieces = out
}

func pieceLess(a, b Piece) bool {
	if a.Tile != b.Tile {
		return a.Tile < b.Tile
	}
	return a.Box.Less(b.Box)
}

// Tiles returns the tiles holding a piece, sorted.
func (t *Tensor) Tiles() []int {
	var ts []int
	for i, p := range t.Pieces {
		if i == 0 || p.Tile != t.Pieces[i-1].Tile {
			ts = append(ts, p.Tile)
		}
	}
	return ts
}

// OnTile returns the indices of the pieces on tile tl.
func (t *Tensor) OnTile(tl int) []int {
	i := sort.Search(len(t.Pieces), func(i int) bool { return t.Pieces[i].Tile >= tl })
	var out []int
	for ; i < len(t.Pieces) && t.Pieces[i].Tile == tl; i++ {
		out = append(out, i)
	}
	return out
}

// Key is a string identifying the tensor's layout (kind, pad, pieces),
// not its value or ID: two tensors of one value with the same key hold
// the same elements the same way.
func (t *Tensor) Key() string {
	b := make([]byte, 0, 16+len(t.Pieces)*(2+4*len(t.Shape)))
	tr := uint64(0)
	if t.Transposed {
		tr = 1
	}
	for _, v := range []uint64{uint64(t.Kind), uint64(t.Pad), uint64(t.Size), tr, uint64(len(t.Pieces))} {
		b = binary.AppendUvarint(b, v)
	}
	for _, p := range t.Pieces {
		b = binary.AppendUvarint(b, uint64(p.Tile))
		b = binary.AppendUvarint(b, uint64(len(p.Box)))
		for _, r := range p.Box {
			b = binary.AppendVarint(b, int64(r.Lo))
			b = binary.AppendVarint(b, int64(r.Hi))
		}
	}
	return string(b)
}

// SameLayout reports whether a and b store the same boxes on the same
// tiles the same way (values and IDs aside).
func SameLayout(a, b *Tensor) bool {
	if a.Kind != b.Kind || a.Size != b.Size || a.pad() != b.pad() || a.Transposed != b.Transposed || len(a.Pieces) != len(b.Pieces) || len(a.Shape) != len(b.Shape) {
		return false
	}
	for i := range a.Shape {
		if a.Shape[i] != b.Shape[i] {
			return false
		}
	}
	for i, p := range a.Pieces {
		q := b.Pieces[i]
		if p.Tile != q.Tile || !p.Box.Equal(q.Box) {
			return false
		}
	}
	return true
}

func (t *Tensor) pad() int {
	if t.Kind != RowMajor {
		return 0
	}
	return max(t.Pad, 1)
}

// Clone copies the tensor.
func (t *Tensor) Clone() *Tensor {
	c := *t
	c.Shape = append([]int(nil), t.Shape...)
	c.Pieces = make([]Piece, len(t.Pieces))
	for i, p := range t.Pieces {
		c.Pieces[i] = Piece{p.Tile, p.Box.Clone()}
	}
	return &c
}

// DefaultPad is the pad of a row-major tensor of size-byte elements:
// rows start 8-byte aligned.
func DefaultPad(size int) int { return max(1, 8/max(size, 1)) }

func pad(n, m int) int {
	if m <= 1 {
		return n
	}
	return (n + m - 1) / m * m
}

// Pad rounds n up to a multiple of m.
func Pad(n, m int) int { return pad(n, m) }
