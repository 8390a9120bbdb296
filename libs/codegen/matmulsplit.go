package codegen

// Fractional work split of the matrix kernel. Whole items split over W
// workers cost ceil(items/W) items on the busiest worker; when items is
// not a multiple of W the others idle at the end. The split variant cuts
// the items' AMP steps, as one stream (item 0's steps, then item 1's,
// ...), into W ranges of nearly equal issue counts: a range may end inside
// an item (its head, steps [0, b)) and the next range then begins with the
// rest of that item (its tail, steps [b, steps)). The tail continues the
// head's FP32 chain through C (ampld, then the remaining steps in k order,
// then ampst), so every element gets exactly the roundings of the whole
// item. A worker runs its head first, its whole items, its tail last; the
// kernel uses the split only when, on the issue counts, every tail's first
// ampld issues at least ampIssues slots after the last ampst of the head
// it continues (worker w+1 starts after worker w, and each worker issues
// its n-th slot n x 6 cycles after its start), and when it lowers the
// busiest worker's count.

// mmChunk is part of one item's steps [k0, k1); k1 == 0: none.
type mmChunk struct {
	item   int
	k0, k1 int64
}

// mmWorker is one worker's share in the split variant.
type mmWorker struct {
	head         mmChunk // the first steps of an item the next worker ends
	start, count int     // whole items
	tail         mmChunk // the last steps of an item the previous worker began
}

// Issues of the split variant's sections (row stride and group jump as in
// the whole-item variant).
const (
	mmSplitWords    = 13             // table row: Ag, B, C, rem, cnt, then head and tail: steps, A, B, C
	mmChunkSkip     = 2              // ldm steps, brz
	mmChunkIssues   = 2 + 3 + 1 + 19 // ldm steps, brz, 3 ldm, rpt, the 4 ampst rows
	mmLoadRows      = 19             // the 4 ampld rows
	mmLastStoreSlot = 15             // slot of the last ampst within the rows
	ampIssues       = 4
)

// chunkIssues is a chunk section's issues: skip when absent.
func (s mmShape) chunkIssues(c mmChunk, load bool) int64 {
	if c.k1 == 0 {
		return mmChunkSkip
	}
	n := mmChunkIssues + (c.k1-c.k0)*s.stepIssues
	if load {
		n += mmLoadRows
	} else {
		n++ // ampclr
	}
	return n
}

// rangeShare returns worker share of the stream range [lo, hi) of steps;
// ok is false when the range lies inside one item and starts after its
// first step (it would need a middle chunk).
func (s mmShape) rangeShare(lo, hi int64) (mmWorker, bool) {
	st := s.steps
	i0, a := int(lo/st), lo%st
	i1, b := int(hi/st), hi%st
	var w mmWorker
	first := i0
	if a > 0 {
		if i0 == i1 {
			return w, false
		}
		w.tail = mmChunk{item: i0, k0: a, k1: st}
		first = i0 + 1
	}
	if b > 0 {
		w.head = mmChunk{item: i1, k0: 0, k1: b}
	}
	w.start, w.count = first, i1-first
	return w, true
}

// splitIssues is a split worker's issues before its exit.
func (s mmShape) splitIssues(pro, item int64, acc bool, w mmWorker) int64 {
	n := pro + s.chunkIssues(w.head, acc) + 1 + s.chunkIssues(w.tail, true)
	if w.count > 0 {
		P := s.panels
		n += int64(w.count)*item + 4*int64((w.start+w.count)/P-w.start/P)
	}
	return n
}

