package codegen

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"ipu.local/libs/arch"
	"ipu.local/libs/isa"
)

// MReg is an integer and address register $m0..$m15 ($m15 reads as zero).
type MReg uint8

// AReg is an arithmetic register $a0..$a15 ($a15 reads as zero). Pairs
// and quads are named by their first register.
type AReg uint8

// Registers.
const (
	M0 MReg = iota
	M1
	M2
	M3
	M4
	M5
	M6
	M7
	M8
	M9
	M10
	M11
	M12
	M13
	M14
	MZero
)

// Arithmetic registers.
const (
	A0 AReg = iota
	A1
	A2
	A3
	A4
	A5
	A6
	A7
	A8
	A9
	A10
	A11
	A12
	A13
	A14
	AZero
)

// Label names a code position. The zero Label is not a label.
type Label int32

// fixKind says how a fixup patches its instruction.
type fixKind uint8

const (
	fixRel   fixKind = iota // branch: Imm = target - (at + 1), in instructions
	fixRpt                  // rpt: Imm = body length
	fixRpti                 // rpti: Imm = count<<8 | body length
	fixAbs20                // li/ali: Imm = target address
	fixWord                 // data word: target address + add
)

type fixup struct {
	at    int // instruction index
	label Label
	kind  fixKind
	count int    // rpti repeat count
	add   uint32 // fixWord: added to the address
}

// Builder assembles tile code in Go: instructions, labels, branch, repeat
// and address fixups, at a fixed base address. Every instruction is one
// 4-byte word, so a label's address is known as soon as it is bound.
//
// Errors are sticky: the first one is kept (with the pc it concerns) and
// returned by Finish; later calls do nothing harmful. The output depends
// only on the calls made.
type Builder struct {
	arch   *arch.Preset
	base   uint32
	insts  []isa.Inst
	data   []bool // the word is raw data (Word), not an instruction
	raw    []uint32
	labels []int // instruction index of each label, -1 while unbound
	fixups []fixup
	err    error

	// issued counts the issue cycles of the instructions emitted, each
	// times mult: the product of the counts of the Repeat loops around it.
	issued int64
	mult   int64
}

// NewBuilder returns a builder whose first instruction is at base (a
// multiple of 4) on a tile of preset a.
func NewBuilder(a *arch.Preset, base uint32) *Builder {
	b := &Builder{arch: a, base: base, labels: []int{-1}, mult: 1}
	if base%4 != 0 {
		b.fail(base, "base %#x is not 4-byte aligned", base)
	}
	return b
}

// Arch returns the preset the code is built for.
func (b *Builder) Arch() *arch.Preset { return b.arch }

// Base returns the address of the first word.
func (b *Builder) Base() uint32 { return b.base }

// PC returns the address of the next word.
func (b *Builder) PC() uint32 { return b.base + 4*uint32(len(b.insts)) }

// Len returns the number of words emitted.
func (b *Builder) Len() int { return len(b.insts) }

// Err returns the first error so far.
func (b *Builder) Err() error { return b.err }

func (b *Builder) fail(pc uint32, format string, args ...any) {
	if b.err == nil {
		b.err = fmt.Errorf("codegen: pc %#x: %s", pc, fmt.Sprintf(format, args...))
	}
}

// Fail records an error found by a kernel generator (first one wins).
func (b *Builder) Fail(err error) {
	if b.err == nil && err != nil {
		b.err = err
	}
}

// Label returns a new unbound label.
func (b *Builder) Label() Label {
	b.labels = append(b.labels, -1)
	return Label(len(b.labels) - 1)
}

// Bind binds l to the next word's address.
func (b *Builder) Bind(l Label) {
	if !b.valid(l) {
		return
	}
	if b.labels[l] >= 0 {
		b.fail(b.PC(), "label %d bound twice", l)
		return
	}
	b.labels[l] = len(b.insts)
}

// Here returns a new label bound to the next word's address.
func (b *Builder) Here() Label {
	l := b.Label()
	b.Bind(l)
	return l
}

// Addr returns the address of a bound label.
func (b *Builder) Addr(l Label) (uint32, bool) {
	if l <= 0 || int(l) >= len(b.labels) || b.labels[l] < 0 {
		return 0, false
	}
	return b.base + 4*uint32(b.labels[l]), true
}

func (b *Builder) valid(l Label) bool {
	if l <= 0 || int(l) >= len(b.labels) {
		b.fail(b.PC(), "unknown label %d", l)
		return false
	}
	return true
}

