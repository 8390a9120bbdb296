package layout

import (
	"fmt"
	"sort"
)

// Error is a tensor whose layout does not hold.
type Error struct {
	ID   int
	Name string
	Msg  string
}

func (e *Error) Error() string {
	return fmt.Sprintf("tensor %d (%q): %s", e.ID, e.Name, e.Msg)
}

func (t *Tensor) errf(format string, args ...any) error {
	return &Error{ID: t.ID, Name: t.Name, Msg: fmt.Sprintf(format, args...)}
}

// Errorf returns an Error naming t.
func (t *Tensor) Errorf(format string, args ...any) error { return t.errf(format, args...) }

// Validate checks t's pieces against its shape and kind: boxes inside the
// shape, panel groups aligned, rows 8-byte aligned, pieces sorted, and the
// distinct boxes a partition of the value (disjoint and covering). tiles
// bounds the tile indices.
func (t *Tensor) Validate(tiles int) error {
	if t.Size < 1 || t.Size > 8 {
		return t.errf("element size %d", t.Size)
	}
	r := len(t.Shape)
	switch t.Kind {
	case RowMajor:
		if t.Pad < 1 {
			return t.errf("pad %d: a row-major layout pads its rows to a multiple of at least 1 element", t.Pad)
		}
	case APanel, BPanel:
		if r < 2 {
			return t.errf("a %s layout of a rank-%d value (panels need a matrix)", t.Kind, r)
		}
		if t.Pad != 0 {
			return t.errf("pad %d on a %s layout", t.Pad, t.Kind)
		}
	default:
		return t.errf("unknown kind %d", t.Kind)
	}
	if len(t.Pieces) == 0 {
		return t.errf("no pieces")
	}
	for i, p := range t.Pieces {
		if p.Tile < 0 || p.Tile >= tiles {
			return t.errf("piece %d: tile %d out of range [0, %d)", i, p.Tile, tiles)
		}
		if len(p.Box) != r {
			return t.errf("piece %d: %d ranges for a rank-%d value", i, len(p.Box), r)
		}
		for d, rg := range p.Box {
			if rg.Lo < 0 || rg.Lo >= rg.Hi || rg.Hi > t.Shape[d] {
				return t.errf("piece %d on tile %d: axis %d range [%d, %d) is empty or outside [0, %d)", i, p.Tile, d, rg.Lo, rg.Hi, t.Shape[d])
			}
		}
		switch t.Kind {
		case APanel:
			if p.Box[r-2].Lo%AGroup != 0 {
				return t.errf("piece %d on tile %d: rows start at %d, not on a group of %d", i, p.Tile, p.Box[r-2].Lo, AGroup)
			}
		case BPanel:
			if p.Box[r-1].Lo%BGroup != 0 {
				return t.errf("piece %d on tile %d: columns start at %d, not on a panel of %d", i, p.Tile, p.Box[r-1].Lo, BGroup)
			}
		}
		if i > 0 && !pieceLess(t.Pieces[i-1], p) {
			return t.errf("piece %d (tile %d %s) not after piece %d (sorted by tile, then box; once each)", i, p.Tile, p.Box, i-1)
		}
	}
	return t.checkPartition()
}

// Distinct returns the distinct boxes of t, sorted, with the tiles holding
// each (sorted).
func (t *Tensor) Distinct() ([]Box, [][]int) {
	idx := make([]int, len(t.Pieces))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool {
		pa, pb := t.Pieces[idx[a]], t.Pieces[idx[b]]
		if !pa.Box.Equal(pb.Box) {
			return pa.Box.Less(pb.Box)
		}
		return pa.Tile < pb.Tile
	})
	var boxes []Box
	var holders [][]int
	for _, i := range idx {
		p := t.Pieces[i]
		if n := len(boxes); n > 0 && boxes[n-1].Equal(p.Box) {
			holders[n-1] = append(holders[n-1], p.Tile)
			continue
		}
		boxes = append(boxes, p.Box)
		holders = append(holders, []int{p.Tile})
	}
	return boxes, holders
}

// checkPartition requires the distinct boxes to be disjoint and to cover
// the value.
func (t *Tensor) checkPartition() error {
	boxes, holders := t.Distinct()
	total := 0
	for _, b := range boxes {
		total += b.Volume()
	}
	if want := Full(t.Shape).Volume(); total != want {
		if total < want {
			return t.errf("its pieces cover %d of the value's %d elements", total, want)
		}
	}
	// Sweep along the axis with the most distinct starts.
	r := len(t.Shape)
	ax := 0
	best := -1
	for d := 0; d < r; d++ {
		seen := map[int]bool{}
		for _, b := range boxes {
			seen[b[d].Lo] = true
		}
		if len(seen) > best {
			best, ax = len(seen), d
		}
	}
	order := make([]int, len(boxes))
	for i := range order {
		order[i] = i
	}
	if r > 0 {
		sort.Slice(order, func(a, b int) bool { return boxes[order[a]][ax].Lo < boxes[order[b]][ax].Lo })
	}
	for a := 0; a < len(order); a++ {
		ba := boxes[order[a]]
		for b := a + 1; b < len(order); b++ {
			bb := boxes[order[b]]
			if r > 0 && bb[ax].Lo >= ba[ax].Hi {
				break
			}
			if _, ok := Intersect(ba, bb); ok {
				return t.errf("boxes %s (tile %d) and %s (tile %d) overlap", ba, holders[order[a]][0], bb, holders[order[b]][0])
			}
		}
	}
	if want := Full(t.Shape).Volume(); total != want {
		return t.errf("its pieces cover %d elements, the value has %d", total, want)
	}
	return nil
}
