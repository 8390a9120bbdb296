package planner

// The analytic start's screen: every split of a product within a tile
// budget ranked by a cheap score (the kernel's cycles on the largest
// block, a reduction estimate, the words each tile receives), the best
// few priced in full.

import (
	"slices"
	"sort"
	"sync"

	"ipu.local/libs/codegen"
	"ipu.local/libs/layout"
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
	c, err := (codegen.MatMul{Type: t, M: mp, K: kp, N: np, CStride: np, Workers: codegen.Slots}).Cost()
	if err != nil {
		return 0, err
	}
	return c.Cycles(), nil
}

// block is a block shape the screen scores: bb batch indices of mb rows,
// kb terms and nb columns, the k axis in gk blocks.
type block struct{ bb, gk, mb, kb, nb int }

// blockOf is the largest block of a gb x gm x gn x gk grid over units of
// ra rows and ca columns.
func blockOf(pr *product, gb, gm, gn, gk, mu, nu, ra, ca int) block {
	return block{bb: (pr.mm.Batches() + gb - 1) / gb, gk: gk, mb: min(pr.mm.M, (mu+gm-1)/gm*ra),
		kb: (pr.mm.K + gk - 1) / gk, nb: min(pr.mm.N, (nu+gn-1)/gn*ca)}
}

// bytes is what a tile of the block holds: its blocks, its C block and
// partials.
func (bl block) bytes(e int64) int64 {
	return int64(bl.bb) * (int64(layout.Pad(bl.mb, layout.AGroup)*layout.Pad(bl.kb, 2)+layout.Pad(bl.kb, 2)*layout.Pad(bl.nb, layout.BGroup))*e +
		int64(layout.Pad(bl.mb, layout.AGroup)*layout.Pad(bl.nb, layout.BGroup))*4*int64(bl.gk))
}

// constBytes is the block's constant operands' bytes.
func (bl block) constBytes(pr *product) int64 {
	e := int64(pr.typ.Size())
	var cb int64
	if isConst(pr.a.w) {
		cb += int64(bl.bb) * int64(layout.Pad(bl.mb, layout.AGroup)*layout.Pad(bl.kb, 2)) * e
	}
	if isConst(pr.b.w) {
		cb += int64(bl.bb) * int64(layout.Pad(bl.kb, 2)*layout.Pad(bl.nb, layout.BGroup)) * e
	}
	return cb
}

// fitsBlock reports whether the block's data fits the screen's share of
// a tile (three quarters, room for the other values live with it): and
// its constants their share (every product's constants live at once),
// and its variable blocks the search's largest variable (underLimit).
func (pl *planner) fitsBlock(pr *product, bl block) bool {
	usable := pl.usable * 3 / 4
	return bl.bytes(int64(pr.typ.Size())) <= usable && bl.constBytes(pr) <= pl.constShare && pl.underLimit(pr, bl)
}

// underLimit reports whether the block's variable operand blocks (an
// operand that is not a constant) and its FP32 C block are each within
// the search's largest variable (Options.MaxVariable; none when 0): a
// split with a larger one is no candidate of a search that limits them.
func (pl *planner) underLimit(pr *product, bl block) bool {
	if pl.maxVariable == 0 {
		return true
	}
	e := int64(pr.typ.Size())
	mp, kp, np := int64(layout.Pad(bl.mb, layout.AGroup)), int64(layout.Pad(bl.kb, 2)), int64(layout.Pad(bl.nb, layout.BGroup))
	bb := int64(bl.bb)
	if !isConst(pr.a.w) && bb*mp*kp*e > pl.maxVariable {
		return false
	}
	if !isConst(pr.b.w) && bb*kp*np*e > pl.maxVariable {
		return false
	}
	return bb*mp*np*4 <= pl.maxVariable
}

// score is the block's kernel cycles, a reduction estimate and the words
// of the operands a node computes (about a word per cycle); false when
// the kernel refuses the block.
func (pl *planner) score(pr *product, bl block) (int64, bool) {
	c, err := blockCycles(pr.typ, bl.mb, bl.kb, bl.nb)
	if err != nil {
		return 0, false
	}
	bb, gk, e := int64(bl.bb), bl.gk, int64(pr.typ.Size())
	c *= bb
	if gk > 1 {
		part := int64((bl.mb+gk-1)/gk*bl.nb) * bb
		c += int64(gk-1)*(part+part/2) + int64(pl.p.ExchangeFixedCycles+2*pl.p.SyncCycles)
	}
	if sourceOf(pr.a.w) == 0 {
		c += bb * int64(bl.mb*bl.kb) * e / 4
	}
	if sourceOf(pr.b.w) == 0 {
		c += bb * int64(bl.kb*bl.nb) * e / 4
	}
	return c, true
}

// scored is a split and its screen score.
type scored struct {
	s     layout.Split
	score int64
}