// Emit appends one instruction, checking its fields.
func (b *Builder) Emit(in isa.Inst) {
	if _, err := isa.Encode(in); err != nil {
		b.fail(b.PC(), "%v", err)
	}
	b.push(in, false, 0)
}

func (b *Builder) push(in isa.Inst, data bool, w uint32) {
	if !data {
		if info := in.Info(); info != nil {
			b.issued += int64(info.Cycles) * b.mult
		}
	}
	b.insts = append(b.insts, in)
	b.data = append(b.data, data)
	b.raw = append(b.raw, w)
}

// emitFix appends an instruction whose immediate a fixup fills in.
func (b *Builder) emitFix(in isa.Inst, l Label, kind fixKind, count int) {
	if !b.valid(l) {
		return
	}
	b.fixups = append(b.fixups, fixup{at: len(b.insts), label: l, kind: kind, count: count})
	b.push(in, false, 0)
}

// Word appends a raw 32-bit data word (a table in the code stream). It is
// never executed; a repeat body may not contain one.
func (b *Builder) Word(w uint32) { b.push(isa.Inst{}, true, w) }

// WordLabel appends a data word holding l's address plus add, resolved
// by Finish: code that stores addresses in the code stream stays
// position-independent (see Splice).
func (b *Builder) WordLabel(l Label, add uint32) {
	if !b.valid(l) {
		return
	}
	b.fixups = append(b.fixups, fixup{at: len(b.insts), label: l, kind: fixWord, add: add})
	b.push(isa.Inst{}, true, 0)
}

// Splice appends the code src built, as if it had been emitted here:
// its instructions, data words, labels (bound at their new places) and
// fixups (resolved by b's Finish). Code built only through the Builder
// (no address computed from src's PC or base) is position-independent,
// so one kernel's code emitted once can be spliced into every tile's
// program. It returns the map from src's labels to b's.
func (b *Builder) Splice(src *Builder) func(Label) Label {
	if src.err != nil {
		b.fail(b.PC(), "spliced code: %v", src.err)
	}
	off := len(b.insts)
	b.insts = append(b.insts, src.insts...)
	b.data = append(b.data, src.data...)
	b.raw = append(b.raw, src.raw...)
	b.issued += src.issued * b.mult
	first := Label(len(b.labels)) // src's label 1
	for _, at := range src.labels[1:] {
		if at >= 0 {
			at += off
		}
		b.labels = append(b.labels, at)
	}
	remap := func(l Label) Label {
		if l <= 0 || int(l) >= len(src.labels) {
			return 0
		}
		return first + l - 1
	}
	for _, f := range src.fixups {
		f.at += off
		f.label = remap(f.label)
		b.fixups = append(b.fixups, f)
	}
	return remap
}

// ReserveSplices makes room in b for splicing srcs and extra more
// instructions or words, so that the splices do not grow b's arrays
// again and again.
func (b *Builder) ReserveSplices(extra int, srcs ...*Builder) {
	n, nl, nf := extra, 0, 0
	for _, s := range srcs {
		n += len(s.insts)
		nl += len(s.labels) - 1
		nf += len(s.fixups)
	}
	b.insts = slices.Grow(b.insts, n)
	b.data = slices.Grow(b.data, n)
	b.raw = slices.Grow(b.raw, n)
	b.labels = slices.Grow(b.labels, nl)
	b.fixups = slices.Grow(b.fixups, nf)
}

// Finish resolves every fixup and returns the code as little-endian bytes.
func (b *Builder) Finish() ([]byte, error) {
	if b.err != nil {
		return nil, b.err
	}
	end := uint64(b.base) + 4*uint64(len(b.insts))
	if b.arch != nil && len(b.insts) > 0 && !b.arch.Executable.Contains(b.base, uint32(end-uint64(b.base))) {
		return nil, fmt.Errorf("codegen: code [%#x, %#x) outside the executable range [%#x, %#x)", b.base, end, b.arch.Executable.Lo, b.arch.Executable.Hi)
	}
	// The words first, the fixups' then over them: b itself does not
	// change (Finish may be called again), and nothing is copied. A
	// fixup's instruction may not encode before it is filled in; any
	// other that does not is an error.
	out := make([]byte, 4*len(b.insts))
	var unencoded []int
	for i, in := range b.insts {
		w := b.raw[i]
		if !b.data[i] {
			var err error
			if w, err = isa.Encode(in); err != nil {
				unencoded = append(unencoded, i)
			}
		}
		binary.LittleEndian.PutUint32(out[4*i:], w)
	}
	if len(unencoded) > 0 {
		fixed := make(map[int]bool, len(b.fixups))
		for _, f := range b.fixups {
			fixed[f.at] = true
		}
		for _, i := range unencoded {
			if !fixed[i] {
				_, err := isa.Encode(b.insts[i])
				return nil, fmt.Errorf("codegen: pc %#x: %w", b.base+4*uint32(i), err)
			}
		}
	}
	for _, f := range b.fixups {
		pc := b.base + 4*uint32(f.at)
		target := b.labels[f.label]
		if target < 0 {
			return nil, fmt.Errorf("codegen: pc %#x: label %d is never bound", pc, f.label)
		}
		if f.kind == fixWord {
			binary.LittleEndian.PutUint32(out[4*f.at:], b.base+4*uint32(target)+f.add)
			continue
		}
		in := b.insts[f.at]
		switch f.kind {
		case fixRel:
			in.Imm = int32(target - (f.at + 1))
		case fixRpt, fixRpti:
			n := target - (f.at + 1)
			if n < 0 {
				return nil, fmt.Errorf("codegen: pc %#x: repeat body ends before it starts", pc)
			}
			if err := b.checkBody(f.at+1, target); err != nil {
				return nil, fmt.Errorf("codegen: pc %#x: %w", pc, err)
			}
			if f.kind == fixRpt {
				if n > 0xFFFF {
					return nil, fmt.Errorf("codegen: pc %#x: rpt body of %d instructions exceeds 65535", pc, n)
				}
				in.Imm = int32(n)
				break
			}
			if n > 0xFF {
				return nil, fmt.Errorf("codegen: pc %#x: rpti body of %d instructions exceeds 255", pc, n)
			}
			in.Imm = int32(f.count<<8 | n)
		case fixAbs20:
			in.Imm = int32(b.base + 4*uint32(target))
		}
		w, err := isa.Encode(in)
		if err != nil {
			return nil, fmt.Errorf("codegen: pc %#x: label %d: %w", pc, f.label, err)
		}
		binary.LittleEndian.PutUint32(out[4*f.at:], w)
	}
	return out, nil
}

// checkBody reports an instruction a repeat body may not hold.
func (b *Builder) checkBody(lo, hi int) error {
	for i := lo; i < hi; i++ {
		if b.data[i] {
			return fmt.Errorf("repeat body holds a data word at %#x", b.base+4*uint32(i))
		}
		switch op := b.insts[i].Op; op {
		case isa.BR, isa.BRZ, isa.BRNZ, isa.CALL, isa.JR, isa.RPT, isa.RPTI,
			isa.RUN, isa.SYNC, isa.HSYNC, isa.HALT, isa.EXIT:
			return fmt.Errorf("repeat body holds %s at %#x", op, b.base+4*uint32(i))
		}
	}
	return nil
}

// Control flow.

// Br branches to l.
func (b *Builder) Br(l Label) { b.emitFix(isa.Inst{Op: isa.BR}, l, fixRel, 0) }

// Brz branches to l when a is zero.
func (b *Builder) Brz(a MReg, l Label) { b.emitFix(isa.Inst{Op: isa.BRZ, A: uint8(a)}, l, fixRel, 0) }

// Brnz branches to l when a is not zero.
func (b *Builder) Brnz(a MReg, l Label) { b.emitFix(isa.Inst{Op: isa.BRNZ, A: uint8(a)}, l, fixRel, 0) }

// Call branches to l, leaving the return address in d.
func (b *Builder) Call(d MReg, l Label) { b.emitFix(isa.Inst{Op: isa.CALL, D: uint8(d)}, l, fixRel, 0) }

// Rpt repeats the instructions from the next one up to end (exclusive)
// count times ($m count; zero skips them).
func (b *Builder) Rpt(count MReg, end Label) {
	b.emitFix(isa.Inst{Op: isa.RPT, A: uint8(count)}, end, fixRpt, 0)
}

