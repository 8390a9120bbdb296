// Package sim is the instruction-set simulator of the tile processor: every
// tile's supervisor and six workers issuing round-robin with the timing of
// the architecture presets, bulk-synchronous supersteps, the exchange
// executed cycle by cycle, and host exchange. It never trusts the code it
// runs: every misbehaviour is a *Fault naming tile, context, PC and phase.
//
// This file is the contract other packages (device, tools, tests) rely on.
package sim

import (
	"fmt"

	"ipu.local/libs/arch"
)

// Segment is a run of bytes placed in tile memory by Load.
type Segment struct {
	Addr uint32
	Data []byte
	Code bool // instructions: must lie in the executable range; stores to it fault
}

// Image is one tile's loadable program.
type Image struct {
	Entry    uint32 // supervisor start PC
	Segments []Segment
}

// Host is the host memory the tiles reach with hin and hout: host address
// page<<24 | offset. Implementations return an error for an address outside
// the attached pages; the simulator turns it into a fault.
type Host interface {
	ReadHost(addr uint32, dst []byte) error
	WriteHost(addr uint32, src []byte) error
}

// Device configuration registers (obj.RegWrite.Reg), validated at load.
const (
	RegEntry    = 0x0001 // per tile: supervisor start PC; makes the tile active
	RegFP8      = 0x0002 // per tile: initial CSR fp8 of every context
	RegWatchdog = 0x0100 // all tiles: cycle limit of one superstep (0: default)

	// The tile's executable range [RegExecLo, RegExecHi): 4-aligned
	// addresses inside the preset's executable range. Load refuses a code
	// segment outside it and fetching outside it faults.
	RegExecLo = 0x0010
	RegExecHi = 0x0011
	// RegSyncGroup is the tile's membership of the sync group: 1 member,
	// 0 not. A tile outside the group that reaches sync or hsync faults.
	RegSyncGroup = 0x0020
	// RegExchange is the tile's membership of the exchange: 1 member, 0
	// not. A tile outside the exchange that executes send or recv faults.
	RegExchange = 0x0021
)

// RegName names a configuration register for messages ("exec_lo (0x10)").
func RegName(reg uint32) string {
	name := "unknown"
	switch reg {
	case RegEntry:
		name = "entry"
	case RegFP8:
		name = "fp8"
	case RegWatchdog:
		name = "watchdog"
	case RegExecLo:
		name = "exec_lo"
	case RegExecHi:
		name = "exec_hi"
	case RegSyncGroup:
		name = "sync_group"
	case RegExchange:
		name = "exchange"
	}
	return fmt.Sprintf("%s (%#x)", name, reg)
}

// DefaultWatchdog is the cycle limit of one superstep when none is set.
const DefaultWatchdog = 1 << 32

// FaultKind classifies device faults.
type FaultKind string

const (
	FaultAccess      FaultKind = "out-of-range access"
	FaultAlign       FaultKind = "misaligned access"
	FaultFetch       FaultKind = "fetch outside executable range"
	FaultInvalid     FaultKind = "invalid instruction"
	FaultCodeWrite   FaultKind = "write to code"
	FaultSilent      FaultKind = "receiver listens to a silent sender"
	FaultNoListener  FaultKind = "word arrived with nobody listening"
	FaultTwoSenders  FaultKind = "two senders drive one receiver"
	FaultBus         FaultKind = "exchange bus conflict"
	FaultHost        FaultKind = "host exchange access outside attached pages"
	FaultSync        FaultKind = "sync mismatch"
	FaultNotExchange FaultKind = "exchange by a tile outside the exchange"
	FaultWatchdog    FaultKind = "superstep exceeded cycle limit"
	FaultNotRunnable FaultKind = "device not runnable"
)

// Fault is a device fault. Context is 0..5 for a worker, 6 for the
// supervisor, -1 when no single context is at fault.
type Fault struct {
	Kind    FaultKind
	Tile    int
	Context int
	PC      uint32
	Phase   int
	Cycle   int64
	Detail  string
}

func (f *Fault) Error() string {
	ctx := "supervisor"
	switch {
	case f.Context >= 0 && f.Context < 6:
		ctx = fmt.Sprintf("worker %d", f.Context)
	case f.Context < 0:
		ctx = "-"
	}
	s := fmt.Sprintf("device fault: %s: tile %d context %s pc %#x phase %d cycle %d", f.Kind, f.Tile, ctx, f.PC, f.Phase, f.Cycle)
	if f.Detail != "" {
		s += ": " + f.Detail
	}
	return s
}

