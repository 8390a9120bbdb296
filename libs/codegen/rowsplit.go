package codegen

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"

	"ipu.local/libs/isa"
)

// This file holds the split form of Rows: RowsSplit's launches, which
// cut each row into chunks so that a tile with fewer rows than workers
// keeps every worker busy.

// maxSplitUnits bounds R*Chunks (the units' table).
const maxSplitUnits = 4096

// splitPhases returns the launches of op's split sequence.
func (op RowOp) splitPhases() int {
	if op.reduces() {
		return 2
	}
	return 3
}

// granule returns the element multiple of a chunk's length: every chunk
// of X and Y starts 8-byte aligned.
func (p Rows) granule() int {
	if p.InF16 || p.OutF16 && !p.Op.reduces() {
		return 4
	}
	return 2
}

// ScratchBytes returns the bytes of FP32 partials at Scratch a launch of
// a split sequence uses (0 for the whole-row kernel).
func (p Rows) ScratchBytes() int {
	if p.Phase == 0 {
		return 0
	}
	n := 4 * p.R * p.Chunks
	if !p.Op.reduces() {
		n *= 2
	}
	return n
}

// lastLen returns the length of a row's last chunk.
func (p Rows) lastLen() int { return p.C - (p.Chunks-1)*p.ChunkLen }

// checkSplit checks the split fields (the shape is checked).
func (p Rows) checkSplit() error {
	if p.Phase == 0 {
		if p.Chunks != 0 || p.ChunkLen != 0 || p.Scratch != 0 {
			return errors.New("chunks, chunk length and scratch belong to a split launch (phase 0 is the whole-row kernel)")
		}
		return nil
	}
	if n := p.Op.splitPhases(); p.Phase < 0 || p.Phase > n {
		return fmt.Errorf("phase %d out of range [0, %d]", p.Phase, n)
	}
	K, L, C, g := p.Chunks, p.ChunkLen, p.C, p.granule()
	if K < 2 || K > C || L < 1 || L > C || L%g != 0 || (K-1)*L >= C || K*L < C {
		return fmt.Errorf("%d chunks of %d elements for rows of %d: want 2 or more chunks of a multiple of %d elements covering the row, the last one not empty", K, L, C, g)
	}
	if int64(p.R)*int64(K) > maxSplitUnits {
		return fmt.Errorf("%d rows of %d chunks: want at most %d chunks in all", p.R, K, maxSplitUnits)
	}
	return nil
}

