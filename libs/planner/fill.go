package planner

// A wide start's use of the tiles its screen leaves idle: the candidates
// filled to the tiles; and the refit rounds after the start, a deep
// model's too.

import (
	"errors"
	"slices"

	"ipu.local/formats/plan"
	"ipu.local/libs/layout"
	"ipu.local/libs/lower"
)

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

// refitRounds bounds the rounds of the refit pass.
const refitRounds = 2

// refit is the refit pass of a start: each round prices, for the
// first product of every class, its split with one block count doubled
// and another cut to what the tiles leave (refits), and takes the
// cheapest point if it beats pt. A deep model's (deep: a narrow start)
// doubles only row or column blocks, cutting k: its start keeps the
// copies of constants few and splits k instead (startCopies), and a
// refit trades k blocks for copies where they pay; it takes the
// cheapest point whose code, estimated, leaves room on every tile
// (codeRoom), since the search counts a tile's code as codeAllowance
// and a deep model's is many times that. The 12-layer BERT-base FP16
// encoder on 1,472 tiles: 977,356 linked cycles before, 857,023 with
// the deep refit (the FFN's two products split k 15 and 9 ways instead
// of 16, with twice the row or column blocks); without the room check
// its second round took a point whose buffers did not place
// (docs/compiler.md). Unlike cheapest (one product's
// candidates, priced in the start), a round prices every class's
// candidates in one batch, and a candidate whose halved row layouts
// leave a tile's code too large (CodeError) is only no candidate: the
// start has settled those layouts, which startFitting redoes on that
// error.
//
// A round after the first prices the refits of the product the last
// round moved, and of the others only those that beat the last round's
// point: a refit that did not pay then seldom pays after another
// product's. Of the golden transformer models whose second round
// gained, one lost that gain (torch_attention on 1,472 tiles: the
// search's price 22,705 cycles instead of 22,676; its linked plan
// happens to be 7 cycles shorter); the BERT-base layer's second round
// prices 6 points instead of 21. Which refits paid is known for every
// worker count: a round skips only the points whose floor rules them
// out (evalBelow, not running).
func (pl *planner) refit(pt point, r *result, deep bool) (point, *result, error) {
	var paid map[refitMove]bool // nil in the first round
	moved := -1                 // the product the last round moved
	for range refitRounds {
		var cands []point
		var moves []refitMove
		classes := map[string]bool{}
		for i, pr := range pl.products {
			if classes[pr.class()] {
				continue // decide moves the whole class
			}
			classes[pr.class()] = true
			for _, s := range refits(pr, pt[i].Split, pl.tiles, deep) {
				m := refitMove{i, s}
				if paid != nil && i != moved && !paid[m] {
					continue
				}
				d := pt[i]
				d.Split = s
				d.Tiles = [2]int{0, max(s.B, 1) * s.M * s.N * s.K} // placed by decide
				nb := pt.clone()
				pl.decide(nb, i, d)
				cands = append(cands, nb)
				moves = append(moves, m)
			}
		}
		rs, errs := pl.evalBelow(cands, ceilings(len(cands), r.cost()), false)
		best, err := pl.cheapestOf(cands, rs, errs, r)
		for deep && err == nil && best >= 0 {
			// A deep model's code takes what its copies would: the
			// cheapest whose code leaves room.
			var room int64
			if room, err = pl.codeRoom(cands[best]); err != nil || room >= 0 {
				break
			}
			rs[best] = nil
			best, err = pl.cheapestOf(cands, rs, errs, r)
		}
		if err != nil {
			return nil, nil, err
		}
		if best < 0 {
			break
		}
		paid = map[refitMove]bool{}
		for j, rj := range rs {
			if errs[j] == nil && rj != nil && rj.mem == nil && rj.cost() < r.cost() {
				paid[moves[j]] = true
			}
		}
		moved = moves[best].i
		pt, r = cands[best], rs[best]
	}
	return pt, r, nil
}

// refitMove is a refit candidate: product i's split s.
type refitMove struct {
	i int
	s plan.Split
}

// cheapestBelow prices cands in one batch (the ones that may cost less
// than r, evalBelow) and returns the index and price of the cheapest
// that fits and costs less than r (-1: none). A
// candidate whose layout the linker cannot run (NotLoweredError) or whose
// code does not fit a tile (CodeError) is no candidate; another error
// ends the search.
func (pl *planner) cheapestBelow(cands []point, r *result) (int, *result, error) {
	rs, errs := pl.evalBelow(cands, ceilings(len(cands), r.cost()), true)
	best, err := pl.cheapestOf(cands, rs, errs, r)
	if best < 0 || err != nil {
		return -1, nil, err
	}
	return best, rs[best], nil
}

// cheapestOf returns the index of the cheapest of cands priced rs (and
// errs) that fits and costs less than r (-1: none), as cheapestBelow.
func (pl *planner) cheapestOf(cands []point, rs []*result, errs []error, r *result) (int, error) {
	best := -1
	for j, cand := range cands {
		if rs[j] == nil && errs[j] == nil {
			continue // cannot cost less than r
		}
		pl.count(cand)
		if err := errs[j]; err != nil {
			var nl *lower.NotLoweredError
			var ce *CodeError
			if errors.As(err, &nl) || errors.As(err, &ce) {
				continue // not a candidate
			}
			return -1, err
		}
		if rs[j].mem == nil && rs[j].cost() < r.cost() && (best < 0 || rs[j].cost() < rs[best].cost()) {
			best = j
		}
	}
	return best, nil
}

// refits returns s with one of its row, column or k block counts doubled
// (within its axis's units) and another cut to the most the tiles leave
// room for, for each such pair that fits, each split once; deep, only
// the row or column counts doubled (k cut); none of a cut split.
func refits(pr *product, s plan.Split, tiles int, deep bool) []plan.Split {
	if s.Rest != nil {
		return nil
	}
	lim := [3]int{layout.Units(pr.mm.M, max(layout.AGroup, pr.align)), layout.Units(pr.mm.N, max(layout.BGroup, pr.nalign)), pr.mm.K}
	var out []plan.Split
	for a := range 3 {
		for b := range 3 {
			if a == b || a != 2 && b != 2 {
				continue // rows against columns: the screen ranks those
			}
			f := [3]int{max(s.M, 1), max(s.N, 1), max(s.K, 1)}
			if f[a] >= lim[a] || deep && a == 2 {
				continue
			}
			f[a] = min(2*f[a], lim[a])
			rest := max(s.B, 1) * f[a] * f[3-a-b]
			if rest > tiles {
				continue
			}
			f[b] = min(tiles/rest, lim[b], f[b])
			v := s
			v.M, v.N, v.K = f[0], f[1], f[2]
			if v.K != s.K && (v.K <= 1 || s.K <= 1) {
				v.Parts = pr.defaultParts(v.K)
			}
			v.Order = ""
			if v.M > v.N {
				v.Order = "b" // as withOrder
			}
			if !slices.Contains(out, v) {
				out = append(out, v)
			}
		}
	}
	return out
}
