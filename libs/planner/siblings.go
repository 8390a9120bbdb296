package planner

// Sibling products side by side: the products that read the same value
// and do not depend on one another (an attention block's Q, K and V
// projections) may each take a share of the tiles and run in the same
// supersteps, where the start, deciding one product at a time, gives the
// first one the tiles it alone runs fastest on and leaves the others to
// share them or crowd into what is left.

import (
	"slices"
	"strings"

	"ipu.local/formats/plan"
	"ipu.local/libs/graph"
	"ipu.local/libs/layout"
)

// siblingKeep is how many of each member's screened splits (by rank) a
// group's side-by-side arrangements try.
const siblingKeep = 4

// siblingGroups returns the groups of two or more products, in product
// order, that read the same non-constant operand root (a product joins
// the group of its A operand's root, else of its B operand's) and none of
// which depends on another member's result.
func (pl *planner) siblingGroups() [][]int {
	var roots []*graph.Value
	byRoot := map[*graph.Value][]int{}
	for i, pr := range pl.products {
		var r *graph.Value
		switch {
		case !isConst(pr.a.w):
			r = pr.a.root
		case !isConst(pr.b.w):
			r = pr.b.root
		default:
			continue
		}
		g := byRoot[r]
		if g == nil {
			roots = append(roots, r)
		}
		independent := true
		for _, j := range g {
			if m := pl.products[j].node; dependsOn(pr.node, m) || dependsOn(m, pr.node) {
				independent = false
				break
			}
		}
		if independent {
			byRoot[r] = append(g, i)
		}
	}
	var out [][]int
	for _, r := range roots {
		if g := byRoot[r]; len(g) >= 2 {
			out = append(out, g)
		}
	}
	return out
}

// dependsOn reports whether node n reads, directly or through other
// nodes, a value that node m computes.
func dependsOn(n, m *graph.Node) bool {
	seen := map[*graph.Node]bool{}
	stack := []*graph.Node{n}
	for len(stack) > 0 {
		x := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, v := range x.Inputs {
			if v == nil || v.Producer == nil || seen[v.Producer] {
				continue
			}
			if v.Producer == m {
				return true
			}
			seen[v.Producer] = true
			stack = append(stack, v.Producer)
		}
	}
	return false
}

// signature is a group's members' classes: groups with equal signatures
// (the same block in each layer of a deep model) take the same
// arrangement.
func (pl *planner) signature(g []int) string {
	cs := make([]string, len(g))
	for k, i := range g {
		cs[k] = pl.products[i].class()
	}
	return strings.Join(cs, "\n")
}

// arrange returns the decisions of a side-by-side arrangement of group g
// of pt: member k takes the rank-th split (or its last) of its screened
// splits lists[k], on tiles [0, n) of its n (placeGroup places it).
// False when the members' tiles together exceed the planner's.
func (pl *planner) arrange(pt point, g []int, lists [][]layout.Split, rank int) ([]plan.Decision, bool) {
	out := make([]plan.Decision, len(g))
	total := 0
	for k, i := range g {
		s := lists[k][min(rank, len(lists[k])-1)]
		d := decision(pl.products[i].idx, s, pt[i].CastOrder, pt[i].Stationary)
		d.Split.Parts = pl.products[i].defaultParts(d.Split.K)
		total += d.Tiles[1]
		out[k] = d
	}
	return out, total <= pl.tiles
}

// arranged is a point with the first m groups of a signature side by
// side.
type arranged struct {
	pt point
	m  int
}

// arrangements returns pt with the groups gs (of one signature) side by
// side: for the splits screened with constants copied at most
// startCopies times, and for those copied any number of times, the
// members' rank-th splits for each rank below siblingKeep, every group of
// each share of gs alike; each point once.
func (pl *planner) arrangements(pt point, gs [][]int) []arranged {
	first := gs[0]
	budget := pl.tiles / len(first)
	var cands []arranged
	seen := map[string]bool{}
	for _, copies := range []int{startCopies, 0} {
		lists := make([][]layout.Split, len(first))
		ranks := 0
		for k, i := range first {
			lists[k], _ = pl.screenN(pl.products[i], budget, 0, copies)
			if len(lists[k]) == 0 {
				ranks = 0
				break
			}
			ranks = max(ranks, min(siblingKeep, len(lists[k])))
		}
		for rank := range ranks {
			ds, ok := pl.arrange(pt, first, lists, rank)
			if !ok {
				continue
			}
			for _, m := range shares(len(gs)) {
				nb := pt.clone()
				fits := true
				for _, g := range gs[:m] {
					fits = fits && pl.placeGroup(nb, g, ds)
				}
				if k := nb.key(); fits && !seen[k] {
					seen[k] = true
					cands = append(cands, arranged{nb, m})
				}
			}
		}
	}
	return cands
}

