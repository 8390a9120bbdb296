package codegen

import (
	"errors"
	"fmt"
	"slices"

	"ipu.local/libs/isa"
)

// Copy copies a 2-D region of 32-bit words byte for byte: for r < R and
// c < W, the word at Y + 4*(r*YStride + c) receives the word at
// X + 4*(r*XStride + c). Any bit pattern copies exactly (FP32, FP16
// pairs, FP8 quads, NaN payloads). Nothing else at Y is written.
//
// Alignment: X and Y 4-byte aligned, strides any (in words). XStride may
// be anything from 0 (every row of Y receives the same row of X); when
// R > 1, YStride is at least W. The words read and the words written
// must not overlap (the rows are compared exactly, not their spans).
// With Interleaved set, both regions must lie in interleaved memory and
// the kernel uses 128-bit accesses where both sides allow them.
//
// Work: the R*W words in row-major order are split into contiguous ranges
// of nearly equal size, one per worker, each boundary moved to the
// nearest row start or multiple of 4 words within a row; of 1..Workers
// workers, the count with the fewest cycles (Cost.Cycles) runs, the
// fewer on a tie. Rows contiguous on both sides (XStride = YStride = W)
// are one row of R*W words.
//
// Code: each worker runs code generated for its range (workers whose code
// is the same share it). A row segment of n words is a head of h <= 3
// words, nb blocks of B words (2, or 4 with Interleaved) and a tail of
// the rest; h and B are chosen for the fewest issues. Within a segment
// every word goes through $a0..$a3: the loads of a block are the widest
// the source address allows (ld128 at a 16-aligned address and block
// offset 0 mod 4, ld64 at an 8-aligned one and even offset, else ld32),
// and the stores likewise. So a block costs 2 issues per 2 words when X
// and Y agree modulo 8 (2 per 4 words modulo 16 with Interleaved), 3 per
// 2 words when they differ by 4 modulo 8. Blocks loop with rpt unless
// they take at most 8 issues in all (then they are unrolled). Full rows
// of a worker loop p at a time (p in 1, 2, 4: the genPeriod of the rows'
// alignments), with rpt when a row has no inner loop, else with a
// counted branch loop (2 issues per iteration). Pointer moves between
// rows ride on the last access's post-increment when it is outside a
// loop and the sum fits 16 bits, else cost one add (the constant in a
// register loaded once when it does not fit an addi).
//
// Cost: worker w issues 4 (table lookup) + 2 (ldm of its two pointers)
// + 2 when workers run different code (ldm of the entry and jr) + the
// issues of its code before exit; Work[w] is 6 x that. Cost counts the
// generated code exactly.
type Copy struct {
	R, W             int    // rows, 32-bit words per row
	X, Y             uint32 // 4-byte aligned
	XStride, YStride int    // words
	Workers          int
	// Interleaved declares that X and Y lie in interleaved memory (checked):
	// 128-bit loads and stores where both addresses allow. The zero value
	// uses 32- and 64-bit accesses only.
	Interleaved bool
}

func (p Copy) check() error {
	if err := checkWorkers(p.Workers); err != nil {
		return err
	}
	if p.R < 1 || p.W < 1 || int64(p.R)*int64(p.W) > 1<<24 {
		return fmt.Errorf("region %dx%d: want positive dimensions of at most 2^24 words", p.R, p.W)
	}
	if p.XStride < 0 || p.YStride < 0 || p.XStride > 1<<24 || p.YStride > 1<<24 {
		return fmt.Errorf("row strides %d, %d: want 0..2^24", p.XStride, p.YStride)
	}
	if p.R > 1 && p.YStride < p.W {
		return fmt.Errorf("row stride %d of Y: want at least W=%d", p.YStride, p.W)
	}
	return nil
}

func (p Copy) checkMemory(b *Builder) error {
	a := b.Arch()
	if a == nil {
		return errors.New("builder has no architecture preset")
	}
	span := func(stride int) uint64 { return 4 * (uint64(p.R-1)*uint64(stride) + uint64(p.W)) }
	x := buffer{"X", p.X, span(p.XStride), false}
	y := buffer{"Y", p.Y, span(p.YStride), true}
	for _, v := range []buffer{x, y} {
		if err := checkBuffer(v, 4, a.Memory, "tile memory"); err != nil {
			return err
		}
		if p.Interleaved {
			if err := checkBuffer(v, 4, a.Interleaved, "interleaved memory"); err != nil {
				return err
			}
		}
	}
	return checkRowsDisjoint(
		byteRows{"X", int64(p.X), 4 * int64(p.XStride), 4 * int64(p.W), p.R},
		byteRows{"Y", int64(p.Y), 4 * int64(p.YStride), 4 * int64(p.W), p.R})
}

