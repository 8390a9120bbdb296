// Package simref is the reference interpreter of the tile instruction set:
// a second, deliberately simple implementation of the machine that package
// sim simulates fast. It exists to be obviously right, not quick: every
// tile runs alone, cycle after cycle; in each cycle it asks which context
// owns the slot and whether it may issue, fetches the word from memory and
// decodes it again, and executes it. The differential test runs random
// programs on both and compares every register, every byte of memory, the
// cycle counts and the faults.
//
// It shares the result types (Image, Fault, RunResult, TileSnapshot...) with
// package sim so that the two can be compared with cmp.Diff, and it follows
// the rules of ../sim/RATIONALE.md where the ISA table leaves a choice (NaN
// canonicalisation, the order of memory checks, host timing, how exchange
// faults are attributed and ordered, ...). Where the two disagree, that
// document decides which one is wrong.
//
// A mismatch found by the differential test is kept as a TestRepro case.
// Run more programs with
//
//	go test ./simref -run Differential -args -long
package simref

import (
	"encoding/binary"
	"fmt"

	"ipu.local/libs/arch"
	"ipu.local/libs/isa"
	"ipu.local/libs/sim"
)

const (
	numWorkers = 6
	supervisor = 6 // context index of the supervisor
	numSlots   = 6 // cycle t belongs to slot t mod 6
)

// Machine is the reference device: every tile's contexts and code ranges.
// Memory belongs to the caller (the mem function of New).
type Machine struct {
	p        *arch.Preset
	mem      func(tile int) []byte
	tiles    []tile
	mark     int
	watchdog int64
	dead     bool // a fault stopped the device; only Load revives it

	// Trace, when set, is called after every issued instruction.
	Trace func(tile, ctx int, cycle int64, pc uint32, in isa.Inst)
	// MaxSupersteps bounds the supersteps of one Run, as
	// sim.Options.MaxSupersteps (0: sim.DefaultMaxSupersteps).
	MaxSupersteps int
}

// context is one hardware thread.
type context struct {
	m, a    [16]uint32
	pc      uint32
	fp8     uint32
	acc     [64]float32
	running bool

	// next is the first cycle this context may issue again.
	next int64

	// Repeat loop: while remaining > 0 the instructions in [start, end)
	// are a loop body.
	loopStart, loopEnd uint32
	loopRemaining      uint32
}

type tile struct {
	active  bool
	halted  bool
	atHsync bool  // stopped at hsync, waiting for the next Run
	hsyncD  uint8 // register of that hsync that receives the command
	fp8Init uint32
	code    []arch.Range
	ctx     [7]context
}

// New returns a machine of preset p whose tile t has memory mem(t).
func New(p *arch.Preset, mem func(tile int) []byte) *Machine {
	return &Machine{
		p:        p,
		mem:      mem,
		tiles:    make([]tile, p.Tiles),
		watchdog: sim.DefaultWatchdog,
	}
}

// Reset powers every tile off.
func (m *Machine) Reset() {
	m.tiles = make([]tile, m.p.Tiles)
	m.mark = 0
	m.watchdog = sim.DefaultWatchdog
	m.dead = false
}

// Load places img in tile's memory and makes the tile active with every
// context reset and the supervisor at the entry point.
func (m *Machine) Load(ti int, img sim.Image) error {
	if ti < 0 || ti >= len(m.tiles) {
		return fmt.Errorf("load: tile %d out of range (%d tiles)", ti, len(m.tiles))
	}
	mem := m.mem(ti)
	if len(mem) != int(m.p.Memory.Size()) {
		return fmt.Errorf("load: tile %d: memory is %d bytes, want %d", ti, len(mem), m.p.Memory.Size())
	}
	var code []arch.Range
	for i, s := range img.Segments {
		if uint64(len(s.Data)) > uint64(m.p.Memory.Size()) || !m.p.Memory.Contains(s.Addr, uint32(len(s.Data))) {
			return fmt.Errorf("load: tile %d segment %d: [%#x, +%d) outside tile memory", ti, i, s.Addr, len(s.Data))
		}
		if s.Code {
			if s.Addr%4 != 0 || len(s.Data)%4 != 0 {
				return fmt.Errorf("load: tile %d segment %d: code [%#x, +%d) not 4-byte aligned", ti, i, s.Addr, len(s.Data))
			}
			if !m.p.Executable.Contains(s.Addr, uint32(len(s.Data))) {
				return fmt.Errorf("load: tile %d segment %d: code [%#x, +%d) outside the executable range", ti, i, s.Addr, len(s.Data))
			}
			if len(s.Data) > 0 {
				code = append(code, arch.Range{Lo: s.Addr, Hi: s.Addr + uint32(len(s.Data))})
			}
		}
	}
	for _, s := range img.Segments {
		copy(mem[s.Addr-m.p.Memory.Lo:], s.Data)
	}
	t := &m.tiles[ti]
	fp8 := t.fp8Init
	*t = tile{active: true, fp8Init: fp8, code: code}
	for c := range t.ctx {
		t.ctx[c].fp8 = fp8
	}
	t.ctx[supervisor].pc = img.Entry
	m.dead = false
	return nil
}

