package simref

import (
	"fmt"

	"ipu.local/libs/isa"
	"ipu.local/libs/sim"
)

// How a tile's superstep ended.
type ending int

const (
	endNone ending = iota
	endSync
	endHsync
	endHalt
	endFault
)

// sent is one send or send2 instruction: its words and where they go.
type sent struct {
	issue  int64
	pc     uint32
	double bool // send2: two words per cycle
	words  []uint32
	dst    int // first destination tile
	ndst   int // number of destination tiles
	stride int // tiles from one destination to the next (>= 1)
}

// window is one recv: the cycles in which a tile listens to one source.
type window struct {
	src   int
	start int64
	words uint32
	addr  uint32
	pc    uint32
}

// hostWrite is one hout: the bytes copied at issue, written to the host at
// the end of the superstep.
type hostWrite struct {
	issue int64
	pc    uint32
	addr  uint32
	data  []byte
}

// step is what one tile did in the current superstep.
type step struct {
	end          ending
	fault        *sim.Fault
	cycles       int64 // issue cycle of the sync, hsync, halt or fault, plus one
	instructions int64
	hostBytes    int64
	sends        []sent
	windows      []window
	houts        []hostWrite
	portFree     int64 // first cycle the send port is free again
	hsyncD       uint8 // the register of the hsync that ended the superstep
	barrierPC    uint32
}

// Classes of faults found at the end of a superstep, in the order they win
// ties (after cycle and tile).
const (
	classExec = iota
	classHostWrite
	classBus
	classExchange
)

// candidate is a fault with what orders it against the others.
type candidate struct {
	f        *sim.Fault
	class    int
	receiver int // the receiving tile of an exchange fault
}

// earliest returns the fault that wins: smallest cycle, then tile, then
// class, then receiving tile; the first offered on a full tie.
func earliest(cs []candidate) *sim.Fault {
	var best *candidate
	for i := range cs {
		c := &cs[i]
		if best == nil {
			best = c
			continue
		}
		a, b := c.f, best.f
		switch {
		case a.Cycle != b.Cycle:
			if a.Cycle < b.Cycle {
				best = c
			}
		case a.Tile != b.Tile:
			if a.Tile < b.Tile {
				best = c
			}
		case c.class != best.class:
			if c.class < best.class {
				best = c
			}
		case c.receiver < best.receiver:
			best = c
		}
	}
	if best == nil {
		return nil
	}
	return best.f
}

// Run resumes every active tile and runs supersteps until every active tile
// waits at hsync or has halted, or a fault occurs.
func (m *Machine) Run(host sim.Host, command uint32) (*sim.RunResult, error) {
	res := &sim.RunResult{}
	active, runnable := false, false
	for i := range m.tiles {
		if m.tiles[i].active {
			active = true
			if !m.tiles[i].halted {
				runnable = true
			}
		}
	}
	if m.dead || !active {
		return res, &sim.Fault{Kind: sim.FaultNotRunnable, Tile: -1, Context: -1, Phase: m.mark}
	}
	if !runnable {
		return res, nil
	}
	// The supervisors waiting at hsync receive the command.
	for i := range m.tiles {
		t := &m.tiles[i]
		if t.active && !t.halted && t.atHsync {
			setM(&t.ctx[supervisor], t.hsyncD, command)
			t.atHsync = false
		}
	}
	limit := m.MaxSupersteps
	if limit <= 0 {
		limit = sim.DefaultMaxSupersteps
	}
	for {
		if len(res.Phases) >= limit {
			m.dead = true
			return res, &sim.Fault{Kind: sim.FaultWatchdog, Tile: -1, Context: -1, Phase: m.mark,
				Detail: fmt.Sprintf("%d supersteps in one run without reaching hsync or halt", limit)}
		}
		stats, f := m.superstep(host)
		res.Phases = append(res.Phases, *stats)
		res.Cycles += stats.Cycles + stats.SyncCycles
		if f != nil {
			m.dead = true
			return res, f
		}
		live, hsync := 0, 0
		for i := range m.tiles {
			t := &m.tiles[i]
			if t.active && !t.halted {
				live++
				if t.atHsync {
					hsync++
				}
			}
		}
		if live == 0 {
			return res, nil
		}
		if hsync == live {
			res.AtHost = true
			return res, nil
		}
	}
}