// Options tune a Machine.
type Options struct {
	// Parallel is the number of host goroutines running tiles within a
	// superstep (0: GOMAXPROCS). Results never depend on it.
	Parallel int
	// SamplePeriod, when > 0, records every tile's supervisor PC every
	// SamplePeriod cycles for the profile.
	SamplePeriod int64
	// MaxSupersteps bounds the supersteps of one Run (0: DefaultMaxSupersteps),
	// so a program that never returns to the host faults instead of hanging.
	MaxSupersteps int
	// RequireConfig starts every tile with its configuration registers
	// unset, as the device at power-on: no executable range and outside
	// the sync group, until the package's configuration writes them.
	// Unset, a tile starts with the preset's executable range and in the
	// sync group, for tests that load code without a configuration.
	RequireConfig bool
	// Stepwise hands each context one instruction at a time instead of
	// running stretches ahead (RATIONALE.md, "Running ahead"): the slow
	// path the run-ahead paths are tested against, kept for measuring
	// what they buy (scripts/bench). Results and cycles are the same.
	Stepwise bool
}

// DefaultMaxSupersteps is the superstep limit of one Run when none is set.
const DefaultMaxSupersteps = 1 << 16

// PhaseStats is what one superstep cost.
type PhaseStats struct {
	Phase         int     // superstep index since load
	Cycles        int64   // longest tile, without the sync
	SyncCycles    int64   // barrier cost
	TileCycles    []int64 // per tile (len = tiles); 0 for inactive tiles
	ExchangeBytes []int64 // per tile: bytes sent
	HostBytes     int64
	Instructions  int64
}

// Sample is one sampled PC.
type Sample struct {
	Tile  int
	Phase int
	Cycle int64
	PC    uint32
}

// RunResult is what Run did.
type RunResult struct {
	Phases  []PhaseStats
	Cycles  int64 // total, syncs included
	Samples []Sample
	Command uint32 // not set by Run: the caller's command word
	AtHost  bool   // every active tile waits at hsync (false: all halted)
}

// ContextSnapshot is the architectural state of one context.
type ContextSnapshot struct {
	M, A    [16]uint32
	PC      uint32
	FP8     uint32
	Acc     [64]uint32 // AMP accumulator bits, row-major 4x16 (workers)
	Running bool
}

// TileSnapshot is one tile's architectural state, for comparing the fast
// simulator with the reference interpreter. Ctx[0..5] are workers, Ctx[6]
// the supervisor.
type TileSnapshot struct {
	Active bool
	Halted bool
	Ctx    [7]ContextSnapshot
}

// The Machine type, New, and its methods are implemented in machine.go:
//
//	func New(p *arch.Preset, mem func(tile int) []byte, opt Options) *Machine
//	    mem returns tile t's memory: len p.Memory.Size(), address p.Memory.Lo
//	    at index 0. The device backs it with its memory-mapped file.
//	func (m *Machine) Reset()                      // every tile inactive, powered off
//	func (m *Machine) Load(tile int, img Image) error   // place segments, mark code, tile active, contexts reset, supervisor at Entry
//	func (m *Machine) LoadAll(tiles []int, imgs []Image) error // Load of each, in order, the code predecoded in parallel; errors are *LoadError
//	func (m *Machine) UseFile(f TileFile)          // LoadAll writes the images with f (tilefile.go)
//	func (m *Machine) Configure(tile int, reg, value uint32) error // a device register write (validated)
//	func (m *Machine) Run(host Host, command uint32) (*RunResult, error)
//	    resumes every active tile (the supervisors waiting at hsync receive
//	    command in their hsync register) and runs supersteps until every
//	    active tile waits at hsync or has halted. Errors are *Fault.
//	func (m *Machine) Mark() int                   // syncs completed since load (hsync counts)
//	func (m *Machine) MarshalState() []byte        // registers, contexts, code ranges, mark: everything but memory
//	func (m *Machine) UnmarshalState(b []byte) error
//	func (m *Machine) Active(tile int) bool
//	func (m *Machine) Snapshot(tile int) TileSnapshot
var _ = arch.Range{}
