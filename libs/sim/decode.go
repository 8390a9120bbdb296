package sim

import (
	"encoding/binary"

	"ipu.local/libs/arch"
	"ipu.local/libs/isa"
)

// inst is one predecoded instruction.
type inst struct {
	op         isa.Op
	d, a, b, c uint8
	flags      uint8
	cycles     uint8
	imm        int32
}

// inst flags. A context refuses an instruction whose flags meet its forbid
// mask; the slow path then says why.
const (
	fSupOnly    = 1 << iota // supervisor only
	fWorkerOnly             // workers only
	fNoLoop                 // not allowed inside a repeat body
	fNotCode                // the word is not in a code segment
	fInvalid                // the word does not decode
)

const (
	forbidWorker = fSupOnly | fNotCode | fInvalid
	forbidSup    = fWorkerOnly | fNotCode | fInvalid
)

// program is the predecoded code of one tile: insts[i] is the word at
// base+4i, over the span of the code segments (gaps are fNotCode).
type program struct {
	base  uint32
	insts []inst
	code  []arch.Range // the code segments, sorted, merged
	// codeLo, codeHi bound every code segment (equal when there is none).
	codeLo, codeHi uint32
}

var emptyProgram = &program{}

// predecode decodes the code ranges of mem once; tiles with identical code
// share the result.
func (m *Machine) predecode(mem []byte, code []arch.Range) *program {
	if len(code) == 0 {
		return emptyProgram
	}
	lo := m.p.Memory.Lo
	n := 0
	for _, r := range code {
		n += 8 + int(r.Size())
	}
	key := make([]byte, 0, n)
	for _, r := range code {
		key = binary.LittleEndian.AppendUint32(key, r.Lo)
		key = binary.LittleEndian.AppendUint32(key, r.Hi)
		key = append(key, mem[r.Lo-lo:r.Hi-lo]...)
	}
	if p, ok := m.progs[string(key)]; ok {
		return p
	}
	base, end := code[0].Lo, code[len(code)-1].Hi
	p := &program{base: base, insts: make([]inst, (end-base)/4), codeLo: base, codeHi: end}
	p.code = append([]arch.Range(nil), code...)
	for i := range p.insts {
		p.insts[i].flags = fNotCode
	}
	for _, r := range code {
		for a := r.Lo; a < r.Hi; a += 4 {
			p.insts[(a-base)/4] = decodeWord(isa.Word(mem[a-lo:]))
		}
	}
	m.progs[string(key)] = p
	return p
}

func decodeWord(w uint32) inst {
	d, err := isa.Decode(w)
	if err != nil {
		return inst{flags: fInvalid}
	}
	info := isa.Lookup(d.Op)
	in := inst{op: d.Op, d: d.D, a: d.A, b: d.B, c: d.C, imm: d.Imm, cycles: uint8(info.Cycles)}
	switch info.Who {
	case isa.Supervisor:
		in.flags |= fSupOnly
	case isa.Worker:
		in.flags |= fWorkerOnly
	}
	switch d.Op {
	case isa.BR, isa.BRZ, isa.BRNZ, isa.CALL, isa.JR, isa.RPT, isa.RPTI,
		isa.RUN, isa.SYNC, isa.HSYNC, isa.HALT, isa.EXIT:
		in.flags |= fNoLoop
	}
	return in
}

// overlapsCode reports whether [addr, addr+n) overlaps a code segment.
func (p *program) overlapsCode(addr, n uint32) bool {
	end := uint64(addr) + uint64(n)
	if n == 0 || end <= uint64(p.codeLo) || addr >= p.codeHi {
		return false
	}
	for _, r := range p.code {
		if end > uint64(r.Lo) && addr < r.Hi {
			return true
		}
	}
	return false
}
