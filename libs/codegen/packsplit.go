package codegen

import "sync"

// This file holds Pack's split kernel (see Pack's doc): the choice of a
// split of the k extent into segments, its cost and its emission.

// Split kernel registers: the pointer into the worker's segment entries
// and a segment's tail count (0 or 1: an odd last k, FP16 lanes along X's
// rows). Both are free in every group's code.
const (
	pkSeg  = M5
	pkTail = M4
)

// maxPackSplitGroups bounds the groups of a split Pack: its table holds
// an entry per segment, about one per group.
const maxPackSplitGroups = 32

// packSeg is a piece of a split Pack's work: the k range [k0, k1) of
// group g.
type packSeg struct{ g, k0, k1 int }

// packSplit is a split Pack: each worker's segments, in the operand's
// order, and the kernel's cost.
type packSplit struct {
	segs [][]packSeg
	cost Cost
}

// splitChoice returns the split kernel for p (checked), or nil when the
// whole-group kernel runs. Choices are cached by shape.
func (p Pack) splitChoice() *packSplit {
	key := p
	key.X, key.Y = 0, 0
	if c, ok := packChoices.Load(key); ok {
		return c.(*packSplit)
	}
	c, _ := packChoices.LoadOrStore(key, p.chooseSplit())
	return c.(*packSplit)
}

// packChoices caches splitChoice by the Pack without its addresses (the
// costs do not depend on them).
var packChoices sync.Map

// granule returns the k multiple a cut inside a group falls on.
func (p Pack) granule(s packShape) int {
	if p.Out == AMPFP8 || s.f16 && s.rows {
		return 2
	}
	return 1
}

// segAdv reports whether a segment entry holds the pointer change between
// blocks of lanes (lanes along X's rows, more than one block: quads, or
// pairs for FP16 to FP16 or FP32).
func (p Pack) segAdv(s packShape) bool {
	if !s.rows {
		return false
	}
	if s.f16 && p.Out != AMPFP8 {
		return s.w > 2
	}
	return s.w > 4
}

// segCounts returns the register counts of a segment over [k0, k1) (the
// k loop's count: data k, or pairs of them for FP16 lanes along X's
// rows; the odd last k; the padding k) and how far a lane pointer walks
// along X's row over its data (lanes along X's rows).
func (s packShape) segCounts(k0, k1 int) (cnt, tail, pad int, walk int64) {
	nd := max(min(k1, s.kx)-k0, 0)
	pad = max(k1-max(k0, s.kx), 0)
	cnt = nd
	if s.f16 && s.rows {
		cnt, tail = nd/2, nd%2
	}
	return cnt, tail, pad, 4 * int64(cnt+tail)
}

// both reports whether the panel has full groups and a partial one: the
// split kernel then has both kinds of segment code.
func (s packShape) both() bool { return s.full > 0 && s.part > 0 }

// splitPrologue loads the worker's segment pointer (and, with both kinds
// of segment, whether it has a partial-group segment) and the constants.
func (p Pack) splitPrologue(b *Builder, s packShape, table Label) {
	words := 1
	if s.both() {
		words = 2
	}
	emitTableBase(b, table, words, pkEntry)
	b.Ldm(pkSeg, pkEntry, 0)
	if s.both() {
		b.Ldm(pkCnt, pkEntry, 4)
	}
	if p.Out == AMPFP8 {
		emitSetFP8(b, p.FP8, pkT0)
	}
	loadBig(b, s.sb, pkStride)
	b.Amov(A14, AZero)
}

// segment emits a segment of lanes valid lanes: the loads of its entry
// (X, Y, the k loop's count, the tail count, the advance, the padding
// count), the group's code, and with flag the entry's last word, the
// next flag, into $m11.
func (p Pack) segment(b *Builder, s packShape, lanes int, flag bool) {
	b.LdmP(pkX, pkSeg, 4)
	b.LdmP(pkY, pkSeg, 4)
	b.LdmP(pkCnt, pkSeg, 4)
	if s.tails() {
		b.LdmP(pkTail, pkSeg, 4)
	}
	if p.segAdv(s) {
		b.LdmP(pkAdv, pkSeg, 4)
	}
	b.LdmP(pkPad, pkSeg, 4)
	p.group(b, s, lanes)
	if flag {
		b.LdmP(pkCnt, pkSeg, 4)
	}
}