// RowsSplit returns the launches that compute p with each row cut into
// chunks spread over the workers, to run in order with a join between
// two launches (the barrier), and the bytes of scratch memory they need
// at scratch (FP32 partials, 8-byte aligned; each launch's Scratch field
// holds the address, for the caller to change). It returns []Rows{p} and
// 0 when no split is faster than p.
//
// Choice. For K = 2..2*Workers chunks of L elements, L the smallest
// allowed length of at least C/K (K skipped when its last chunk would be
// empty), the launches' exact costs back to back from phase 0
// (Cost.CyclesAt, each launch starting at the phase the previous one
// ended at, plus LaunchCallCycles per launch) are compared with p's; the
// fewest cycles win. Choices are
// cached by shape (the addresses do not change them).
//
// Chunks. Row i is cut into K = Chunks chunks: chunk k holds columns
// [k*L, min((k+1)*L, C)), L = ChunkLen a multiple of 4 when X is FP16
// or the op writes FP16 rows at Y, else of 2, so that every chunk starts
// 8-byte aligned in X, Y, Scale and Bias and at an even column; the last
// chunk holds 1..L elements. The lanes of a chunk (S0: its even columns,
// S1: its odd ones, as in the row operations' doc) are the row's.
//
// Arithmetic order. Each unit (row i, chunk k) computes its chunk's
// partial as the whole-row kernel computes a row's lane sum (or lane
// maxima), on the chunk alone; a row's K partials are combined in chunk
// order by every unit that needs them:
//
//	sum = RN32(...RN32(RN32(P_0 + P_1) + P_2) ... + P_{K-1})
//	m   = f32max(...f32max(f32max(M_0, M_1), M_2) ..., M_{K-1})
//
// with P_k = RN32(S0_k + S1_k), the lane sum of the chunk, and M_k =
// f32max(m0_k, m1_k), its lane maxima from -Inf. These sums replace the
// whole-row lane sums of the row operations' doc, everything else being
// as documented there (m equals the whole row's: f32max is order
// independent). The launches:
//
//	Softmax, LogSoftmax
//	  1  M_k of x
//	  2  m = max of M; e_j = exp(RN32(x_j - m)); P_k of e (Softmax
//	     with FP32 Y stores e_j at Y)
//	  3  s = sum of P (m too, unless e is read from Y). Softmax:
//	     z = rcp(s), y_j = RN32(e_j * z), e_j read from Y or computed
//	     again as in 2; LogSoftmax: l = log(s), y_j = RN32(RN32(x_j - m) - l)
//	LayerNorm
//	  1  P_k of x
//	  2  mu = RN32(sum of P * c); Q_k, the chunk lane sum of the fused
//	     d_j*d_j, d_j = RN32(x_j - mu)
//	  3  mu, q = sum of Q, v, r and y_j as Rows; the units of row i all
//	     store the same mu and r at Mean[i] and InvStdDev[i]
//	ReduceSum, ReduceMean
//	  1  P_k of x
//	  2  per row: y = sum of P (ReduceMean: RN32(sum * c)), stored as
//	     Rows stores it
//
// EmulateRowSplit (and EmulateRowBytes, given any of the launches)
// reproduces this order bit for bit.
//
// Scratch (ScratchBytes): launch 1's partials (M or P) of unit (i, k) at
// Scratch + 4*(i*K + k); launch 2's (P or Q; not for the reductions) at
// Scratch + 4*R*K + 4*(i*K + k).
//
// Workers. A chunk launch's R*K units, in row-major (row, chunk) order,
// are cut into at most Workers contiguous ranges, the largest exact issue
// count of a range the smallest possible, each range filled as far as
// that bound allows; a worker does its full-length chunks, then its last
// chunks. A reduction's launch 2 gives the rows to the workers as Rows
// does (FP16 outputs: pairs of rows).
func RowsSplit(p Rows, scratch uint32) ([]Rows, int, error) {
	if p.Phase != 0 || p.Chunks != 0 || p.ChunkLen != 0 || p.Scratch != 0 {
		return nil, 0, fmt.Errorf("%s: split of launch %d of a split sequence", p.Op, p.Phase)
	}
	if err := p.check(nil); err != nil {
		return nil, 0, fmt.Errorf("%s: %w", p.Op, err)
	}
	if scratch%8 != 0 {
		return nil, 0, fmt.Errorf("%s: scratch at %#x is not 8-byte aligned", p.Op, scratch)
	}
	key := p.choiceKey()
	choice, ok := splitChoices.Load(key)
	if !ok {
		choice, _ = splitChoices.LoadOrStore(key, p.chooseSplit())
	}
	kl := choice.([2]int)
	if kl[0] == 0 {
		return []Rows{p}, 0, nil
	}
	seq := p.splitSeq(kl[0], kl[1], scratch)
	return seq, seq[0].ScratchBytes(), nil
}

// splitChoices caches RowsSplit's choices (chunks and their length; 0
// chunks: the whole-row kernel) by choiceKey.
var splitChoices sync.Map

// choiceKey returns p with its addresses reduced to what the costs
// depend on: whether Scale, Bias, Mean and InvStdDev are given.
func (p Rows) choiceKey() Rows {
	given := func(a uint32) uint32 {
		if a != 0 {
			return 1
		}
		return 0
	}
	p.X, p.Y = 0, 0
	p.Scale, p.Bias, p.Mean, p.InvStdDev = given(p.Scale), given(p.Bias), given(p.Mean), given(p.InvStdDev)
	return p
}

