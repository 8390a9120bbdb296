package codegen

import (
	"errors"
	"fmt"

	"ipu.local/libs/isa"
)

// Gather is a strided 2-D gather, the transposing copy: for r < R and
// c < C,
//
//	Y[r][c] = X[r*RStride + c*CStride]
//
// with elements of Size bytes (4 or 2), Y[r][c] at Y + Size*(r*YStride +
// c) and X[i] at X + Size*i. Element bit patterns copy exactly (NaN
// payloads included); nothing else at Y changes: a 2-byte element that
// shares its word with a byte outside Y's elements is written by reading
// the word, replacing its half and storing the word back (the other half
// keeps its value).
//
// Alignment: X and Y aligned to Size (2-byte elements: any even address,
// any strides). Strides are elements, any value >= 0 (1, 0 and large
// ones included); YStride >= C when R > 1. The span of X read, from its
// first element to its last (for Size 2 widened to whole words), must not
// overlap the rows of Y. With Interleaved set, X and Y lie in
// interleaved memory (checked) and Size 4 uses 128-bit accesses where the
// addresses allow.
//
// Work: the R*C outputs in row-major order are split as in Copy into one
// contiguous range per worker (Size 2: each boundary at a position that
// starts a new word of Y, so that no two workers write one word), and
// the worker count with the fewest cycles runs.
//
// Size 4 is Copy's code with one ld32 per element (post-incremented by
// 4*CStride bytes) and Y's stores as wide as Y allows: per 2 elements 3
// issues (ld32, ld32, st64), with Interleaved per 4 elements 5 (4 ld32,
// st128); CStride 1 is Copy itself. A post-increment beyond 16 bits costs
// one add per element.
//
// Size 2 assembles each word of Y in $m registers: per word of two
// elements, ldm of the word holding each (post-incremented to the next),
// the halves joined (sort16lo when both are low halves, sort16hi when
// both are high, else the odd one shifted down by shri 16 first), stm:
// 4 issues per 2 elements from alike halves (a transpose's columns), 5
// from unlike ones; 2 (ldm, stm) when both come from one source word in
// place. An element alone in its word of Y is merged with the word: 2
// issues to read the kept low half (ldm, andi) or 5 to merge a low half
// (ldm, shri, shli, or, stm), on top of the element's own ldm, move, (or)
// and stm. Rows contiguous in Y (YStride = C) carry a half-filled word
// from one row to the next in a register.
//
// Size 2 whose rows pair in source words (RStride 1, R and C even, X, Y
// and the strides word-aligned: a transpose's) may instead take 2x2
// blocks (gatherpairs.go): per block the two source words, sort16lo and
// sort16hi, two stores: 6 issues per 4 elements; the kernel takes
// whichever code has fewer cycles.
//
// Rows, loops and cost are as in Copy: Cost counts the generated code
// exactly, Work[w] = 6 x (4 + 2 + 2 when the workers' codes differ + the
// issues of worker w's code).
type Gather struct {
	Size             int    // element bytes: 4 or 2
	R, C             int    // Y is R rows of C elements
	Y                uint32 // Size-aligned
	YStride          int    // elements
	X                uint32 // Size-aligned
	RStride, CStride int    // elements: Y[r][c] = X[r*RStride + c*CStride]
	Workers          int
	// Interleaved declares that X and Y lie in interleaved memory
	// (checked): 128-bit accesses where the addresses allow (Size 4).
	Interleaved bool
	// Outer repeats the R x C gather as Copy's Outer does (strides in
	// elements; Y's blocks nested, X's and Y's spans disjoint). Size 2
	// blocks start words of Y (Y word-aligned, the outer Y strides
	// even); a block that ends inside a word merges its last half with
	// the word, as a row does.
	Outer [2]BlockDim
}

func (p Gather) check() error {
	if err := checkWorkers(p.Workers); err != nil {
		return err
	}
	if p.Size != 4 && p.Size != 2 {
		return fmt.Errorf("element size %d: want 4 or 2", p.Size)
	}
	if p.R < 1 || p.C < 1 || int64(p.R)*int64(p.C) > 1<<24 {
		return fmt.Errorf("output %dx%d: want positive dimensions of at most 2^24 elements", p.R, p.C)
	}
	for _, s := range []int{p.YStride, p.RStride, p.CStride} {
		if s < 0 || s > 1<<24 {
			return fmt.Errorf("strides %d, %d, %d (Y, rows, columns): want 0..2^24", p.YStride, p.RStride, p.CStride)
		}
	}
	if p.R > 1 && p.YStride < p.C {
		return fmt.Errorf("row stride %d of Y: want at least C=%d", p.YStride, p.C)
	}
	if err := checkBlocks(p.Outer, int64(p.R-1)*int64(p.YStride)+int64(p.C), int64(p.R)*int64(p.C)); err != nil {
		return err
	}
	if p.Size == 2 {
		for i, d := range p.Outer {
			if d.N > 1 && d.YStride%2 != 0 {
				return fmt.Errorf("outer dimension %d: Y stride %d: 2-byte blocks start words (want even)", i, d.YStride)
			}
		}
	}
	return nil
}

