// Package prog is the device program between lowering and code: the
// supersteps of one inference, each tile's kernel launches with their
// parameters, the exchange transfers, the host transfers, and the
// buffers they read and write. Addresses are buffer references until the
// linker places the buffers (Buffer.Addr), so that the cost model can
// price a program without placing it and the linker can place buffers by
// liveness.
//
// libs/lower builds a Program from a plan; libs/cost prices it (every
// superstep's cycles exactly: kernels from codegen's cost formulas,
// exchanges from sched); libs/link allocates its buffers, emits the code
// and schedules the exchanges.
package prog

import (
	"fmt"
	"sort"
	"sync"

	"ipu.local/formats/obj"
	"ipu.local/libs/arch"
	"ipu.local/libs/codegen"
	"ipu.local/libs/sched"
)

// Region is where a buffer may go.
type Region uint8

// Regions.
const (
	Interleaved    Region = iota // 128-bit loads and AMP B operands work here
	NonInterleaved               // below the interleaved region; code shares it
	AnyRegion                    // wherever there is room (interleaved first)
)

// Buffer is a range of tile memory with one address on every tile of
// Tiles, so that a multicast lands at one address.
type Buffer struct {
	ID     int
	Name   string
	Tiles  []int  // sorted
	Size   uint32 // bytes on each tile (a multiple of 8)
	Align  uint32 // at least 16
	Region Region
	// Data holds constant contents per tile (nil: none). A buffer with
	// data lives for the whole program (it is in the tile images).
	Data map[int][]byte
	// Permanent buffers are never reused (constants, host pages'
	// targets that persist).
	Permanent bool
	// Apart lists buffers this one must not share a 32 KiB interleaved
	// element pair with (the AMP's A operand and its B operand).
	Apart []*Buffer
	// First and Last are the supersteps that first write and last read
	// the buffer (set by Program.Liveness).
	First, Last int
	// Addr is set by the linker's placement.
	Addr uint32
	// Placed reports whether Addr is set.
	Placed bool
	// Promoted marks a buffer of no region (AnyRegion) that a kernel's
	// faster code moved to interleaved memory (lower's wideCasts, which
	// decides again on every lowering).
	Promoted bool
	// markEpoch and mark: the buffer's number for the Marker of that
	// epoch.
	markEpoch uint64
	mark      int32
}

// Ref is an address inside a buffer.
type Ref struct {
	Buf *Buffer
	Off uint32
}

// Addr is the reference's address (once its buffer is placed).
func (r Ref) Addr() uint32 { return r.Buf.Addr + r.Off }

// Add returns r moved by n bytes.
func (r Ref) Add(n int) Ref { return Ref{r.Buf, r.Off + uint32(n)} }

// Fix is an address field of a kernel's parameters: the linker writes
// the reference's address into it once buffers are placed.
type Fix struct {
	Field *uint32
	Ref   Ref
	Write bool // the kernel writes there (else reads)
}

// Kernel is one launch on one tile.
type Kernel struct {
	What string
	// Params is one of *codegen.MatMul, *codegen.Cast,
	// *codegen.Binary, *codegen.Unary, *codegen.Rows, *codegen.Pack,
	// *codegen.Copy, *codegen.Gather, *codegen.RowGather.
	Params any
	Fixes  []Fix
	// RowsRead, for a product kernel (MatMul): its result's
	// rows [0, RowsRead) are all that any reader reads, by the loop
	// bounds of the kernels and transfers reading it; the rows from
	// RowsRead to the padded M are never read (0: unknown, all may be).
	RowsRead int
	cost     *codegen.Cost
	at       [codegen.Slots]int64 // CyclesAt by phase, 0: not yet
	// What the planner's code estimate reads of every kernel, together
	// (one cache line): the passes over a whole program's kernels are
	// bound by their loads.
	//
	// probe is ProbeCode's bytes for the preset probeFor (nil: not yet).
	probe    int64
	probeFor *arch.Preset
	// setEpoch and setTile: the LaunchSet that holds the kernel, on tile
	// setTile (-1: on more than one, in its map).
	setEpoch uint64
	setTile  int
	// workers is cost's Workers plus one (0: not yet; Workers reads it).
	workers int32
}