// eachGrid calls f with each split of pr over at most budget tiles (its
// batch, row and column block counts, each of its axis's distinct
// block sizes, and its k block count, a power of two up to 64), in
// order, block order set (withOrder), and its tiles' largest block.
func eachGrid(pr *product, budget int, f func(sp layout.Split, bl block)) {
	ra := max(layout.AGroup, pr.align)
	ca := max(layout.BGroup, pr.nalign)
	mu, nu := layout.Units(pr.mm.M, ra), layout.Units(pr.mm.N, ca)
	for _, gb := range distinct(pr.mm.Batches(), budget) {
		for gk := 1; gk <= min(64, pr.mm.K) && gb*gk <= budget; gk *= 2 {
			for _, gm := range distinct(mu, budget/(gb*gk)) {
				for _, gn := range distinct(nu, budget/(gb*gk*gm)) {
					sp := withOrder(layout.Split{GB: gb, GM: gm, GN: gn, GK: gk, Align: pr.align, NAlign: pr.nalign})
					f(sp, blockOf(pr, gb, gm, gn, gk, mu, nu, ra, ca))
				}
			}
		}
	}
}

// screen ranks the splits of pr using at most budget tiles by the
// product's compute cycles, a reduction estimate and the words each tile
// receives, and returns the best few. Splits that copy a constant
// operand to more than maxCopies tiles rank only when no other split
// fits (0: no limit but memory).
func (pl *planner) screen(pr *product, budget, maxCopies int) []layout.Split {
	ss, _ := pl.screenN(pr, budget, 0, maxCopies)
	return ss
}

// screenN is screen with the column blocks fixed to gnOnly (0: any); it
// returns the best score too (-1: no split).
func (pl *planner) screenN(pr *product, budget, gnOnly, maxCopies int) ([]layout.Split, int64) {
	var cs []scored
	constA, constB := isConst(pr.a.w), isConst(pr.b.w)
	if maxCopies > 0 {
		maxCopies = max(maxCopies, pl.shareCopies(pr))
	}
	var spare []scored // splits that copy constants more than maxCopies times
	eachGrid(pr, budget, func(sp layout.Split, bl block) {
		if gnOnly > 0 && sp.GN != gnOnly || !pl.fitsBlock(pr, bl) {
			return
		}
		c, ok := pl.score(pr, bl)
		if !ok {
			return
		}
		// Constants stay in the tile images for good: a split that
		// copies a weight to many tiles fills them.
		if maxCopies > 0 && (constA && sp.GN > maxCopies || constB && sp.GM > maxCopies) {
			spare = append(spare, scored{sp, c})
			return
		}
		cs = append(cs, scored{sp, c})
	})
	if len(cs) == 0 {
		cs = spare
	}
	sort.SliceStable(cs, func(i, j int) bool {
		if cs[i].score != cs[j].score {
			return cs[i].score < cs[j].score
		}
		return cs[i].s.Tiles() < cs[j].s.Tiles()
	})
	var out []layout.Split
	for i := 0; i < len(cs) && i < screenKeep; i++ {
		out = append(out, cs[i].s)
	}
	if len(cs) == 0 {
		return out, -1
	}
	return out, cs[0].score
}

// shareCopies is how many copies of pr's constant operand keep it
// within its fair share of the machine: half of all tiles' memory,
// shared by the products' constants in proportion to their bytes (the
// same count for every product). It applies only where the constant is
// the smaller operand (a convolution's weight beside its columns, not a
// projection's beside a transformer's few tokens): there, copying the
// constant spreads the larger operand over more tiles; 0 elsewhere.
func (pl *planner) shareCopies(pr *product) int {
	c, v := pr.a, pr.b
	if !isConst(c.w) {
		c, v = v, c
	}
	if !isConst(c.w) || isConst(v.w) || pl.weights <= 0 {
		return 0
	}
	if layout.Full(shapeOf(c.w)).Volume() >= layout.Full(shapeOf(v.w)).Volume() {
		return 0
	}
	return int(int64(pl.tiles) * pl.usable / (2 * pl.weights))
}

// startKeep is how many splits per product the start prices in full
// with constants copied at most startCopies times; wideKeep how many
// more a wide start prices that copy constants further, within their
// share of memory (the per-tile blocks of a short product, such as the
// projections of a transformer's 128 tokens, stay big enough only when
// the rows split too).
const (
	startKeep   = 6
	startCopies = 2
	wideKeep    = 3
)

// deepKeep is startKeep for a deep model (not pl.wide) of more than
// manyProducts products: the start prices about keep points a product,
// each lowering every product, and its refit trades k blocks for copies
// after it (refit). The 12-layer BERT-base FP16 encoder (72 products)
// on 1,472 tiles plans to the same 857,023 linked cycles keeping 3, 4
// or 6, in 39.6, 45.4 and 45.4 s; a feed-forward pair on 128 tiles
// (tests) refits to 116,823 cycles from 6, 120,461 from 3. A start
// whose point none of the fewer fits starts again keeping startKeep
// (startFitting). Variables, for tests.
var (
	deepKeep     = 3
	manyProducts = 24
)

