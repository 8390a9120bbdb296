package planner

import (
	"fmt"
	"math/rand/v2"
	"sort"

	"ipu.local/formats/plan"
	"ipu.local/libs/arch"
	"ipu.local/libs/cost"
	"ipu.local/libs/graph"
)

// acceptWorse is the probability of walking onto a worse point.
const acceptWorse = 0.05

// screenKeep is how many screened splits per product get a full cost.
const screenKeep = 6

// distinct returns the block counts g in [1, min(n, limit)] giving
// distinct block lengths ceil(n/g), each the smallest g for its length.
func distinct(n, limit int) []int {
	var gs []int
	last := -1
	for g := 1; g <= min(n, limit); g++ {
		if b := (n + g - 1) / g; b != last {
			gs = append(gs, g)
			last = b
		}
	}
	return gs
}

// minBudget is the smallest tile budget the analytic start screens.
const minBudget = 1

// budgets returns the tile budgets the analytic start screens splits
// for, largest first: the planner's tiles, its halvings and the powers
// of two below it, down to minBudget. A plan for N tiles may use any
// subset of them, and once the fixed costs of more tiles (exchange,
// reduction) outweigh the compute they save, a split using far fewer
// tiles is cheaper; ranking by compute alone would never pick it. With
// the powers of two, the start on N tiles costs every split the start
// on a power-of-two count below N costs.
func (pl *planner) budgets() []int {
	seen := map[int]bool{}
	var bs []int
	for b := pl.tiles; b >= minBudget; b /= 2 {
		seen[b] = true
		bs = append(bs, b)
	}
	for b := 1; b < pl.tiles; b *= 2 {
		if b >= minBudget && !seen[b] {
			bs = append(bs, b)
		}
	}
	sort.Sort(sort.Reverse(sort.IntSlice(bs)))
	return bs
}

// candidates returns the splits of pr the analytic start costs fully:
// for every budget, the best few by screen, each split once, in budget
// order.
func (pl *planner) candidates(pr *cost.Product) []cost.Split {
	var out []cost.Split
	seen := map[cost.Split]bool{}
	for _, b := range pl.budgets() {
		for _, s := range pl.screen(pr, b) {
			if !seen[s] {
				seen[s] = true
				out = append(out, s)
			}
		}
	}
	return out
}

// screen ranks splits of pr using at most budget tiles by the product's
// compute cycles plus a reduction estimate, and returns the best few.
func (pl *planner) screen(pr *cost.Product, budget int) []cost.Split {
	type cand struct {
		s     cost.Split
		score int64
	}
	var cs []cand
	for gk := 1; gk <= min(8, pr.K) && gk <= budget; gk *= 2 {
		ra := max(cost.RowAlign, pr.Align)
		mu, nu := cost.Units(pr.M, ra), cost.Units(pr.N, cost.ColAlign)
		for _, gm := range distinct(mu, budget/gk) {
			for _, gn := range distinct(nu, budget/(gk*gm)) {
				mb := min(pr.M, (mu+gm-1)/gm*ra)
				nb := min(pr.N, (nu+gn-1)/gn*cost.ColAlign)
				kb := (pr.K + gk - 1) / gk
				c, err := cost.MatMulCycles(pl.p, pr.Type, mb, kb, nb)
				if err != nil {
					continue
				}
				if gk > 1 {
					part := (mb + gk - 1) / gk * nb
					a, _ := cost.AddCycles(pl.p, part)
					c += int64(gk-1)*(int64(part)+a) + int64(pl.p.ExchangeFixedCycles+2*pl.p.SyncCycles)
				}
				cs = append(cs, cand{cost.Split{GM: gm, GN: gn, GK: gk}, c})
			}
		}
	}
	sort.Slice(cs, func(i, j int) bool {
		if cs[i].score != cs[j].score {
			return cs[i].score < cs[j].score
		}
		return cs[i].s.Tiles() < cs[j].s.Tiles()
	})
	if len(cs) == 0 {
		// Nothing the kernel takes: cost the widest split, whose memory
		// report says why it does not fit.
		gm := min(cost.Units(pr.M, max(cost.RowAlign, pr.Align)), budget)
		cs = append(cs, cand{s: cost.Split{GM: gm, GN: max(1, min(cost.Units(pr.N, cost.ColAlign), budget/gm)), GK: 1}})
	}
	var out []cost.Split
	for i := 0; i < len(cs) && i < screenKeep; i++ {
		out = append(out, cs[i].s)
	}
	return out
}