func (p Gather) checkMemory(b *Builder) error {
	a := b.Arch()
	if a == nil {
		return errors.New("builder has no architecture preset")
	}
	sz := uint64(p.Size)
	last := uint64(p.R-1)*uint64(p.RStride) + uint64(p.C-1)*uint64(p.CStride) + uint64(outerSpan(p.Outer, true))
	x := buffer{"X", p.X, sz * (last + 1), false}
	y := buffer{"Y", p.Y, sz * (uint64(p.R-1)*uint64(p.YStride) + uint64(p.C) + uint64(outerSpan(p.Outer, false))), true}
	for _, v := range []buffer{x, y} {
		if v.addr%uint32(p.Size) != 0 {
			return fmt.Errorf("%s at %#x is not %d-byte aligned", v.name, v.addr, p.Size)
		}
	}
	blocks := blockCount(p.Outer) > 1
	if blocks && p.Size == 2 && p.Y%4 != 0 {
		return fmt.Errorf("Y at %#x: 2-byte blocks want it word-aligned", p.Y)
	}
	if p.Size == 2 {
		// Whole words are read.
		x.addr, x.size = p.X&^3, (uint64(p.X)+x.size+3)&^3-uint64(p.X&^3)
	}
	for _, v := range []buffer{x, y} {
		if err := checkBuffer(v, uint32(p.Size), a.Memory, "tile memory"); err != nil {
			return err
		}
		if p.Interleaved {
			if err := checkBuffer(v, uint32(p.Size), a.Interleaved, "interleaved memory"); err != nil {
				return err
			}
		}
	}
	if p.Size == 2 {
		// The words holding Y's first and last elements.
		lo, hi := uint64(p.Y&^3), (uint64(y.addr)+y.size+3)&^3
		if uint32(lo) < a.Memory.Lo || hi > uint64(a.Memory.Hi) {
			return fmt.Errorf("Y words [%#x, %#x) are outside tile memory", lo, hi)
		}
	}
	if blocks {
		return checkSpansDisjoint(x, y)
	}
	return checkRowsDisjoint(
		byteRows{"X", int64(x.addr), 0, int64(x.size), 1},
		byteRows{"Y", int64(p.Y), int64(p.Size) * int64(p.YStride), int64(p.Size) * int64(p.C), p.R})
}

func (p Gather) gen() genEngine {
	sz := int64(p.Size)
	if p.Size == 4 {
		return newWordEngine(p.R, p.C, int64(p.X), 4*int64(p.RStride), 4*int64(p.CStride), int64(p.Y), 4*int64(p.YStride), p.Interleaved, genDims(p.Outer, 4)...)
	}
	return &halfEngine{genGrid{rows: p.R, cols: p.C, src: int64(p.X), srcRow: sz * int64(p.RStride), srcCol: sz * int64(p.CStride),
		dst: int64(p.Y), dstRow: sz * int64(p.YStride), size: 2, outer: genDims(p.Outer, 2)}}
}

// plan returns the workers' code: the engine's, or the pair engine's
// (gatherpairs.go) where it applies and takes fewer cycles.
func (p Gather) plan() genPlan {
	best := genBestSplit(p.gen(), p.Workers)
	if e := p.pairs(); e != nil {
		if q := genBestSplit(e, p.Workers); q.cost().Cycles() < best.cost().Cycles() {
			best = q
		}
	}
	return best
}

// Cost returns the kernel's exact cost.
func (p Gather) Cost() (Cost, error) {
	if err := p.check(); err != nil {
		return Cost{}, fmt.Errorf("gather: %w", err)
	}
	return p.plan().cost(), nil
}

// EmitGather emits the kernel at b's current position.
func EmitGather(b *Builder, p Gather) (Kernel, error) {
	if err := p.check(); err != nil {
		return Kernel{}, fmt.Errorf("gather: %w", err)
	}
	if err := p.checkMemory(b); err != nil {
		return Kernel{}, fmt.Errorf("gather: %w", err)
	}
	return p.plan().emit(b)
}

