package sim

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"runtime/debug"
	"sort"
	"sync"
	"sync/atomic"

	"ipu.local/libs/arch"
	"ipu.local/libs/isa"
)

const (
	numWorkers = 6 // worker contexts, and issue slots per tile
	supCtx     = 6 // context index of the supervisor
	numCtx     = 7

	fp8Mask = 1<<17 - 1 // defined bits of CSR fp8

	never = int64(math.MaxInt64)
)

// Machine simulates every tile of one preset. Memory belongs to the caller
// (the mem function of New); the Machine holds everything else.
type Machine struct {
	p   *arch.Preset
	mem func(tile int) []byte
	opt Options

	tiles    []tile
	mark     int
	watchdog int64
	faulted  bool // a fault stopped the device; Load or Reset revive it

	progs *codeIndex // predecoded code, shared by identical tiles
	file  TileFile   // the memory's file, when UseFile gave one

	hostMu sync.Mutex // Host methods are never called concurrently
	host   Host

	xs exchangeScratch // the exchange resolution's, reused across supersteps
}

// context is one hardware thread's architectural state.
type context struct {
	m, a    [16]uint32
	pc      uint32
	fp8     uint32
	running bool // workers only

	// Repeat loop: while loopOn, reaching loopEnd with loopRem > 1 jumps
	// back to loopStart.
	loopOn             bool
	loopStart, loopEnd uint32
	loopRem            uint32
	forbid             uint8 // inst flags this context refuses (set while running)

	acc [64]float32 // AMP accumulator, row-major 4x16 (workers)
}

// tile is one tile's state and the record of its current superstep.
type tile struct {
	active   bool
	halted   bool
	atHsync  bool  // waiting at hsync for the next Run
	hsyncReg uint8 // the hsync's destination register
	fp8Init  uint32
	exec     arch.Range // RegExecLo, RegExecHi: the tile's executable range
	inSync   bool       // RegSyncGroup
	inXchg   bool       // RegExchange
	entry    uint32     // RegEntry, when entrySet
	entrySet bool
	prog     *program
	ctx      [numCtx]context

	res tileRun // what the tile did in the current superstep
}

// New returns a machine for preset p. mem returns tile t's memory: len
// p.Memory.Size(), address p.Memory.Lo at index 0.
func New(p *arch.Preset, mem func(tile int) []byte, opt Options) *Machine {
	m := &Machine{p: p, mem: mem, opt: opt}
	m.Reset()
	return m
}

// Reset makes every tile inactive, powered off, and forgets the
// configuration.
func (m *Machine) Reset() {
	m.tiles = make([]tile, m.p.Tiles)
	for i := range m.tiles {
		if m.opt.RequireConfig {
			// Empty until RegExecLo and RegExecHi are written.
			m.tiles[i].exec = arch.Range{Lo: m.p.Executable.Lo, Hi: m.p.Executable.Lo}
		} else {
			m.tiles[i].exec = m.p.Executable
			m.tiles[i].inSync = true
			m.tiles[i].inXchg = true
		}
	}
	m.mark = 0
	m.watchdog = DefaultWatchdog
	m.faulted = false
	m.progs = newCodeIndex(m.p.Memory.Lo)
	m.xs = exchangeScratch{}
}

// Mark is the number of barriers (sync or hsync) completed since load.
func (m *Machine) Mark() int { return m.mark }

// Active reports whether tile runs a program.
func (m *Machine) Active(tile int) bool {
	return tile >= 0 && tile < len(m.tiles) && m.tiles[tile].active
}

// Load places img in tile's memory, records its code segments and resets
// the tile: every context zeroed, CSR fp8 from RegFP8, the supervisor at
// RegEntry when it was written, else at img.Entry, the tile active. Every
// code segment must lie in the tile's executable range (RegExecLo,
// RegExecHi).
func (m *Machine) Load(tileIdx int, img Image) error {
	mem, code, err := m.place(tileIdx, img, true)
	if err != nil {
		return err
	}
	m.tiles[tileIdx].prog = m.predecode(mem, code)
	return nil
}

// Configure performs a device register write, validating the register
// and its value.
func (m *Machine) Configure(tileIdx int, reg, value uint32) error {
	switch reg {
	case RegWatchdog:
		if value == 0 {
			m.watchdog = DefaultWatchdog
		} else {
			m.watchdog = int64(value)
		}
		return nil
	case RegEntry, RegFP8, RegExecLo, RegExecHi, RegSyncGroup, RegExchange:
	default:
		return fmt.Errorf("configure: unknown register %#x", reg)
	}
	if tileIdx < 0 || tileIdx >= len(m.tiles) {
		return fmt.Errorf("configure: register %s: tile %d out of range (%d tiles)", RegName(reg), tileIdx, len(m.tiles))
	}
	t := &m.tiles[tileIdx]
	switch reg {
	case RegEntry:
		if value%4 != 0 || !m.p.Executable.Contains(value, 4) {
			return fmt.Errorf("configure: register %s: value %#x is not a 4-aligned address in the executable range %s", RegName(reg), value, hexRange(m.p.Executable))
		}
		t.entry, t.entrySet = value, true
		t.ctx[supCtx].pc = value
		t.active = true
		t.halted = false
	case RegFP8:
		if value&^fp8Mask != 0 {
			return fmt.Errorf("configure: fp8 value %#x sets undefined bits %#x", value, value&^fp8Mask)
		}
		t.fp8Init = value
		for i := range t.ctx {
			t.ctx[i].fp8 = value
		}
	case RegExecLo, RegExecHi:
		if value%4 != 0 || value < m.p.Executable.Lo || value > m.p.Executable.Hi {
			return fmt.Errorf("configure: register %s: value %#x is not a 4-aligned address in the executable range %s", RegName(reg), value, hexRange(m.p.Executable))
		}
		ex := t.exec
		if reg == RegExecLo {
			ex.Lo = value
		} else {
			ex.Hi = value
		}
		if t.prog != nil {
			for _, c := range t.prog.code {
				if c.Lo < ex.Lo || c.Hi > ex.Hi {
					return fmt.Errorf("configure: register %s: value %#x leaves the loaded code [%#x, %#x) outside the executable range", RegName(reg), value, c.Lo, c.Hi)
				}
			}
		}
		t.exec = ex
	case RegSyncGroup:
		if value > 1 {
			return fmt.Errorf("configure: register %s: value %#x is neither 0 nor 1", RegName(reg), value)
		}
		t.inSync = value == 1
	case RegExchange:
		if value > 1 {
			return fmt.Errorf("configure: register %s: value %#x is neither 0 nor 1", RegName(reg), value)
		}
		t.inXchg = value == 1
	}
	return nil
}

// Snapshot returns tile's architectural state (zero for a tile out of
// range). The accumulator's NaNs read as 0x7fc00000.
func (m *Machine) Snapshot(tileIdx int) TileSnapshot {
	var s TileSnapshot
	if tileIdx < 0 || tileIdx >= len(m.tiles) {
		return s
	}
	t := &m.tiles[tileIdx]
	s.Active, s.Halted = t.active, t.halted
	for i := range t.ctx {
		c := &t.ctx[i]
		cs := &s.Ctx[i]
		cs.M, cs.A, cs.PC, cs.FP8 = c.m, c.a, c.pc, c.fp8
		if i < numWorkers {
			cs.Running = c.running
			for j, v := range c.acc {
				cs.Acc[j] = bits32(v)
			}
		} else {
			cs.Running = t.active && !t.halted
		}
	}
	return s
}

func (m *Machine) tileMem(t int) ([]byte, error) {
	mem := m.mem(t)
	if uint64(len(mem)) != uint64(m.p.Memory.Size()) {
		return nil, fmt.Errorf("tile %d memory is %d bytes, want %d", t, len(mem), m.p.Memory.Size())
	}
	return mem, nil
}