// byteRows is n byte ranges [at + i*stride, +size), i < n, with stride >= 0.
type byteRows struct {
	name         string
	at           int64
	stride, size int64
	n            int
}

// checkRowsDisjoint reports a byte in both sets: a merge of the two sorted
// lists of ranges (ranges of one set have equal sizes, so their ends are
// sorted too).
func checkRowsDisjoint(a, b byteRows) error {
	i, j := 0, 0
	for i < a.n && j < b.n {
		as, bs := a.at+int64(i)*a.stride, b.at+int64(j)*b.stride
		switch {
		case as+a.size <= bs:
			i++
		case bs+b.size <= as:
			j++
		default:
			return fmt.Errorf("%s row %d [%#x, %#x) overlaps %s row %d [%#x, %#x)", a.name, i, as, as+a.size, b.name, j, bs, bs+b.size)
		}
	}
	return nil
}

func (p Copy) gen() *wordEngine {
	return newWordEngine(p.R, p.W, int64(p.X), 4*int64(p.XStride), 4, int64(p.Y), 4*int64(p.YStride), p.Interleaved)
}

// Cost returns the kernel's exact cost.
func (p Copy) Cost() (Cost, error) {
	if err := p.check(); err != nil {
		return Cost{}, fmt.Errorf("copy: %w", err)
	}
	return genBestSplit(p.gen(), p.Workers).cost(), nil
}

// EmitCopy emits the kernel at b's current position.
func EmitCopy(b *Builder, p Copy) (Kernel, error) {
	if err := p.check(); err != nil {
		return Kernel{}, fmt.Errorf("copy: %w", err)
	}
	if err := p.checkMemory(b); err != nil {
		return Kernel{}, fmt.Errorf("copy: %w", err)
	}
	return genBestSplit(p.gen(), p.Workers).emit(b)
}

// Generated worker code.
//
// Copy and Gather generate each worker's code for its own range of the
// output: a genSeq, straight-line code with loops, built in memory before it
// is emitted so that the pointer moves between accesses can ride on the
// accesses' post-increments. Every access is a post-incrementing load or
// store whose address the genSeq knows statically (for the worker it was
// generated for), so each move is the difference of two known addresses.

// Registers of generated code: the two pointers come from the worker's
// table row; M4 counts branch loops; M5 is scratch (rpt counts, constants
// when the pool is empty).
const (
	gSrc   = M2
	gDst   = M3
	gLoop  = M4
	gScrat = M5
)

type genKind uint8

const (
	genInst genKind = iota
	genLoop         // start of a loop body of count iterations
	genEnd          // end of the innermost loop body
)

type genItem struct {
	kind  genKind
	in    isa.Inst
	count int
}

type genConst struct {
	v   uint32
	reg MReg
}

type genPtr struct {
	known      bool
	first, cur int64 // value at the first use; value now
	last       int   // item whose post-increment may still change, -1
}

type genLoopState struct {
	count int
	start map[MReg]int64
}

type genSeq struct {
	items  []genItem
	ptr    [16]genPtr
	consts []genConst // loaded once, before the code
	pool   []MReg     // registers left for constants
	loops  []genLoopState
}

func newGenSeq(pool ...MReg) *genSeq {
	s := &genSeq{pool: pool}
	for i := range s.ptr {
		s.ptr[i].last = -1
	}
	return s
}

func (s *genSeq) inst(in isa.Inst) { s.items = append(s.items, genItem{kind: genInst, in: in}) }

func (s *genSeq) alu(op isa.Op, d, a, c MReg) {
	s.inst(isa.Inst{Op: op, D: uint8(d), A: uint8(a), B: uint8(c)})
}

func (s *genSeq) alui(op isa.Op, d, a MReg, imm int32) {
	s.inst(isa.Inst{Op: op, D: uint8(d), A: uint8(a), Imm: imm})
}

// access emits a post-incrementing load or store (op) of register d
// through pointer p at address target.
func (s *genSeq) access(op isa.Op, d uint8, p MReg, target int64) {
	s.moveTo(p, target)
	s.ptr[p].last = len(s.items)
	s.inst(isa.Inst{Op: op, D: d, A: uint8(p)})
}