// EmulateGather returns Y's bytes after the gather: y holds the bytes of
// Y's span (Size*((R-1)*YStride + C)) before it, x the bytes of X from
// its start. It returns nil when p is invalid or x or y too short.
func EmulateGather(p Gather, x, y []byte) []byte {
	if p.check() != nil {
		return nil
	}
	sz := p.Size
	span := sz * ((p.R-1)*p.YStride + p.C + int(outerSpan(p.Outer, false)))
	last := (p.R-1)*p.RStride + (p.C-1)*p.CStride + int(outerSpan(p.Outer, true))
	if len(y) < span || len(x) < sz*(last+1) {
		return nil
	}
	out := append([]byte(nil), y[:span]...)
	for _, b := range BlockOffsets(p.Outer) {
		for r := 0; r < p.R; r++ {
			for c := 0; c < p.C; c++ {
				i, o := b[0]+r*p.RStride+c*p.CStride, b[1]+r*p.YStride+c
				copy(out[sz*o:sz*(o+1)], x[sz*i:sz*(i+1)])
			}
		}
	}
	return out
}

// halfEngine gathers 2-byte elements: output (r, c) at dst + r*dstRow +
// 2c from src + r*srcRow + c*srcCol (bytes).
//
// Rows may repeat in blocks (genGrid), each starting a word of Y.
type halfEngine struct{ genGrid }

// Registers: the two source words of an output word, the pending low
// half.
const (
	hW0 = M6
	hW1 = M7
	hP  = M8
)

const hiMask = 0xFFFF0000

// word and half of source element (r, c).
func (e *halfEngine) word(r, c int) int64 { return e.srcAt(r, c) &^ 3 }
func (e *halfEngine) half(r, c int) int   { return int(e.srcAt(r, c)>>1) & 1 }

// at returns the output address of the flat index f.
func (e *halfEngine) at(f int) int64 { return e.dstAt(f/e.cols, f%e.cols) }

// boundary: output f starts a new word of Y (the word of f-1 differs).
func (e *halfEngine) boundary(f int) bool { return e.at(f-1)>>2 != e.at(f)>>2 }

// contiguous reports whether row r+1 starts right after row r in Y.
func (e *halfEngine) contiguous() bool { return e.dstRow == 2*int64(e.cols) }

// state is the output word a worker is filling: when pending, hP holds
// the low half of the word at addr (its high half zero).
type halfState struct {
	pending bool
	addr    int64
}

// low moves the half h of w into the low half of d (the high half zero).
func (e *halfEngine) low(s *genSeq, d, w MReg, h int) {
	if h == 0 {
		s.alui(isa.ANDI, d, w, 0xFFFF)
	} else {
		s.alui(isa.SHRI, d, w, 16)
	}
}

// high moves the half h of w into its high half (the low half zero).
func (e *halfEngine) high(s *genSeq, w MReg, h int) {
	if h == 0 {
		s.alui(isa.SHLI, w, w, 16)
	} else {
		s.alu(isa.AND, w, w, s.reg(hiMask))
	}
}

// flush stores a pending low half, keeping the high half of its word.
func (e *halfEngine) flush(s *genSeq, st *halfState) {
	if !st.pending {
		return
	}
	s.access(isa.LDMP, uint8(hW1), gDst, st.addr)
	s.alui(isa.SHRI, hW1, hW1, 16)
	s.alui(isa.SHLI, hW1, hW1, 16)
	s.alu(isa.OR, hW1, hW1, hP)
	s.access(isa.STMP, uint8(hW1), gDst, st.addr)
	*st = halfState{}
}

// pair emits the output word of elements c and c+1 of row r.
func (e *halfEngine) pair(s *genSeq, r, c int) {
	w0, w1 := e.word(r, c), e.word(r, c+1)
	h0, h1 := e.half(r, c), e.half(r, c+1)
	if w0 == w1 && h0 == 0 && h1 == 1 {
		s.access(isa.LDMP, uint8(hW0), gSrc, w0)
		s.access(isa.STMP, uint8(hW0), gDst, e.dstAt(r, c))
		return
	}
	s.access(isa.LDMP, uint8(hW0), gSrc, w0)
	s.access(isa.LDMP, uint8(hW1), gSrc, w1)
	e.combine(s, h0, h1)
	s.access(isa.STMP, uint8(hW0), gDst, e.dstAt(r, c))
}

// combine sets hW0 to the word of half h0 of hW0 (low) and half h1 of
// hW1 (high): sort16lo or sort16hi when the halves are alike, else the
// odd one shifted into the low half first.
func (e *halfEngine) combine(s *genSeq, h0, h1 int) {
	switch {
	case h0 == 0 && h1 == 0:
		s.alu(isa.SORT16LO, hW0, hW0, hW1)
	case h0 == 1 && h1 == 1:
		s.alu(isa.SORT16HI, hW0, hW0, hW1)
	case h0 == 1:
		s.alui(isa.SHRI, hW0, hW0, 16)
		s.alu(isa.SORT16LO, hW0, hW0, hW1)
	default:
		s.alui(isa.SHRI, hW1, hW1, 16)
		s.alu(isa.SORT16LO, hW0, hW0, hW1)
	}
}