// candidates returns the splits of pr the start prices: the best few by
// screen over every budget (a budget's best first, round robin from the
// largest budget), each split once, the ones copying constants at most
// startCopies times first, then, when wide, wideKeep more that copy
// them further and the first ones filled (addFilled); and the best
// split cut in two on every tile, when it scores better than every grid
// there (ok).
func (pl *planner) candidates(pr *product, wide bool) (grids []layout.Split, cut layout.Split, ok bool) {
	var lists, wides [][]layout.Split
	var best int64 // the best grid's score on every tile
	for i, b := range pl.budgets() {
		ss, sc := pl.screenN(pr, b, 0, startCopies)
		lists = append(lists, ss)
		if i == 0 {
			best = sc
		}
		if wide {
			wides = append(wides, pl.screen(pr, b, 0))
		}
	}
	if pl.prefs.keep[pr.out.Index] > 0 {
		// A row operator reads the result: whole rows per block spare it
		// a re-layout.
		for _, b := range pl.budgets()[:min(3, len(pl.budgets()))] {
			lists = append([][]layout.Split{first(pl.screenN(pr, b, 1, startCopies))}, lists...)
		}
	}
	seen := map[layout.Split]bool{}
	out := roundRobin(nil, lists, pl.keep, seen)
	out = roundRobin(out, wides, len(out)+wideKeep, seen)
	if wide {
		out = pl.addFilled(pr, out, seen)
	}
	cut, ok = pl.cut(pr, pl.tiles, best)
	if len(out) == 0 {
		// Nothing fits any budget: price the splits that spread the
		// constants most, then the widest split, whose memory report
		// says best why none fits.
		out = pl.frugalSplits(pr)
		mu := layout.Units(pr.mm.M, max(layout.AGroup, pr.align))
		nu := layout.Units(pr.mm.N, max(layout.BGroup, pr.nalign))
		gm := min(mu, pl.tiles)
		if w := (layout.Split{GB: 1, GM: gm, GN: max(1, min(nu, pl.tiles/gm)), GK: 1, Align: pr.align, NAlign: pr.nalign}); !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	return out, cut, ok
}

// frugalSplits returns the startKeep splits of pr over the planner's
// tiles whose blocks fit the screen's share of a tile whatever their
// constants, fewest constant bytes on a tile first, then by score. They
// are the start's candidates for a product none of whose splits keeps
// its constants within their share (screenN): a weight that is a large
// part of all of them, on a few tiles (bert_layer_fp16's second FFN
// weight, 512 KiB, on 6 tiles), where the widest split copies it whole
// to every tile.
func (pl *planner) frugalSplits(pr *product) []layout.Split {
	var rs []ranked
	usable := pl.usable * 3 / 4
	eachGrid(pr, pl.tiles, func(sp layout.Split, bl block) {
		if bl.bytes(int64(pr.typ.Size())) > usable || !pl.underLimit(pr, bl) {
			return
		}
		if c, ok := pl.score(pr, bl); ok {
			rs = append(rs, ranked{sp, bl.constBytes(pr), c})
		}
	})
	return firstRanked(rs)
}

// ranked is a split, the measure the start ranks it by first and its
// score.
type ranked struct {
	s          layout.Split
	key, score int64
}

// firstRanked returns the startKeep splits of rs of the least key, then
// the least score (stable).
func firstRanked(rs []ranked) []layout.Split {
	sort.SliceStable(rs, func(i, j int) bool {
		if rs[i].key != rs[j].key {
			return rs[i].key < rs[j].key
		}
		return rs[i].score < rs[j].score
	})
	var out []layout.Split
	for i := 0; i < len(rs) && i < startKeep; i++ {
		out = append(out, rs[i].s)
	}
	return out
}

// lightSplits returns the startKeep splits of pr over the planner's
// tiles whose blocks take the fewest bytes on a tile (block.bytes: the
// operand blocks, the C block and its partials), then by score: the
// start's last resort for a product whose activations, not its
// constants, fill the tiles, since the screen ranks splits by cycles.
func (pl *planner) lightSplits(pr *product) []layout.Split {
	var rs []ranked
	e := int64(pr.typ.Size())
	eachGrid(pr, pl.tiles, func(sp layout.Split, bl block) {
		if !pl.underLimit(pr, bl) {
			return
		}
		if c, ok := pl.score(pr, bl); ok {
			rs = append(rs, ranked{sp, bl.bytes(e), c})
		}
	})
	return firstRanked(rs)
}

// roundRobin appends to out the first splits of lists, then their
// second ones, and so on, skipping those seen, until out holds keep.
func roundRobin(out []layout.Split, lists [][]layout.Split, keep int, seen map[layout.Split]bool) []layout.Split {
	for i := 0; len(out) < keep; i++ {
		any := false
		for _, l := range lists {
			if i < len(l) {
				any = true
				if s := l[i]; !seen[s] && len(out) < keep {
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

// first is its first argument.
func first[T, U any](t T, _ U) T { return t }
