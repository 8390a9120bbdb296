package planner

import "ipu.local/libs/layout"

// fillKeep is how many of a product's first candidates a wide start
// also prices filled (see addFilled).
const fillKeep = 2

// addFilled appends to grids, for each of its first fillKeep, the splits
// that raise its row or column block count as far as the planner's
// tiles allow, each the fewest blocks for the shortest block that many
// give, on the axes whose blocks copy a constant operand (the row blocks
// copy B, the column blocks A) where that shortens the blocks. The
// screen keeps the splits that copy a constant at most startCopies times
// and ranks each smaller tile budget's splits on their own, so a
// product's first candidates often leave tiles idle; filling copies the
// constant further, which the start's full price weighs against each
// tile's shorter block. A cut split is not filled.
func (pl *planner) addFilled(pr *product, grids []layout.Split, seen map[layout.Split]bool) []layout.Split {
	units := [2]int{layout.Units(pr.mm.M, max(layout.AGroup, pr.align)), layout.Units(pr.mm.N, max(layout.BGroup, pr.nalign))}
	copies := [2]bool{isConst(pr.b.w), isConst(pr.a.w)}
	for _, g := range grids[:min(fillKeep, len(grids))] {
		if g.Cut() {
			continue
		}
		for axis, f := range [2]int{g.GM, g.GN} {
			u := units[axis]
			n := min(pl.tiles/(g.Tiles()/max(f, 1)), u)
			if !copies[axis] || n <= f || ceilDiv(u, n) >= ceilDiv(u, f) {
				continue
			}
			n = ceilDiv(u, ceilDiv(u, n)) // the fewest blocks for that length
			v := g
			if axis == 0 {
				v.GM = n
			} else {
				v.GN = n
			}
			if v = withOrder(v); !seen[v] {
				seen[v] = true
				grids = append(grids, v)
			}
		}
	}
	return grids
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }
