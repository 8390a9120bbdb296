package isa

import (
	"encoding/binary"
	"fmt"
)

// Inst is one decoded instruction. Register fields hold register numbers
// (0..15) whatever file they name; Imm holds the immediate sign- or
// zero-extended as the instruction's form says.
type Inst struct {
	Op         Op
	D, A, B, C uint8
	Imm        int32
}

// Info returns the table entry of i's opcode (nil for an unknown one).
func (i Inst) Info() *Info { return byOp[i.Op] }

// DecodeError says why a word is not a valid instruction.
type DecodeError struct {
	Word uint32
	Msg  string
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("invalid instruction %08x: %s", e.Word, e.Msg)
}

// fieldsUsed returns the mask of register fields (bit 0 d, 1 a, 2 b, 3 c)
// and whether the imm field is used.
func fieldsUsed(in *Info) (regs uint8, imm bool) {
	for _, k := range in.Operands {
		switch k {
		case MD, AD, AD2, AD4:
			regs |= 1
		case MA, AA, AA2:
			regs |= 2
		case MB, AB, AB2:
			regs |= 4
		case MC, AC, AC2:
			regs |= 8
		case MemOff, MemInc:
			regs |= 2
			imm = true
		default:
			imm = true
		}
	}
	return
}

// Decode decodes one instruction word.
func Decode(w uint32) (Inst, error) {
	op := Op(w >> 24)
	in := byOp[op]
	if in == nil {
		return Inst{}, &DecodeError{w, fmt.Sprintf("unknown opcode %#02x", uint8(op))}
	}
	i := Inst{Op: op, D: uint8(w>>20) & 15}
	regs, imm := fieldsUsed(in)
	switch in.Form {
	case FormR:
		i.A = uint8(w>>16) & 15
		i.B = uint8(w>>12) & 15
		i.C = uint8(w>>8) & 15
		i.Imm = int32(w & 0xff)
		var unused uint32
		if regs&1 == 0 {
			unused |= 0xf << 20
		}
		if regs&2 == 0 {
			unused |= 0xf << 16
		}
		if regs&4 == 0 {
			unused |= 0xf << 12
		}
		if regs&8 == 0 {
			unused |= 0xf << 8
		}
		if !imm {
			unused |= 0xff
		}
		if w&unused != 0 {
			return Inst{}, &DecodeError{w, fmt.Sprintf("%s: reserved bits set", in.Name)}
		}
	case FormI:
		i.A = uint8(w>>16) & 15
		if hasKind(in, Imm16U) {
			i.Imm = int32(w & 0xffff)
		} else {
			i.Imm = int32(int16(w))
		}
		var unused uint32
		if regs&1 == 0 {
			unused |= 0xf << 20
		}
		if regs&2 == 0 {
			unused |= 0xf << 16
		}
		if !imm {
			unused |= 0xffff
		}
		if w&unused != 0 {
			return Inst{}, &DecodeError{w, fmt.Sprintf("%s: reserved bits set", in.Name)}
		}
	case FormJ:
		v := w & 0xfffff
		if hasKind(in, Rel20) {
			i.Imm = int32(v<<12) >> 12
		} else {
			i.Imm = int32(v)
		}
		var unused uint32
		if regs&1 == 0 {
			unused |= 0xf << 20
		}
		if !imm {
			unused |= 0xfffff
		}
		if w&unused != 0 {
			return Inst{}, &DecodeError{w, fmt.Sprintf("%s: reserved bits set", in.Name)}
		}
	}
	if err := checkRegs(in, i); err != nil {
		return Inst{}, &DecodeError{w, err.Error()}
	}
	return i, nil
}

func hasKind(in *Info, k Kind) bool {
	for _, o := range in.Operands {
		if o == k {
			return true
		}
	}
	return false
}

func checkRegs(in *Info, i Inst) error {
	for _, k := range in.Operands {
		var r uint8
		var align uint8 = 1
		switch k {
		case AD2:
			r, align = i.D, 2
		case AA2:
			r, align = i.A, 2
		case AB2:
			r, align = i.B, 2
		case AC2:
			r, align = i.C, 2
		case AD4:
			r, align = i.D, 4
		case CSRImm:
			if i.Imm >= NumCSR {
				return fmt.Errorf("%s: no control register %d", in.Name, i.Imm)
			}
		}
		if r%align != 0 {
			return fmt.Errorf("%s: register $a%d is not a multiple of %d", in.Name, r, align)
		}
	}
	return nil
}

// Encode encodes i, checking that every field fits.
func Encode(i Inst) (uint32, error) {
	in := byOp[i.Op]
	if in == nil {
		return 0, fmt.Errorf("unknown opcode %#02x", uint8(i.Op))
	}
	if i.D > 15 || i.A > 15 || i.B > 15 || i.C > 15 {
		return 0, fmt.Errorf("%s: register number out of range", in.Name)
	}
	if err := checkRegs(in, i); err != nil {
		return 0, err
	}
	regs, imm := fieldsUsed(in)
	w := uint32(i.Op) << 24
	if regs&1 != 0 {
		w |= uint32(i.D) << 20
	}
	switch in.Form {
	case FormR:
		if regs&2 != 0 {
			w |= uint32(i.A) << 16
		}
		if regs&4 != 0 {
			w |= uint32(i.B) << 12
		}
		if regs&8 != 0 {
			w |= uint32(i.C) << 8
		}
		if imm {
			if i.Imm < 0 || i.Imm > 0xff {
				return 0, fmt.Errorf("%s: immediate %d does not fit in 8 bits", in.Name, i.Imm)
			}
			w |= uint32(i.Imm)
		}
	case FormI:
		if regs&2 != 0 {
			w |= uint32(i.A) << 16
		}
		if imm {
			if hasKind(in, Imm16U) {
				if i.Imm < 0 || i.Imm > 0xffff {
					return 0, fmt.Errorf("%s: immediate %d does not fit in 16 unsigned bits", in.Name, i.Imm)
				}
			} else if i.Imm < -0x8000 || i.Imm > 0x7fff {
				return 0, fmt.Errorf("%s: immediate %d does not fit in 16 signed bits", in.Name, i.Imm)
			}
			w |= uint32(i.Imm) & 0xffff
		}
	case FormJ:
		if imm {
			if hasKind(in, Rel20) {
				if i.Imm < -(1<<19) || i.Imm >= 1<<19 {
					return 0, fmt.Errorf("%s: offset %d does not fit in 20 signed bits", in.Name, i.Imm)
				}
			} else if i.Imm < 0 || i.Imm >= 1<<20 {
				return 0, fmt.Errorf("%s: immediate %d does not fit in 20 unsigned bits", in.Name, i.Imm)
			}
			w |= uint32(i.Imm) & 0xfffff
		}
	}
	return w, nil
}

// MustEncode is Encode for instructions built by code, not users.
func MustEncode(i Inst) uint32 {
	w, err := Encode(i)
	if err != nil {
		panic(err)
	}
	return w
}

// PutWord writes w little-endian at b.
func PutWord(b []byte, w uint32) { binary.LittleEndian.PutUint32(b, w) }

// Word reads a little-endian instruction word from b.
func Word(b []byte) uint32 { return binary.LittleEndian.Uint32(b) }