func (m *Machine) parallel() int {
	if m.opt.Parallel > 0 {
		return m.opt.Parallel
	}
	return runtime.GOMAXPROCS(0)
}

func hexRange(r arch.Range) string { return fmt.Sprintf("[%#x, %#x)", r.Lo, r.Hi) }

// mergeRanges sorts rs and merges touching or overlapping ranges.
func mergeRanges(rs []arch.Range) []arch.Range {
	sort.Slice(rs, func(i, j int) bool { return rs[i].Lo < rs[j].Lo })
	var out []arch.Range
	for _, r := range rs {
		if n := len(out); n > 0 && r.Lo <= out[n-1].Hi {
			if r.Hi > out[n-1].Hi {
				out[n-1].Hi = r.Hi
			}
			continue
		}
		out = append(out, r)
	}
	return out
}

// Run resumes every active tile (the supervisors waiting at hsync receive
// command in their hsync register) and runs supersteps until every active
// tile waits at hsync or has halted. A device fault is returned as a
// *Fault, together with the phases completed before it.
func (m *Machine) Run(host Host, command uint32) (*RunResult, error) {
	res := &RunResult{}
	if m.faulted {
		return res, &Fault{Kind: FaultNotRunnable, Tile: -1, Context: -1, Phase: m.mark, Detail: "a previous fault stopped the device; load it again"}
	}
	anyActive, anyRunnable := false, false
	for i := range m.tiles {
		t := &m.tiles[i]
		if t.active {
			anyActive = true
			if !t.halted {
				anyRunnable = true
			}
		}
	}
	if !anyActive {
		return res, &Fault{Kind: FaultNotRunnable, Tile: -1, Context: -1, Phase: m.mark, Detail: "no tile is loaded"}
	}
	if !anyRunnable {
		return res, nil
	}
	for i := range m.tiles {
		t := &m.tiles[i]
		if t.active && !t.halted && t.atHsync {
			t.ctx[supCtx].m[t.hsyncReg&15] = command
			t.ctx[supCtx].m[15] = 0
			t.atHsync = false
		}
	}
	m.host = host
	defer func() { m.host = nil }()
	var list []int
	for {
		list = list[:0]
		for i := range m.tiles {
			if t := &m.tiles[i]; t.active && !t.halted {
				list = append(list, i)
			}
		}
		if len(list) == 0 {
			return res, nil
		}
		limit := m.opt.MaxSupersteps
		if limit <= 0 {
			limit = DefaultMaxSupersteps
		}
		if maxSupersteps > 0 {
			limit = maxSupersteps
		}
		if len(res.Phases) >= limit {
			m.faulted = true
			return res, &Fault{Kind: FaultWatchdog, Tile: -1, Context: -1, Phase: m.mark,
				Detail: fmt.Sprintf("%d supersteps in one run without reaching hsync or halt", limit)}
		}
		st, f := m.superstep(list, res)
		if f != nil {
			m.faulted = true
			return res, f
		}
		res.Phases = append(res.Phases, st.stats)
		res.Cycles += st.stats.Cycles + st.stats.SyncCycles
		if st.atSync == 0 && st.atHsync == 0 {
			return res, nil
		}
		if st.atSync == 0 {
			res.AtHost = true
			return res, nil
		}
	}
}

// stepOutcome sums up how a superstep ended.
type stepOutcome struct {
	stats           PhaseStats
	atSync, atHsync int
}

