// Package arch holds the architecture presets: every machine fact the
// simulator, the cost model and the documentation use, in one place.
//
// The values follow ../shared/docs/architecture.md. Where that document marks
// a number as a model choice, the choice is made here and nowhere else.
package arch

import (
	"fmt"
	"sort"
	"strings"
)

// Range is a half-open byte-address range [Lo, Hi).
type Range struct {
	Lo, Hi uint32
}

// Contains reports whether [addr, addr+n) lies inside r.
func (r Range) Contains(addr, n uint32) bool {
	return addr >= r.Lo && uint64(addr)+uint64(n) <= uint64(r.Hi)
}

// Size is the number of bytes in r.
func (r Range) Size() uint32 { return r.Hi - r.Lo }

func (r Range) String() string { return fmt.Sprintf("(%d, %d)", r.Lo, r.Hi) }

// Preset describes one machine.
type Preset struct {
	Name string
	// Tiles is the number of tiles on the chip.
	Tiles int
	// Workers is the number of worker contexts per tile; there is one
	// supervisor context besides them. Contexts issue round-robin over
	// Workers slots: a context issues at most once every Workers cycles.
	Workers int
	// ClockHz is the tile clock, used to turn cycles into time.
	ClockHz float64

	// Memory map of one tile.
	Memory         Range // all of tile memory
	Executable     Range // instructions may be fetched only from here
	NonInterleaved Range // consecutive 64-bit words in the same memory element
	Interleaved    Range // consecutive 64-bit words alternate between two elements
	// ElementBytes is the size of one memory element; two operand accesses
	// of one instruction that touch the same element cost one more cycle.
	ElementBytes uint32
	// RuntimeReserved is the number of bytes at the top of tile memory that
	// the runtime keeps for itself (model choice; the seed leaves 1104).
	RuntimeReserved uint32

	// Arithmetic rates, multiply-accumulates per tile per cycle.
	MACsFP32 int // AMP, FP32 inputs (ampf: 64 fused MACs over 4 cycles a worker)
	MACsFP16 int // AMP, FP16 inputs, FP32 accumulation
	MACsFP8  int // AMP, FP8 inputs, FP32 accumulation (0: no FP8 AMP)

	// Exchange.
	ExchangeWordBytes   int // bytes a tile sends per cycle on its own slot
	SupertileSize       int // tiles sharing one exchange bus
	TilesPerColumn      int // tiles in one exchange column
	LatencyBase         int // cycles from send issue to arrival at the nearest tile
	LatencyColumnsPerCy int // one more cycle of latency per this many columns of distance
	SyncCycles          int // cost of one internal barrier
	ExchangeFixedCycles int // fixed cost the cost model charges per exchange phase
	HostBytesPerCycle   int // chip-wide host link bandwidth in bytes per cycle
	// HostBytesPerIssue is what one tile's hin or hout moves per issue
	// slot of its supervisor (model choice): a transfer of b bytes holds
	// the supervisor for max(1, ceil(b / HostBytesPerIssue)) slots.
	HostBytesPerIssue int

	// AMPLaunchCycles is the fixed cost of starting a matrix kernel on a
	// tile, fitted to hardware measurements (cost model only).
	AMPLaunchCycles int
}

// Latency returns the exchange latency in cycles from tile src to tile dst:
// a fixed part plus a part growing with the distance between tile columns.
func (p *Preset) Latency(src, dst int) int {
	cs, cd := src/p.TilesPerColumn, dst/p.TilesPerColumn
	d := cs - cd
	if d < 0 {
		d = -d
	}
	return p.LatencyBase + d/p.LatencyColumnsPerCy
}

// Supertile returns the index of the exchange bus that tile t sends on.
func (p *Preset) Supertile(t int) int { return t / p.SupertileSize }

// Columns is the number of exchange columns.
func (p *Preset) Columns() int {
	return (p.Tiles + p.TilesPerColumn - 1) / p.TilesPerColumn
}

// Element returns the memory element holding the 64-bit word at addr.
// Elements in the non-interleaved region are numbered from 0; the
// interleaved region's elements follow them.
func (p *Preset) Element(addr uint32) int {
	if addr < p.Interleaved.Lo {
		return int((addr - p.Memory.Lo) / p.ElementBytes)
	}
	nonIl := int(p.NonInterleaved.Size() / p.ElementBytes)
	off := addr - p.Interleaved.Lo
	pair := off / (2 * p.ElementBytes)
	return nonIl + int(pair)*2 + int((off/8)&1)
}

// UsableMemory is tile memory less the runtime's reserve at the top.
func (p *Preset) UsableMemory() Range {
	return Range{p.Memory.Lo, p.Memory.Hi - p.RuntimeReserved}
}

// PeakMACs returns the AMP rate for an input type name ("f16", "f8" or
// "f32").
func (p *Preset) PeakMACs(dtype string) int {
	switch dtype {
	case "f8":
		return p.MACsFP8
	case "f32":
		return p.MACsFP32
	}
	return p.MACsFP16
}

// WithTiles returns a copy of p with n tiles, named name.
func (p Preset) WithTiles(name string, n int) *Preset {
	p.Name = name
	p.Tiles = n
	return &p
}

func base() Preset {
	mem := Range{0x4C000, 0xE8000}
	return Preset{
		Workers:             6,
		Memory:              mem,
		Executable:          Range{0x4C000, 0x80000},
		NonInterleaved:      Range{0x4C000, 0x80000},
		Interleaved:         Range{0x80000, 0xE8000},
		ElementBytes:        16 << 10,
		RuntimeReserved:     1104,
		MACsFP32:            16,
		MACsFP16:            64,
		ExchangeWordBytes:   4,
		SupertileSize:       2,
		TilesPerColumn:      46,
		LatencyBase:         10,
		LatencyColumnsPerCy: 3,
		SyncCycles:          90,
		ExchangeFixedCycles: 100,
		HostBytesPerIssue:   16,
		AMPLaunchCycles:     335,
	}
}

var presets = map[string]*Preset{}

func register(p *Preset) { presets[p.Name] = p }

func init() {
	ipu2 := base()
	ipu2.Name = "ipu2"
	ipu2.Tiles = 1472
	ipu2.ClockHz = 1.33e9
	ipu2.HostBytesPerCycle = 48 // 64 GB/s / 1.33 GHz
	register(&ipu2)

	ipu21 := base()
	ipu21.Name = "ipu21"
	ipu21.Tiles = 1472
	ipu21.ClockHz = 1.49e9
	ipu21.MACsFP8 = 128
	ipu21.HostBytesPerCycle = 43 // 64 GB/s / 1.49 GHz
	register(&ipu21)

	// Small presets: the same tile, fewer of them, for fast tests.
	register(ipu21.WithTiles("ipu21-tiny", 4))
	register(ipu21.WithTiles("ipu21-64", 64))
	register(ipu2.WithTiles("ipu2-tiny", 4))
}

// Lookup returns the preset called name.
func Lookup(name string) (*Preset, error) {
	p, ok := presets[name]
	if !ok {
		return nil, fmt.Errorf("unknown architecture %q (known: %s)", name, strings.Join(Names(), ", "))
	}
	cp := *p
	return &cp, nil
}

// MustLookup is Lookup for names known at compile time.
func MustLookup(name string) *Preset {
	p, err := Lookup(name)
	if err != nil {
		panic(err)
	}
	return p
}

// Names lists the presets in sorted order.
func Names() []string {
	var n []string
	for k := range presets {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}