// segEntry returns the words of segment sg's entry, without the flag.
func (p Pack) segEntry(s packShape, sg packSeg) []uint32 {
	cnt, tail, pad, walk := s.segCounts(sg.k0, sg.k1)
	x := int64(p.X) + s.ex*int64(sg.g*s.w) + int64(sg.k0)*s.sb
	if s.rows {
		x = int64(p.X) + int64(sg.g*s.w)*s.sb + s.ex*int64(sg.k0)
	}
	y := int64(p.Y) + int64((sg.g*s.w*p.KP+s.w*sg.k0)*s.e)
	words := []uint32{uint32(x), uint32(y), uint32(cnt)}
	if s.tails() {
		words = append(words, uint32(tail))
	}
	if p.segAdv(s) {
		words = append(words, uint32(s.sb-walk))
	}
	return append(words, uint32(pad))
}

// packSplitter holds the exact costs of a split Pack's code, in issues:
// a segment's cost is linear in its counts.
type packSplitter struct {
	p          Pack
	s          packShape
	q          int   // granule
	pro        int64 // prologue, and the first brz with both kinds
	full, part [4]int64
}

// splitter returns the costs of p's split kernel: for each kind of
// segment, its issues at zero counts with its branch, then the issues
// per count of each loop.
func (p Pack) splitter(s packShape) *packSplitter {
	s.split = true
	coef := func(lanes int, flag bool, branch int64) [4]int64 {
		at := func(cnt, tail, pad int) int64 {
			t := s
			t.cnt, t.tail, t.pad = cnt, tail, pad
			return issues(func(b *Builder) { p.segment(b, t, lanes, flag) })
		}
		c0 := at(0, 0, 0)
		return [4]int64{c0 + branch, at(1, 0, 0) - c0, at(0, 1, 0) - c0, at(0, 0, 1) - c0}
	}
	sp := &packSplitter{p: p, s: s, q: p.granule(s)}
	sp.pro = issues(func(b *Builder) { p.splitPrologue(b, s, b.Label()) })
	if s.both() {
		sp.pro++
	}
	// A full segment closes with brnz, a partial one before full ones
	// with brz.
	sp.full = coef(s.w, true, 1)
	if s.part > 0 {
		var brz int64
		if s.both() {
			brz = 1
		}
		sp.part = coef(s.part, s.both(), brz)
	}
	return sp
}

// seg returns the issues of segment [k0, k1) of group g with its branch.
func (sp *packSplitter) seg(g, k0, k1 int) int64 {
	c := sp.full
	if sp.s.part > 0 && g == sp.s.groups-1 {
		c = sp.part
	}
	cnt, tail, pad, _ := sp.s.segCounts(k0, k1)
	return c[0] + int64(cnt)*c[1] + int64(tail)*c[2] + int64(pad)*c[3]
}

// fill cuts the panel into at most n ranges, each worker's range as long
// as bound (issues) allows; nil when they do not cover it.
func (sp *packSplitter) fill(n int, bound int64) [][]packSeg {
	s, kp, q := sp.s, sp.p.KP, sp.q
	g, k := 0, 0
	var out [][]packSeg
	for w := 0; w < n && g < s.groups; w++ {
		work := sp.pro
		var segs []packSeg
		for g < s.groups {
			if c := sp.seg(g, k, kp); work+c <= bound {
				work += c
				segs = append(segs, packSeg{g, k, kp})
				g, k = g+1, 0
				continue
			}
			// The longest [k, m*q) that fits, m*q < KP.
			lo, hi := k/q, (kp-1)/q
			for lo < hi {
				m := lo + (hi-lo+1)/2
				if work+sp.seg(g, k, m*q) <= bound {
					lo = m
				} else {
					hi = m - 1
				}
			}
			if lo*q > k {
				segs = append(segs, packSeg{g, k, lo * q})
				k = lo * q
			}
			break
		}
		if len(segs) == 0 {
			return nil
		}
		out = append(out, segs)
	}
	if g < s.groups {
		return nil
	}
	return out
}