// superstep runs the tiles in list to their barriers, resolves the
// exchange and the host writes, and passes the barrier.
func (m *Machine) superstep(list []int, res *RunResult) (stepOutcome, *Fault) {
	phase := m.mark
	m.runTiles(list, phase)

	var out stepOutcome
	st := &out.stats
	st.Phase = phase
	st.TileCycles = make([]int64, len(m.tiles))
	st.ExchangeBytes = make([]int64, len(m.tiles))
	var best faultCand
	for _, i := range list {
		r := &m.tiles[i].res
		st.TileCycles[i] = r.cycles
		st.ExchangeBytes[i] = r.exchBytes
		st.HostBytes += r.hostBytes
		st.Instructions += r.instrs
		if r.cycles > st.Cycles {
			st.Cycles = r.cycles
		}
		if r.fault != nil {
			best.offer(r.fault, 0, 0)
		}
		res.Samples = append(res.Samples, r.samples...)
	}
	if m.p.HostBytesPerCycle > 0 && st.HostBytes > 0 {
		hc := (st.HostBytes + int64(m.p.HostBytesPerCycle) - 1) / int64(m.p.HostBytesPerCycle)
		if hc > st.Cycles {
			st.Cycles = hc
		}
	}
	// The superstep lasts until the exchange has delivered its last word:
	// the barrier cannot complete while words are in flight.
	for _, i := range list {
		for _, sd := range m.tiles[i].res.sends {
			if sd.n == 0 {
				continue
			}
			words := int64(sd.n)
			if sd.pair {
				words = (words + 1) / 2
			}
			leave := sd.t + words - 1
			for k, u := uint32(0), int(sd.dstLo); k < sd.dstN; k, u = k+1, u+int(sd.dstStride) {
				if c := leave + int64(m.p.Latency(i, u)) + 1; c > st.Cycles {
					st.Cycles = c
				}
			}
		}
	}
	m.applyHostWrites(list, phase, &best)
	m.checkBus(list, phase, &best)
	exchanged := m.gatherArrivals(list)
	if exchanged {
		m.resolveExchange(phase, &best, false)
	}
	if best.f != nil {
		res.Phases = append(res.Phases, *st)
		res.Cycles += st.Cycles
		return out, best.f
	}
	// Barrier kinds: every tile in list is at sync, hsync or halted.
	firstHsync := -1
	for _, i := range list {
		switch m.tiles[i].res.barrier {
		case barSync:
			out.atSync++
		case barHsync:
			out.atHsync++
			if firstHsync < 0 {
				firstHsync = i
			}
		}
	}
	for _, i := range list {
		t := &m.tiles[i]
		if r := &t.res; (r.barrier == barSync || r.barrier == barHsync) && !t.inSync {
			f := &Fault{Kind: FaultSync, Tile: i, Context: supCtx, PC: r.barrierPC, Phase: phase, Cycle: r.cycles - 1,
				Detail: fmt.Sprintf("tile %d is not a member of the sync group (register %s is 0)", i, RegName(RegSyncGroup))}
			res.Phases = append(res.Phases, *st)
			res.Cycles += st.Cycles
			return out, f
		}
	}
	if out.atSync > 0 && out.atHsync > 0 {
		r := &m.tiles[firstHsync].res
		f := &Fault{Kind: FaultSync, Tile: firstHsync, Context: supCtx, PC: r.barrierPC, Phase: phase, Cycle: r.cycles - 1,
			Detail: fmt.Sprintf("tile waits at hsync while %d tiles wait at sync", out.atSync)}
		res.Phases = append(res.Phases, *st)
		res.Cycles += st.Cycles
		return out, f
	}
	if exchanged {
		m.resolveExchange(phase, &best, true)
	}
	for _, i := range list {
		t := &m.tiles[i]
		switch t.res.barrier {
		case barHalt:
			t.halted = true
		case barHsync:
			t.atHsync = true
			t.hsyncReg = t.res.hsyncReg
		}
	}
	if out.atSync > 0 || out.atHsync > 0 {
		m.mark++
		st.SyncCycles = int64(m.p.SyncCycles)
	}
	return out, nil
}

