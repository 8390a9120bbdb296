package planner

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"

	"ipu.local/formats/plan"
	"ipu.local/libs/layout"
	"ipu.local/libs/lower"
)

func decision(node int, s layout.Split, castOrder, stationary string) plan.Decision {
	d := plan.Decision{Node: node, Split: plan.Split{B: s.GB, M: s.GM, N: s.GN, K: s.GK, Rest: lower.PlanRest(s)}, CastOrder: castOrder, Stationary: stationary, Tiles: [2]int{0, s.Tiles()}}
	if s.BOrder {
		d.Split.Order = "b"
	}
	return d
}

// withOrder sets a split's block order: the operand copied to more tiles
// gets the contiguous tiles (its copies travel as one multicast), the B
// operand when it is copied GM times and the A operand fewer.
func withOrder(s layout.Split) layout.Split {
	s.BOrder = s.GM > s.GN
	return s
}

// options returns the cast orders and stationary operands a product
// chooses between. A product whose host operands may be spread screens
// its splits with them spread under the inference objective (the host
// link's cycles for their copies would rule most splits out), delivered
// as blocks under the device objective; the start then tries the other
// on the best split (otherOrder).
func (pl *planner) options(pr *product) (orders, stats []string) {
	if pr.castable() {
		return []string{plan.AfterExchange, plan.BeforeExchange}, []string{"a", "b", ""}
	}
	if pr.spreadable() && !pl.device {
		return []string{plan.BeforeExchange}, []string{""}
	}
	return []string{""}, []string{"b"}
}

// otherOrder returns d with the host operands delivered as blocks (cast
// order "") instead of spread (before the exchange), or the other way;
// false when the product has no such operand or also casts one (its
// options try both orders).
func (pr *product) otherOrder(d plan.Decision) (plan.Decision, bool) {
	if !pr.spreadable() || pr.castable() {
		return d, false
	}
	if d.CastOrder == plan.BeforeExchange {
		d.CastOrder = ""
	} else {
		d.CastOrder = plan.BeforeExchange
	}
	return d, true
}

// start builds the analytic start: products in order, each the best of
// its screened splits and options given the ones before it (the later
// products at their first candidate while they are not decided). A
// wide start also prices splits that copy constants further (see
// candidates); the products it decides first may leave the later ones
// no room, so the caller starts again narrow when it runs out of memory.
// A finished point out of memory is returned with its result and the
// MemoryError (repairRoom's start).
func (pl *planner) start(wide bool) (point, *result, error) {
	pt := make(point, len(pl.products))
	cands := make([][]plan.Decision, len(pl.products))
	cuts := make([]*layout.Split, len(pl.products))
	for i, pr := range pl.products {
		grids, cut, ok := pl.candidates(pr, wide)
		if ok {
			cuts[i] = &cut
		}
		cands[i] = pl.decisions(pr, grids)
		if len(cands[i]) == 0 {
			return nil, nil, fmt.Errorf("node %q: no split of %d products [%d,%d]x[%d,%d] fits the kernels", pr.node.Name, pr.mm.Batches(), pr.mm.M, pr.mm.K, pr.mm.K, pr.mm.N)
		}
		pt[i] = cands[i][0]
	}
	// Spread the products' constants over the tiles: each product's tile
	// range starts where the constants placed so far weigh least.
	for i := range pt {
		pl.placeRange(pt, i)
	}
	var bestR *result
	decided := map[string]plan.Decision{} // by product class
	for i, pr := range pl.products {
		pl.reportStart(i)
		bestR = nil
		// A product like one decided before (a repeated layer) takes its
		// split on its own tiles.
		if d, ok := decided[pr.class()]; ok {
			d.Node = pr.idx
			pt[i] = d
			pl.placeRange(pt, i)
			continue
		}
		best, bestR, firstErr, err := pl.cheapest(pt, i, cands[i], noCeiling)
		if err != nil {
			return nil, nil, err
		}
		if cuts[i] != nil {
			if d, r := pl.tryCut(pt, i, *cuts[i], best, bestR); r != nil {
				best, bestR = d, r
			}
		}
		// The same split with the other reduce-scatter (column parts or
		// row parts only), then with the host's operands delivered the
		// other way: whichever is cheaper.
		for _, other := range []func(plan.Decision) (plan.Decision, bool){pr.otherParts, pr.otherOrder} {
			alt, ok := other(best)
			if !ok || bestR == nil {
				continue
			}
			if d, r, _, err := pl.cheapest(pt, i, []plan.Decision{alt}, bestR.cost()); err != nil {
				return nil, nil, err
			} else if r != nil && r.cost() < bestR.cost() {
				best, bestR = d, r
			}
		}
		if bestR == nil {
			// No candidate fits the tiles' memory with the products after
			// this one at their first candidates. A narrow start (the
			// last) takes the one that comes closest, and lets those
			// products' own decisions make room; a wide one gives way to
			// a narrow one (startFitting).
			var d plan.Decision
			ok := false
			if !wide {
				if d, ok, err = pl.makeRoom(pt, i, cands[i]); err != nil {
					return nil, nil, err
				}
			}
			if !ok {
				if firstErr == nil {
					firstErr = fmt.Errorf("node %q: no split fits %d tiles", pr.node.Name, pl.tiles)
				}
				return nil, nil, firstErr
			}
			best = d
		}
		pl.decide(pt, i, best)
		decided[pr.class()] = best
	}
	pl.reportStart(len(pl.products))
	if bestR == nil || len(decided) < len(pl.products) {
		// The last product copied a decision: price the whole point.
		if len(pl.products) > 0 {
			r, err := pl.eval(pt)
			if err != nil {
				return nil, nil, err
			}
			if r.mem != nil {
				return pt, r, r.mem // the finished point, for repairRoom
			}
			bestR = r
		}
	}
	if len(pl.products) == 0 {
		r, err := pl.eval(pt)
		if err != nil {
			return nil, nil, err
		}
		if r.mem != nil {
			return nil, nil, r.mem
		}
		bestR = r
	}
	return pt, bestR, nil
}

