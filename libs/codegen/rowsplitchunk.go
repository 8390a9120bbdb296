package codegen

import (
	"fmt"

	"ipu.local/libs/isa"
)

// This file holds the chunk launches of RowsSplit: each unit (a chunk of
// a row) and its table entry, the balance of units over the workers, the
// launch's cost and its emission.

// Split kernel registers (the chunk launches). Units use the whole-row
// kernel's registers otherwise: $m2 X and $m3 Y at the chunk's start,
// $m7 and $m8 the scale and bias at the chunk's start.
const (
	spEnt  = M12 // the next word of this worker's units (post-incremented)
	spFull = M4  // full-length units left
	spLast = M9  // last-chunk units left
	spW    = M13 // the partial this unit writes
	spTmp  = M0  // the row's partials, Mean and InvStdDev addresses
)

// unitField is a word of a unit's table entry.
type unitField uint8

const (
	ufX    unitField = iota // the chunk's first element in X
	ufY                     // in Y
	ufG                     // in Scale
	ufB                     // in Bias
	ufW                     // the partial the unit writes
	ufS1                    // the row's partials of launch 1
	ufS2                    // of launch 2
	ufMean                  // Mean[i]
	ufInv                   // InvStdDev[i]
	ufE                     // the chunk's first e_j in the stash
	ufMu                    // LayerNorm: the row's mu in scratch
)

// area2 returns the offset of launch 2's partials in scratch.
func (p Rows) area2() uint32 { return uint32(4 * p.R * p.Chunks) }

// fieldWord returns the word of field f for unit (i, k).
func (p Rows) fieldWord(f unitField, i, k int) uint32 {
	col := uint32((k - p.FirstChunk) * p.ChunkLen) // on the tile
	vs := uint32(4)
	if p.ScaleF16 {
		vs = 2
	}
	row := uint32(4 * i * p.Chunks)
	switch f {
	case ufX:
		return p.X + uint32(p.xSize())*(uint32(i*p.XStride)+col)
	case ufY:
		return p.Y + uint32(p.ySize())*(uint32(i*p.YStride)+col)
	case ufG:
		return p.Scale + vs*col
	case ufB:
		return p.Bias + vs*col
	case ufW:
		w := p.Scratch + row + uint32(4*k)
		if p.Phase == 2 {
			w += p.area2()
		}
		return w
	case ufS1:
		return p.Scratch + row
	case ufS2:
		return p.Scratch + p.area2() + row
	case ufMean:
		return p.Mean + uint32(4*i)
	case ufInv:
		return p.InvStdDev + uint32(4*i)
	case ufMu:
		return p.Scratch + 2*p.area2() + uint32(4*i)
	case ufE:
		// The row's columns all (a tile split's tiles use theirs).
		return p.Scratch + p.stashOffset() + 4*uint32(i*p.stashPitch()+k*p.ChunkLen)
	}
	return 0
}

// combine emits d = the row's K partials at $m base combined with op
// (f32add or f32max), $a4:5 clobbered: d is not $a4 or $a5.
//
// With K even every row's partials start 8-byte aligned: they load in
// pairs (ld64 into $a4:5) and combine lane-wise into the pair at d (d
// even; its odd lane is clobbered), the even-numbered partials in one
// lane and the odd-numbered in the other, in chunk order, and the two
// lanes last. Odd K combines in chunk order with scalar loads. With
// quadPartials they load four at a time (ld128 into $a8:11, or $a0:3
// when acc or d is there), the quad's two pairs combined into the lanes
// in turn: the same partials in the same order, 3 issues per four
// partials instead of 4.
func (p Rows) combine(b *Builder, op isa.Op, d AReg, base MReg) {
	p.combineVia(b, op, d, d, base)
}

