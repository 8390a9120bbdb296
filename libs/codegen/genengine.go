package codegen

import "ipu.local/libs/isa"

// This file holds the generators of worker code: the genEngine interface,
// the split of the outputs over the workers, and wordEngine, the engine of
// Copy and of Gather of 4-byte elements.

// An genEngine generates the code of a worker that writes the outputs
// [f0, f1) in row-major order.
type genEngine interface {
	elements() int
	boundary(f int) bool // f may start a worker's range
	code(f0, f1 int) *genSeq
}

// genSplitAt returns n contiguous ranges of [0, N) as boundaries: ideal
// equal parts, each boundary moved to the nearest allowed position
// (within 4; the lower one on a tie). Empty ranges are dropped.
func genSplitAt(e genEngine, n int) []int {
	N := e.elements()
	bounds := []int{0}
	for i := 1; i < n; i++ {
		t := int((int64(i)*int64(N) + int64(n)/2) / int64(n))
		best := -1
		for d := 0; d <= 4 && best < 0; d++ {
			for _, f := range []int{t - d, t + d} {
				if f > bounds[len(bounds)-1] && f < N && e.boundary(f) {
					best = f
					break
				}
			}
		}
		if best > 0 {
			bounds = append(bounds, best)
		}
	}
	return append(bounds, N)
}

// genBestSplit returns the plan with the fewest cycles over 1..workers
// workers (the fewer workers on a tie).
func genBestSplit(e genEngine, workers int) genPlan {
	var best genPlan
	bestCycles := int64(-1)
	for n := 1; n <= min(workers, e.elements()); n++ {
		bounds := genSplitAt(e, n)
		if len(bounds)-1 < n {
			continue // the same ranges as a smaller n
		}
		var w genPlan
		for i := 0; i+1 < len(bounds); i++ {
			w.code = append(w.code, e.code(bounds[i], bounds[i+1]))
		}
		if c := w.cost().Cycles(); bestCycles < 0 || c < bestCycles {
			best, bestCycles = w, c
		}
	}
	return best
}

// genSegments calls seg for the head (a partial first row), rows for the
// full rows and seg for the tail (a partial last row) of the outputs
// [f0, f1) of rows of c elements.
func genSegments(f0, f1, c int, seg func(r, cs, ce int), rows func(r, n int)) {
	f := f0
	if r, cs := f/c, f%c; cs != 0 || f1-f < c {
		ce := min(c, cs+f1-f)
		seg(r, cs, ce)
		f = r*c + ce
	}
	if n := (f1 - f) / c; n > 0 {
		rows(f/c, n)
		f += n * c
	}
	if f < f1 {
		seg(f/c, 0, f1-f)
	}
}

// wordEngine copies words: output (r, c) at dst + r*dstRow + 4c from
// src + r*srcRow + c*srcStep (bytes). Copy and Gather of 4-byte
// elements.
//
// Rows may repeat in blocks (Copy's Outer; genGrid).
type wordEngine struct {
	genGrid
	wide bool
}

// genGrid is the outputs' grid of a copying engine: output (r, c) at
// dst + r*dstRow + c*size from src + r*srcRow + c*srcCol (bytes), the
// rows in blocks as outer gives them (row r is row r%rows of block
// r/rows).
type genGrid struct {
	rows, cols     int
	src            int64
	srcRow, srcCol int64
	dst, dstRow    int64
	size           int64 // bytes of an output element
	outer          []genDim
}

// genDim is an outer dimension of a word engine's rows: n blocks of the
// dimensions inside, src and dst bytes apart.
type genDim struct {
	n        int
	src, dst int64
}

func newWordEngine(rows, cols int, src, srcRow, srcCol, dst, dstRow int64, wide bool, outer ...genDim) *wordEngine {
	e := &wordEngine{genGrid{rows, cols, src, srcRow, srcCol, dst, dstRow, 4, outer}, wide}
	c := int64(cols)
	if rows > 1 && srcCol == 4 && srcRow == 4*c && dstRow == 4*c {
		e.rows, e.cols = 1, rows*cols
	}
	return e
}

func (g *genGrid) elements() int {
	n := g.rows * g.cols
	for _, d := range g.outer {
		n *= d.n
	}
	return n
}

func (e *wordEngine) boundary(f int) bool { return f%e.cols%4 == 0 }

