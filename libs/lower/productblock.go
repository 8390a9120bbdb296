package lower

import (
	"ipu.local/formats/plan"
	"ipu.local/libs/layout"
)

// RestOf is a plan split's rest as layout's (none for nil).
func RestOf(r *plan.Rest) layout.Rest {
	if r == nil {
		return layout.Rest{}
	}
	return layout.Rest{Cols: r.Axis == "n", At: r.At, GM: r.M, GN: r.N}
}

// PlanRest is a layout split's rest as the plan's (nil for none).
func PlanRest(s layout.Split) *plan.Rest {
	if !s.Cut() {
		return nil
	}
	axis := "m"
	if s.Rest.Cols {
		axis = "n"
	}
	return &plan.Rest{Axis: axis, At: s.Rest.At, M: s.Rest.GM, N: s.Rest.GN}
}

// blockPiece returns the index of the piece of operand tensor t on tile
// tl where the kernel reads block b: the piece b, or, when the blocks
// may be cut (layout.Split.EdgeCut), the first of the pieces that hold b
// cut along its group axis (rows of A, columns of B), which lie one
// after the other in t's storage, each but the last whole groups without
// padding, so that they read as one panel block. -1: none.
func blockPiece(t *layout.Tensor, tl int, b layout.Box, cut bool) int {
	if i := pieceOn(t, tl, b); i >= 0 || !cut {
		return i
	}
	r := len(b)
	ax := r - 2
	if t.Kind == layout.BPanel {
		ax = r - 1
	}
	first, at := -1, b[ax].Lo
	for _, i := range t.OnTile(tl) {
		p := t.Pieces[i].Box
		if p[ax].Lo != at || !sameBut(p, b, ax) || p[ax].Hi > b[ax].Hi {
			if first >= 0 {
				return -1 // the next piece does not continue the block
			}
			continue
		}
		if first < 0 {
			first = i
		}
		at = p[ax].Hi
		if at == b[ax].Hi {
			return first
		}
		if g := t.Geometry(i); g.GP != p[ax].Len() || g.Elems*g.Size%8 != 0 {
			return -1 // padding would sit between the pieces
		}
	}
	return -1
}

// sameBut reports whether boxes a and b agree on every axis but ax.
func sameBut(a, b layout.Box, ax int) bool {
	for d := range a {
		if d != ax && a[d] != b[d] {
			return false
		}
	}
	return true
}