// superstep runs every live tile to its sync, hsync, halt or fault, one
// tile after another, then performs the barrier: host writes, the fault
// checks, the sync check, the exchange, the statistics.
func (m *Machine) superstep(host sim.Host) (*sim.PhaseStats, *sim.Fault) {
	n := len(m.tiles)
	steps := make([]*step, n)
	for i := range m.tiles {
		t := &m.tiles[i]
		if !t.active || t.halted {
			continue
		}
		steps[i] = m.runTile(i, host)
	}
	stats := &sim.PhaseStats{
		Phase:         m.mark,
		TileCycles:    make([]int64, n),
		ExchangeBytes: make([]int64, n),
	}
	var faults []candidate
	for i, s := range steps {
		if s == nil {
			continue
		}
		stats.TileCycles[i] = s.cycles
		stats.Cycles = max(stats.Cycles, s.cycles)
		stats.Instructions += s.instructions
		stats.HostBytes += s.hostBytes
		for _, snd := range s.sends {
			stats.ExchangeBytes[i] += 4 * int64(len(snd.words))
		}
		if s.fault != nil {
			faults = append(faults, candidate{f: s.fault, class: classExec})
		}
	}
	// The chip-wide host link: the superstep lasts at least as long as
	// its host bytes take.
	if m.p.HostBytesPerCycle > 0 && stats.HostBytes > 0 {
		perCycle := int64(m.p.HostBytesPerCycle)
		stats.Cycles = max(stats.Cycles, (stats.HostBytes+perCycle-1)/perCycle)
	}
	// The superstep lasts until the exchange has delivered its last word:
	// the barrier cannot complete while words are in flight.
	for src, s := range steps {
		if s == nil {
			continue
		}
		for _, snd := range s.sends {
			per := 1
			if snd.double {
				per = 2
			}
			if len(snd.words) == 0 {
				continue
			}
			leave := snd.issue + int64((len(snd.words)+per-1)/per) - 1
			for k, u := 0, snd.dst; k < snd.ndst; k, u = k+1, u+snd.stride {
				stats.Cycles = max(stats.Cycles, leave+int64(m.p.Latency(src, u))+1)
			}
		}
	}

	// Host writes, in tile order then issue order, even in a superstep
	// that faults.
	for i, s := range steps {
		if s == nil {
			continue
		}
		for _, h := range s.houts {
			var err error
			if host == nil {
				err = fmt.Errorf("no host attached")
			} else {
				err = host.WriteHost(h.addr, h.data)
			}
			if err != nil {
				faults = append(faults, candidate{class: classHostWrite, f: &sim.Fault{Kind: sim.FaultHost,
					Tile: i, Context: supervisor, PC: h.pc, Phase: m.mark, Cycle: h.issue, Detail: err.Error()}})
			}
		}
	}
	faults = append(faults, m.checkBus(steps)...)
	xfaults, stores := m.exchange(steps)
	faults = append(faults, xfaults...)
	if f := earliest(faults); f != nil {
		return stats, f
	}

	// Everyone must agree on the kind of barrier.
	atSync, firstHsync := 0, -1
	for i, s := range steps {
		switch {
		case s == nil:
		case s.end == endSync:
			atSync++
		case s.end == endHsync && firstHsync < 0:
			firstHsync = i
		}
	}
	if atSync > 0 && firstHsync >= 0 {
		s := steps[firstHsync]
		return stats, &sim.Fault{Kind: sim.FaultSync, Tile: firstHsync, Context: supervisor,
			PC: s.barrierPC, Phase: m.mark, Cycle: s.cycles - 1,
			Detail: fmt.Sprintf("tile %d waits at hsync while %d tiles wait at sync", firstHsync, atSync)}
	}

	// The barrier passes: received words land, halt and hsync take effect.
	for _, st := range stores {
		m.store32(st.tile, st.addr, st.val)
	}
	for i, s := range steps {
		switch {
		case s == nil:
		case s.end == endHalt:
			m.tiles[i].halted = true
		case s.end == endHsync:
			m.tiles[i].atHsync = true
			m.tiles[i].hsyncD = s.hsyncD
		}
	}
	if atSync > 0 || firstHsync >= 0 {
		stats.SyncCycles = int64(m.p.SyncCycles)
		m.mark++
	}
	return stats, nil
}