// decisions returns pr's decisions for splits: each with every cast
// order and stationary operand the product allows, its k parts the
// default.
func (pl *planner) decisions(pr *product, splits []layout.Split) []plan.Decision {
	orders, stats := pl.options(pr)
	var out []plan.Decision
	for _, s := range splits {
		for _, o := range orders {
			for _, st := range stats {
				d := decision(pr.idx, s, o, st)
				d.Split.Parts = pr.defaultParts(d.Split.K)
				out = append(out, d)
			}
		}
	}
	return out
}

// makeRoom decides product i of pt when none of its candidates (cands)
// fits the tiles' memory with the later products at their first
// candidates: the cheapest of its lightest splits (lightSplits) that
// fits, else, of all of them, the one that overflows the least
// (leastOver); false when none is out of memory by bytes alone.
func (pl *planner) makeRoom(pt point, i int, cands []plan.Decision) (plan.Decision, bool, error) {
	pr := pl.products[i]
	// A split by its block counts: the product's alignments and the
	// block order (withOrder) follow from them.
	have := map[[4]int]bool{}
	for _, d := range cands {
		have[[4]int{d.Split.B, d.Split.M, d.Split.N, d.Split.K}] = true
	}
	var splits []layout.Split
	for _, s := range pl.lightSplits(pr) {
		if !have[[4]int{s.GB, s.GM, s.GN, s.GK}] {
			splits = append(splits, s)
		}
	}
	light := pl.decisions(pr, splits)
	if len(light) > 0 {
		d, r, _, err := pl.cheapest(pt, i, light, noCeiling)
		if err != nil || r != nil {
			return d, r != nil, err
		}
	}
	return pl.leastOver(pt, i, append(cands[:len(cands):len(cands)], light...))
}

// leastOver returns the decision of ds (priced for product i of pt by
// cheapest) whose point overflows the tiles' memory by the fewest bytes
// (MemoryError.Over), the first on a tie; false when none of them is
// out of memory by bytes alone (not lowered, or over a region or the
// code's range), since then there is nothing to descend on.
func (pl *planner) leastOver(pt point, i int, ds []plan.Decision) (plan.Decision, bool, error) {
	pts := make([]point, len(ds))
	for j, d := range ds {
		pts[j] = pt.clone()
		pl.decide(pts[j], i, d)
	}
	rs, errs := pl.evalAll(pts)
	var best plan.Decision
	least := int64(-1)
	for j, r := range rs {
		if errs[j] != nil {
			var nl *lower.NotLoweredError
			if errors.As(errs[j], &nl) {
				continue
			}
			return best, false, errs[j]
		}
		var me *MemoryError
		if r == nil || !errors.As(r.mem, &me) || me.Over <= 0 {
			continue
		}
		pl.count(pts[j])
		if least < 0 || me.Over < least {
			best, least = pts[j][i], me.Over
		}
	}
	return best, least >= 0, nil
}

// decide sets product i of pt, and every later product of its class
// (the repeated layers of a deep model, which the start gives the same
// decision), to d, each placed in turn. A class's candidates are priced
// as the start will use them: a split whose constants or code fit one
// layer may not fit twelve, which pricing the first product alone shows
// only in the whole point, after every product is decided.
func (pl *planner) decide(pt point, i int, d plan.Decision) {
	pt[i] = d
	pl.placeRange(pt, i)
	class := pl.products[i].class()
	for k := i + 1; k < len(pt); k++ {
		if pl.products[k].class() == class {
			c := d
			c.Node = pl.products[k].idx
			pt[k] = c
			pl.placeRange(pt, k)
		}
	}
}