// chooseSplit returns RowsSplit's choice for p.
func (p Rows) chooseSplit() [2]int {
	// The exact cycles (LaunchCycles) of the candidates in the order of
	// a lower bound, their workers' largest work, until that bound
	// reaches the best.
	type candidate struct {
		seq   []Rows
		costs []Cost
		bound int64
	}
	var cands []candidate
	g := p.granule()
	for K := 2; K <= 2*p.Workers && K <= p.C && p.R*K <= maxSplitUnits; K++ {
		L := (p.C + K - 1) / K
		L = (L + g - 1) / g * g
		if (K-1)*L >= p.C {
			continue
		}
		c := candidate{seq: p.splitSeq(K, L, 0)}
		for _, q := range c.seq {
			cost := q.splitCost()
			c.costs = append(c.costs, cost)
			c.bound += slices.Max(cost.Work)
		}
		cands = append(cands, c)
	}
	slices.SortStableFunc(cands, func(a, b candidate) int { return cmp.Compare(a.bound, b.bound) })
	var best [2]int
	bestCycles := p.cost().Cycles() + LaunchCallCycles // one launch, through the runtime
	for _, c := range cands {
		if c.bound >= bestCycles {
			break
		}
		if total := sequenceCycles(c.costs); total < bestCycles {
			best, bestCycles = [2]int{c.seq[0].Chunks, c.seq[0].ChunkLen}, total
		}
	}
	return best
}

// splitSeq returns the launches of p with K chunks of L elements.
func (p Rows) splitSeq(K, L int, scratch uint32) []Rows {
	seq := make([]Rows, p.Op.splitPhases())
	for i := range seq {
		q := p
		q.Phase, q.Chunks, q.ChunkLen, q.Scratch = i+1, K, L, scratch
		seq[i] = q
	}
	return seq
}

// sequenceCycles returns the cycles of launches back to back, the first
// one at phase 0, each through the runtime's launch routine
// (LaunchCallCycles).
func sequenceCycles(costs []Cost) int64 {
	var total int64
	for _, c := range costs {
		total += c.CyclesAt(int(total%Slots)) + LaunchCallCycles
	}
	return total
}

// combining reports whether the launch is a reduction's last: one unit per
// row, no chunks.
func (p Rows) combining() bool { return p.Op.reduces() && p.Phase == 2 }

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
)

// area2 returns the offset of launch 2's partials in scratch.
func (p Rows) area2() uint32 { return uint32(4 * p.R * p.Chunks) }

// fieldWord returns the word of field f for unit (i, k).
func (p Rows) fieldWord(f unitField, i, k int) uint32 {
	col := uint32(k * p.ChunkLen)
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
	}
	return 0
}