func decision(node int, s cost.Split, castOrder, stationary string) plan.Decision {
	return plan.Decision{Node: node, Split: plan.Split{M: s.GM, N: s.GN, K: s.GK}, CastOrder: castOrder, Stationary: stationary, Tiles: [2]int{0, s.Tiles()}}
}

// options returns the cast orders and stationary operands a product
// chooses between.
func options(pr *cost.Product) (orders, stats []string) {
	if castable(pr) {
		return []string{plan.AfterExchange, plan.BeforeExchange}, []string{"a", "b"}
	}
	return []string{""}, []string{"b"}
}

// start builds the analytic start: products in order, each the best of
// its screened splits and options given the ones before it.
func (pl *planner) start() (point, *result, error) {
	var pt point
	for _, pr := range pl.products {
		var best point
		var bestR *result
		var memErr error
		orders, stats := options(pr.Product)
		for _, s := range pl.candidates(pr.Product) {
			for _, o := range orders {
				for _, st := range stats {
					cand := append(pt.clone(), decision(pr.idx, s, o, st))
					r, err := pl.eval(cand)
					if err != nil {
						return nil, nil, err
					}
					if r.mem != nil {
						// Report the first: candidates come largest
						// budget first, and the widest split's report
						// says best why nothing fits.
						if memErr == nil {
							memErr = r.mem
						}
						continue
					}
					if bestR == nil || r.total < bestR.total {
						best, bestR = cand, r
					}
				}
			}
		}
		if bestR == nil {
			if memErr == nil {
				memErr = fmt.Errorf("node %q: no split of [%d,%d]x[%d,%d] fits %d tiles", pr.Node.Name, pr.M, pr.K, pr.K, pr.N, pl.tiles)
			}
			return nil, nil, memErr
		}
		pt = best
	}
	r, err := pl.eval(pt)
	if err != nil {
		return nil, nil, err
	}
	return pt, r, nil
}

