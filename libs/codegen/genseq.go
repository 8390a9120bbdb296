package codegen

import (
	"fmt"
	"slices"

	"ipu.local/libs/isa"
)

// This file holds the generated worker code of Copy and Gather: the
// genSeq (straight-line code with loops, built in memory), its pointer
// moves and emission, and the genPlan of every worker's sequence.

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
	// loopRegs count the branch loops, the outermost on the first: one
	// (gLoop) unless the code nests branch loops.
	loopRegs []MReg
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
	regs := s.loopRegs
	if regs == nil {
		regs = []MReg{gLoop}
	}
	depth := 0
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
				if depth >= len(regs) {
					b.Fail(fmt.Errorf("generated code nests %d branch loops: more than its %d counters", depth+1, len(regs)))
					return
				}
				c := regs[depth]
				b.LoadConst(c, uint32(it.count))
				top := b.Here()
				depth++
				walk(i+1, j)
				depth--
				b.Addi(c, c, -1)
				b.Brnz(c, top)
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
