package planner

// Code bytes per tile: the planner refuses a program whose code would
// not fit a tile's executable range, as the linker does
// (link/xplace.go), from an estimate: every distinct kernel a tile
// launches compiled at the search's made-up addresses, its launches,
// and the exchange code the geometry expands (geometry.go).

import (
	"errors"
	"fmt"
	"slices"

	"ipu.local/libs/arch"
	"ipu.local/libs/cost"
	"ipu.local/libs/layout"
	"ipu.local/libs/lower"
	"ipu.local/libs/prog"
)

// CodeError is a program whose code on a tile, estimated, exceeds its
// executable range.
type CodeError struct {
	Tile         int
	Bytes, Limit int64
	// Rows are the row operators' inputs laid out on a halved alignment
	// with a piece on a tile whose code does not fit (rowLayout).
	Rows []int
}

func (e *CodeError) Error() string {
	return fmt.Sprintf("tile %d: code of about %d bytes, more than the %d of its executable range", e.Tile, e.Bytes, e.Limit)
}

// tileCode estimates the code bytes of the tiles on: their kernels'
// code (each kernel once a tile; the linker also shares the code of
// launches of equal kernels on the same buffers), a launch's entry and
// worker runs, a word a superstep, and the exchange code exch gives by
// tile. Tiles not on are 0.
func tileCode(p *arch.Preset, pr *prog.Program, exch []int64, on []bool) ([]int64, error) {
	code := make([]int64, p.Tiles)
	for t := range code {
		if on[t] && t < len(exch) {
			code[t] = exch[t]
		}
	}
	seen := prog.NewLaunchSet()
	for _, s := range pr.Steps {
		for t, ks := range s.Work {
			if !on[t] {
				continue
			}
			code[t] += 4
			for _, k := range ks {
				w, err := k.Workers()
				if err != nil {
					return nil, err
				}
				code[t] += 4 * int64(2+w)
				if seen.Add(t, k) {
					code[t] += k.ProbeCode(p)
				}
			}
		}
	}
	return code, nil
}

// fitsCode refuses a program whose estimated code exceeds the executable
// range on tiles where halved row layouts (rowLayout) lie: the error's
// Rows are those layouts' values. The estimate is an upper bound (the
// exchange code before the linker compresses it: a 12-layer encoder's
// fullest tile, 166416 bytes linked, is estimated at 208548), so a
// program it finds too large elsewhere is left to the linker.
func fitsCode(p *arch.Preset, pr *prog.Program, exch []int64, halved map[int][]layout.Piece) error {
	if len(halved) == 0 {
		return nil
	}
	held := make([]bool, p.Tiles)
	for _, ps := range halved {
		for _, pc := range ps {
			if pc.Tile >= 0 && pc.Tile < p.Tiles {
				held[pc.Tile] = true
			}
		}
	}
	code, err := tileCode(p, pr, exch, held)
	if err != nil {
		return err
	}
	limit := int64(p.Executable.Size())
	var ce *CodeError
	rows := map[int]bool{}
	for t, n := range code {
		if n <= limit {
			continue
		}
		on := rowsOn(halved, t)
		if len(on) == 0 {
			continue
		}
		if ce == nil || n > ce.Bytes {
			ce = &CodeError{Tile: t, Bytes: n, Limit: limit}
		}
		for _, v := range on {
			rows[v] = true
		}
	}
	if ce == nil {
		return nil
	}
	for v := range rows {
		ce.Rows = append(ce.Rows, v)
	}
	slices.Sort(ce.Rows)
	return ce
}

// rowsOn returns the values of halved whose pieces take tile t, in
// order.
func rowsOn(halved map[int][]layout.Piece, t int) []int {
	var out []int
	for v, ps := range halved {
		for _, p := range ps {
			if p.Tile == t {
				out = append(out, v)
				break
			}
		}
	}
	slices.Sort(out)
	return out
}