// planSplit returns the split variant's shares when it beats whole items
// (best, the busiest whole-item worker's issues), else nil.
func (s mmShape) planSplit(pro, item int64, acc bool, W int, best int64) []mmWorker {
	if W < 2 || s.items%W == 0 || s.items < W {
		return nil
	}
	total := int64(s.items) * s.steps
	// assign gives each worker in turn the longest range within x issues.
	assign := func(x int64) []mmWorker {
		out := make([]mmWorker, 0, W)
		lo := int64(0)
		for w := 0; w < W; w++ {
			if lo == total {
				return nil // a worker without work: no better than fewer
			}
			minHi := lo + 1
			if a := lo % s.steps; a > 0 {
				minHi = lo - a + s.steps
			}
			if sh, _ := s.rangeShare(lo, minHi); s.splitIssues(pro, item, acc, sh) > x {
				return nil
			}
			hi := minHi
			for l, h := minHi, total; l <= h; {
				m := l + (h-l)/2
				if sh, _ := s.rangeShare(lo, m); s.splitIssues(pro, item, acc, sh) <= x {
					hi, l = m, m+1
				} else {
					h = m - 1
				}
			}
			sh, _ := s.rangeShare(lo, hi)
			out = append(out, sh)
			lo = hi
		}
		if lo != total {
			return nil
		}
		return out
	}
	var found []mmWorker
	for l, h := total/int64(W), best-1; l <= h; {
		m := l + (h-l)/2
		if ws := assign(m); ws != nil {
			found, h = ws, m-1
		} else {
			l = m + 1
		}
	}
	if found == nil || !s.ordered(pro, item, acc, found) {
		return nil
	}
	return found
}

// ordered checks that every tail's first ampld issues at least ampIssues
// slots after the last ampst of the head it continues (both counted from
// their workers' first issues; worker w+1 starts after worker w).
func (s mmShape) ordered(pro, item int64, acc bool, ws []mmWorker) bool {
	for w := 1; w < len(ws); w++ {
		t, h := ws[w].tail, ws[w-1].head
		if t.k1 == 0 {
			continue
		}
		if h.k1 == 0 || h.item != t.item || h.k1 != t.k0 {
			return false
		}
		headEnd := pro + mmChunkSkip + 3 + 1 + (h.k1-h.k0)*s.stepIssues + mmLastStoreSlot
		if acc {
			headEnd += mmLoadRows
		} else {
			headEnd++
		}
		tailLoad := s.splitIssues(pro, item, acc, ws[w]) - s.chunkIssues(t, true) + mmChunkSkip + 3
		if tailLoad < headEnd+ampIssues {
			return false
		}
	}
	return true
}

// splitTable is the split variant's per-worker table.
func (s mmShape) splitTable(a, b, c uint32, ws []mmWorker) [][]uint32 {
	tab := make([][]uint32, len(ws))
	stepA, stepB := uint32(s.stepA), uint32(s.stepB)
	chunk := func(ch mmChunk) []uint32 {
		if ch.k1 == 0 {
			return []uint32{0, 0, 0, 0}
		}
		g, pn := int64(ch.item/s.panels), int64(ch.item%s.panels)
		return []uint32{
			uint32(ch.k1 - ch.k0),
			a + uint32(g*s.groupBytes) + stepA*uint32(ch.k0),
			b + uint32(pn*s.bStride) + stepB*uint32(ch.k0),
			c + uint32(4*g*s.rowBytes+s.panelC*pn),
		}
	}
	for w, sh := range ws {
		st := min(sh.start, s.items-1)
		g, pn := int64(st/s.panels), int64(st%s.panels)
		row := []uint32{
			a + uint32(g*s.groupBytes),
			b + uint32(pn*s.bStride),
			c + uint32(4*g*s.rowBytes+s.panelC*pn),
			uint32(int64(s.panels) - pn),
			uint32(sh.count),
		}
		row = append(row, chunk(sh.head)...)
		tab[w] = append(row, chunk(sh.tail)...)
	}
	return tab
}

// Chunk registers (the split variant).
const (
	mmChSteps = mmTmp
	mmChB     = M13
	mmChC     = M14
)

// emitChunk emits a chunk section reading its table words at off: skip
// when its steps are 0, else load A, B, C, clear or load the accumulator,
// run the steps, store the rows.
func emitChunk(b *Builder, p MatMul, off int32, load bool, rows func(base MReg, op func(MReg, int))) {
	skip := b.Label()
	b.Ldm(mmChSteps, mmEntry, off)
	b.Brz(mmChSteps, skip)
	b.Ldm(mmA, mmEntry, off+4)
	b.Ldm(mmChB, mmEntry, off+8)
	b.Ldm(mmChC, mmEntry, off+12)
	if load {
		rows(mmChC, b.Ampld)
	} else {
		b.Ampclr()
	}
	end := b.Label()
	b.Rpt(mmChSteps, end)
	p.Type.ampStep(b, mmA, mmChB)
	b.Bind(end)
	rows(mmChC, b.Ampst)
	b.Bind(skip)
}
