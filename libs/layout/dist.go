package layout

// Constructors of the mappings the planner chooses from.

// Grid returns the pieces of a block grid over shape: axis d split into
// counts[d] blocks (1 for every axis past len(counts)), each block of
// axis d starting at a multiple of aligns[d] (0 or 1: any), the blocks
// numbered row-major over the grid and placed on tiles lo, lo+1, ...
// Blocks past an axis's last unit are empty and take no tile.
func Grid(shape []int, counts, aligns []int, lo int) []Piece {
	r := len(shape)
	type axis struct{ lo, hi []int }
	ax := make([]axis, r)
	for d := 0; d < r; d++ {
		g, al := 1, 1
		if d < len(counts) {
			g = max(1, counts[d])
		}
		if d < len(aligns) {
			al = max(1, aligns[d])
		}
		g = min(g, Units(shape[d], al))
		for b := 0; b < g; b++ {
			l, h := AlignedBlock(shape[d], g, b, al)
			if l < h {
				ax[d].lo = append(ax[d].lo, l)
				ax[d].hi = append(ax[d].hi, h)
			}
		}
	}
	if r == 0 {
		return []Piece{{lo, Box{}}}
	}
	var out []Piece
	idx := make([]int, r)
	t := lo
	for {
		box := make(Box, r)
		for d := range box {
			box[d] = Range{ax[d].lo[idx[d]], ax[d].hi[idx[d]]}
		}
		out = append(out, Piece{t, box})
		t++
		d := r - 1
		for d >= 0 {
			idx[d]++
			if idx[d] < len(ax[d].lo) {
				break
			}
			idx[d] = 0
			d--
		}
		if d < 0 {
			break
		}
	}
	return out
}

// GridCounts chooses block counts for the leading axes of shape (all but
// the last keep axes), at most n blocks in all: the outer axes first,
// each as split as the tiles left allow, in units of aligns (as Grid).
func GridCounts(shape []int, keep, n int, aligns []int) []int {
	r := len(shape)
	counts := make([]int, r)
	left := max(n, 1)
	for d := 0; d < r; d++ {
		counts[d] = 1
		if d >= r-keep {
			continue
		}
		al := 1
		if d < len(aligns) {
			al = max(1, aligns[d])
		}
		g := min(Units(shape[d], al), left)
		counts[d] = max(g, 1)
		left /= counts[d]
	}
	return counts
}

// Replicated returns the whole value on each of tiles.
func Replicated(shape []int, tiles []int) []Piece {
	out := make([]Piece, len(tiles))
	for i, t := range tiles {
		out[i] = Piece{t, Full(shape)}
	}
	return out
}

// Permuted returns t's pieces for transpose(t's value, perm): the same
// tiles, the boxes' axes permuted.
func Permuted(pieces []Piece, perm []int) []Piece {
	out := make([]Piece, len(pieces))
	for i, p := range pieces {
		out[i] = Piece{p.Tile, PermuteBox(p.Box, perm, false)}
	}
	return out
}

// Reshaped returns the pieces of a row-major tensor of a reshape of t's
// value to shape that stores every element exactly where t does (the
// same tiles, the same storage), ok false when a piece is not such a box
// of the new shape.
func Reshaped(t *Tensor, shape []int, pad int) ([]Piece, bool) {
	if t.Kind != RowMajor || Full(shape).Volume() != t.Elements() {
		return nil, false
	}
	probe := &Tensor{Size: t.Size, Shape: shape, Kind: RowMajor, Pad: pad}
	out := make([]Piece, len(t.Pieces))
	for i, p := range t.Pieces {
		segs := segments(t, i)
		first := segs[0].flat
		last := segs[len(segs)-1].flat + segs[len(segs)-1].n - 1
		lo, hi := unflatten(first, shape), unflatten(last, shape)
		box := make(Box, len(shape))
		for d := range box {
			if lo[d] > hi[d] {
				return nil, false
			}
			box[d] = Range{lo[d], hi[d] + 1}
		}
		probe.Pieces = []Piece{{p.Tile, box}}
		ns := segments(probe, 0)
		if !sameSegments(segs, ns) || probe.Geometry(0).Elems != t.Geometry(i).Elems {
			return nil, false
		}
		out[i] = Piece{p.Tile, box}
	}
	return out, true
}

func unflatten(f int, shape []int) []int {
	idx := make([]int, len(shape))
	for d := len(shape) - 1; d >= 0; d-- {
		idx[d] = f % shape[d]
		f /= shape[d]
	}
	return idx
}

// sameSegments reports whether two segment lists cover the same flat
// ranges at the same storage offsets (merging adjacent ones).
func sameSegments(a, b []segment) bool {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		var x, y segment
		x, i = mergedSegment(a, i)
		y, j = mergedSegment(b, j)
		if x != y {
			return false
		}
	}
	return i == len(a) && j == len(b)
}

// mergedSegment returns the segment of s starting at i merged with the
// ones after it that continue it in the value and in storage (its piece
// 0), and the index past them.
func mergedSegment(s []segment, i int) (segment, int) {
	m := segment{0, s[i].flat, s[i].n, s[i].off}
	for i++; i < len(s) && m.flat+m.n == s[i].flat && m.off+m.n == s[i].off; i++ {
		m.n += s[i].n
	}
	return m, i
}