func (e *halfEngine) pairLen(r, c int) int {
	h0, h1 := e.half(r, c), e.half(r, c+1)
	switch {
	case e.word(r, c) == e.word(r, c+1) && h0 == 0 && h1 == 1:
		return 2
	case h0 == h1:
		return 4
	}
	return 5
}

// segment emits the outputs [cs, ce) of row r.
func (e *halfEngine) segment(s *genSeq, st *halfState, r, cs, ce int) {
	c := cs
	if y := e.dstAt(r, c); y%4 != 0 {
		w := y - 2
		if !st.pending || st.addr != w {
			e.flush(s, st)
			s.access(isa.LDMP, uint8(hP), gDst, w)
			s.alui(isa.ANDI, hP, hP, 0xFFFF)
		}
		s.access(isa.LDMP, uint8(hW0), gSrc, e.word(r, c))
		e.high(s, hW0, e.half(r, c))
		s.alu(isa.OR, hP, hP, hW0)
		s.access(isa.STMP, uint8(hP), gDst, w)
		*st = halfState{}
		c++
	} else {
		e.flush(s, st)
	}
	if nb := (ce - c) / 2; nb > 0 && nb*e.pairLen(r, c) > genUnroll {
		s.open(nb, genAt{gSrc, e.word(r, c)}, genAt{gDst, e.dstAt(r, c)})
		e.pair(s, r, c)
		s.close(genAt{gSrc, e.word(r, c+2) - e.word(r, c)}, genAt{gDst, 4})
		c += 2 * nb
	} else {
		for ; c+2 <= ce; c += 2 {
			e.pair(s, r, c)
		}
	}
	if c < ce {
		s.access(isa.LDMP, uint8(hW0), gSrc, e.word(r, c))
		e.low(s, hP, hW0, e.half(r, c))
		st.pending, st.addr = true, e.dstAt(r, c)
	}
}

// entry returns the state at the start of full row r when the worker
// wrote row r-1 at the same stride (for r = 0, or the first row of a
// block, a row before it): a pending low half when that row ends
// inside a word.
func (e *halfEngine) entry(r int) halfState {
	if end := e.dstAt(r, 0) - e.dstRow + 2*int64(e.cols); end%4 != 0 {
		return halfState{true, end - 2}
	}
	return halfState{}
}

func (e *halfEngine) code(f0, f1 int) *genSeq {
	var s *genSeq
	if e.outer == nil {
		s = newGenSeq(M9, M10, M11, M12, M13, M14, M0, M1)
	} else {
		s = newGenSeq(M9, M10, M11, M12, M0, M1)
		s.loopRegs = []MReg{gLoop, M14, M13}
	}
	var st halfState
	seg := func(r, cs, ce int) { e.segment(s, &st, r, cs, ce) }
	rows0 := func(r, n int) {
		p := genPeriod(4, e.srcRow, e.dstRow)
		if st != e.entry(r) {
			// The worker's output starts with row r: the loop's first
			// iteration would not find the state the others find.
			seg(r, 0, e.cols)
			r, n = r+1, n-1
		}
		if n < 2*p {
			for i := 0; i < n; i++ {
				seg(r+i, 0, e.cols)
			}
			return
		}
		first := e.dstAt(r, 0) &^ 3
		s.open(n/p, genAt{gSrc, e.word(r, 0)}, genAt{gDst, first})
		for i := 0; i < p; i++ {
			seg(r+i, 0, e.cols)
		}
		s.close(genAt{gSrc, int64(p) * e.srcRow}, genAt{gDst, int64(p) * e.dstRow})
		if st.pending {
			st.addr += int64(n/p-1) * int64(p) * e.dstRow
		}
		for i := n / p * p; i < n; i++ {
			seg(r+i, 0, e.cols)
		}
	}
	at := func(r int) (int64, int64) { return e.word(r, 0), e.dstAt(r, 0) &^ 3 }
	settle := func() { e.flush(s, &st) }
	blockRows := func(r, n int) {
		rows0(r, n)
		if e.outer != nil && (r+n)%e.rows == 0 {
			settle() // a block ends with its words written
		}
	}
	full := func(r, n int) { genBlocks(s, e.rows, e.outer, r, n, len(e.outer), 4, at, blockRows, settle) }
	genSegments(f0, f1, e.cols, seg, full)
	e.flush(s, &st)
	return s
}