// combine emits d = the row's K partials at $m base combined with op
// (f32add or f32max) in chunk order ($a4 is clobbered: d is not $a4).
func (p Rows) combine(b *Builder, op isa.Op, d AReg, base MReg) {
	b.Ld32(d, base, 0)
	for k := 1; k < p.Chunks; k++ {
		b.Ld32(rwT, base, int32(4*k))
		b.F(op, d, d, rwT)
	}
}

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
			if ps[1].out {
				ld(ufY, rwY)
			}
			ld(ufW, spW)
			ld(ufS1, spTmp)
			p.combine(b, isa.FMAX, rwM, spTmp)
			b.Amov(rwM+1, rwM)
		case 3:
			if ps[2].src == fromX {
				ld(ufX, rwX)
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
		case 3:
			ld(ufY, rwY)
			if p.Scale != 0 {
				ld(ufG, rwG)
			}
			if p.Bias != 0 {
				ld(ufB, rwB)
			}
			ld(ufS1, spTmp)
			p.combine(b, isa.FADD, rwM, spTmp)
			b.F(isa.FMUL, rwM, rwM, rwInvC)
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
			b.Mov(rwXp, rwX)
			b.F(isa.V2MAX, rwM, rwNInf, rwNInf)
			q.walk(b, ps[0], rwT2, func(l lanes, _ rowStore) {
				l.v(isa.V2MAX, rwM, rwM, rwT)
			})
			b.F(isa.FMAX, rwM, rwM, rwM+1)
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
func (p Rows) twoLoops() bool { return p.lastLen() != p.ChunkLen }

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
		pairConst(b, rwNInf, float32(math.Inf(-1)))
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
	units := make([]int64, p.R*p.Chunks)
	for u := range units {
		units[u] = c.full
		if u%p.Chunks == p.Chunks-1 {
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
			if u%p.Chunks == p.Chunks-1 {
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
			if p.twoLoops() && u%p.Chunks == p.Chunks-1 {
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
				entries = append(entries, p.fieldWord(f, u/p.Chunks, u%p.Chunks))
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

// A reduction's last launch: worker w combines the partials of a range
// of rows (FP16 outputs: of pairs of rows, the odd last row merged into
// its word), as Rows splits them.
//
//	table: $m2 = the first row's partials, $m3 = Y, $m4 = rows (pairs)
//	       [, $m9 = the odd last row]
//	FP32:  loop: combine -> $a6 [*c]; $m2 += 4K; st32 [$m3+=4]; addi; brnz
//	FP16:  brz pairs, tail; loop: combine -> $a6 [*c]; $m2 += 4K;
//	       combine -> $a7 [*c]; $m2 += 4K; f32v2tof16; st32; addi; brnz
//	       tail: brz odd, done; combine -> $a6 [*c]; $m2 += 4K;
//	       f32v2tof16; merge
//	       done:

func (p Rows) combineWords() int {
	if p.OutF16 {
		return 4
	}
	return 3
}

func (p Rows) combinePrologue(b *Builder, table Label) {
	emitTableBase(b, table, p.combineWords(), M1)
	b.Ldm(rwX, M1, 0)
	b.Ldm(rwY, M1, 4)
	b.Ldm(rwRows, M1, 8)
	if p.OutF16 {
		b.Ldm(rwTail, M1, 12)
	}
	if p.Op == ReduceMean {
		b.LoadF32(rwInvC, p.invC())
	}
}

// combineRow emits d = the value of the row whose partials are at $m2,
// and moves $m2 to the next row.
func (p Rows) combineRow(b *Builder, d AReg) {
	p.combine(b, isa.FADD, d, rwX)
	if p.Op == ReduceMean {
		b.F(isa.FMUL, d, d, rwInvC)
	}
	b.Addi(rwX, rwX, int32(4*p.Chunks))
}

func (p Rows) combineLoops(b *Builder) {
	if !p.OutF16 {
		loop := b.Here()
		p.combineRow(b, rwZ)
		b.St32P(rwZ, rwY, 4)
		b.Addi(rwRows, rwRows, -1)
		b.Brnz(rwRows, loop)
		b.Exit()
		return
	}
	tail, done := b.Label(), b.Label()
	b.Brz(rwRows, tail)
	loop := b.Here()
	p.combinePair(b)
	b.Addi(rwRows, rwRows, -1)
	b.Brnz(rwRows, loop)
	b.Bind(tail)
	b.Brz(rwTail, done)
	p.combineTail(b)
	b.Bind(done)
	b.Exit()
}

func (p Rows) combinePair(b *Builder) {
	p.combineRow(b, rwZ)
	p.combineRow(b, rwZ+1)
	b.F1(isa.CVTFH, rwZ, rwZ)
	b.St32P(rwZ, rwY, 4)
}

func (p Rows) combineTail(b *Builder) {
	p.combineRow(b, rwZ)
	b.F1(isa.CVTFH, rwZ, rwZ)
	storeLow16(b, rwY, rwZ)
}

func (p Rows) combineCost() Cost {
	pro := issues(func(b *Builder) { p.combinePrologue(b, b.Label()) })
	if p.OutF16 {
		pair := issues(p.combinePair) + 2
		tail := issues(p.combineTail)
		workers, _, pairs, odd := p.split16()
		c := Cost{Workers: workers, Work: make([]int64, workers)}
		for w := range c.Work {
			v := pro + 2 + int64(pairs[w])*pair
			if odd[w] {
				v += tail
			}
			c.Work[w] = Slots * v
		}
		return c
	}
	row := issues(func(b *Builder) { p.combineRow(b, rwZ) }) + 3
	workers := min(p.Workers, p.R)
	_, count := split(p.R, workers)
	c := Cost{Workers: workers, Work: make([]int64, workers)}
	for w := range c.Work {
		c.Work[w] = Slots * (pro + int64(count[w])*row)
	}
	return c
}

func (p Rows) emitCombine(b *Builder) (Kernel, error) {
	k := Kernel{Entry: b.Here(), Cost: p.combineCost()}
	table := b.Label()
	p.combinePrologue(b, table)
	p.combineLoops(b)
	var rows [][]uint32
	if p.OutF16 {
		workers, first, pairs, odd := p.split16()
		for w := 0; w < workers; w++ {
			tail := uint32(0)
			if odd[w] {
				tail = 1
			}
			rows = append(rows, []uint32{p.fieldWord(ufS1, first[w], 0), p.Y + uint32(2*first[w]), uint32(pairs[w]), tail})
		}
	} else {
		workers := min(p.Workers, p.R)
		start, count := split(p.R, workers)
		for w := 0; w < workers; w++ {
			rows = append(rows, []uint32{p.fieldWord(ufS1, start[w], 0), p.Y + uint32(4*start[w]), uint32(count[w])})
		}
	}
	emitTable(b, table, rows)
	return k, b.Err()
}

// EmulateRowSplit returns what a split sequence computes for one row x,
// p being any of its launches (their Chunks and ChunkLen; see RowsSplit
// for the order): the C outputs (one for the reductions) and, for
// LayerNorm, mu and r. With Chunks below 2 (the whole-row kernel) it is
// EmulateRow.
func EmulateRowSplit(p Rows, x, g, bias []float32) (y []float32, mu, r float32) {
	if p.Chunks < 2 || p.ChunkLen < 1 {
		return EmulateRow(p, x, g, bias)
	}
	n := len(x)
	var chunks [][]float32
	for k := 0; k < p.Chunks; k++ {
		lo, hi := min(k*p.ChunkLen, n), min((k+1)*p.ChunkLen, n)
		if k == p.Chunks-1 {
			hi = n
		}
		chunks = append(chunks, x[lo:hi])
	}
	// sum is the chunk lane sums of f(x_j) combined in chunk order.
	sum := func(f func(acc, v float32) float32) float32 {
		var s float32
		for k, c := range chunks {
			if v := laneSum(c, f); k == 0 {
				s = v
			} else {
				s = iadd(s, v)
			}
		}
		return s
	}
	c := float32(1 / float64(n))
	switch p.Op {
	case ReduceSum, ReduceMean:
		s := sum(iadd)
		if p.Op == ReduceMean {
			s = imul(s, c)
		}
		return []float32{s}, 0, 0
	case Softmax, LogSoftmax:
		var mx float32
		for k, ch := range chunks {
			lane := [2]float32{float32(math.Inf(-1)), float32(math.Inf(-1))}
			for j, v := range ch {
				lane[j%2] = imax(lane[j%2], v)
			}
			if v := imax(lane[0], lane[1]); k == 0 {
				mx = v
			} else {
				mx = imax(mx, v)
			}
		}
		s := sum(func(acc, v float32) float32 { return iadd(acc, iexp(isub(v, mx))) })
		y = make([]float32, n)
		if p.Op == Softmax {
			z := ircp(s)
			for j, v := range x {
				y[j] = imul(iexp(isub(v, mx)), z)
			}
			return y, 0, 0
		}
		l := ilog(s)
		for j, v := range x {
			y[j] = isub(isub(v, mx), l)
		}
		return y, 0, 0
	}
	mu = imul(sum(iadd), c)
	q := sum(func(acc, v float32) float32 {
		d := isub(v, mu)
		return ifma(acc, d, d)
	})
	r = irsqrt(iadd(imul(q, c), p.Epsilon))
	y = make([]float32, n)
	for j, v := range x {
		z := imul(isub(v, mu), r)
		switch {
		case g != nil && bias != nil:
			z = ifma(bias[j], z, g[j])
		case g != nil:
			z = imul(z, g[j])
		case bias != nil:
			z = iadd(z, bias[j])
		}
		y[j] = z
	}
	return y, mu, r
}