// cost returns the split kernel's cost for the worker ranges segs.
func (sp *packSplitter) cost(segs [][]packSeg) Cost {
	c := Cost{Workers: len(segs), Work: make([]int64, len(segs))}
	for w, ws := range segs {
		iss := sp.pro
		for _, sg := range ws {
			iss += sp.seg(sg.g, sg.k0, sg.k1)
		}
		c.Work[w] = Slots * iss
	}
	return c
}

// chooseSplit returns the split kernel with the fewest cycles when it
// beats the whole-group kernel (p checked), else nil.
func (p Pack) chooseSplit() *packSplit {
	s := p.shape()
	if p.Workers < 2 || s.groups > maxPackSplitGroups {
		return nil
	}
	sp := p.splitter(s)
	total := sp.pro
	for g := 0; g < s.groups; g++ {
		total += sp.seg(g, 0, p.KP)
	}
	// A split must save more than 1/32 of the whole-group kernel's
	// cycles: its table and segment loads cost memory, and gains below
	// that come from shifting a few k against the launch's stagger.
	var best *packSplit
	whole := p.wholeCost(s).Cycles()
	bestCycles := whole - whole/32
	for n := 2; n <= p.Workers; n++ {
		// The smallest bound with which n ranges cover the panel.
		lo, hi := int64(0), total
		for lo+1 < hi {
			mid := lo + (hi-lo)/2
			if sp.fill(n, mid) != nil {
				hi = mid
			} else {
				lo = mid
			}
		}
		segs := sp.fill(n, hi)
		cost := sp.cost(segs)
		if c := cost.Cycles(); c < bestCycles {
			best, bestCycles = &packSplit{segs: segs, cost: cost}, c
		}
	}
	return best
}

// emitSplit emits the split kernel: the partial-group segment first when
// the worker has one, then the full-group segments in a loop.
func (p Pack) emitSplit(b *Builder, s packShape, split *packSplit) {
	s.split = true
	table := b.Label()
	p.splitPrologue(b, s, table)
	loop, done := b.Label(), b.Label()
	if s.part > 0 {
		if s.both() {
			b.Brz(pkCnt, loop)
		}
		p.segment(b, s, s.part, s.both())
		if s.both() {
			b.Brz(pkCnt, done)
		}
	}
	if s.full > 0 {
		b.Bind(loop)
		p.segment(b, s, s.w, true)
		b.Brnz(pkCnt, loop)
	}
	b.Bind(done)
	b.Exit()

	// The table: per worker its entries' address (and whether it has a
	// partial-group segment), then each worker's entries.
	b.Bind(table)
	lists := make([][]uint32, len(split.segs))
	listsAt := b.Label() // bound after the per-worker words
	at := uint32(0)      // the worker's list, from listsAt
	for w, segs := range split.segs {
		var part, full []packSeg
		for _, sg := range segs {
			if s.part > 0 && sg.g == s.groups-1 {
				part = append(part, sg)
			} else {
				full = append(full, sg)
			}
		}
		var l []uint32
		for _, sg := range part {
			l = append(l, p.segEntry(s, sg)...)
			if s.both() {
				l = append(l, boolWord(len(full) > 0))
			}
		}
		for i, sg := range full {
			l = append(l, p.segEntry(s, sg)...)
			l = append(l, boolWord(i+1 < len(full)))
		}
		b.WordLabel(listsAt, at)
		if s.both() {
			b.Word(boolWord(len(part) > 0))
		}
		lists[w] = l
		at += uint32(4 * len(l))
	}
	b.Bind(listsAt)
	for _, l := range lists {
		for _, v := range l {
			b.Word(v)
		}
	}
}

// boolWord returns a table flag word.
func boolWord(v bool) uint32 {
	if v {
		return 1
	}
	return 0
}