// Configure applies one device register write.
func (m *Machine) Configure(ti int, reg, value uint32) error {
	switch reg {
	case sim.RegWatchdog:
		if value == 0 {
			m.watchdog = sim.DefaultWatchdog
		} else {
			m.watchdog = int64(value)
		}
		return nil
	case sim.RegEntry, sim.RegFP8:
	default:
		return fmt.Errorf("configure: unknown register %#x", reg)
	}
	if ti < 0 || ti >= len(m.tiles) {
		return fmt.Errorf("configure: register %#x: tile %d out of range (%d tiles)", reg, ti, len(m.tiles))
	}
	t := &m.tiles[ti]
	switch reg {
	case sim.RegEntry:
		// A bad entry point faults at the first fetch.
		t.active = true
		t.halted = false
		t.ctx[supervisor].pc = value
	case sim.RegFP8:
		if value&^fp8Defined != 0 {
			return fmt.Errorf("configure: tile %d: fp8 value %#x sets undefined bits", ti, value)
		}
		t.fp8Init = value
		for c := range t.ctx {
			t.ctx[c].fp8 = value
		}
	}
	return nil
}

// Mark is the number of barriers completed since load.
func (m *Machine) Mark() int { return m.mark }

// Active reports whether a program was loaded on tile ti.
func (m *Machine) Active(ti int) bool {
	return ti >= 0 && ti < len(m.tiles) && m.tiles[ti].active
}

// Snapshot returns tile ti's architectural state.
func (m *Machine) Snapshot(ti int) sim.TileSnapshot {
	t := &m.tiles[ti]
	s := sim.TileSnapshot{Active: t.active, Halted: t.halted}
	for c := range t.ctx {
		x := &t.ctx[c]
		cs := sim.ContextSnapshot{M: x.m, A: x.a, PC: x.pc, FP8: x.fp8, Running: x.running}
		if c < numWorkers {
			for i, v := range x.acc {
				cs.Acc[i] = arith32(v)
			}
		} else {
			// The supervisor runs while its tile is loaded and not halted.
			cs.Running = t.active && !t.halted
		}
		s.Ctx[c] = cs
	}
	return s
}

// Memory access kinds.
const (
	accRead = iota
	accWrite
)

// check validates an access of n bytes at addr with the given alignment:
// inside tile memory, aligned, inside the interleaved region when asked,
// and not writing over code. It returns the fault kind, or "" when the
// access is allowed.
func (m *Machine) check(t *tile, addr, n, align uint32, interleaved bool, kind int) (sim.FaultKind, string) {
	if !m.p.Memory.Contains(addr, n) {
		return sim.FaultAccess, fmt.Sprintf("[%#x, +%d) outside tile memory", addr, n)
	}
	if addr%align != 0 {
		return sim.FaultAlign, fmt.Sprintf("address %#x not %d-aligned", addr, align)
	}
	if interleaved && !m.p.Interleaved.Contains(addr, n) {
		return sim.FaultAccess, fmt.Sprintf("[%#x, +%d) outside interleaved memory", addr, n)
	}
	if kind == accWrite {
		for _, r := range t.code {
			if addr < r.Hi && r.Lo < addr+n {
				return sim.FaultCodeWrite, fmt.Sprintf("store [%#x, +%d) overlaps code", addr, n)
			}
		}
	}
	return "", ""
}

func (m *Machine) load32(ti int, addr uint32) uint32 {
	return binary.LittleEndian.Uint32(m.mem(ti)[addr-m.p.Memory.Lo:])
}

func (m *Machine) store32(ti int, addr, v uint32) {
	binary.LittleEndian.PutUint32(m.mem(ti)[addr-m.p.Memory.Lo:], v)
}

func (m *Machine) load16(ti int, addr uint32) uint16 {
	return binary.LittleEndian.Uint16(m.mem(ti)[addr-m.p.Memory.Lo:])
}

func (m *Machine) load8(ti int, addr uint32) uint8 {
	return m.mem(ti)[addr-m.p.Memory.Lo]
}

// inCode reports whether the word at pc lies in a code segment of t.
func inCode(t *tile, pc uint32) bool {
	for _, r := range t.code {
		if pc >= r.Lo && uint64(pc)+4 <= uint64(r.Hi) {
			return true
		}
	}
	return false
}