// runTiles runs every tile of list through one superstep, on up to
// parallel() goroutines. Tiles share nothing while they run.
func (m *Machine) runTiles(list []int, phase int) {
	// Sixteen chunks a goroutine: a superstep ends with its last chunk,
	// so smaller ones leave the other goroutines idle for less. The
	// 12-layer encoder's check, one inference: 12.8-13.5 s against
	// 13.8 s with four (64 were no better).
	par := max(1, min(m.parallel(), len(list)))
	chunk := max(1, len(list)/(par*16))
	// A page of tile memory that the host cannot provide (the device
	// file's disk is full) faults as a panic that runTileSafe catches,
	// not as a crash of the process.
	m.inParts((len(list)+chunk-1)/chunk, func(k int) {
		for _, i := range list[k*chunk : min((k+1)*chunk, len(list))] {
			m.runTileSafe(i, phase)
		}
	})
}

// inParts calls fn(k) for every k in [0, parts): on the calling
// goroutine when m.parallel() is 1, else on up to m.parallel()
// goroutines that take the parts in order as they free up, each with a
// memory fault turned into a panic (debug.SetPanicOnFault) for fn to
// recover.
func (m *Machine) inParts(parts int, fn func(k int)) {
	par := min(m.parallel(), parts)
	if par <= 1 {
		for k := range parts {
			fn(k)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range par {
		wg.Add(1)
		go func() {
			defer wg.Done()
			debug.SetPanicOnFault(catchPanics)
			for k := int(next.Add(1)) - 1; k < parts; k = int(next.Add(1)) - 1 {
				fn(k)
			}
		}()
	}
	wg.Wait()
}

// maxSupersteps, when > 0, bounds the supersteps of one Run: tests set it,
// since a program may sync forever.
var maxSupersteps = 0

// catchPanics turns a simulator bug into a fault instead of a crash; the
// fuzz test turns it off to see the bug.
var catchPanics = true

func (m *Machine) runTileSafe(i, phase int) {
	if catchPanics {
		defer func() {
			if e := recover(); e != nil {
				r := &m.tiles[i].res
				detail := fmt.Sprintf("internal simulator error: %v", e)
				if f, ok := e.(interface{ Addr() uintptr }); ok && f.Addr() != 0 {
					detail = fmt.Sprintf("host memory fault at %#x: the tile memory's backing store failed (a device file on a full disk?)", f.Addr())
				}
				r.fault = &Fault{Kind: FaultInvalid, Tile: i, Context: -1, Phase: phase, Cycle: r.cycles, Detail: detail}
			}
		}()
	}
	m.runTile(i, phase)
}

// faultCand keeps the earliest fault offered: smallest cycle, then tile,
// then class (0 execution, 1 host write, 2 bus, 3 exchange), then aux
// (the receiving tile of an exchange fault).
type faultCand struct {
	f          *Fault
	class, aux int
}

func (b *faultCand) offer(f *Fault, class, aux int) {
	if b.f == nil {
		*b = faultCand{f, class, aux}
		return
	}
	g := b.f
	switch {
	case f.Cycle != g.Cycle:
		if f.Cycle > g.Cycle {
			return
		}
	case f.Tile != g.Tile:
		if f.Tile > g.Tile {
			return
		}
	case class != b.class:
		if class > b.class {
			return
		}
	case aux >= b.aux:
		return
	}
	*b = faultCand{f, class, aux}
}

// applyHostWrites performs the superstep's hout writes in tile order, then
// issue order.
func (m *Machine) applyHostWrites(list []int, phase int, best *faultCand) {
	for _, i := range list {
		r := &m.tiles[i].res
		for _, h := range r.houts {
			var err error
			if m.host == nil {
				err = errors.New("no host attached")
			} else {
				err = m.host.WriteHost(h.hostAddr, r.houtData[h.off:h.off+h.n])
			}
			if err != nil {
				best.offer(&Fault{Kind: FaultHost, Tile: i, Context: supCtx, PC: h.pc, Phase: phase, Cycle: h.t,
					Detail: fmt.Sprintf("hout of %d bytes to host %#x: %v", h.n, h.hostAddr, err)}, 1, 0)
			}
		}
	}
}

// opName names an opcode for fault details.
func opName(op isa.Op) string { return op.String() }