// reportStart tells Options.StartProgress the products decided.
func (pl *planner) reportStart(decided int) {
	if pl.startProgress != nil {
		pl.startProgress(decided, len(pl.products))
	}
}

// cheapest prices product i of pt under each decision of ds (its tile
// range placed) and returns the cheapest that fits and may cost less
// than ceil, nil when none does; firstErr is the first point's reason
// not to be a candidate (not lowered, or its memory), err an error that
// ends the search. A decision that cannot cost less than ceil or than
// the cheapest priced before it (evalBelow) is not priced.
func (pl *planner) cheapest(pt point, i int, ds []plan.Decision, ceil int64) (best plan.Decision, bestR *result, firstErr, err error) {
	pts := make([]point, len(ds))
	for j, d := range ds {
		pts[j] = pt.clone()
		pl.decide(pts[j], i, d)
	}
	rs, errs := pl.evalBelow(pts, ceilings(len(pts), ceil), true)
	for j, cand := range pts {
		r, err := rs[j], errs[j]
		if r == nil && err == nil {
			continue // cannot be the cheapest
		}
		pl.count(cand)
		if err != nil {
			var nl *lower.NotLoweredError
			if errors.As(err, &nl) {
				if firstErr == nil {
					firstErr = err
				}
				continue
			}
			return best, nil, nil, err
		}
		if r.mem != nil {
			if firstErr == nil {
				firstErr = r.mem
			}
			if ce := (*CodeError)(nil); pl.starting && errors.As(r.mem, &ce) && len(ce.Rows) > 0 {
				// The start lays those rows out whole instead (startFitting).
				return best, nil, nil, ce
			}
			continue
		}
		if bestR == nil || r.cost() < bestR.cost() {
			best, bestR = cand[i], r
		}
	}
	return best, bestR, firstErr, nil
}

// move returns a neighbour of pt chosen with rng.
func (pl *planner) move(pt point, rng *rand.Rand) point {
	nb := pt.clone()
	if len(nb) == 0 {
		return nb
	}
	i := rng.IntN(len(nb))
	d := &nb[i]
	pr := pl.products[i]
	switch rng.IntN(4) {
	case 0, 1: // change one split factor (of a grid: a cut split's rest goes)
		d.Split.Rest = nil
		fs := []*int{&d.Split.M, &d.Split.N, &d.Split.K, &d.Split.B}
		lim := []int{layout.Units(pr.mm.M, max(layout.AGroup, pr.align)), layout.Units(pr.mm.N, max(layout.BGroup, pr.nalign)), pr.mm.K, pr.mm.Batches()}
		k := rng.IntN(4)
		f := fs[k]
		if *f == 0 {
			*f = 1
		}
		switch rng.IntN(4) {
		case 0:
			*f *= 2
		case 1:
			*f = max(1, *f/2)
		case 2:
			*f++
		default:
			*f = max(1, *f-1)
		}
		*f = min(*f, lim[k])
		for max(d.Split.B, 1)*d.Split.M*d.Split.N*d.Split.K > pl.tiles {
			g := fs[(k+1+rng.IntN(3))%4]
			if *g > 1 {
				*g--
			} else if *f > 1 {
				*f--
			}
		}
	case 2:
		if pr.castable() {
			if d.CastOrder == plan.BeforeExchange {
				d.CastOrder = plan.AfterExchange
			} else {
				d.CastOrder = plan.BeforeExchange
			}
		} else if o, ok := pr.otherOrder(*d); ok && !pl.device {
			// Under the device objective, spreading only adds an
			// exchange: the start tried it.
			d.CastOrder = o.CastOrder
		}
	default:
		if pr.castable() {
			// The operand cast after the exchange: a, b, or none.
			d.Stationary = map[string]string{"a": "b", "b": "", "": "a"}[d.Stationary]
		}
	}
	d.Split.Order = ""
	if d.Split.M > d.Split.N {
		d.Split.Order = "b"
	}
	if d.Split.K <= 1 || pt[i].Split.K <= 1 {
		d.Split.Parts = pr.defaultParts(d.Split.K)
	}
	n := int(d.Split.Blocks())
	lo := min(d.Tiles[0], pl.tiles-n)
	d.Tiles = [2]int{lo, lo + n}
	return nb
}