// runTile runs tile ti from cycle 0 of the superstep until its supervisor
// issues sync, hsync or halt, or something faults.
func (m *Machine) runTile(ti int, host sim.Host) *step {
	t := &m.tiles[ti]
	s := &step{}
	for c := range t.ctx {
		t.ctx[c].next = 0
	}
	for cyc := int64(0); ; cyc++ {
		if cyc >= m.watchdog {
			s.end = endFault
			s.cycles = cyc + 1
			s.fault = &sim.Fault{Kind: sim.FaultWatchdog, Tile: ti, Context: -1,
				PC: t.ctx[supervisor].pc, Phase: m.mark, Cycle: cyc,
				Detail: fmt.Sprintf("superstep exceeded %d cycles", m.watchdog)}
			return s
		}
		// Who owns this cycle: the worker of its slot if that one runs,
		// else the supervisor.
		c := supervisor
		if w := int(cyc % numSlots); t.ctx[w].running {
			c = w
		}
		if cyc < t.ctx[c].next {
			continue
		}
		m.issue(ti, c, cyc, host, s)
		if s.end != endNone {
			// A fault ends the tile's superstep too: it ran up to the
			// faulting cycle.
			s.cycles = cyc + 1
			return s
		}
	}
}

// issue tries to issue the next instruction of context c in cycle cyc.
func (m *Machine) issue(ti, c int, cyc int64, host sim.Host, s *step) {
	t := &m.tiles[ti]
	x := &t.ctx[c]
	pc := x.pc
	fault := func(kind sim.FaultKind, detail string) {
		s.end = endFault
		s.fault = &sim.Fault{Kind: kind, Tile: ti, Context: c, PC: pc, Phase: m.mark, Cycle: cyc, Detail: detail}
	}

	// Fetch and decode, every time.
	if pc%4 != 0 || !m.p.Executable.Contains(pc, 4) {
		fault(sim.FaultFetch, "pc outside the executable range")
		return
	}
	if !inCode(t, pc) {
		fault(sim.FaultFetch, "pc outside the code segments")
		return
	}
	in, err := isa.Decode(m.load32(ti, pc))
	if err != nil {
		fault(sim.FaultInvalid, err.Error())
		return
	}
	info := in.Info()
	if info.Who == isa.Supervisor && c != supervisor {
		fault(sim.FaultInvalid, info.Name+" is for the supervisor only")
		return
	}
	if info.Who == isa.Worker && c == supervisor {
		fault(sim.FaultInvalid, info.Name+" is for workers only")
		return
	}
	if x.loopRemaining > 0 {
		switch in.Op {
		case isa.BR, isa.BRZ, isa.BRNZ, isa.CALL, isa.JR, isa.RPT, isa.RPTI,
			isa.RUN, isa.SYNC, isa.HSYNC, isa.HALT, isa.EXIT:
			fault(sim.FaultInvalid, info.Name+" inside a repeat body")
			return
		}
	}

	r := m.exec(ti, c, cyc, in, host, s)
	if r.fault != "" {
		fault(r.fault, r.detail)
		return
	}
	if r.stall {
		return
	}
	s.instructions++
	if m.Trace != nil {
		m.Trace(ti, c, cyc, pc, in)
	}

	// Timing: the next issue of this context.
	switch {
	case in.Op == isa.DELAY:
		x.next = cyc + numSlots + int64(in.Imm)
	case r.cycles > 0:
		x.next = cyc + numSlots*r.cycles
	default:
		x.next = cyc + numSlots*int64(info.Cycles+r.extra)
	}

	// The program counter, and the repeat loop closing.
	x.pc = r.next
	if x.loopRemaining > 0 && x.pc == x.loopEnd {
		if x.loopRemaining > 1 {
			x.pc = x.loopStart
			x.loopRemaining--
		} else {
			x.loopRemaining = 0
		}
	}
	if r.end != endNone {
		s.end = r.end
		s.barrierPC = pc
	}
}
