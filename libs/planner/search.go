package planner

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"

	"ipu.local/formats/plan"
	"ipu.local/libs/arch"
	"ipu.local/libs/codegen"
	"ipu.local/libs/layout"
	"ipu.local/libs/lower"
	"ipu.local/libs/prog"
)

// screenKeep is how many screened splits per product the start prices in
// full.
const screenKeep = 4

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

// budgets returns the tile budgets the start screens splits for, largest
// first: the planner's tiles, its halvings and the powers of two below
// it. Once the fixed costs of more tiles (exchange, reduction) outweigh
// the compute they save, a split using fewer tiles is cheaper.
func (pl *planner) budgets() []int {
	seen := map[int]bool{}
	var bs []int
	for b := pl.tiles; b >= 1; b /= 2 {
		seen[b] = true
		bs = append(bs, b)
	}
	for b := 1; b < pl.tiles; b *= 2 {
		if !seen[b] {
			bs = append(bs, b)
		}
	}
	sort.Sort(sort.Reverse(sort.IntSlice(bs)))
	return bs
}

var blockMemo sync.Map

// blockCycles is the product kernel's cycles on a block of mb x kb x nb.
func blockCycles(t codegen.AMPType, mb, kb, nb int) (int64, error) {
	key := [4]int{int(t), mb, kb, nb}
	if c, ok := blockMemo.Load(key); ok {
		return c.(int64), nil
	}
	c, err := blockCyclesOf(t, mb, kb, nb)
	if err == nil {
		blockMemo.Store(key, c)
	}
	return c, err
}

func blockCyclesOf(t codegen.AMPType, mb, kb, nb int) (int64, error) {
	mp, np, kp := layout.Pad(mb, layout.AGroup), layout.Pad(nb, layout.BGroup), layout.Pad(kb, 2)
	var c codegen.Cost
	var err error
	if t == codegen.VecFP32 {
		c, err = (codegen.MatMulF32{M: mp, K: kp, N: np, A: 0, B: 0, C: 0, CStride: np, Workers: codegen.Slots}).Cost()
	} else {
		c, err = (codegen.MatMul{Type: t, M: mp, K: kp, N: np, CStride: np, Workers: codegen.Slots}).Cost()
	}
	if err != nil {
		return 0, err
	}
	return c.Cycles(), nil
}

// screen ranks the splits of pr using at most budget tiles by the
// product's compute cycles, a reduction estimate and the words each tile
// receives, and returns the best few.
func (pl *planner) screen(pr *product, budget int) []layout.Split {
	type cand struct {
		s     layout.Split
		score int64
	}
	var cs []cand
	ra := max(layout.AGroup, pr.align)
	mu, nu := layout.Units(pr.mm.M, ra), layout.Units(pr.mm.N, layout.BGroup)
	nb := pr.mm.Batches()
	e := int64(pr.typ.Size())
	usable := int64(pl.p.UsableMemory().Size()) * 3 / 4
	fed := sourceOf(pr.a.w) == 0 || sourceOf(pr.b.w) == 0
	for _, gb := range distinct(nb, budget) {
		for gk := 1; gk <= min(8, pr.mm.K) && gb*gk <= budget; gk *= 2 {
			for _, gm := range distinct(mu, budget/(gb*gk)) {
				for _, gn := range distinct(nu, budget/(gb*gk*gm)) {
					mb := min(pr.mm.M, (mu+gm-1)/gm*ra)
					nbk := min(pr.mm.N, (nu+gn-1)/gn*layout.BGroup)
					kb := (pr.mm.K + gk - 1) / gk
					bb := (nb + gb - 1) / gb
					// A tile holds its blocks, its C block and partials.
					bytes := int64(bb) * (int64(layout.Pad(mb, layout.AGroup)*layout.Pad(kb, 2)+layout.Pad(kb, 2)*layout.Pad(nbk, layout.BGroup))*e +
						int64(layout.Pad(mb, layout.AGroup)*layout.Pad(nbk, layout.BGroup))*4*int64(gk))
					if bytes > usable {
						continue
					}
					c, err := blockCycles(pr.typ, mb, kb, nbk)
					if err != nil {
						continue
					}
					c *= int64(bb)
					if gk > 1 {
						part := int64((mb+gk-1)/gk*nbk) * int64(bb)
						c += int64(gk-1)*(part+part/2) + int64(pl.p.ExchangeFixedCycles+2*pl.p.SyncCycles)
					}
					if fed {
						// Operands arrive at about a word per cycle.
						c += int64(bb) * (int64(mb*kb) + int64(kb*nbk)) * e / 4
					}
					cs = append(cs, cand{layout.Split{GB: gb, GM: gm, GN: gn, GK: gk, Align: pr.align}, c})
				}
			}
		}
	}
	sort.SliceStable(cs, func(i, j int) bool {
		if cs[i].score != cs[j].score {
			return cs[i].score < cs[j].score
		}
		return cs[i].s.Tiles() < cs[j].s.Tiles()
	})
	if len(cs) == 0 {
		// Nothing fits: price the widest split, whose memory report
		// says best why.
		gm := min(mu, budget)
		cs = append(cs, cand{s: layout.Split{GB: 1, GM: gm, GN: max(1, min(nu, budget/gm)), GK: 1, Align: pr.align}})
	}
	var out []layout.Split
	for i := 0; i < len(cs) && i < screenKeep; i++ {
		out = append(out, cs[i].s)
	}
	return out
}

