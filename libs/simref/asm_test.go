package simref_test

import (
	"encoding/binary"
	"fmt"

	"ipu.local/libs/arch"
	"ipu.local/libs/isa"
	"ipu.local/libs/sim"
)

// Register numbers, for readability of hand-written programs.
const (
	m0, m1, m2, m3, m4, m5, m6, m7 = 0, 1, 2, 3, 4, 5, 6, 7
	a0, a1, a2, a3, a4, a5, a6, a7 = 0, 1, 2, 3, 4, 5, 6, 7
)

// codeBase is where test programs start; dataBase is a scratch area in the
// interleaved region.
const (
	codeBase = 0x4C000
	dataBase = 0x90000
)

// prog assembles a list of instructions (and labels) into words. A label is
// a string; branch offsets may name one with lbl.
type prog struct {
	insts  []isa.Inst
	fixups map[int]string // instruction index -> label its Imm targets
	labels map[string]int // label -> instruction index
}

func newProg() *prog {
	return &prog{fixups: map[int]string{}, labels: map[string]int{}}
}

func (p *prog) add(op isa.Op, d, a, b, c uint8, imm int32) *prog {
	p.insts = append(p.insts, isa.Inst{Op: op, D: d, A: a, B: b, C: c, Imm: imm})
	return p
}

// r is a form R instruction with d, a, b.
func (p *prog) r(op isa.Op, d, a, b uint8) *prog { return p.add(op, d, a, b, 0, 0) }

// i is a form I or J instruction with d, a, imm.
func (p *prog) i(op isa.Op, d, a uint8, imm int32) *prog { return p.add(op, d, a, 0, 0, imm) }

// op is an instruction without operands.
func (p *prog) op(op isa.Op) *prog { return p.add(op, 0, 0, 0, 0, 0) }

// li loads a full 32-bit constant into $m d (two instructions).
func (p *prog) li(d uint8, v uint32) *prog {
	p.i(isa.LI, d, 0, int32(v&0xffff))
	return p.i(isa.LIH, d, 0, int32(v>>16))
}

// label marks the next instruction.
func (p *prog) label(name string) *prog {
	p.labels[name] = len(p.insts)
	return p
}

// br emits a branch to a label (br, brz, brnz, call).
func (p *prog) br(op isa.Op, d, a uint8, label string) *prog {
	p.fixups[len(p.insts)] = label
	return p.add(op, d, a, 0, 0, 0)
}

// addr returns the address of a label once assembled at base.
func (p *prog) addr(base uint32, label string) uint32 {
	i, ok := p.labels[label]
	if !ok {
		panic("no label " + label)
	}
	return base + 4*uint32(i)
}

func (p *prog) bytes() []byte {
	out := make([]byte, 4*len(p.insts))
	for k, in := range p.insts {
		if l, ok := p.fixups[k]; ok {
			t, ok := p.labels[l]
			if !ok {
				panic("no label " + l)
			}
			in.Imm = int32(t - k - 1)
		}
		w, err := isa.Encode(in)
		if err != nil {
			panic(fmt.Sprintf("instruction %d: %v", k, err))
		}
		binary.LittleEndian.PutUint32(out[4*k:], w)
	}
	return out
}

func (p *prog) image() sim.Image {
	return sim.Image{Entry: codeBase, Segments: []sim.Segment{{Addr: codeBase, Data: p.bytes(), Code: true}}}
}

// memories returns fresh memory for every tile of preset p.
func memories(p *arch.Preset) [][]byte {
	mem := make([][]byte, p.Tiles)
	for i := range mem {
		mem[i] = make([]byte, p.Memory.Size())
	}
	return mem
}

// hostMem is a Host with one page (page 1) of 64 KiB.
type hostMem struct{ b []byte }

func newHost() *hostMem { return &hostMem{b: make([]byte, 64<<10)} }

func (h *hostMem) span(addr uint32, n int) ([]byte, error) {
	if addr>>24 != 1 || int(addr&0xffffff)+n > len(h.b) {
		return nil, fmt.Errorf("host address %#x (+%d) not attached", addr, n)
	}
	off := int(addr & 0xffffff)
	return h.b[off : off+n], nil
}

func (h *hostMem) ReadHost(addr uint32, dst []byte) error {
	s, err := h.span(addr, len(dst))
	if err != nil {
		return err
	}
	copy(dst, s)
	return nil
}

func (h *hostMem) WriteHost(addr uint32, src []byte) error {
	s, err := h.span(addr, len(src))
	if err != nil {
		return err
	}
	copy(s, src)
	return nil
}