// startFitting is the start (startAny) and its refit (none after a
// wide model's narrow start), again with the halved row layouts on a
// tile whose code does not fit kept whole, as long as that is some. A
// candidate the start refuses for such a tile's code ends the start too
// (cheapest), not only a product none of whose candidates fit: halving
// rows is worth less than the splits it would rule out (a 12-layer
// BERT-base FP16 encoder whose halved softmax inputs left the attention
// scores one split of six: 970,543 estimated cycles; whole: 945,133).
// The points priced before are forgotten: their plans change.
func (pl *planner) startFitting() (point, *result, error) {
	for {
		pl.starting = true
		cur, curR, wide, err := pl.startAny()
		pl.starting = false
		var ce *CodeError
		if !errors.As(err, &ce) || len(ce.Rows) == 0 {
			if err == nil && (wide || !pl.wide) {
				cur, curR, err = pl.refit(cur, curR, !wide)
			}
			if err != nil {
				return cur, curR, err
			}
			if cur, curR, err = pl.placeSideBySide(cur, curR); err != nil || curR.il.Bytes == 0 {
				return cur, curR, err
			}
			return pl.spread(cur, curR)
		}
		for _, v := range ce.Rows {
			pl.whole[v] = true
		}
		pl.cache, pl.programs, pl.counted = map[string]*result{}, map[programPrint]pricing{}, map[string]bool{}
	}
}

// startAny is the first start that fits, and whether it is a wide one:
// wide, then narrow when out of memory; narrow for a deep model, with
// deepKeep splits a product when it has many, then startKeep when no
// point of those fits; a narrow start out of memory again keeping each
// product's first split, then the repair of its finished point
// (repairRoom). The error is the last start's with the most candidates.
func (pl *planner) startAny() (point, *result, bool, error) {
	if !pl.wide && len(pl.products) > manyProducts {
		pl.keep = deepKeep
	}
	cur, curR, err := pl.start(pl.wide)
	wide := pl.wide
	var me *MemoryError
	if pl.keep < startKeep && (errors.As(err, &me) || err == nil && curR.il.Bytes > 0) {
		// None of the fewer candidates fit: all of them.
		pl.keep = startKeep
		cur, curR, err = pl.start(false)
	}
	if pl.wide && errors.As(err, &me) {
		cur, curR, err = pl.start(false)
		wide = false
	}
	if !errors.As(err, &me) {
		return cur, curR, wide, err
	}
	// Each product took the cheapest of its splits with the later ones
	// at their first: an early product's may leave a later one no room
	// where every product's first split leaves it some.
	if keep := pl.keep; keep > 1 {
		pl.keep = 1
		if c, r, err1 := pl.start(false); err1 == nil {
			return c, r, false, nil
		}
		pl.keep = keep
	}
	if cur == nil {
		return cur, curR, wide, err
	}
	c, r, ok, err1 := pl.repairRoom(cur)
	switch {
	case err1 != nil:
		return nil, nil, false, err1
	case ok:
		return c, r, false, nil
	}
	return cur, curR, wide, err
}

// codeRoom returns the fewest bytes a tile of pt's program keeps free
// with its code estimated (tileCode) in place of codeAllowance: its
// constants, its variables at their peak and its code against the
// search's usable memory. A deep model's code is many times the
// allowance (a 12-layer BERT-base FP16 encoder's fullest tile: 166,416
// bytes linked), and the linker places the buffers that the code leaves
// no room for in the interleaved region, past what the search counted.
func (pl *planner) codeRoom(pt point) (int64, error) {
	out, err := pl.planOf(pt)
	if err != nil {
		return 0, err
	}
	pr, err := lower.LowerWith(out, pl.g, pl.p, lower.Options{NoData: true, Cache: pl.steps[0]})
	if err != nil {
		return 0, err
	}
	syn := cost.Synthetic(pl.p, pr.Buffers)
	_, exch := expandGeometry(pl.p, pr, syn)
	on := make([]bool, pl.p.Tiles)
	for t := range on {
		on[t] = true
	}
	code, err := tileCode(pl.p, pr, exch, on)
	if err != nil {
		return 0, err
	}
	per, used, _ := tileBytes(pr)
	room := pl.usable
	for t := range per {
		if used[t] {
			room = min(room, pl.usable-per[t].Constants-per[t].Variables-code[t])
		}
	}
	return room, nil
}