// combineVia is combine with the lanes in the pair at acc (even), which
// it clobbers, and the result in d.
func (p Rows) combineVia(b *Builder, op isa.Op, d, acc AReg, base MReg) {
	if p.Chunks%2 != 0 {
		b.Ld32(d, base, 0)
		for k := 1; k < p.Chunks; k++ {
			b.Ld32(rwT, base, int32(4*k))
			b.F(op, d, d, rwT)
		}
		return
	}
	vop := isa.V2ADD
	if op == isa.FMAX {
		vop = isa.V2MAX
	}
	if p.quadPartials() {
		// Four at a time: the quad's pairs added in order, so each lane
		// takes the same partials in the same order as with ld64.
		overlaps := func(q AReg) bool { return acc < q+4 && acc+2 > q || d >= q && d < q+4 }
		q := AReg(8)
		if overlaps(q) {
			q = 0
		}
		if overlaps(q) {
			b.Fail(fmt.Errorf("%s: partials combined into $a%d (lanes $a%d:%d): no quad free for them", p.Op, d, acc, acc+1))
			return
		}
		b.Ld128(q, base, 0)
		b.F(vop, acc, q, q+2)
		for k := 4; k < p.Chunks; k += 4 {
			b.Ld128(q, base, int32(4*k))
			b.F(vop, acc, acc, q)
			b.F(vop, acc, acc, q+2)
		}
		b.F(op, d, acc, acc+1)
		return
	}
	b.Ld64(acc, base, 0)
	for k := 2; k < p.Chunks; k += 2 {
		b.Ld64(rwT, base, int32(4*k))
		b.F(vop, acc, acc, rwT)
	}
	b.F(op, d, acc, acc+1)
}

// quadPartials reports whether combineVia loads the partials four at a
// time: Scratch interleaved and 16-byte aligned, and every row's
// partials too (Chunks a multiple of 4; launch 2's area then starts
// 16-byte aligned as well).
func (p Rows) quadPartials() bool { return p.ScratchInterleaved && p.Chunks%4 == 0 }

// unitPre emits the length-independent start of a unit: the loads of its
// table entry (recorded in rec when not nil) and the combination of the
// earlier launches' partials.
func (p Rows) unitPre(b *Builder, rec *[]unitField) {
	ld := func(f unitField, d MReg) {
		b.LdmP(d, spEnt, 4)
		if rec != nil {
			*rec = append(*rec, f)
		}
	}
	ps := p.passes()
	switch p.Op {
	case Softmax, LogSoftmax:
		switch p.Phase {
		case 1:
			ld(ufX, rwX)
			ld(ufW, spW)
		case 2:
			ld(ufX, rwX)
			switch {
			case ps[1].stash:
				ld(ufE, rwY)
			case ps[1].out:
				ld(ufY, rwY)
			}
			ld(ufW, spW)
			ld(ufS1, spTmp)
			p.combine(b, isa.FMAX, rwM, spTmp)
			b.Amov(rwM+1, rwM)
		case 3:
			switch ps[2].src {
			case fromX:
				ld(ufX, rwX)
			case fromStash:
				ld(ufE, rwX)
			}
			ld(ufY, rwY)
			if ps[2].src == fromX {
				ld(ufS1, spTmp)
				p.combine(b, isa.FMAX, rwM, spTmp)
				b.Amov(rwM+1, rwM)
			}
			ld(ufS2, spTmp)
			p.combine(b, isa.FADD, rwZ, spTmp)
		}
	case LayerNorm:
		ld(ufX, rwX)
		switch p.Phase {
		case 1:
			ld(ufW, spW)
		case 2:
			ld(ufW, spW)
			ld(ufS1, spTmp)
			p.combine(b, isa.FADD, rwM, spTmp)
			b.F(isa.FMUL, rwM, rwM, rwInvC)
			b.Amov(rwM+1, rwM)
			// Every unit of the row stores the same mu for launch 3.
			ld(ufMu, spTmp)
			b.St32(rwM, spTmp, 0)
		case 3:
			ld(ufY, rwY)
			if p.Scale != 0 {
				ld(ufG, rwG)
			}
			if p.Bias != 0 {
				ld(ufB, rwB)
			}
			ld(ufMu, spTmp)
			b.Ld32(rwM, spTmp, 0)
			b.Amov(rwM+1, rwM)
			ld(ufS2, spTmp)
			p.combine(b, isa.FADD, rwZ, spTmp)
			b.F(isa.FMUL, rwZ, rwZ, rwInvC)
			b.F(isa.FADD, rwZ, rwZ, rwEps)
			b.F1(isa.FRSQRT, rwZ, rwZ)
			b.Amov(rwZ+1, rwZ)
			if p.Mean != 0 {
				ld(ufMean, spTmp)
				b.St32(rwM, spTmp, 0)
			}
			if p.InvStdDev != 0 {
				ld(ufInv, spTmp)
				b.St32(rwZ, spTmp, 0)
			}
		}
	default: // reductions, launch 1
		ld(ufX, rwX)
		ld(ufW, spW)
	}
}

// unitFields returns the words of a unit's table entry.
func (p Rows) unitFields() []unitField {
	var rec []unitField
	p.unitPre(NewBuilder(nil, 0), &rec)
	return rec
}