// CyclesAt is the kernel's Cost().CyclesAt(phase), cached.
func (k *Kernel) CyclesAt(phase int) (int64, error) {
	if c := k.at[phase]; c > 0 {
		return c, nil
	}
	c, err := k.Cost()
	if err != nil {
		return 0, err
	}
	k.at[phase] = c.CyclesAt(phase)
	return k.at[phase], nil
}

// costs caches kernel costs by their parameters, addresses reduced to
// what a cost depends on (nothing, or their place in a 16-byte line for
// Copy and Gather).
var costs sync.Map

// costKey is a kernel's parameters with its addresses reduced.
func (k *Kernel) costKey() any {
	saved := make([]uint32, len(k.Fixes))
	for i, f := range k.Fixes {
		saved[i] = *f.Field
		switch k.Params.(type) {
		case *codegen.Copy, *codegen.Gather, *codegen.RowGather:
			*f.Field = 0x80000 + *f.Field%16
		default:
			*f.Field = 0x80000 // not 0: a kernel may skip an absent array (0)
		}
	}
	key := k.Key()
	for i, f := range k.Fixes {
		*f.Field = saved[i]
	}
	return key
}

// ClearCost forgets the kernel's cached cost (its parameters changed).
func (k *Kernel) ClearCost() {
	k.cost, k.workers = nil, 0
	k.at = [codegen.Slots]int64{}
	k.probeFor = nil
}

// Cost returns the kernel's cost (cached).
func (k *Kernel) Cost() (codegen.Cost, error) {
	if k.cost != nil {
		return *k.cost, nil
	}
	k.provisional()
	key := k.costKey()
	if c, ok := costs.Load(key); ok {
		cc := c.(codegen.Cost)
		k.cost, k.workers = &cc, int32(cc.Workers)+1
		return cc, nil
	}
	var c codegen.Cost
	var err error
	switch p := k.Params.(type) {
	case *codegen.MatMul:
		c, err = p.Cost()
	case *codegen.Cast:
		c, err = p.Cost()
	case *codegen.Binary:
		c, err = p.Cost()
	case *codegen.SumParts:
		c, err = p.Cost()
	case *codegen.Select:
		c, err = p.Cost()
	case *codegen.IntBinary:
		c, err = p.Cost()
	case *codegen.Unary:
		c, err = p.Cost()
	case *codegen.Rows:
		c, err = p.Cost()
	case *codegen.Pack:
		c, err = p.Cost()
	case *codegen.Copy:
		c, err = p.Cost()
	case *codegen.Gather:
		c, err = p.Cost()
	case *codegen.RowGather:
		c, err = p.Cost()
	default:
		return codegen.Cost{}, fmt.Errorf("%s: unknown kernel parameters %T", k.What, k.Params)
	}
	if err != nil {
		return codegen.Cost{}, fmt.Errorf("%s: %w", k.What, err)
	}
	k.cost, k.workers = &c, int32(c.Workers)+1
	costs.Store(key, c)
	return c, nil
}

// Workers is Cost().Workers, kept in the kernel.
func (k *Kernel) Workers() (int, error) {
	if k.workers > 0 {
		return int(k.workers - 1), nil
	}
	c, err := k.Cost()
	return c.Workers, err
}

// provisional gives the address fields of buffers not yet placed
// made-up addresses with their final alignment: every buffer is 16-byte
// aligned, and some kernels' code (Copy, Gather) depends on where in a
// 16-byte line their arrays start.
func (k *Kernel) provisional() {
	base := map[*Buffer]uint32{}
	next := uint32(0x80000)
	for _, f := range k.Fixes {
		if f.Ref.Buf.Placed {
			*f.Field = f.Ref.Addr()
			continue
		}
		b, ok := base[f.Ref.Buf]
		if !ok {
			b = next
			next += (f.Ref.Buf.Size + 31) &^ 15
			base[f.Ref.Buf] = b
		}
		*f.Field = b + f.Ref.Off
	}
}