// shares returns how many of n groups of a signature an arrangement
// takes: all of them, and for a deep model also the first 7/8, 3/4, 5/8
// and 1/2 of them (rounded up): the code of every layer's members on the
// same tiles may not fit them (the 12-layer BERT-base encoder's code
// fits for 7 of its 11 groups of a signature, not for 8).
func shares(n int) []int {
	out := []int{n}
	for _, e := range []int{7, 6, 5, 4} {
		if m := (e*n + 7) / 8; m < out[len(out)-1] {
			out = append(out, m)
		}
	}
	return out
}

// placeGroup sets group g's members of pt to the decisions ds of an
// arrangement, each member in turn on the range where the constants and
// code of the products outside the group and of the members placed
// before weigh least (placeRange's rule) among those that overlap no
// member placed before: the groups of a deep model's layers spread over
// the tiles as its single products do. False when a member finds no
// such range.
func (pl *planner) placeGroup(pt point, g []int, ds []plan.Decision) bool {
	for k, i := range g {
		d := ds[k]
		d.Node = pl.products[i].idx
		n := d.Tiles[1]
		placed := g[:k]
		var next []int // the ranges right after and right before the placed members
		for _, j := range placed {
			next = append(next, pt[j].Tiles[1], pt[j].Tiles[0]-n)
		}
		unplaced := func(j int) bool { return slices.Contains(g[k:], j) }
		lo := pl.leastLoaded(pt, n, unplaced, func(lo, hi int) bool {
			for _, j := range placed {
				if lo < pt[j].Tiles[1] && pt[j].Tiles[0] < hi {
					return false
				}
			}
			return true
		}, next)
		if lo < 0 {
			return false
		}
		d.Tiles = [2]int{lo, lo + n}
		pt[i] = d
	}
	return true
}

// sideBySideRounds bounds the rounds of a signature: a round that
// takes a share of its groups leaves the rest to the next.
const sideBySideRounds = 3

// placeSideBySide tries, for each signature of sibling groups, the groups of
// pt with their members on disjoint tiles, each member's split screened
// for its share of the tiles (every group of the signature alike), and
// keeps the cheapest arrangement when it beats r. The candidates of a
// signature are priced in one batch; when the cheapest takes only the
// first groups, the next round tries the others.
func (pl *planner) placeSideBySide(pt point, r *result) (point, *result, error) {
	groups := pl.siblingGroups()
	var sigs []string
	bySig := map[string][][]int{}
	for _, g := range groups {
		s := pl.signature(g)
		if bySig[s] == nil {
			sigs = append(sigs, s)
		}
		bySig[s] = append(bySig[s], g)
	}
	pl.sideBySide = nil
	for _, sig := range sigs {
		gs := bySig[sig]
		rec := SideBySide{Groups: len(gs), Before: r.total}
		for _, i := range gs[0] {
			rec.Members = append(rec.Members, pl.products[i].node.Name)
		}
		for range sideBySideRounds {
			cands := pl.arrangements(pt, gs)
			pts := make([]point, len(cands))
			for j, c := range cands {
				pts[j] = c.pt
			}
			best, br, err := pl.cheapestBelow(pts, r)
			if err != nil {
				return nil, nil, err
			}
			if best < 0 {
				break
			}
			pt, r = pts[best], br
			rec.Taken += cands[best].m
			if gs = gs[cands[best].m:]; len(gs) == 0 {
				break
			}
		}
		if rec.Taken > 0 {
			rec.After = r.total
			pl.sideBySide = append(pl.sideBySide, rec)
		}
	}
	return pt, r, nil
}

// SideBySide is what the start did with the sibling groups of one
// signature: Members are the first group's products, Taken of its Groups
// went side by side, and the start's price went from Before to After
// cycles (the search's price).
type SideBySide struct {
	Members       []string
	Groups, Taken int
	Before, After int64
}
