package layout

import "fmt"

// MapRuns returns the runs that bring the elements of dst inside box
// cover (dst's coordinates) from src, for a data movement whose every
// output element comes from one element of its input known at compile
// time (slices, concatenations, splits, broadcasts, tilings, gathers by
// constant indices): at fills in, for the index out of dst's value, the
// index of src's value it copies. Both tensors are row-major; src
// elements are read from the destination tile's own piece when it holds
// them, else from the nearest holder. Runs are as long as both sides
// stay contiguous.
func MapRuns(src, dst *Tensor, cover Box, at func(out, in []int)) ([]Run, error) {
	if src.Kind != RowMajor || dst.Kind != RowMajor {
		return nil, fmt.Errorf("runs between %s and %s layouts", src.Kind, dst.Kind)
	}
	ix := newBoxIndex(src)
	in := make([]int, len(src.Shape))
	var out []Run
	for di, dp := range dst.Pieces {
		inter, ok := Intersect(dp.Box, cover)
		if !ok && len(cover) > 0 {
			continue
		}
		if len(cover) == 0 {
			inter = dp.Box
		}
		dg := dst.Geometry(di)
		// The source box last found, its holder and geometry.
		k, si := -1, -1
		var sg Geometry
		var err error
		start := len(out)
		eachBoxIndex(inter, func(idx []int) {
			if err != nil {
				return
			}
			at(idx, in)
			if k < 0 || !holds(ix.boxes[k], in) {
				k = -1
				ix.each(point(in), func(j int, _ Box) { k = j })
				if k < 0 {
					err = fmt.Errorf("element %v of %q: no piece of %q holds source element %v", idx, dst.Name, src.Name, in)
					return
				}
				si = holder(ix.holders[k], src, dp.Tile)
				sg = src.Geometry(si)
			}
			so, do := sg.Offset(in), dg.Offset(idx)
			if n := len(out); n > start {
				r := &out[n-1]
				if r.Src == si && r.SrcOff+r.N == so && r.DstOff+r.N == do {
					r.N++
					return
				}
			}
			out = append(out, Run{si, di, so, do, 1})
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// holds reports whether box b holds the element at idx.
func holds(b Box, idx []int) bool {
	for d, i := range idx {
		if i < b[d].Lo || i >= b[d].Hi {
			return false
		}
	}
	return true
}

// point is the box of one element.
func point(idx []int) Box {
	b := make(Box, len(idx))
	for d, i := range idx {
		b[d] = Range{i, i + 1}
	}
	return b
}

// eachBoxIndex calls f for every index of box b in row-major order (once
// for a rank-0 box).
func eachBoxIndex(b Box, f func(idx []int)) {
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
