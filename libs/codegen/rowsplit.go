package codegen

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
)

// This file holds the split form of Rows: RowsSplit's launches, which
// cut each row into chunks so that a tile with fewer rows than workers
// keeps every worker busy: the sequence's parameters and checks, the
// choice of the split and EmulateRowSplit. The launches' code is in
// rowsplitchunk.go and rowsplitcombine.go.

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
	if p.stashes() {
		n += p.stashBytes()
	}
	if p.Op == LayerNorm {
		n += 4 * p.R // mu (ufMu)
	}
	return n
}

// maxStashBytes bounds the stash of a split Softmax (see stashes).
const maxStashBytes = 16 << 10

// stashPitch returns the FP32 elements of a row in the stash (even: its
// rows start 8-byte aligned).
func (p Rows) stashPitch() int { return (p.C + 1) &^ 1 }

func (p Rows) stashBytes() int { return 4 * p.R * p.stashPitch() }

// stashOffset returns the offset of the stash in scratch, after the
// partials of launches 1 and 2.
func (p Rows) stashOffset() uint32 { return 2 * p.area2() }

// stashes reports whether a split Softmax with FP16 outputs keeps e_j
// in an FP32 stash after the partials (launch 2 stores e_j there, launch
// 3 reads it back instead of computing it again from x_j: the same
// values, without the subtraction and the exponential). It does when the
// stash takes at most maxStashBytes.
func (p Rows) stashes() bool {
	return p.Op == Softmax && p.OutF16 && p.Phase > 0 && p.stashBytes() <= maxStashBytes
}

// lastLen returns the length of a row's last chunk.
func (p Rows) lastLen() int { return p.C - (p.Chunks-1)*p.ChunkLen }

// checkSplit checks the split fields (the shape is checked).
func (p Rows) checkSplit() error {
	if p.Phase == 0 {
		if p.Chunks != 0 || p.ChunkLen != 0 || p.Scratch != 0 || p.FirstChunk != 0 || p.TileChunks != 0 {
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
	if p.TileChunks == 0 && p.FirstChunk == 0 {
		return nil
	}
	if p.Op.reduces() {
		return fmt.Errorf("%s spread over tiles: only the three-launch operations are", p.Op)
	}
	if p.FirstChunk < 0 || p.TileChunks < 1 || p.FirstChunk+p.TileChunks > K {
		return fmt.Errorf("chunks [%d, %d) of %d on the tile: want a non-empty range of them", p.FirstChunk, p.FirstChunk+p.TileChunks, K)
	}
	return nil
}

// units returns the chunk launch's units on its tile: R*TileChunks (or
// R*Chunks) of them, unit u being chunk unitChunk(u) of row u/tileChunks().
func (p Rows) units() int { return p.R * p.tileChunks() }

func (p Rows) tileChunks() int {
	if p.TileChunks == 0 {
		return p.Chunks
	}
	return p.TileChunks
}

func (p Rows) unitChunk(u int) int { return p.FirstChunk + u%p.tileChunks() }

// lastUnit reports whether unit u is a row's last chunk.
func (p Rows) lastUnit(u int) bool { return p.unitChunk(u) == p.Chunks-1 }

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
// maxima), on the chunk alone; a row's K partials are combined by every
// unit that needs them. With K even, in two lanes, the even-numbered
// partials in one and the odd-numbered in the other, each in chunk
// order, and the lanes last:
//
//	E   = RN32(...RN32(RN32(P_0 + P_2) + P_4) ... + P_{K-2})
//	O   = RN32(...RN32(RN32(P_1 + P_3) + P_5) ... + P_{K-1})
//	sum = RN32(E + O)
//
// and with K odd in chunk order:
//
//	sum = RN32(...RN32(RN32(P_0 + P_1) + P_2) ... + P_{K-1})
//
// and the maxima m likewise with f32max. P_k = RN32(S0_k + S1_k) is
// the lane sum of the chunk, and M_k =
// f32max(m0_k, m1_k), its lane maxima from -Inf. These sums replace the
// whole-row lane sums of the row operations' doc, everything else being
// as documented there (m equals the whole row's: f32max is order
// independent). The launches:
//
//	Softmax, LogSoftmax
//	  1  M_k of x
//	  2  m = max of M; e_j = exp(RN32(x_j - m)); P_k of e (Softmax
//	     with FP32 Y stores e_j at Y, with FP16 Y in the stash when
//	     stashes says so)
//	  3  s = sum of P (m too, unless e is read from Y or the stash).
//	     Softmax: z = rcp(s), y_j = RN32(e_j * z), e_j read from Y or
//	     the stash or computed again as in 2; LogSoftmax: l = log(s),
//	     y_j = RN32(RN32(x_j - m) - l)
//	LayerNorm
//	  1  P_k of x
//	  2  mu = RN32(sum of P * c) (every unit of row i stores it in
//	     scratch); Q_k, the chunk lane sum of the fused d_j*d_j,
//	     d_j = RN32(x_j - mu)
//	  3  mu (as launch 2 stored it), q = sum of Q, v, r and y_j as
//	     Rows; the units of row i all store the same mu and r at Mean[i]
//	     and InvStdDev[i]
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
// Scratch + 4*R*K + 4*(i*K + k); the stash's e_j of row i at Scratch +
// 8*R*K + 4*(i*C' + j), C' = C rounded up to even; LayerNorm's mu of
// row i (launch 2 stores it, launch 3 loads it) at Scratch + 8*R*K +
// 4*i. Partials load two at a time (ld64) when K is even.
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
	// sum is the chunk lane sums of f(x_j) combined as the units
	// combine them (combinePartials).
	sum := func(f func(acc, v float32) float32) float32 {
		parts := make([]float32, len(chunks))
		for k, c := range chunks {
			parts[k] = laneSum(c, f)
		}
		return combinePartials(parts)
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
		mx := chunkMax(chunks)
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

// chunkMax returns the chunks' lane maxima (from -Inf) combined in chunk
// order, as the split Softmax and LogSoftmax compute m.
// combinePartials combines a row's partials as the launches do: an even
// count in two lanes (the even-numbered partials and the odd-numbered,
// each in order) added last, an odd count in order.
func combinePartials(parts []float32) float32 {
	if len(parts)%2 != 0 {
		s := parts[0]
		for _, v := range parts[1:] {
			s = iadd(s, v)
		}
		return s
	}
	e, o := parts[0], parts[1]
	for k := 2; k < len(parts); k += 2 {
		e, o = iadd(e, parts[k]), iadd(o, parts[k+1])
	}
	return iadd(e, o)
}

func chunkMax(chunks [][]float32) float32 {
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
	return mx
}