// offsets returns row r's byte offsets from the first row's source and
// destination.
func (g *genGrid) offsets(r int) (src, dst int64) {
	src, dst = int64(r%g.rows)*g.srcRow, int64(r%g.rows)*g.dstRow
	r /= g.rows
	for _, d := range g.outer {
		i := r % d.n
		src, dst = src+int64(i)*d.src, dst+int64(i)*d.dst
		r /= d.n
	}
	return src, dst
}

func (g *genGrid) srcAt(r, c int) int64 {
	if g.outer == nil {
		return g.src + int64(r)*g.srcRow + int64(c)*g.srcCol
	}
	o, _ := g.offsets(r)
	return g.src + o + int64(c)*g.srcCol
}

func (g *genGrid) dstAt(r, c int) int64 {
	if g.outer == nil {
		return g.dst + int64(r)*g.dstRow + g.size*int64(c)
	}
	_, o := g.offsets(r)
	return g.dst + o + g.size*int64(c)
}

// chunks splits k words at addr (step bytes apart) into the widest
// accesses the alignment allows: sizes in words.
func (e *wordEngine) chunks(addr, step int64, k int) []int {
	var out []int
	for j := 0; j < k; {
		a := addr + int64(j)*step
		n := 1
		switch {
		case step == 4 && e.wide && j%4 == 0 && k-j >= 4 && a%16 == 0:
			n = 4
		case step == 4 && j%2 == 0 && k-j >= 2 && a%8 == 0:
			n = 2
		}
		out = append(out, n)
		j += n
	}
	return out
}

var (
	genLoads  = map[int]isa.Op{1: isa.LD32P, 2: isa.LD64P, 4: isa.LD128P}
	genStores = map[int]isa.Op{1: isa.ST32P, 2: isa.ST64P, 4: isa.ST128P}
)

// group emits k words from column c of row r: loads, then stores.
func (e *wordEngine) group(s *genSeq, r, c, k int) {
	j := 0
	for _, n := range e.chunks(e.srcAt(r, c), e.srcCol, k) {
		s.access(genLoads[n], uint8(A0)+uint8(j), gSrc, e.srcAt(r, c+j))
		j += n
	}
	j = 0
	for _, n := range e.chunks(e.dstAt(r, c), 4, k) {
		s.access(genStores[n], uint8(A0)+uint8(j), gDst, e.dstAt(r, c+j))
		j += n
	}
}

func (e *wordEngine) groupLen(r, c, k int) int {
	return len(e.chunks(e.srcAt(r, c), e.srcCol, k)) + len(e.chunks(e.dstAt(r, c), 4, k))
}

// genUnroll is the most issues of blocks emitted without a loop.
const genUnroll = 8

// wordSegPlan is a row segment's head words, block size and block count.
type wordSegPlan struct{ h, bs, nb int }

// plan chooses the head and block size of the segment [cs, ce) of row r
// with the fewest issues.
func (e *wordEngine) plan(r, cs, ce int) wordSegPlan {
	best, bestN := wordSegPlan{}, -1
	sizes := []int{2}
	if e.wide {
		sizes = append(sizes, 4)
	}
	m := ce - cs
	for h := 0; h <= min(3, m); h++ {
		for _, bs := range sizes {
			nb := (m - h) / bs
			t := m - h - nb*bs
			n := e.groupLen(r, cs, h) + e.groupLen(r, cs+h+nb*bs, t)
			if nb > 0 {
				bl := e.groupLen(r, cs+h, bs)
				n += nb * bl
				if nb*bl > genUnroll {
					n++
				}
			}
			if bestN < 0 || n < bestN {
				best, bestN = wordSegPlan{h, bs, nb}, n
			}
		}
	}
	return best
}

func (e *wordEngine) segment(s *genSeq, r, cs, ce int) {
	pl := e.plan(r, cs, ce)
	e.group(s, r, cs, pl.h)
	c := cs + pl.h
	if pl.nb > 0 && pl.nb*e.groupLen(r, c, pl.bs) > genUnroll {
		s.open(pl.nb, genAt{gSrc, e.srcAt(r, c)}, genAt{gDst, e.dstAt(r, c)})
		e.group(s, r, c, pl.bs)
		s.close(genAt{gSrc, int64(pl.bs) * e.srcCol}, genAt{gDst, 4 * int64(pl.bs)})
		c += pl.nb * pl.bs
	} else {
		for i := 0; i < pl.nb; i++ {
			e.group(s, r, c, pl.bs)
			c += pl.bs
		}
	}
	e.group(s, r, c, ce-c)
}

