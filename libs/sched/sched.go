// Package sched lowers one BSP exchange phase to tile code: it gives every
// transfer a send cycle, so that each word arrives exactly when its
// receiver listens, and emits for every tile involved a straight-line
// supervisor sequence (li/lih, delay, send/send2/recv, sync) that issues
// each instruction at its planned cycle under the simulator's timing.
//
// # Timing model
//
// The sequence starts at the superstep's cycle 0 (the first instruction
// after the previous barrier) with no worker running, so the supervisor
// issues at most once every 6 cycles and `delay n` moves the next issue n
// cycles later: two consecutive instructions issue 6 cycles apart, or 12+n
// with a delay n between them. A gap of G cycles between two events
// therefore holds m load instructions when G = 6(m+1) or G >= 6(m+2); a
// send that meets a busy port stalls until it frees, which also lets it
// issue at the port's free cycle from any earlier attempt. A send of w
// words occupies the port and one supertile bus slot for w cycles (send2:
// both slots for w/2 cycles); a destination u hears word k at send +
// k + Latency(src, u) and its recv must issue at the first word's
// arrival; one receiver hears one stream at a time.
//
// # Algorithm
//
// A list scheduler in time: every transfer's earliest feasible send cycle
// (sender port, sender and receiver issue timing with the loads their
// registers need, receivers' listening, the bus) sits in a lazy priority
// queue; the transfer with the earliest start (ties: the most loaded of
// its tiles, then the longer transfer) is committed, the others are
// re-evaluated when popped. Each tile's events are thus appended in time
// order. Registers are a per-tile cache of values ($mzero serves 0; a
// new value evicts one no pending event reads, else the least recently
// used); a load that does not fit in the gap before its event is hoisted
// into an earlier gap with spare issue slots whose register is free by
// then. A transfer of an even word count uses send2 when that ends it
// sooner and no other tile of the supertile has a send pending that
// could start meanwhile. Schedule runs a few such passes with other tie
// and send2 rules (Options.Passes) and keeps the shortest. One pass
// compares starts in 32-cycle steps and serves the most loaded tiles
// first within a step: on an all-gather among a group of tiles, where
// every multicast reaches nearly the whole group, the earliest start
// lets whichever transfer is free go first and leaves the busiest
// receivers idle later (strategies).
//
// Each pass is a fast schedule followed by instruction-alignment
// validation (align.go): the fast schedule lets an event issue any cycle
// from 6(m+1) after the previous one (m loads between), ignoring that the
// supervisor issues only on its slot of the 6-cycle round-robin, so that
// a gap of 6(m+1)+1 .. 6(m+2)-1 cycles cannot be met; every transfer is
// then replayed under the exact rule (and its addresses checked for
// alignment), the failing ones and every transfer planned after them on
// their tiles (transitively) are rescheduled exactly while the others
// keep their cycles, and the rescheduled tiles are validated again until
// the schedule holds; when those would be nearly the whole phase, the
// pass's exact schedule (made for comparison anyway) is the retry.
// ScheduleStats reports the figures (AlignStats).
//
// Validate replays a Plan's code against the simulator's rules in plain
// Go; see RATIONALE.md for the rules that shaped the design.
package sched

import (
	"cmp"
	"fmt"
	"slices"
	"sort"

	"ipu.local/libs/arch"
	"ipu.local/libs/codegen"
	"ipu.local/libs/isa"
)

// Transfer is one stream of an exchange phase: Words 32-bit words from
// SrcAddr on tile Src to DstAddr on each of DstN tiles, Dst, Dst+Stride,
// Dst+2*Stride, ... (consecutive tiles when Stride is 0 or 1).
type Transfer struct {
	Src     int
	Dst     int    // first receiving tile
	DstN    int    // receiving tiles (a multicast when > 1); 0 means 1
	Stride  int    // tiles from one receiver to the next; 0 means 1
	Words   int    // >= 1
	SrcAddr uint32 // 4-aligned, at the sender
	DstAddr uint32 // 4-aligned, the same at every receiver
}

// Dests returns the number of receiving tiles.
func (x Transfer) Dests() int {
	if x.DstN == 0 {
		return 1
	}
	return x.DstN
}

// Step returns the tiles from one receiver to the next (at least 1).
func (x Transfer) Step() int { return max(x.Stride, 1) }

// DestAt returns the k-th receiving tile.
func (x Transfer) DestAt(k int) int { return x.Dst + k*x.Step() }

// Last returns the last receiving tile.
func (x Transfer) Last() int { return x.DestAt(x.Dests() - 1) }

// IndexOf returns k of the receiving tile u = DestAt(k).
func (x Transfer) IndexOf(u int) int { return (u - x.Dst) / x.Step() }

// Receives reports whether tile u is one of the receivers.
func (x Transfer) Receives(u int) bool {
	return u >= x.Dst && u <= x.Last() && (u-x.Dst)%x.Step() == 0
}