// Repeat emits body as a zero-overhead loop of n iterations: nothing
// when n is 0, rpti when n <= MaxRptiCount, else rpt on countReg, which
// the caller has loaded with n. Issued counts the body n times.
func (b *Builder) Repeat(n int, countReg MReg, body func()) {
	if n <= 0 {
		return
	}
	end := b.Label()
	if n <= MaxRptiCount {
		b.Rpti(n, end)
	} else {
		b.Rpt(countReg, end)
	}
	b.mult *= int64(n)
	body()
	b.mult /= int64(n)
	b.Bind(end)
}

// Issued returns the issue cycles of the code emitted so far, counting
// the body of a Repeat as many times as it runs: the cost of straight-line
// code around Repeat loops.
func (b *Builder) Issued() int64 { return b.issued }

// MaxRptiCount is the largest count rpti encodes.
const MaxRptiCount = 1<<12 - 1

// Rpti is Rpt with an immediate count (0..MaxRptiCount).
func (b *Builder) Rpti(count int, end Label) {
	if count < 0 || count > MaxRptiCount {
		b.fail(b.PC(), "rpti count %d out of range [0, %d]", count, MaxRptiCount)
		count = 0
	}
	b.emitFix(isa.Inst{Op: isa.RPTI}, end, fixRpti, count)
}

// Constants and addresses.

// ConstLen returns how many instructions LoadConst and LoadA take for v.
func ConstLen(v uint32) int {
	if v < 1<<20 {
		return 1
	}
	return 2
}

// LoadConst sets d to v: li, or li and lih.
func (b *Builder) LoadConst(d MReg, v uint32) {
	if v < 1<<20 {
		b.Emit(isa.Inst{Op: isa.LI, D: uint8(d), Imm: int32(v)})
		return
	}
	b.Emit(isa.Inst{Op: isa.LI, D: uint8(d), Imm: int32(v & 0xFFFF)})
	b.Emit(isa.Inst{Op: isa.LIH, D: uint8(d), Imm: int32(v >> 16)})
}

// LoadAddr sets d to a tile address (one li below 2^20, else li and lih).
func (b *Builder) LoadAddr(d MReg, addr uint32) { b.LoadConst(d, addr) }

// LoadLabel sets d to the address of l with one li.
func (b *Builder) LoadLabel(d MReg, l Label) {
	b.emitFix(isa.Inst{Op: isa.LI, D: uint8(d)}, l, fixAbs20, 0)
}

// LoadA sets $a d to the bits v: ali, or ali and alih.
func (b *Builder) LoadA(d AReg, v uint32) {
	if v < 1<<20 {
		b.Emit(isa.Inst{Op: isa.ALI, D: uint8(d), Imm: int32(v)})
		return
	}
	b.Emit(isa.Inst{Op: isa.ALI, D: uint8(d), Imm: int32(v & 0xFFFF)})
	b.Emit(isa.Inst{Op: isa.ALIH, D: uint8(d), Imm: int32(v >> 16)})
}

// LoadF32 sets $a d to the FP32 value f.
func (b *Builder) LoadF32(d AReg, f float32) { b.LoadA(d, math.Float32bits(f)) }

// F32Len is the number of instructions LoadF32 takes for f.
func F32Len(f float32) int { return ConstLen(math.Float32bits(f)) }

// Integer instructions.

func (b *Builder) r(op isa.Op, d, a, c uint8) { b.Emit(isa.Inst{Op: op, D: d, A: a, B: c}) }
func (b *Builder) i(op isa.Op, d, a uint8, imm int32) {
	b.Emit(isa.Inst{Op: op, D: d, A: a, Imm: imm})
}

// Nop does nothing for one cycle of this context.
func (b *Builder) Nop() { b.Emit(isa.Inst{Op: isa.NOP}) }

// Add is d = a + c.
func (b *Builder) Add(d, a, c MReg) { b.r(isa.ADD, uint8(d), uint8(a), uint8(c)) }

// Sub is d = a - c.
func (b *Builder) Sub(d, a, c MReg) { b.r(isa.SUB, uint8(d), uint8(a), uint8(c)) }

// Mul is d = a * c.
func (b *Builder) Mul(d, a, c MReg) { b.r(isa.MUL, uint8(d), uint8(a), uint8(c)) }

// And is d = a & c.
func (b *Builder) And(d, a, c MReg) { b.r(isa.AND, uint8(d), uint8(a), uint8(c)) }

// Or is d = a | c.
func (b *Builder) Or(d, a, c MReg) { b.r(isa.OR, uint8(d), uint8(a), uint8(c)) }