// Emit emits the kernel into b (its addresses fixed first).
func (k *Kernel) Emit(b *codegen.Builder) (codegen.Kernel, error) {
	var kk codegen.Kernel
	var err error
	switch p := k.Params.(type) {
	case *codegen.MatMul:
		kk, err = codegen.EmitMatMul(b, *p)
	case *codegen.Cast:
		kk, err = codegen.EmitCast(b, *p)
	case *codegen.Binary:
		kk, err = codegen.EmitBinary(b, *p)
	case *codegen.SumParts:
		kk, err = codegen.EmitSumParts(b, *p)
	case *codegen.Select:
		kk, err = codegen.EmitSelect(b, *p)
	case *codegen.IntBinary:
		kk, err = codegen.EmitIntBinary(b, *p)
	case *codegen.Unary:
		kk, err = codegen.EmitUnary(b, *p)
	case *codegen.Rows:
		kk, err = codegen.EmitRows(b, *p)
	case *codegen.Pack:
		kk, err = codegen.EmitPack(b, *p)
	case *codegen.Copy:
		kk, err = codegen.EmitCopy(b, *p)
	case *codegen.Gather:
		kk, err = codegen.EmitGather(b, *p)
	case *codegen.RowGather:
		kk, err = codegen.EmitRowGather(b, *p)
	default:
		return codegen.Kernel{}, fmt.Errorf("%s: unknown kernel parameters %T", k.What, k.Params)
	}
	if err != nil {
		return codegen.Kernel{}, fmt.Errorf("%s: %w", k.What, err)
	}
	return kk, nil
}

// Key identifies the kernel's code (its parameters by value, addresses
// fixed): two launches with one key share their code on a tile.
func (k *Kernel) Key() any {
	switch p := k.Params.(type) {
	case *codegen.MatMul:
		return *p
	case *codegen.Cast:
		return *p
	case *codegen.Binary:
		return *p
	case *codegen.SumParts:
		return *p
	case *codegen.Select:
		return *p
	case *codegen.IntBinary:
		return *p
	case *codegen.Unary:
		return *p
	case *codegen.Rows:
		return *p
	case *codegen.Pack:
		return *p
	case *codegen.Copy:
		return *p
	case *codegen.Gather:
		return *p
	case *codegen.RowGather:
		return *p
	}
	return k
}

// ApplyFixes writes the placed addresses into the parameters.
func (k *Kernel) ApplyFixes() {
	for _, f := range k.Fixes {
		*f.Field = f.Ref.Addr()
	}
}

// Transfer is one exchange stream: Words 32-bit words from Src to each
// of DstN tiles, Dst, Dst+Stride, ... (consecutive when Stride is 0 or 1:
// a strided multicast reaches the copies of a block along a grid's
// second axis with one send).
type Transfer struct {
	Src, Dst, DstN int
	Stride         int
	Words          int
	From, To       Ref
}

// Dests is the number of receiving tiles.
func (x Transfer) Dests() int { return max(x.DstN, 1) }

// Step is the tiles from one receiver to the next (at least 1).
func (x Transfer) Step() int { return max(x.Stride, 1) }

// Last is the last receiving tile.
func (x Transfer) Last() int { return x.Dst + (x.Dests()-1)*x.Step() }

// Sched returns the transfer for the scheduler (addresses placed).
func (x Transfer) Sched() sched.Transfer { return x.SchedAt(x.From.Addr(), x.To.Addr()) }

// SchedAt returns the transfer for the scheduler with its source and
// destination at the addresses given.
func (x Transfer) SchedAt(from, to uint32) sched.Transfer {
	st := 0
	if x.Stride > 1 {
		st = x.Stride
	}
	return sched.Transfer{Src: x.Src, Dst: x.Dst, DstN: x.Dests(), Stride: st, Words: x.Words, SrcAddr: from, DstAddr: to}
}

// HostOp is one host transfer of a tile: hin (In) from page offset Off
// into Ref, or hout from Ref to the page.
type HostOp struct {
	In    bool
	Page  uint8
	Off   uint32
	Ref   Ref
	Bytes uint32
}

// Superstep is one superstep of every tile.
type Superstep struct {
	Kind obj.PhaseKind
	Name string
	// Work: a compute superstep's launches by tile, in order.
	Work map[int][]*Kernel
	// Xfers: an exchange superstep's transfers.
	Xfers []Transfer
	// Host: a host superstep's transfers by tile.
	Host map[int][]HostOp
	// Cycles is the longest tile's cycles without the sync (set by the
	// cost model or the linker).
	Cycles int64
	// Pre and Post are the supervisor's own cycles in a compute
	// superstep before its first launch and after its last, before the
	// sync: a branch's test at the start of each side's first superstep
	// (BranchCycles), the jump past the else side at the end of the then
	// side's last (JumpCycles). Every tile of the program spends them.
	Pre, Post int64
	// Bound caches the cost model's bound of an exchange superstep: nil
	// when not cached; the copies of a superstep a step cache replays
	// share one cell (negative until priced), since the bound depends on
	// the transfers and which addresses are equal, not on their values.
	Bound *int64
}