// Options tune Schedule.
type Options struct {
	// NoSend2 never uses send2 (by default an even transfer uses both bus
	// slots of its supertile when that finishes it earlier).
	NoSend2 bool
	// EarlySync lets a tile sync before its last word has arrived or its
	// send port has drained: the simulator keeps windows open across the
	// barrier. By default every tile syncs after its own traffic is over,
	// so the phase's cycles cover the exchange.
	EarlySync bool
	// Regs is the set of $m registers the code may use (bit i: $mi);
	// 0 means $m0..$m14. At least 3 are needed; $m15 reads as zero and
	// serves the value 0 whatever the set.
	Regs uint16
	// Passes is the number of greedy passes, each with other tie-breaks,
	// of which Schedule keeps the shortest; 0 means DefaultPasses.
	Passes int
	// MayAlias: the addresses are made up (a cost model's, before
	// placement, which wraps them round the memory), so two transfers
	// writing the same bytes of a tile are not an error.
	MayAlias bool
}

// DefaultRegs is every writable $m register.
const DefaultRegs = 0x7FFF

func (o Options) regs() uint16 {
	if o.Regs == 0 {
		return DefaultRegs
	}
	return o.Regs
}

// Plan is a scheduled exchange phase.
type Plan struct {
	// Tiles holds the code of every tile the phase involves, by tile.
	Tiles []TileCode
	// Makespan is the phase's cycles: the largest tile's sync issue
	// cycle + 1, as the simulator counts a superstep.
	Makespan int64
	// LowerBound is a bound no schedule of the phase can beat under
	// the same options (see Bound).
	LowerBound int64
	// Events holds the timing of every transfer, in phase order.
	Events []Event
	// Options are the options the plan was made with.
	Options Options
}

// TileCode is one tile's exchange code.
type TileCode struct {
	Tile int
	// Code is straight-line supervisor code ending with sync. It
	// assumes its first instruction issues at the superstep's cycle 0
	// with no worker running, and clobbers the registers of
	// Options.Regs.
	Code []isa.Inst
	// Cycles is the tile's superstep cycles: its sync's issue cycle + 1.
	Cycles int64
	// Table is the patch table of code Compress made: the per-iteration
	// operand values its repeat loops load (ldm with post-increment), in
	// order. Each instruction of TableLoads is the li of the address of
	// one loop's values: TableAt plus 4 times their index in Table.
	// Straight-line code has none (Table nil).
	Table      []uint32
	TableAt    uint32
	TableLoads []int
}

// Emit appends the tile's code to b. Code with a patch table loads the
// label tableWord(i) returns for Table's word i instead of its address;
// the caller emits the table there (EmitTable), outside the instruction
// stream.
func (c *TileCode) Emit(b *codegen.Builder, tableWord func(i int) codegen.Label) {
	k := 0
	for i, in := range c.Code {
		if k < len(c.TableLoads) && i == c.TableLoads[k] {
			k++
			b.LoadLabel(codegen.MReg(in.D), tableWord(int((uint32(in.Imm)-c.TableAt)/4)))
			continue
		}
		b.Emit(in)
	}
}

// EmitTable appends the patch table to b as data words, binding the
// label of word i (at(i), or -1: none) where it lands.
func (c *TileCode) EmitTable(b *codegen.Builder, at func(i int) codegen.Label) {
	for i, w := range c.Table {
		if l := at(i); l >= 0 {
			b.Bind(l)
		}
		b.Word(w)
	}
}

// Tile returns the code of tile t, or nil when the phase does not involve
// it.
func (pl *Plan) Tile(t int) *TileCode {
	i := sort.Search(len(pl.Tiles), func(i int) bool { return pl.Tiles[i].Tile >= t })
	if i < len(pl.Tiles) && pl.Tiles[i].Tile == t {
		return &pl.Tiles[i]
	}
	return nil
}

// Event is when one transfer happens.
type Event struct {
	// Send is the issue cycle of the send (send2 when Pair).
	Send int64
	Pair bool
	// Cycles is how long the stream lasts: Words, or Words/2 for send2.
	Cycles int64
	// Arrive[i] is the cycle the first word reaches tile DestAt(i), which
	// is also the cycle that tile's recv issues; the last word arrives
	// Cycles-1 later.
	Arrive []int64
}

// issue is the supervisor's issue period (isa: a context issues at most
// once every 6 cycles).
const issue = 6

// maxDelay is the largest delay immediate.
const maxDelay = 1<<20 - 1

// maxTransfers and maxReceptions (transfers times their destinations)
// bound the phase size Schedule accepts.
const (
	maxTransfers  = 1 << 22
	maxReceptions = 1 << 24
)

// Check returns the error Schedule would return for the phase before
// scheduling it: tiles, ranges, alignment, no tile sending to itself, no
// two transfers writing the same bytes of a tile, the options.
func Check(p *arch.Preset, phase []Transfer, opt Options) error { return check(p, phase, opt) }