// Xor is d = a ^ c.
func (b *Builder) Xor(d, a, c MReg) { b.r(isa.XOR, uint8(d), uint8(a), uint8(c)) }

// Sort16Lo is d = (a & 0xffff) | c << 16: the low halves of a and c.
func (b *Builder) Sort16Lo(d, a, c MReg) { b.r(isa.SORT16LO, uint8(d), uint8(a), uint8(c)) }

// Sort16Hi is d = a >> 16 | (c & 0xffff0000): the high halves of a and c.
func (b *Builder) Sort16Hi(d, a, c MReg) { b.r(isa.SORT16HI, uint8(d), uint8(a), uint8(c)) }

// Li is d = imm (unsigned 20 bits).
func (b *Builder) Li(d MReg, imm int32) { b.Emit(isa.Inst{Op: isa.LI, D: uint8(d), Imm: imm}) }

// Addi is d = a + imm (signed 16 bits).
func (b *Builder) Addi(d, a MReg, imm int32) { b.i(isa.ADDI, uint8(d), uint8(a), imm) }

// Muli is d = a * imm (signed 16 bits).
func (b *Builder) Muli(d, a MReg, imm int32) { b.i(isa.MULI, uint8(d), uint8(a), imm) }

// Andi is d = a & imm (unsigned 16 bits).
func (b *Builder) Andi(d, a MReg, imm int32) { b.i(isa.ANDI, uint8(d), uint8(a), imm) }

// Shli is d = a << imm.
func (b *Builder) Shli(d, a MReg, imm int32) { b.i(isa.SHLI, uint8(d), uint8(a), imm) }

// Shri is d = a >> imm, logical.
func (b *Builder) Shri(d, a MReg, imm int32) { b.i(isa.SHRI, uint8(d), uint8(a), imm) }

// Mov is d = a (addi d, a, 0).
func (b *Builder) Mov(d, a MReg) { b.Addi(d, a, 0) }

// Loads and stores. Off is a signed 16-bit byte offset; Inc a signed
// 16-bit post-increment.

// Ldm is d = mem32[base+off].
func (b *Builder) Ldm(d, base MReg, off int32) { b.i(isa.LDM, uint8(d), uint8(base), off) }

// LdmP is d = mem32[base]; base += inc.
func (b *Builder) LdmP(d, base MReg, inc int32) { b.i(isa.LDMP, uint8(d), uint8(base), inc) }

// Stm is mem32[base+off] = d.
func (b *Builder) Stm(d, base MReg, off int32) { b.i(isa.STM, uint8(d), uint8(base), off) }

// StmP is mem32[base] = d; base += inc.
func (b *Builder) StmP(d, base MReg, inc int32) { b.i(isa.STMP, uint8(d), uint8(base), inc) }

// Ld32 is $a d = mem32[base+off].
func (b *Builder) Ld32(d AReg, base MReg, off int32) { b.i(isa.LD32, uint8(d), uint8(base), off) }

// Ld32P is $a d = mem32[base]; base += inc.
func (b *Builder) Ld32P(d AReg, base MReg, inc int32) { b.i(isa.LD32P, uint8(d), uint8(base), inc) }

// St32 is mem32[base+off] = $a d.
func (b *Builder) St32(d AReg, base MReg, off int32) { b.i(isa.ST32, uint8(d), uint8(base), off) }

// St32P is mem32[base] = $a d; base += inc.
func (b *Builder) St32P(d AReg, base MReg, inc int32) { b.i(isa.ST32P, uint8(d), uint8(base), inc) }

// Ld64 is $a d:d+1 = mem64[base+off].
func (b *Builder) Ld64(d AReg, base MReg, off int32) { b.i(isa.LD64, uint8(d), uint8(base), off) }

// Ld64P is $a d:d+1 = mem64[base]; base += inc.
func (b *Builder) Ld64P(d AReg, base MReg, inc int32) { b.i(isa.LD64P, uint8(d), uint8(base), inc) }

// St64 is mem64[base+off] = $a d:d+1.
func (b *Builder) St64(d AReg, base MReg, off int32) { b.i(isa.ST64, uint8(d), uint8(base), off) }

// St64P is mem64[base] = $a d:d+1; base += inc.
func (b *Builder) St64P(d AReg, base MReg, inc int32) { b.i(isa.ST64P, uint8(d), uint8(base), inc) }