// startKeep is how many splits per product the start prices in full.
const startKeep = 6

// candidates returns the splits of pr the start prices: the best few by
// screen over every budget (a budget's best first, round robin from the
// largest budget), each split once.
func (pl *planner) candidates(pr *product) []layout.Split {
	var lists [][]layout.Split
	for _, b := range pl.budgets() {
		lists = append(lists, pl.screen(pr, b))
	}
	var out []layout.Split
	seen := map[layout.Split]bool{}
	for i := 0; len(out) < startKeep; i++ {
		any := false
		for _, l := range lists {
			if i < len(l) {
				any = true
				if s := l[i]; !seen[s] && len(out) < startKeep {
					seen[s] = true
					out = append(out, s)
				}
			}
		}
		if !any {
			break
		}
	}
	return out
}

func decision(node int, s layout.Split, castOrder, stationary string) plan.Decision {
	return plan.Decision{Node: node, Split: plan.Split{B: s.GB, M: s.GM, N: s.GN, K: s.GK}, CastOrder: castOrder, Stationary: stationary, Tiles: [2]int{0, s.Tiles()}}
}

// options returns the cast orders and stationary operands a product
// chooses between.
func options(pr *product) (orders, stats []string) {
	if pr.castable() {
		return []string{plan.AfterExchange, plan.BeforeExchange}, []string{"a", "b"}
	}
	return []string{""}, []string{"b"}
}