// genPeriod returns the rows after which the alignments repeat.
func genPeriod(mod int64, strides ...int64) int {
	for _, p := range []int{1, 2, 4, 8} {
		ok := true
		for _, s := range strides {
			if (int64(p)*s)%mod != 0 {
				ok = false
			}
		}
		if ok {
			return p
		}
	}
	return 8
}

func (e *wordEngine) code(f0, f1 int) *genSeq {
	var s *genSeq
	if e.outer == nil {
		s = newGenSeq(M6, M7, M8, M9, M10, M11, M12, M13, M14, M0, M1)
	} else {
		// A branch loop per block level around the rows' loops.
		s = newGenSeq(M6, M7, M8, M9, M10, M11, M12, M0, M1)
		s.loopRegs = []MReg{gLoop, M14, M13}
	}
	full := func(r, n int) { e.blocks(s, r, n, len(e.outer)) }
	genSegments(f0, f1, e.cols, func(r, cs, ce int) { e.segment(s, r, cs, ce) }, full)
	return s
}

// blocks emits the full rows [r, r+n) (genBlocks).
func (e *wordEngine) blocks(s *genSeq, r, n, L int) {
	at := func(r int) (int64, int64) { return e.srcAt(r, 0), e.dstAt(r, 0) }
	genBlocks(s, e.rows, e.outer, r, n, L, 16, at, func(r, n int) { e.rows0(s, r, n) }, func() {})
}

// genBlocks emits the full rows [r, r+n) of an engine whose rows (rows
// a block) repeat in outer blocks, the rows lying in one block of level
// L+1 (level 0: the rows; L = len(outer): all of them): a partial block
// first and last, the whole blocks between in a loop, p of them an
// iteration (their alignments modulo mod repeat after p). at gives the
// pointers' addresses at a row's start, rows0 emits rows of one block
// (a whole block ends in the state a block starts in), settle emits what
// brings the code to that state before a loop.
func genBlocks(s *genSeq, rows int, outer []genDim, r, n, L int, mod int64, at func(r int) (src, dst int64), rows0 func(r, n int), settle func()) {
	if L == 0 {
		rows0(r, n)
		return
	}
	B := rows
	for _, d := range outer[:L-1] {
		B *= d.n
	}
	sub := func(r, n int) { genBlocks(s, rows, outer, r, n, L-1, mod, at, rows0, settle) }
	if h := min(n, (B-r%B)%B); h > 0 {
		sub(r, h)
		r, n = r+h, n-h
	}
	m := n / B
	d := outer[L-1]
	p := genPeriod(mod, d.src, d.dst)
	if m >= 2*p {
		settle()
		src, dst := at(r)
		s.open(m/p, genAt{gSrc, src}, genAt{gDst, dst})
		for i := 0; i < p; i++ {
			sub(r+i*B, B)
		}
		s.close(genAt{gSrc, int64(p) * d.src}, genAt{gDst, int64(p) * d.dst})
		for i := m / p * p; i < m; i++ {
			sub(r+i*B, B)
		}
	} else {
		for i := 0; i < m; i++ {
			sub(r+i*B, B)
		}
	}
	if r, n = r+m*B, n-m*B; n > 0 {
		sub(r, n)
	}
}

// rows0 emits the full rows [r, r+n) of one block: p rows at a time in a
// loop (the period of their alignments).
func (e *wordEngine) rows0(s *genSeq, r, n int) {
	p := genPeriod(16, e.srcRow, e.dstRow)
	if n < 2*p {
		for i := 0; i < n; i++ {
			e.segment(s, r+i, 0, e.cols)
		}
		return
	}
	s.open(n/p, genAt{gSrc, e.srcAt(r, 0)}, genAt{gDst, e.dstAt(r, 0)})
	for i := 0; i < p; i++ {
		e.segment(s, r+i, 0, e.cols)
	}
	s.close(genAt{gSrc, int64(p) * e.srcRow}, genAt{gDst, int64(p) * e.dstRow})
	for i := n / p * p; i < n; i++ {
		e.segment(s, r+i, 0, e.cols)
	}
}