// NewSuperstep returns an empty superstep.
func NewSuperstep(kind obj.PhaseKind, name string) *Superstep {
	return &Superstep{Kind: kind, Name: name, Work: map[int][]*Kernel{}, Host: map[int][]HostOp{}}
}

// Tiles returns the tiles with work, transfers or host operations in s,
// sorted.
func (s *Superstep) Tiles() []int {
	seen := map[int]bool{}
	for t := range s.Work {
		seen[t] = true
	}
	for t := range s.Host {
		seen[t] = true
	}
	for _, x := range s.Xfers {
		seen[x.Src] = true
		for u := x.Dst; u <= x.Last(); u += x.Step() {
			seen[u] = true
		}
	}
	out := make([]int, 0, len(seen))
	for t := range seen {
		out = append(out, t)
	}
	sort.Ints(out)
	return out
}

// Branch is an If the device branches on. Its condition (a
// one-element bool) is multicast in an exchange superstep to every tile
// of the program; then each tile's supervisor loads it and runs the
// supersteps of one side: Then when it is true, else Else. Every tile
// takes the same side, so the sync counts agree. Each side starts and
// ends with a compute superstep: the test (BranchCycles) is the first
// one's Pre, the then side's jump past the else side (JumpCycles) its
// last one's Post, and the two sides' last supersteps share one sync.
type Branch struct {
	If string // the If node
	// CondTile holds the condition at CondAt (its tensor's storage); every
	// other tile receives it at Cond. CondBytes is its element size.
	CondTile  int
	CondAt    Ref
	Cond      Ref
	CondBytes int
	// Then and Else are the sides' supersteps, [lo, hi) indices into
	// Program.Steps; Else follows Then.
	Then, Else [2]int
}

// The supervisor's store of its cycle counter into the tile's profile
// buffer at the end of every compute superstep, before its sync (or a
// then side's jump): li of the word's address (a tile address, one
// instruction), get of CSR cycles, stm; one issue every codegen.Slots
// cycles. The linker emits it (libs/link profile.go); libs/cost and the
// linker count it in every compute superstep.
const (
	ProfileStoreInstrs = 3
	ProfileStoreCycles = ProfileStoreInstrs * codegen.Slots
)

// LaunchCallInstrs and LaunchCallCycles are what a launch costs beyond
// codegen's CyclesAt: nothing, since the linker expands the runtime's
// launch routine in place (codegen.LaunchCallCycles).
const (
	LaunchCallInstrs = codegen.LaunchCallIssues
	LaunchCallCycles = codegen.LaunchCallCycles
)

// The supervisor's cycles a branch costs: the test (load the address,
// load the word, keep the condition's bits, branch: four instructions)
// and the jump, one instruction, at one issue every codegen.Slots
// cycles.
const (
	BranchInstrs = 4
	BranchCycles = BranchInstrs * codegen.Slots
	JumpCycles   = codegen.Slots
)

// Side returns the branch whose sides hold superstep i, and whether i
// is on its then side (nil when i is outside every branch).
func (p *Program) Side(i int) (b *Branch, then bool) {
	for _, b := range p.Branches {
		switch {
		case i >= b.Then[0] && i < b.Then[1]:
			return b, true
		case i >= b.Else[0] && i < b.Else[1]:
			return b, false
		}
	}
	return nil, false
}

// Longest sums per-superstep cycles c (each with its sync, sync) over
// the longest path: every superstep outside a branch, and for each
// branch the longer side. It also returns each branch's sides' sums.
func (p *Program) Longest(c []int64, sync func(i int) int64) (total int64, sides [][2]int64) {
	sides = make([][2]int64, len(p.Branches))
	idx := map[*Branch]int{}
	for k, b := range p.Branches {
		idx[b] = k
	}
	for i := range p.Steps {
		v := c[i] + sync(i)
		if b, then := p.Side(i); b != nil {
			if then {
				sides[idx[b]][0] += v
			} else {
				sides[idx[b]][1] += v
			}
			continue
		}
		total += v
	}
	for _, s := range sides {
		total += max(s[0], s[1])
	}
	return total, sides
}

