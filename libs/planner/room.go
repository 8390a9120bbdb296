package planner

import "ipu.local/formats/plan"

// repairRoom looks for a point that fits the tiles' memory from pt, a
// start's finished point that does not. The start decided each product
// with the later ones at their first splits, so an early product's
// split may leave the later ones no room that another of its splits
// would, with their own decisions made again. For each product in
// order (the first of its class: the class moves together), repairRoom
// tries each of its split candidates (the start's and the lightest) and
// decides every later product again as the start does (the cheapest
// that fits, else the one that overflows the least), keeping the
// earlier ones; the first point that fits is the repair (false when
// none does). Feed-forward pairs (FP16; the start ends out of memory,
// the repair fits): 1024 x 4096 on 56 tiles, 1,104 bytes over, 352,329
// cycles; 640 x 2560 with 200 rows on 40 tiles, 371,840 bytes over,
// 377,048 cycles (each repair prices 5 or 6 points, the starts before
// it 12 or 13). Each candidate costs a start of the products after it,
// so the repair prices at most as many points as the starts before it
// did, their retries included (then false): a model that does not fit
// reports so later, by the retry and the repair (a ResNet-18 of width 8
// at 64x64 on 5 tiles: 0.8 s instead of 0.3 s).
func (pl *planner) repairRoom(pt point) (point, *result, bool, error) {
	firsts := pl.classFirsts()
	budget := pl.evals // as many more points as the starts priced
	for n, i := range firsts {
		for _, d := range pl.roomCandidates(i) {
			if pl.evals >= 2*budget {
				return nil, nil, false, nil
			}
			q := pt.clone()
			pl.decide(q, i, d)
			for _, j := range firsts[n+1:] {
				ds := pl.roomCandidates(j)
				dj, r, _, err := pl.cheapest(q, j, ds, noCeiling)
				if err != nil {
					return nil, nil, false, err
				}
				if r == nil {
					var ok bool
					if dj, ok, err = pl.leastOver(q, j, ds); err != nil {
						return nil, nil, false, err
					} else if !ok {
						continue
					}
				}
				pl.decide(q, j, dj)
			}
			r, err := pl.eval(q)
			if err != nil {
				return nil, nil, false, err
			}
			if r.mem == nil {
				return q, r, true, nil
			}
		}
	}
	return nil, nil, false, nil
}

// classFirsts returns the index of the first product of each class, in
// order.
func (pl *planner) classFirsts() []int {
	var out []int
	seen := map[string]bool{}
	for i, pr := range pl.products {
		if !seen[pr.class()] {
			seen[pr.class()] = true
			out = append(out, i)
		}
	}
	return out
}

// roomCandidates returns product i's decisions for repairRoom: the
// start's narrow candidates, then its lightest splits.
func (pl *planner) roomCandidates(i int) []plan.Decision {
	pr := pl.products[i]
	grids, _, _ := pl.candidates(pr, false)
	return pl.decisions(pr, append(grids, pl.lightSplits(pr)...))
}