// start builds the analytic start: products in order, each the best of
// its screened splits and options given the ones before it (the later
// products at their first candidate while they are not decided).
func (pl *planner) start() (point, *result, error) {
	pt := make(point, len(pl.products))
	cands := make([][]plan.Decision, len(pl.products))
	for i, pr := range pl.products {
		orders, stats := options(pr)
		for _, s := range pl.candidates(pr) {
			for _, o := range orders {
				for _, st := range stats {
					cands[i] = append(cands[i], decision(pr.idx, s, o, st))
				}
			}
		}
		if len(cands[i]) == 0 {
			return nil, nil, fmt.Errorf("node %q: no split of %d products [%d,%d]x[%d,%d] fits the kernels", pr.node.Name, pr.mm.Batches(), pr.mm.M, pr.mm.K, pr.mm.K, pr.mm.N)
		}
		pt[i] = cands[i][0]
	}
	var bestR *result
	for i, pr := range pl.products {
		var best plan.Decision
		var firstErr error
		bestR = nil
		for _, d := range cands[i] {
			cand := pt.clone()
			cand[i] = d
			r, err := pl.eval(cand)
			if err != nil {
				var nl *lower.NotLoweredError
				if errors.As(err, &nl) {
					if firstErr == nil {
						firstErr = err
					}
					continue
				}
				return nil, nil, err
			}
			if r.mem != nil {
				if firstErr == nil {
					firstErr = r.mem
				}
				continue
			}
			if bestR == nil || r.total < bestR.total {
				best, bestR = d, r
			}
		}
		if bestR == nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("node %q: no split fits %d tiles", pr.node.Name, pl.tiles)
			}
			return nil, nil, firstErr
		}
		pt[i] = best
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
	case 0, 1: // change one split factor
		fs := []*int{&d.Split.M, &d.Split.N, &d.Split.K, &d.Split.B}
		lim := []int{layout.Units(pr.mm.M, max(layout.AGroup, pr.align)), layout.Units(pr.mm.N, layout.BGroup), pr.mm.K, pr.mm.Batches()}
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
		}
	default:
		if pr.castable() {
			if d.Stationary == "a" {
				d.Stationary = "b"
			} else {
				d.Stationary = "a"
			}
		}
	}
	d.Tiles = [2]int{0, max(d.Split.B, 1) * d.Split.M * d.Split.N * d.Split.K}
	return nb
}

// codeAllowance is the tile memory the planner leaves for code: the
// linker's placement decides exactly.
const codeAllowance = 32 << 10

// MemoryError is a point whose data does not fit the tiles: the worst
// tiles' bytes by category.
type MemoryError struct {
	Arch   string
	Tiles  int
	Usable int64
	Worst  []TileBytes
}

// TileBytes is one tile's data by category.
type TileBytes struct {
	Tile                 int
	Constants, Variables int64
}

func (e *MemoryError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "out of memory on %d tiles of %s (usable %d bytes per tile, %d of them for code): ", e.Tiles, e.Arch, e.Usable, codeAllowance)
	for i, t := range e.Worst {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "tile %d total %d (constants %d, variables %d at their peak, code %d)", t.Tile, t.Constants+t.Variables+codeAllowance, t.Constants, t.Variables, codeAllowance)
	}
	return b.String()
}

// fits checks a program's memory: on every tile, the constants and the
// largest set of variables live at once within the usable memory less
// the code allowance. The linker's placement decides exactly.
func fits(p *arch.Preset, tiles int, pr *prog.Program) error {
	pr.Liveness()
	per := map[int]*TileBytes{}
	at := func(t int) *TileBytes {
		if per[t] == nil {
			per[t] = &TileBytes{Tile: t}
		}
		return per[t]
	}
	live := map[int]map[int]int64{}
	for _, b := range pr.Buffers {
		for _, t := range b.Tiles {
			if b.Data != nil || b.Permanent {
				at(t).Constants += int64(b.Size)
				continue
			}
			if live[t] == nil {
				live[t] = map[int]int64{}
			}
			for i := b.First; i <= b.Last; i++ {
				live[t][i] += int64(b.Size)
			}
		}
	}
	for t := range live {
		for _, v := range live[t] {
			at(t).Variables = max(at(t).Variables, v)
		}
	}
	usable := int64(p.UsableMemory().Size())
	var over []TileBytes
	for _, tb := range per {
		if tb.Constants+tb.Variables+codeAllowance > usable {
			over = append(over, *tb)
		}
	}
	if len(over) == 0 {
		return nil
	}
	sort.Slice(over, func(i, j int) bool {
		a, b := over[i].Constants+over[i].Variables, over[j].Constants+over[j].Variables
		if a != b {
			return a > b
		}
		return over[i].Tile < over[j].Tile
	})
	return &MemoryError{Arch: p.Name, Tiles: tiles, Usable: usable, Worst: over[:min(len(over), 3)]}
}