// loadCounts loads the count registers the walk of pass ps needs on a
// row of p.C elements (a chunk beyond an rpti count).
func (p Rows) loadCounts(b *Builder, ps rowPass) {
	if p.quads(ps) {
		if p.C/4 > MaxRptiCount {
			b.LoadConst(rwQuads, uint32(p.C/4))
		}
	} else if p.pairs() > MaxRptiCount {
		b.LoadConst(rwCount, uint32(p.pairs()))
	}
}

// unitBody emits the length-dependent part of a unit on a chunk of n
// elements: its pass over the chunk and the store of its partial.
func (p Rows) unitBody(b *Builder, n int) {
	q := p
	q.C = n
	ps := p.passes()
	switch {
	case p.Op == Softmax || p.Op == LogSoftmax:
		switch p.Phase {
		case 1:
			q.loadCounts(b, ps[0])
			q.maxPass(b, ps[0])
			b.St32(rwM, spW, 0)
		case 2:
			q.loadCounts(b, ps[1])
			if ps[1].out {
				b.Mov(rwYp, rwY)
			}
			q.laneSum(b, rwZ, ps[1], func(l lanes, st rowStore) {
				l.v(isa.V2SUB, rwT, rwT, rwM)
				l.v1(isa.V2EXP, rwT, rwT)
				if ps[1].out {
					st(rwT)
				}
				l.v(isa.V2ADD, rwS, rwS, rwT)
			})
			b.St32(rwZ, spW, 0)
		case 3:
			q.loadCounts(b, ps[2])
			q.softmaxOut(b, ps[2])
		}
	case p.Op == LayerNorm && p.Phase == 2:
		q.loadCounts(b, ps[1])
		q.laneSum(b, rwZ, ps[1], func(l lanes, _ rowStore) {
			l.v(isa.V2SUB, rwT, rwT, rwM)
			l.v(isa.V2FMA, rwS, rwT, rwT)
		})
		b.St32(rwZ, spW, 0)
	case p.Op == LayerNorm && p.Phase == 3:
		q.loadCounts(b, ps[2])
		b.Mov(rwXp, rwX)
		b.Mov(rwYp, rwY)
		q.layerNormOut(b, ps[2])
	default: // chunk sums
		q.loadCounts(b, ps[0])
		q.laneSum(b, rwZ, ps[0], nil)
		b.St32(rwZ, spW, 0)
	}
}

// twoLoops reports whether the last chunk is shorter: its units have
// their own loop.
func (p Rows) twoLoops() bool {
	return p.lastLen() != p.ChunkLen && p.FirstChunk+p.tileChunks() == p.Chunks
}

// chunkPrologue emits the table loads and constants of a chunk launch.
func (p Rows) chunkPrologue(b *Builder, table Label) {
	words := 2
	if p.twoLoops() {
		words = 3
	}
	emitTableBase(b, table, words, M1)
	b.Ldm(spEnt, M1, 0)
	b.Ldm(spFull, M1, 4)
	if p.twoLoops() {
		b.Ldm(spLast, M1, 8)
	}
	sm := p.Op == Softmax || p.Op == LogSoftmax
	if sm && p.Phase == 2 || !sm && p.Phase < 3 {
		b.LoadA(rwZero, 0) // lane sums
	}
	switch {
	case sm && p.Phase == 1:
		p.maxInit(b)
	case p.Op == LayerNorm && p.Phase >= 2:
		b.LoadF32(rwInvC, p.invC())
		if p.Phase == 3 {
			b.LoadF32(rwEps, p.Epsilon)
		}
	}
}

// chunkLoops emits the unit loops after the prologue:
//
//	one length:  loop: unit(L); addi full, -1; brnz full, loop; exit
//	two lengths: brz full, second; loop: unit(L); addi; brnz loop
//	             second: brz last, done; loop2: unit(L'); addi; brnz loop2
//	             done: exit
func (p Rows) chunkLoops(b *Builder) {
	if !p.twoLoops() {
		loop := b.Here()
		p.unitPre(b, nil)
		p.unitBody(b, p.ChunkLen)
		b.Addi(spFull, spFull, -1)
		b.Brnz(spFull, loop)
		b.Exit()
		return
	}
	second, done := b.Label(), b.Label()
	b.Brz(spFull, second)
	loop := b.Here()
	p.unitPre(b, nil)
	p.unitBody(b, p.ChunkLen)
	b.Addi(spFull, spFull, -1)
	b.Brnz(spFull, loop)
	b.Bind(second)
	b.Brz(spLast, done)
	loop2 := b.Here()
	p.unitPre(b, nil)
	p.unitBody(b, p.lastLen())
	b.Addi(spLast, spLast, -1)
	b.Brnz(spLast, loop2)
	b.Bind(done)
	b.Exit()
}