// constBytes is the constant bytes per tile of a product's blocks under a
// decision (its largest blocks).
func (pl *planner) constBytes(pr *product, d plan.Decision) int64 {
	s := pr.split(d)
	ca, cb := isConst(pr.a.w), isConst(pr.b.w)
	if !ca && !cb {
		return 0
	}
	e := int64(pr.typ.Size())
	// The largest blocks (a cut split's buffers are its largest part's).
	var mb, nb int
	for _, p := range parts(s, pr.mm) {
		mb = max(mb, layout.Pad(min(p.m, layout.Units(p.m, s.RowAlign())/p.gm*s.RowAlign()+s.RowAlign()), layout.AGroup))
		nb = max(nb, layout.Pad(min(p.n, layout.Units(p.n, s.ColAlign())/p.gn*s.ColAlign()+s.ColAlign()), layout.BGroup))
	}
	kb := layout.Pad((pr.mm.K+s.GK-1)/s.GK, 2)
	bb := int64((pr.mm.Batches() + max(s.GB, 1) - 1) / max(s.GB, 1))
	var n int64
	if ca {
		n += bb * int64(mb*kb) * e
	}
	if cb {
		n += bb * int64(kb*nb) * e
	}
	return n
}

// codeWeight is what placeRange counts for a product on each of its
// tiles besides its constants: its kernel's code and tables and its
// exchanges' code, a few KiB, which pile up on the tiles of every layer
// of a deep model that puts its products on the same tiles.
const codeWeight = 4 << 10

// placeRange moves product i's tile range to where the constants and code
// of the other products of pt weigh least (the first such range), apart
// from its earlier siblings' ranges where a range allows (siblings run
// in the same supersteps: on the same tiles they take turns).
func (pl *planner) placeRange(pt point, i int) {
	d := &pt[i]
	n := d.Tiles[1] - d.Tiles[0]
	if n >= pl.tiles {
		return
	}
	skip := func(j int) bool { return j == i }
	lo := -1
	if sibs := pl.earlierSiblings(i); len(sibs) > 0 {
		lo = pl.leastLoaded(pt, n, skip, func(lo, hi int) bool {
			for _, j := range sibs {
				if r := pt[j].Tiles; lo < r[1] && r[0] < hi {
					return false
				}
			}
			return true
		}, pl.siblingEnds(pt, sibs))
	}
	if lo < 0 {
		lo = pl.leastLoaded(pt, n, skip, nil, nil)
	}
	d.Tiles = [2]int{lo, lo + n}
}

// earlierSiblings returns the products before i in its sibling group
// (siblingGroups), computed once.
func (pl *planner) earlierSiblings(i int) []int {
	if pl.siblingsBefore == nil {
		pl.siblingsBefore = make([][]int, len(pl.products))
		for _, g := range pl.siblingGroups() {
			for k, j := range g {
				pl.siblingsBefore[j] = g[:k:k]
			}
		}
	}
	return pl.siblingsBefore[i]
}

// siblingEnds returns the tiles where the siblings' ranges end: a range
// starting there is apart from them (leastLoaded's starts every n/8
// tiles may all overlap).
func (pl *planner) siblingEnds(pt point, sibs []int) []int {
	ends := make([]int, 0, len(sibs)+1)
	ends = append(ends, 0)
	for _, j := range sibs {
		ends = append(ends, pt[j].Tiles[1])
	}
	return ends
}

// leastLoaded returns the first tile of the first range of n tiles where
// the constants and code of the products of pt but those skip names weigh
// least (the fullest tile's, then, between ranges alike in that, the
// range's total: a product spread over every tile makes every range's
// fullest tile alike, and the total still keeps the products that run
// side by side apart), among the ranges [lo, lo+n) that free allows (nil:
// all); -1 when it allows none. The ranges tried start every n/8 tiles and at the
// tiles in extra.
func (pl *planner) leastLoaded(pt point, n int, skip func(j int) bool, free func(lo, hi int) bool, extra []int) int {
	if n >= pl.tiles {
		if free == nil || free(0, n) {
			return 0
		}
		return -1
	}
	load := make([]int64, pl.tiles+1)
	for j, o := range pt {
		if skip(j) {
			continue
		}
		c := pl.constBytes(pl.products[j], o) + codeWeight
		load[o.Tiles[0]] += c
		load[o.Tiles[1]] -= c
	}
	for t := 1; t <= pl.tiles; t++ {
		load[t] += load[t-1]
	}
	best, bestSum, bestLo := int64(-1), int64(0), -1
	var starts []int
	for lo := 0; lo+n <= pl.tiles; lo += max(1, n/8) {
		starts = append(starts, lo)
	}
	for _, lo := range extra {
		if lo >= 0 && lo+n <= pl.tiles {
			starts = append(starts, lo)
		}
	}
	slices.Sort(starts)
	for _, lo := range slices.Compact(starts) {
		if free != nil && !free(lo, lo+n) {
			continue
		}
		var m, sum int64
		for t := lo; t < lo+n; t++ {
			m = max(m, load[t])
			sum += load[t]
		}
		if best < 0 || m < best || m == best && sum < bestSum {
			best, bestSum, bestLo = m, sum, lo
		}
	}
	return bestLo
}
