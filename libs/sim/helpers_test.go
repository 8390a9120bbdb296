package sim

import (
	"encoding/binary"
	"fmt"
	"testing"

	"ipu.local/libs/arch"
	"ipu.local/libs/isa"
)

// Addresses the tests use.
const (
	codeBase = 0x4C000 // executable range start
	dataBase = 0x60000 // non-interleaved data
	ilBase   = 0x80000 // interleaved data
)

// I builds an instruction from its fields.
func I(op isa.Op, d, a, b uint8, imm int32) isa.Inst {
	return isa.Inst{Op: op, D: d, A: a, B: b, Imm: imm}
}

// Shorthands for the instructions the tests use most.
func li(d uint8, v int32) isa.Inst       { return I(isa.LI, d, 0, 0, v) }
func addi(d, a uint8, v int32) isa.Inst  { return I(isa.ADDI, d, a, 0, v) }
func add(d, a, b uint8) isa.Inst         { return I(isa.ADD, d, a, b, 0) }
func nop() isa.Inst                      { return I(isa.NOP, 0, 0, 0, 0) }
func stm(d, a uint8, off int32) isa.Inst { return I(isa.STM, d, a, 0, off) }
func ldm(d, a uint8, off int32) isa.Inst { return I(isa.LDM, d, a, 0, off) }
func run(a, b uint8, w int32) isa.Inst   { return I(isa.RUN, 0, a, b, w) }
func get(d uint8, csr int32) isa.Inst    { return I(isa.GET, d, 0, 0, csr) }
func delay(n int32) isa.Inst             { return I(isa.DELAY, 0, 0, 0, n) }
func send(d, a, b uint8) isa.Inst        { return I(isa.SEND, d, a, b, 0) }
func send2(d, a, b uint8) isa.Inst       { return I(isa.SEND2, d, a, b, 0) }
func recv(d, a, b uint8) isa.Inst        { return I(isa.RECV, d, a, b, 0) }
func rpti(count, n int32) isa.Inst       { return I(isa.RPTI, 0, 0, 0, count<<8|n) }
func op0(op isa.Op) isa.Inst             { return I(op, 0, 0, 0, 0) }
func hsync(d uint8) isa.Inst             { return I(isa.HSYNC, d, 0, 0, 0) }
func amph(a, b uint8) isa.Inst           { return I(isa.AMPH, 0, a, b, 0) }
func ampf(a, b uint8) isa.Inst           { return I(isa.AMPF, 0, a, b, 0) }
func ampst(a uint8, row int32) isa.Inst  { return I(isa.AMPST, 0, a, 0, row) }
func lih(d uint8, v int32) isa.Inst      { return I(isa.LIH, d, 0, 0, v) }
func brnz(a uint8, label string) branch  { return branch{I(isa.BRNZ, 0, a, 0, 0), label} }
func br(label string) branch             { return branch{I(isa.BR, 0, 0, 0, 0), label} }
func word(w uint32) rawWord              { return rawWord(w) }
func sync_() isa.Inst                    { return op0(isa.SYNC) }
func exit() isa.Inst                     { return op0(isa.EXIT) }
func halt() isa.Inst                     { return op0(isa.HALT) }

// branch is a branch to a label; rawWord is a word placed as is.
type (
	branch struct {
		in    isa.Inst
		label string
	}
	rawWord uint32
)

// label marks the position of the next instruction.
type label string

// assemble turns a list of isa.Inst, branch, rawWord and label into words.
func assemble(items ...any) []uint32 {
	labels := map[string]int{}
	n := 0
	for _, it := range items {
		switch v := it.(type) {
		case label:
			labels[string(v)] = n
		case isa.Inst, branch, rawWord:
			n++
		default:
			panic(fmt.Sprintf("assemble: %T", it))
		}
	}
	var out []uint32
	for _, it := range items {
		switch v := it.(type) {
		case isa.Inst:
			out = append(out, isa.MustEncode(v))
		case rawWord:
			out = append(out, uint32(v))
		case branch:
			at, ok := labels[v.label]
			if !ok {
				panic("assemble: no label " + v.label)
			}
			in := v.in
			in.Imm = int32(at - (len(out) + 1))
			out = append(out, isa.MustEncode(in))
		}
	}
	return out
}

// codeBytes returns words as little-endian bytes.
func codeBytes(words []uint32) []byte {
	b := make([]byte, 4*len(words))
	for i, w := range words {
		binary.LittleEndian.PutUint32(b[4*i:], w)
	}
	return b
}

// rig is a machine with its memories.
type rig struct {
	t    testing.TB
	p    *arch.Preset
	mems [][]byte
	m    *Machine
}

func newRig(t testing.TB, preset string, opt Options) *rig {
	p := arch.MustLookup(preset)
	r := &rig{t: t, p: p, mems: make([][]byte, p.Tiles)}
	for i := range r.mems {
		r.mems[i] = make([]byte, p.Memory.Size())
	}
	r.m = New(p, func(t int) []byte { return r.mems[t] }, opt)
	return r
}

// load loads code at codeBase (entry there) plus extra segments.
func (r *rig) load(tile int, code []uint32, extra ...Segment) {
	r.t.Helper()
	img := Image{Entry: codeBase, Segments: append([]Segment{{Addr: codeBase, Data: codeBytes(code), Code: true}}, extra...)}
	if err := r.m.Load(tile, img); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rig) word(tile int, addr uint32) uint32 {
	return binary.LittleEndian.Uint32(r.mems[tile][addr-r.p.Memory.Lo:])
}

func (r *rig) setWord(tile int, addr, v uint32) {
	binary.LittleEndian.PutUint32(r.mems[tile][addr-r.p.Memory.Lo:], v)
}

// words returns a data segment holding vs.
func words(addr uint32, vs ...uint32) Segment {
	b := make([]byte, 4*len(vs))
	for i, v := range vs {
		binary.LittleEndian.PutUint32(b[4*i:], v)
	}
	return Segment{Addr: addr, Data: b}
}

// mapHost is host memory for tests: page<<24|offset.
type mapHost map[uint32][]byte

func (h mapHost) rng(addr uint32, n int) ([]byte, error) {
	p, ok := h[addr>>24]
	off := int(addr & 0xFFFFFF)
	if !ok || off+n > len(p) {
		return nil, fmt.Errorf("host range %#x+%d not attached", addr, n)
	}
	return p[off : off+n], nil
}

func (h mapHost) ReadHost(addr uint32, dst []byte) error {
	b, err := h.rng(addr, len(dst))
	if err != nil {
		return err
	}
	copy(dst, b)
	return nil
}

func (h mapHost) WriteHost(addr uint32, src []byte) error {
	b, err := h.rng(addr, len(src))
	if err != nil {
		return err
	}
	copy(b, src)
	return nil
}