// move returns a neighbour of pt chosen with rng.
func (pl *planner) move(pt point, rng *rand.Rand) point {
	nb := pt.clone()
	if len(nb) == 0 {
		return nb
	}
	i := rng.IntN(len(nb))
	d := &nb[i]
	pr := pl.products[i].Product
	switch rng.IntN(4) {
	case 0, 1: // change one split factor
		f := []*int{&d.Split.M, &d.Split.N, &d.Split.K}[rng.IntN(3)]
		lim := []int{cost.Units(pr.M, max(cost.RowAlign, pr.Align)), cost.Units(pr.N, cost.ColAlign), pr.K}
		var k int
		switch {
		case f == &d.Split.M:
			k = 0
		case f == &d.Split.N:
			k = 1
		default:
			k = 2
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
		for d.Split.M*d.Split.N*d.Split.K > pl.tiles {
			// Shrink another factor to stay within the tiles.
			g := []*int{&d.Split.M, &d.Split.N, &d.Split.K}[(k+1+rng.IntN(2))%3]
			if *g > 1 {
				*g--
			} else {
				*f--
			}
		}
	case 2:
		if castable(pr) {
			if d.CastOrder == plan.BeforeExchange {
				d.CastOrder = plan.AfterExchange
			} else {
				d.CastOrder = plan.BeforeExchange
			}
		}
	default:
		if castable(pr) {
			if d.Stationary == "a" {
				d.Stationary = "b"
			} else {
				d.Stationary = "a"
			}
		}
	}
	d.Tiles = [2]int{0, d.Split.M * d.Split.N * d.Split.K}
	return nb
}

// Plan maps g onto p's tiles. It returns the plan, the search state to
// save, and the figures of the planner's log lines.
func Plan(g *graph.Graph, p *arch.Preset, opt Options) (*plan.Plan, *plan.State, *Stats, error) {
	tiles := opt.Tiles
	if tiles == 0 {
		tiles = p.Tiles
	}
	if tiles < 1 || tiles > p.Tiles {
		return nil, nil, nil, fmt.Errorf("tiles %d out of range [1, %d] of %s", tiles, p.Tiles, p.Name)
	}
	if opt.MaxAttempts < 0 {
		return nil, nil, nil, fmt.Errorf("max attempts %d is negative", opt.MaxAttempts)
	}
	pl := newPlanner(g, p, tiles)
	st := &Stats{FragmentLimit: FragmentLimit}
	var s *plan.State
	var cur, inc point
	var curR, incR *result
	if opt.State != nil && opt.State.Attempts+len(opt.State.Incumbent.Decisions) > 0 {
		s = opt.State
		if s.Model != opt.ModelFingerprint || s.Arch != p.Name || s.Tiles != tiles || s.Seed != opt.Seed {
			return nil, nil, nil, fmt.Errorf("search state is for model %.12s arch %s tiles %d seed %d, not model %.12s arch %s tiles %d seed %d",
				s.Model, s.Arch, s.Tiles, s.Seed, opt.ModelFingerprint, p.Name, tiles, opt.Seed)
		}
		cur, inc = point(s.Current.Decisions).clone(), point(s.Incumbent.Decisions).clone()
		if err := pl.checkPoint(cur); err != nil {
			return nil, nil, nil, fmt.Errorf("search state current: %w", err)
		}
		if err := pl.checkPoint(inc); err != nil {
			return nil, nil, nil, fmt.Errorf("search state incumbent: %w", err)
		}
		var err error
		if curR, err = pl.evalFit(cur); err != nil {
			return nil, nil, nil, fmt.Errorf("search state current: %w", err)
		}
		if incR, err = pl.evalFit(inc); err != nil {
			return nil, nil, nil, fmt.Errorf("search state incumbent: %w", err)
		}
		st.Resuming = true
	} else {
		s = plan.NewState(opt.ModelFingerprint, p.Name, tiles, opt.Seed)
		var err error
		cur, curR, err = pl.start()
		if err != nil {
			return nil, nil, nil, err
		}
		inc, incR = cur.clone(), curR
		s.Visited = []string{cur.key()}
		st.Evaluated++
	}
	pcg, err := s.PCG()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("search state rng: %w", err)
	}
	rng := rand.New(pcg)
	visited := map[string]bool{}
	for _, k := range s.Visited {
		visited[k] = true
	}
	for a := 0; a < opt.MaxAttempts; a++ {
		nb := pl.move(cur, rng)
		u := rng.Float64() // drawn every attempt, so the stream does not depend on what was visited
		k := nb.key()
		if visited[k] {
			continue
		}
		visited[k] = true
		r, err := pl.eval(nb)
		if err != nil {
			return nil, nil, nil, err
		}
		st.Evaluated++
		if r.mem != nil {
			continue
		}
		if r.total < curR.total || u < acceptWorse {
			cur, curR = nb, r
		}
		if r.total < incR.total {
			inc, incR = nb, r
		}
	}
	st.Attempts = opt.MaxAttempts
	s.Attempts += opt.MaxAttempts
	s.SetPCG(pcg)
	s.Current = plan.Point{Cycles: curR.total, Decisions: cur.clone()}
	s.Incumbent = plan.Point{Cycles: incR.total, Decisions: inc.clone()}
	s.Visited = s.Visited[:0]
	for k := range visited {
		s.Visited = append(s.Visited, k)
	}
	sort.Strings(s.Visited)
	if len(s.Visited) > plan.MaxVisited {
		s.Visited = s.Visited[:plan.MaxVisited]
	}
	out, err := pl.build(inc, incR, opt, tiles, s)
	if err != nil {
		return nil, nil, nil, err
	}
	pl.stats(inc, incR, st)
	return out, s, st, nil
}

// evalFit is eval for a point that must fit memory.
func (pl *planner) evalFit(pt point) (*result, error) {
	r, err := pl.eval(pt)
	if err != nil {
		return nil, err
	}
	if r.mem != nil {
		return nil, r.mem
	}
	return r, nil
}

// checkPoint validates a saved point against this graph's products.
func (pl *planner) checkPoint(pt point) error {
	if len(pt) != len(pl.products) {
		return fmt.Errorf("%d decisions for %d products", len(pt), len(pl.products))
	}
	for i, d := range pt {
		pr := pl.products[i]
		if d.Node != pr.idx {
			return fmt.Errorf("decision %d is for node %d, want %d", i, d.Node, pr.idx)
		}
		if !(cost.Split{GM: d.Split.M, GN: d.Split.N, GK: d.Split.K, Align: pr.Align}).Fits(pr.M, pr.K, pr.N) || d.Tiles[1] > pl.tiles || d.Tiles[1]-d.Tiles[0] < d.Split.M*d.Split.N*d.Split.K {
			return fmt.Errorf("decision %d: split %+v over tiles %v does not fit", i, d.Split, d.Tiles)
		}
	}
	return nil
}