// Ld128 is $a d:d+3 = mem128[base+off] (interleaved memory).
func (b *Builder) Ld128(d AReg, base MReg, off int32) { b.i(isa.LD128, uint8(d), uint8(base), off) }

// Ld128P is $a d:d+3 = mem128[base]; base += inc (interleaved memory).
func (b *Builder) Ld128P(d AReg, base MReg, inc int32) { b.i(isa.LD128P, uint8(d), uint8(base), inc) }

// St128P is mem128[base] = $a d:d+3; base += inc (interleaved memory).
func (b *Builder) St128P(d AReg, base MReg, inc int32) { b.i(isa.ST128P, uint8(d), uint8(base), inc) }

// Register moves.

// Mta is $a d = $m a.
func (b *Builder) Mta(d AReg, a MReg) { b.r(isa.MTA, uint8(d), uint8(a), 0) }

// Mfa is $m d = $a a.
func (b *Builder) Mfa(d MReg, a AReg) { b.r(isa.MFA, uint8(d), uint8(a), 0) }

// Amov is $a d = $a a.
func (b *Builder) Amov(d, a AReg) { b.r(isa.AMOV, uint8(d), uint8(a), 0) }

// Float instructions.

// F emits a float or conversion instruction of up to three $a operands
// (d, a, c: pairs where op takes pairs), e.g. F(isa.V2ADD, A0, A0, A2).
func (b *Builder) F(op isa.Op, d, a, c AReg) { b.r(op, uint8(d), uint8(a), uint8(c)) }

// F1 emits a one-operand float or conversion instruction.
func (b *Builder) F1(op isa.Op, d, a AReg) { b.r(op, uint8(d), uint8(a), 0) }

// Sel emits f32sel, f32v2sel or f16v4sel: d = a != 0 ? c : e.
func (b *Builder) Sel(op isa.Op, d, a, c, e AReg) {
	b.Emit(isa.Inst{Op: op, D: uint8(d), A: uint8(a), B: uint8(c), C: uint8(e)})
}

// AMP.

// Ampclr zeroes the accumulator.
func (b *Builder) Ampclr() { b.Emit(isa.Inst{Op: isa.AMPCLR}) }

// Amph is one FP16 AMP step with operands at $m a and $m c.
func (b *Builder) Amph(a, c MReg) { b.r(isa.AMPH, 0, uint8(a), uint8(c)) }

// Ampq is one FP8 AMP step (two k) with operands at $m a and $m c.
func (b *Builder) Ampq(a, c MReg) { b.r(isa.AMPQ, 0, uint8(a), uint8(c)) }

// Ampf is one FP32 AMP step with operands at $m a and $m c.
func (b *Builder) Ampf(a, c MReg) { b.r(isa.AMPF, 0, uint8(a), uint8(c)) }

// Ampst stores accumulator row (0..3) at $m a.
func (b *Builder) Ampst(a MReg, row int) {
	b.Emit(isa.Inst{Op: isa.AMPST, A: uint8(a), Imm: int32(row)})
}

// Ampld loads accumulator row (0..3) from $m a.
func (b *Builder) Ampld(a MReg, row int) {
	b.Emit(isa.Inst{Op: isa.AMPLD, A: uint8(a), Imm: int32(row)})
}

// Contexts and control registers.

// Run starts worker w at $m entry with $m0 = $m arg.
func (b *Builder) Run(entry, arg MReg, w int) {
	b.Emit(isa.Inst{Op: isa.RUN, A: uint8(entry), B: uint8(arg), Imm: int32(w)})
}

// Exit ends this worker.
func (b *Builder) Exit() { b.Emit(isa.Inst{Op: isa.EXIT}) }

// Join waits until no worker runs.
func (b *Builder) Join() { b.Emit(isa.Inst{Op: isa.JOIN}) }

// Halt stops the tile.
func (b *Builder) Halt() { b.Emit(isa.Inst{Op: isa.HALT}) }

// Delay makes this context's next instruction issue n cycles later.
func (b *Builder) Delay(n int) { b.Emit(isa.Inst{Op: isa.DELAY, Imm: int32(n)}) }

// Get is d = csr.
func (b *Builder) Get(d MReg, csr int) { b.Emit(isa.Inst{Op: isa.GET, D: uint8(d), Imm: int32(csr)}) }

// Put is csr = a.
func (b *Builder) Put(csr int, a MReg) { b.Emit(isa.Inst{Op: isa.PUT, A: uint8(a), Imm: int32(csr)}) }
