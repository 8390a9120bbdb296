package planner

import (
	"sort"

	"ipu.local/formats/plan"
)

// spreadRounds bounds the passes spread makes over the products.
const spreadRounds = 2

// spread re-decides the products of a start point whose interleaved
// buffers overflow that region (result.il), the products with the most
// constant bytes first: each takes the cheapest of its splits that put
// the fewest constant bytes on a tile (frugalSplits, with its cast order
// and stationary operand), when that costs less than the point, which
// it does whenever it overflows less. The start decides products one at
// a time, the others at their first splits, and ranks them by bytes; on
// few tiles its splits over all but one tile can stack the weights the
// AMP reads from interleaved memory on the same tiles (the FP32 BERT
// layer on 9 tiles: four weights over 8 of them), which no walk's move
// undoes one factor at a time. It stops when the point fits, or after a
// pass that changes nothing.
func (pl *planner) spread(pt point, r *result) (point, *result, error) {
	order := make([]int, 0, len(pl.products))
	weight := make([]int64, len(pl.products))
	for i, pr := range pl.products {
		if w := pl.constBytes(pr, pt[i]); w > 0 {
			order = append(order, i)
			weight[i] = w
		}
	}
	sort.SliceStable(order, func(a, b int) bool { return weight[order[a]] > weight[order[b]] })
	for range spreadRounds {
		changed := false
		for _, i := range order {
			if r.il.Bytes == 0 {
				return pt, r, nil
			}
			pr := pl.products[i]
			var ds []plan.Decision
			for _, s := range pl.frugalSplits(pr) {
				d := decision(pr.idx, s, pt[i].CastOrder, pt[i].Stationary)
				d.Split.Parts = pr.defaultParts(d.Split.K)
				ds = append(ds, d)
			}
			d, dr, _, err := pl.cheapest(pt, i, ds, r.cost())
			if err != nil {
				return nil, nil, err
			}
			if dr == nil || dr.cost() >= r.cost() {
				continue
			}
			next := pt.clone()
			pl.decide(next, i, d)
			pt, r, changed = next, dr, true
		}
		if !changed {
			break
		}
	}
	return pt, r, nil
}