// LongerThen reports for each branch whether its then side is the
// longer (or as long) of sides, as Longest returns them.
func LongerThen(sides [][2]int64) []bool {
	out := make([]bool, len(sides))
	for k, s := range sides {
		out[k] = s[0] >= s[1]
	}
	return out
}

// OnPath reports whether superstep i runs when each branch k takes its
// then side exactly when then[k].
func (p *Program) OnPath(i int, then []bool) bool {
	for k, b := range p.Branches {
		switch {
		case i >= b.Then[0] && i < b.Then[1]:
			return then[k]
		case i >= b.Else[0] && i < b.Else[1]:
			return !then[k]
		}
	}
	return true
}

// Program is one inference on the device: host fetch, the compute and
// exchange supersteps, host result.
type Program struct {
	Arch    *arch.Preset
	Steps   []*Superstep
	Buffers []*Buffer
	// Branches are the Ifs the device branches on, in program order;
	// their superstep ranges do not overlap.
	Branches []*Branch
	// Host side: pages, and the graph inputs' and outputs' page layouts.
	Pages   []obj.Page
	Inputs  []obj.Tensor
	Outputs []obj.Tensor
	// PadClearsRemoved counts the FP8 casts (packs) whose padding clears
	// the padding-clear pass removed (libs/lower padclear.go).
	PadClearsRemoved int
	// Alias maps a buffer that steps replayed from a step cache read
	// (or write) to the buffer of this program it stands for (libs/lower
	// cache.go): Liveness counts an access to the one as one to the
	// other. Nil without a cache.
	Alias map[*Buffer]*Buffer
}

// Canonical returns the buffer of p that b stands for (Alias).
func (p *Program) Canonical(b *Buffer) *Buffer {
	for n := 0; p.Alias != nil && n < len(p.Alias); n++ {
		a, ok := p.Alias[b]
		if !ok {
			break
		}
		b = a
	}
	return b
}

// NewBuffer adds a buffer of size bytes on tiles.
func (p *Program) NewBuffer(name string, tiles []int, size int, align uint32, region Region) *Buffer {
	b := &Buffer{ID: len(p.Buffers), Name: name, Tiles: tiles, Size: uint32(size+7) &^ 7, Align: max(align, 16), Region: region}
	p.Buffers = append(p.Buffers, b)
	return b
}

// TileSet returns the sorted distinct tiles of ts.
func TileSet(ts []int) []int {
	out := append([]int(nil), ts...)
	sort.Ints(out)
	k := 0
	for i, t := range out {
		if i == 0 || t != out[k-1] {
			out[k] = t
			k++
		}
	}
	return out[:k]
}

// Liveness sets every buffer's First and Last supersteps from the
// kernels, transfers and host operations that touch it; permanent
// buffers and buffers with data span the whole program.
func (p *Program) Liveness() {
	for _, b := range p.Buffers {
		b.First, b.Last = -1, -1
	}
	for a := range p.Alias {
		a.First, a.Last = -1, -1
	}
	touch := func(b *Buffer, i int) {
		if b.First < 0 || i < b.First {
			b.First = i
		}
		if i > b.Last {
			b.Last = i
		}
	}
	for i, s := range p.Steps {
		for _, ks := range s.Work {
			for _, k := range ks {
				for _, f := range k.Fixes {
					touch(f.Ref.Buf, i)
				}
			}
		}
		for _, x := range s.Xfers {
			touch(x.From.Buf, i)
			touch(x.To.Buf, i)
		}
		for _, ops := range s.Host {
			for _, op := range ops {
				touch(op.Ref.Buf, i)
			}
		}
	}
	// An alias's accesses are those of the buffer it stands for (min
	// and max: in any order).
	for a := range p.Alias {
		if c := p.Canonical(a); a.First >= 0 && c != a {
			touch(c, a.First)
			touch(c, a.Last)
		}
	}
	for _, b := range p.Buffers {
		if b.Permanent || b.Data != nil || b.First < 0 {
			b.First, b.Last = 0, len(p.Steps)
		}
	}
}