// chunkPlan is a chunk launch's division of work: the issues of the
// prologue (with the loop checks), of a full-length unit and of a
// last-chunk unit (each with its loop branch), and each worker's range
// of units.
type chunkPlan struct {
	pro, full, last int64
	first, count    []int
}

func (p Rows) chunkPlan() chunkPlan {
	var c chunkPlan
	c.pro = issues(func(b *Builder) { p.chunkPrologue(b, b.Label()) })
	pre := issues(func(b *Builder) { p.unitPre(b, nil) })
	c.full = pre + issues(func(b *Builder) { p.unitBody(b, p.ChunkLen) }) + 2
	c.last = c.full
	if p.twoLoops() {
		c.pro += 2
		c.last = pre + issues(func(b *Builder) { p.unitBody(b, p.lastLen()) }) + 2
	}
	units := make([]int64, p.units())
	for u := range units {
		units[u] = c.full
		if p.lastUnit(u) {
			units[u] = c.last
		}
	}
	c.first, c.count = balance(units, p.Workers)
	return c
}

// balance cuts items into at most w contiguous ranges (each non-empty)
// whose largest sum is the smallest possible, filling each range as far
// as that bound allows.
func balance(items []int64, w int) (first, count []int) {
	var lo, hi int64
	for _, v := range items {
		lo = max(lo, v)
		hi += v
	}
	// cut calls f(i) at the first item of each range under bound and
	// returns the number of ranges.
	cut := func(bound int64, f func(i int)) int {
		n, sum := 0, int64(0)
		for i, v := range items {
			if i == 0 || sum+v > bound {
				n, sum = n+1, 0
				if f != nil {
					f(i)
				}
			}
			sum += v
		}
		return n
	}
	for lo < hi {
		if mid := lo + (hi-lo)/2; cut(mid, nil) <= w {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	cut(lo, func(i int) { first = append(first, i) })
	for r, i := range first {
		end := len(items)
		if r+1 < len(first) {
			end = first[r+1]
		}
		count = append(count, end-i)
	}
	return first, count
}

// splitCost returns a split launch's cost.
func (p Rows) splitCost() Cost {
	if p.combining() {
		return p.combineCost()
	}
	c := p.chunkPlan()
	out := Cost{Workers: len(c.first), Work: make([]int64, len(c.first))}
	for w := range out.Work {
		v := c.pro
		for u := c.first[w]; u < c.first[w]+c.count[w]; u++ {
			if p.lastUnit(u) {
				v += c.last
			} else {
				v += c.full
			}
		}
		out.Work[w] = Slots * v
	}
	return out
}

// emitSplit emits a split launch (its parameters checked).
func (p Rows) emitSplit(b *Builder) (Kernel, error) {
	if p.combining() {
		return p.emitCombine(b)
	}
	c := p.chunkPlan()
	k := Kernel{Entry: b.Here(), Cost: p.splitCost()}
	table := b.Label()
	p.chunkPrologue(b, table)
	p.chunkLoops(b)
	// The table: per worker its first entry's address and its unit
	// counts, then the entries, each worker's full-length units first.
	fields := p.unitFields()
	var rows [][]uint32
	var entries []uint32
	entriesAt := b.Label() // bound after the table's rows
	for w := range c.first {
		var full, last []int
		for u := c.first[w]; u < c.first[w]+c.count[w]; u++ {
			if p.twoLoops() && p.lastUnit(u) {
				last = append(last, u)
			} else {
				full = append(full, u)
			}
		}
		row := []uint32{uint32(4 * len(entries)), uint32(len(full))}
		if p.twoLoops() {
			row = append(row, uint32(len(last)))
		}
		rows = append(rows, row)
		for _, u := range append(full, last...) {
			for _, f := range fields {
				entries = append(entries, p.fieldWord(f, u/p.tileChunks(), p.unitChunk(u)))
			}
		}
	}
	// Each row's first word is its worker's entries, from entriesAt.
	b.Bind(table)
	for _, r := range rows {
		b.WordLabel(entriesAt, r[0])
		for _, w := range r[1:] {
			b.Word(w)
		}
	}
	b.Bind(entriesAt)
	for _, v := range entries {
		b.Word(v)
	}
	return k, b.Err()
}