// moveTo makes pointer p hold target: on the last access's post-increment
// when it may still change and the sum fits, else with an add.
func (s *genSeq) moveTo(p MReg, target int64) {
	ps := &s.ptr[p]
	if !ps.known {
		ps.known, ps.first, ps.cur = true, target, target
		return
	}
	d := target - ps.cur
	if d == 0 {
		return
	}
	ps.cur = target
	if ps.last >= 0 {
		in := &s.items[ps.last].in
		if v := int64(in.Imm) + d; fitsImm16(v) {
			in.Imm = int32(v)
			return
		}
	}
	if fitsImm16(d) {
		s.alui(isa.ADDI, p, p, int32(d))
		return
	}
	s.alu(isa.ADD, p, p, s.reg(uint32(d)))
}

// reg returns a register holding v: one of the pool, loaded once before
// the code, or the scratch register loaded here.
func (s *genSeq) reg(v uint32) MReg {
	for _, c := range s.consts {
		if c.v == v {
			return c.reg
		}
	}
	if len(s.pool) > 0 {
		r := s.pool[0]
		s.pool = s.pool[1:]
		s.consts = append(s.consts, genConst{v, r})
		return r
	}
	s.loadConst(gScrat, v)
	return gScrat
}

func (s *genSeq) loadConst(d MReg, v uint32) {
	if v < 1<<20 {
		s.inst(isa.Inst{Op: isa.LI, D: uint8(d), Imm: int32(v)})
		return
	}
	s.inst(isa.Inst{Op: isa.LI, D: uint8(d), Imm: int32(v & 0xFFFF)})
	s.inst(isa.Inst{Op: isa.LIH, D: uint8(d), Imm: int32(v >> 16)})
}

// genAt is a pointer and an address.
type genAt struct {
	p MReg
	v int64
}

// open starts a loop of count iterations whose first accesses through
// each pointer of at are at the given addresses. Every pointer the body
// uses must be in at.
func (s *genSeq) open(count int, at ...genAt) {
	st := genLoopState{count: count, start: map[MReg]int64{}}
	for _, a := range at {
		s.moveTo(a.p, a.v)
		st.start[a.p] = a.v
	}
	s.sealAll()
	s.loops = append(s.loops, st)
	s.items = append(s.items, genItem{kind: genLoop, count: count})
}

// close ends the innermost loop: each pointer of step moves by its step
// per iteration.
func (s *genSeq) close(step ...genAt) {
	st := s.loops[len(s.loops)-1]
	s.loops = s.loops[:len(s.loops)-1]
	for _, a := range step {
		s.moveTo(a.p, st.start[a.p]+a.v)
	}
	s.items = append(s.items, genItem{kind: genEnd})
	for _, a := range step {
		s.ptr[a.p].cur = st.start[a.p] + int64(st.count)*a.v
	}
	s.sealAll()
}

func (s *genSeq) sealAll() {
	for i := range s.ptr {
		s.ptr[i].last = -1
	}
}

// ends returns, for each loop start, the index of its end, and whether
// its body holds another loop.
func (s *genSeq) ends() (end map[int]int, nested map[int]bool) {
	end, nested = map[int]int{}, map[int]bool{}
	var stack []int
	for i, it := range s.items {
		switch it.kind {
		case genLoop:
			for _, o := range stack {
				nested[o] = true
			}
			stack = append(stack, i)
		case genEnd:
			end[stack[len(stack)-1]] = i
			stack = stack[:len(stack)-1]
		}
	}
	return end, nested
}

// genRptImm reports whether a rpt loop of count iterations over body
// instructions is an rpti.
func genRptImm(count, body int) bool { return count <= MaxRptiCount && body <= 0xFF }

// issues returns the issue cycles of the code emit produces.
func (s *genSeq) issues() int64 {
	var n int64
	for _, c := range s.consts {
		n += int64(ConstLen(c.v))
	}
	end, nested := s.ends()
	var walk func(lo, hi int) int64
	walk = func(lo, hi int) int64 {
		var t int64
		for i := lo; i < hi; i++ {
			if s.items[i].kind != genLoop {
				t++
				continue
			}
			j, cnt := end[i], int64(s.items[i].count)
			body := walk(i+1, j)
			if nested[i] {
				t += int64(ConstLen(uint32(cnt))) + cnt*(body+2)
			} else {
				if !genRptImm(int(cnt), j-i-1) {
					t += int64(ConstLen(uint32(cnt)))
				}
				t += 1 + cnt*body
			}
			i = j
		}
		return t
	}
	return n + walk(0, len(s.items))
}