// check validates the options and the phase against the preset.
func check(p *arch.Preset, phase []Transfer, opt Options) error {
	if p == nil {
		return fmt.Errorf("sched: no architecture preset")
	}
	if p.Tiles <= 0 || p.Tiles > 1<<16 || p.SupertileSize < 1 || p.TilesPerColumn < 1 || p.LatencyColumnsPerCy < 1 {
		return fmt.Errorf("sched: preset %q: unusable exchange geometry", p.Name)
	}
	if opt.Regs&0x8000 != 0 {
		return fmt.Errorf("sched: options: register set %#x includes $m15", opt.Regs)
	}
	if n := popcount(opt.regs()); n < 3 {
		return fmt.Errorf("sched: options: register set %#x has %d registers, need 3", opt.Regs, n)
	}
	if len(phase) > maxTransfers {
		return fmt.Errorf("sched: %d transfers exceed the limit of %d", len(phase), maxTransfers)
	}
	maxWords := int(p.Memory.Size() / 4)
	receptions := 0
	for i, x := range phase {
		if x.Src < 0 || x.Src >= p.Tiles {
			return fmt.Errorf("sched: transfer %d: source tile %d outside the %d tiles of %s", i, x.Src, p.Tiles, p.Name)
		}
		if x.DstN < 0 || x.DstN > 0xFFFF {
			return fmt.Errorf("sched: transfer %d: %d destination tiles (want 0..65535)", i, x.DstN)
		}
		n := x.Dests()
		if x.Stride < 0 || x.Stride > isa.MaxSendStride {
			return fmt.Errorf("sched: transfer %d: destination stride %d (want 0..%d)", i, x.Stride, isa.MaxSendStride)
		}
		if x.Dst < 0 || x.Last() >= p.Tiles {
			if x.Step() == 1 {
				return fmt.Errorf("sched: transfer %d: destination tiles [%d, %d) outside the %d tiles of %s", i, x.Dst, x.Dst+n, p.Tiles, p.Name)
			}
			return fmt.Errorf("sched: transfer %d: destination tiles %d to %d every %d outside the %d tiles of %s", i, x.Dst, x.Last(), x.Step(), p.Tiles, p.Name)
		}
		if receptions += n; receptions > maxReceptions {
			return fmt.Errorf("sched: transfer %d: the phase's destinations exceed the limit of %d receptions", i, maxReceptions)
		}
		if x.Receives(x.Src) {
			return fmt.Errorf("sched: transfer %d: tile %d sends to itself (a tile hears its own send %d cycles later, which no issue sequence meets; copy locally)", i, x.Src, p.Latency(x.Src, x.Src))
		}
		if x.Words < 1 || x.Words > min(maxWords, isa.MaxSendWords) {
			return fmt.Errorf("sched: transfer %d: %d words (want 1..%d)", i, x.Words, min(maxWords, isa.MaxSendWords))
		}
		for _, a := range []struct {
			what string
			addr uint32
		}{{"source", x.SrcAddr}, {"destination", x.DstAddr}} {
			if a.addr%4 != 0 {
				return fmt.Errorf("sched: transfer %d: %s address %#x not 4-byte aligned", i, a.what, a.addr)
			}
			if !p.Memory.Contains(a.addr, 4*uint32(x.Words)) {
				return fmt.Errorf("sched: transfer %d: %s [%#x, %#x) outside tile memory [%#x, %#x)", i, a.what, a.addr, uint64(a.addr)+4*uint64(x.Words), p.Memory.Lo, p.Memory.Hi)
			}
		}
	}
	if opt.MayAlias {
		return nil
	}
	return checkOverlap(phase, p.Tiles)
}

// checkOverlap rejects two transfers writing the same bytes of one tile:
// the phase would have no single meaning.
func checkOverlap(phase []Transfer, tiles int) error {
	type buf struct {
		lo, hi uint32
		x      int
	}
	bufs := newBuckets[buf](tiles)
	for _, x := range phase {
		for k := range x.Dests() {
			bufs.count(x.DestAt(k), 1)
		}
	}
	bufs.alloc()
	for i, x := range phase {
		for k := range x.Dests() {
			bufs.put(x.DestAt(k), buf{x.DstAddr, x.DstAddr + 4*uint32(x.Words), i})
		}
	}
	for t := range tiles {
		bs := bufs.of(t)
		slices.SortFunc(bs, func(a, b buf) int {
			if a.lo != b.lo {
				return cmp.Compare(a.lo, b.lo)
			}
			return cmp.Compare(a.x, b.x)
		})
		for i := 1; i < len(bs); i++ {
			if a, b := bs[i-1], bs[i]; b.lo < a.hi {
				return fmt.Errorf("sched: transfers %d and %d both write tile %d at %#x", min(a.x, b.x), max(a.x, b.x), t, b.lo)
			}
		}
	}
	return nil
}

func popcount(m uint16) int {
	n := 0
	for ; m != 0; m &= m - 1 {
		n++
	}
	return n
}

// FragmentLimit is the most fragments (stream ends: a send or a
// reception) a tile's exchange code can hold over a program: each takes
// at least one instruction, and the code must lie in the executable
// range. The planner rejects candidates beyond it and the linker refuses
// them.
func FragmentLimit(p *arch.Preset) int { return int(p.Executable.Size() / 4) }