// emit emits the code: the constants, then the items, loops as rpt (or
// rpti) when their body holds no loop, else as a counted branch loop on
// gLoop.
func (s *genSeq) emit(b *Builder) {
	for _, c := range s.consts {
		b.LoadConst(c.reg, c.v)
	}
	end, nested := s.ends()
	var walk func(lo, hi int)
	walk = func(lo, hi int) {
		for i := lo; i < hi; i++ {
			it := s.items[i]
			if it.kind != genLoop {
				b.Emit(it.in)
				continue
			}
			j := end[i]
			if nested[i] {
				b.LoadConst(gLoop, uint32(it.count))
				top := b.Here()
				walk(i+1, j)
				b.Addi(gLoop, gLoop, -1)
				b.Brnz(gLoop, top)
			} else {
				done := b.Label()
				if genRptImm(it.count, j-i-1) {
					b.Rpti(it.count, done)
				} else {
					b.LoadConst(gScrat, uint32(it.count))
					b.Rpt(gScrat, done)
				}
				walk(i+1, j)
				b.Bind(done)
			}
			i = j
		}
	}
	walk(0, len(s.items))
}

func (s *genSeq) same(o *genSeq) bool {
	return slices.Equal(s.items, o.items) && slices.Equal(s.consts, o.consts)
}

// genPlan is the generated code of each running worker.
type genPlan struct {
	code []*genSeq
}

// variants returns the distinct codes and, per worker, its code's index.
func (w genPlan) variants() (uniq []*genSeq, of []int) {
	of = make([]int, len(w.code))
	for i, s := range w.code {
		of[i] = -1
		for j, u := range uniq {
			if u.same(s) {
				of[i] = j
				break
			}
		}
		if of[i] < 0 {
			of[i] = len(uniq)
			uniq = append(uniq, s)
		}
	}
	return uniq, of
}

// prologue is the issues before a worker's own code: table lookup, the
// two pointers, and the entry and jr when the workers' codes differ.
func (w genPlan) prologue() int64 {
	uniq, _ := w.variants()
	n := int64(tableBaseIssues + 2)
	if len(uniq) > 1 {
		n += 2
	}
	return n
}

func (w genPlan) cost() Cost {
	pro := w.prologue()
	c := Cost{Workers: len(w.code), Work: make([]int64, len(w.code))}
	for i, s := range w.code {
		c.Work[i] = Slots * (pro + s.issues())
	}
	return c
}

// emit emits the kernel: the shared prologue
//
//	table lookup; ldm src, dst; (ldm entry; jr entry)
//
// then each distinct code ending with exit, then the table (src, dst,
// entry per worker).
func (w genPlan) emit(b *Builder) (Kernel, error) {
	k := Kernel{Entry: b.Here(), Cost: w.cost()}
	uniq, of := w.variants()
	words := 2
	if len(uniq) > 1 {
		words = 3
	}
	table := b.Label()
	emitTableBase(b, table, words, M1)
	b.Ldm(gSrc, M1, 0)
	b.Ldm(gDst, M1, 4)
	if len(uniq) > 1 {
		b.Ldm(M0, M1, 8)
		b.Emit(isa.Inst{Op: isa.JR, A: uint8(M0)})
	}
	labels := make([]Label, len(uniq))
	for i, s := range uniq {
		labels[i] = b.Here()
		s.emit(b)
		b.Exit()
	}
	b.Bind(table)
	for i, s := range w.code {
		b.Word(uint32(s.ptr[gSrc].first))
		b.Word(uint32(s.ptr[gDst].first))
		if len(uniq) > 1 {
			b.WordLabel(labels[of[i]], 0)
		}
	}
	return k, b.Err()
}

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
type wordEngine struct {
	rows, cols     int
	src            int64
	srcRow, srcCol int64
	dst, dstRow    int64
	wide           bool
}

func newWordEngine(rows, cols int, src, srcRow, srcCol, dst, dstRow int64, wide bool) *wordEngine {
	e := &wordEngine{rows, cols, src, srcRow, srcCol, dst, dstRow, wide}
	c := int64(cols)
	if rows > 1 && srcCol == 4 && srcRow == 4*c && dstRow == 4*c {
		e.rows, e.cols = 1, rows*cols
	}
	return e
}

func (e *wordEngine) elements() int { return e.rows * e.cols }

func (e *wordEngine) boundary(f int) bool { return f%e.cols%4 == 0 }

func (e *wordEngine) srcAt(r, c int) int64 { return e.src + int64(r)*e.srcRow + int64(c)*e.srcCol }
func (e *wordEngine) dstAt(r, c int) int64 { return e.dst + int64(r)*e.dstRow + 4*int64(c) }

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
	s := newGenSeq(M6, M7, M8, M9, M10, M11, M12, M13, M14, M0, M1)
	full := func(r, n int) {
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
	genSegments(f0, f1, e.cols, func(r, cs, ce int) { e.segment(s, r, cs, ce) }, full)
	return s
}
