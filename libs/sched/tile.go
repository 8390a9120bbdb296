package sched

import (
	"math/bits"

	"ipu.local/libs/codegen"
	"ipu.local/libs/isa"
)

// firstIssue is a virtual event before a tile's first instruction, which
// issues at cycle 0: the first gap works like any other.
const firstIssue = -issue

// none is a cycle before anything.
const none = -1 << 40

// gap is the stretch of a tile's code before one of its events.
type gap struct {
	start int64 // the previous event's issue cycle (firstIssue for the first)
	end   int64 // this event's issue cycle
	stall bool  // the event is a send issued the cycle the port frees
	used  int   // load instructions placed in the gap
	loose bool  // planned without the issue-slot constraint (fast pass)
}

// capacity is the number of load instructions the gap can hold.
func (g *gap) capacity() int {
	if g.loose {
		return int((g.end-g.start)/issue - 1)
	}
	return fill(g.end-g.start, g.stall)
}

// fill returns the most instructions that fit between two events g cycles
// apart: m of them take the next event to 6(m+1) exactly, or, with a
// delay, to any cycle from 6(m+2) on; a send stalled by its busy port
// issues when the port frees however early it was reached. -1 when
// nothing fits (7 to 11 cycles).
func fill(g int64, stall bool) int {
	m := g / issue
	if stall || g%issue == 0 {
		return int(m - 1)
	}
	return int(m - 2)
}

// nextIssue returns the first cycle >= t at which an event with m load
// instructions in its gap can issue after an event at last.
func nextIssue(last int64, m int, t int64) int64 {
	exact := last + issue*int64(m+1)
	switch {
	case t <= exact:
		return exact
	case t < exact+issue:
		return exact + issue
	}
	return t
}

// tevent is one send, send2 or recv of a tile.
type tevent struct {
	t    int64
	op   isa.Op
	regs [3]uint8 // d, a, b
	x    int      // the transfer
}

// load is one value placed in a register in the gap before event gap.
type load struct {
	gap int
	reg uint8
	val uint32
}

// busUse is one send's occupation of its supertile's bus.
type busUse struct {
	start, end int64
	slots      int
}

// tileState is one tile's schedule so far.
type tileState struct {
	id        int
	last      int64 // issue cycle of the last event (firstIssue: none yet)
	portFree  int64 // the send port is busy before this cycle
	listenEnd int64 // the last recv window closes at this cycle
	events    []tevent
	gaps      []gap
	open      []int // gaps with spare capacity, oldest first
	spare     int   // their spare capacity, in instructions
	loads     []load
	// The register cache: the value of $mr when valid has bit r, and the
	// issue cycle of the last event reading it (none: never).
	val     [16]uint32
	valid   uint16
	lastUse [16]int64
	sends   []busUse
	sync    int64 // the sync's issue cycle, set by finish
	// future counts the pending events reading each value, by its
	// number on the tile (phaseIndex): a register whose value no pending
	// event reads is the one to reuse.
	future []int32
	regOf  []int8    // by value number: the register holding it, or -1
	vidOf  [16]int32 // by register: the number of its value when valid
	live   uint16    // registers holding a value some pending event reads
	// loose drops the issue-slot constraint: an event with m loads
	// before it may issue at any cycle from 6(m+1) after the previous
	// one, as if a delay could be shorter than an issue period. The
	// fast pass plans with it; validation finds where it was wrong.
	loose bool
	// ver counts the changes plan depends on (events placed, values
	// no longer read): plans made at one version are the same. It
	// starts at 1.
	ver uint32
}

// next returns the first cycle >= t at which an event with m loads in
// its gap can issue after the tile's last event.
func (s *tileState) next(m int, t int64) int64 {
	if s.loose {
		return max(t, s.last+issue*int64(m+1))
	}
	return nextIssue(s.last, m, t)
}

// victim returns the register of free (bits 0..14) best to load: one
// holding a value no pending event reads if any, of those the least
// recently used, of those the lowest; -1 when free is empty.
func (s *tileState) victim(free uint16) int {
	free &= 0x7FFF
	if dead := free &^ s.live; dead != 0 {
		free = dead
	}
	best := -1
	for m := free; m != 0; m &= m - 1 {
		r := bits.TrailingZeros16(m)
		if best < 0 || s.lastUse[r] < s.lastUse[best] {
			best = r
		}
	}
	return best
}

// expect counts the values a pending event reads (delta 1), or uncounts
// them once it is placed (-1); ids are their numbers.
func (s *tileState) expect(ops [3]uint32, ids [3]int32, delta int32) {
	zero := count(s.future, ops, ids, delta)
	if zero != 0 {
		s.ver++
	}
	for i, v := range ops {
		if zero&(1<<i) == 0 {
			continue
		}
		for r := 0; r < 15; r++ {
			if s.valid&(1<<r) != 0 && s.val[r] == v {
				s.live &^= 1 << r
			}
		}
	}
}

// newTile returns tile id before any event, with future the counts of
// the pending events reading each of its values (owned by the tile).
func newTile(id int, future []int32) *tileState {
	s := &tileState{id: id, last: firstIssue, portFree: none, listenEnd: none, future: future, ver: 1,
		regOf: make([]int8, len(future))}
	for i := range s.regOf {
		s.regOf[i] = -1
	}
	for i := range s.lastUse {
		s.lastUse[i] = none
	}
	return s
}

// item is one value an event needs loaded.
type item struct {
	reg     uint8
	val     uint32
	cost    int   // instructions: li, or li and lih
	release int64 // the register is free after this cycle's event
	vid     int32 // the value's number on the tile
	gap     int   // where the load goes: an earlier gap, or -1 for the event's own
}

// opPlan is how one event gets its operands.
type opPlan struct {
	regs  [3]uint8
	items [3]item
	n     int
	need  int // load instructions that must go in the event's own gap
}

// plan chooses registers for an event reading ops (d, a, b), numbered
// ids, on tile s:
// cached values stay where they are, 0 is $mzero, missing values go to
// the least recently used registers of mask, and as many loads as fit are
// hoisted into earlier gaps (tentatively: commit decides).
func (s *tileState) plan(ops [3]uint32, ids [3]int32, mask uint16) opPlan {
	var p opPlan
	var pinned uint16
	// Cached values first, so that no new load takes their registers.
	var cached [3]bool
	for k, v := range ops {
		if v == 0 {
			p.regs[k], cached[k] = uint8(codegen.MZero), true
			continue
		}
		if r := s.cached(v, ids[k], mask); r >= 0 {
			p.regs[k], cached[k] = uint8(r), true
			pinned |= 1 << r
		}
	}
	for k, v := range ops {
		if cached[k] {
			continue
		}
		found := false
		for i := 0; i < p.n; i++ {
			if p.items[i].val == v {
				p.regs[k], found = p.items[i].reg, true
				break
			}
		}
		if found {
			continue
		}
		best := s.victim(mask &^ pinned)
		pinned |= 1 << best
		p.regs[k] = uint8(best)
		p.items[p.n] = item{reg: uint8(best), val: v, cost: codegen.ConstLen(v), release: s.lastUse[best], gap: -1, vid: ids[k]}
		p.n++
	}
	// Hoist: the most constrained load (latest release) first, each into
	// the latest earlier gap with room that starts after its register's
	// last use.
	var taken [3]struct{ gap, n int }
	nt := 0
	order := [3]int{0, 1, 2}
	for i := 1; i < p.n; i++ {
		for j := i; j > 0 && p.items[order[j]].release > p.items[order[j-1]].release; j-- {
			order[j], order[j-1] = order[j-1], order[j]
		}
	}
	for _, oi := range order[:p.n] {
		it := &p.items[oi]
		for k := len(s.open) - 1; k >= 0; k-- {
			g := s.open[k]
			if s.gaps[g].start < it.release {
				break
			}
			extra := 0
			for t := 0; t < nt; t++ {
				if taken[t].gap == g {
					extra += taken[t].n
				}
			}
			if s.gaps[g].capacity()-s.gaps[g].used-extra >= it.cost {
				it.gap = g
				taken[nt] = struct{ gap, n int }{g, it.cost}
				nt++
				break
			}
		}
		if it.gap < 0 {
			p.need += it.cost
		}
	}
	return p
}

// nextSend returns the first cycle >= t at which s can issue a send
// needing m loads in its gap.
func (s *tileState) nextSend(t int64, m int) int64 {
	if t < s.portFree {
		t = s.portFree
	}
	if t == s.portFree && t >= s.last+issue*int64(m+1) {
		return t
	}
	return s.next(m, t)
}

// nextRecv returns the first cycle >= t at which s can issue a recv
// needing m loads in its gap.
func (s *tileState) nextRecv(t int64, m int) int64 {
	if t < s.listenEnd {
		t = s.listenEnd
	}
	return s.next(m, t)
}

// add appends an event at cycle t planned by p; the caller has checked
// that t is feasible.
func (s *tileState) add(t int64, op isa.Op, p opPlan, x int) {
	s.ver++
	stall := op != isa.RECV && t == s.portFree
	g := gap{start: s.last, end: t, stall: stall, loose: s.loose}
	room := g.capacity()
	// Keep loads in the event's own gap when it has room: earlier gaps'
	// spare slots stay for later events and cached values live longer.
	for i := 0; i < p.n; i++ {
		it := &p.items[i]
		if it.gap >= 0 && p.need+it.cost <= room {
			it.gap = -1
			p.need += it.cost
		}
	}
	if p.need > room {
		panic("sched: internal error: event placed where its loads do not fit")
	}
	gi := len(s.gaps)
	g.used = p.need
	s.gaps = append(s.gaps, g)
	for i := 0; i < p.n; i++ {
		it := p.items[i]
		at := it.gap
		if at < 0 {
			at = gi
		} else {
			s.gaps[at].used += it.cost
			s.spare -= it.cost
		}
		s.loads = append(s.loads, load{gap: at, reg: it.reg, val: it.val})
		if old := s.vidOf[it.reg]; s.valid&(1<<it.reg) != 0 && s.regOf[old] == int8(it.reg) {
			s.regOf[old] = -1
		}
		s.regOf[it.vid], s.vidOf[it.reg] = int8(it.reg), it.vid
		s.val[it.reg] = it.val
		s.valid |= 1 << it.reg
		s.live &^= 1 << it.reg
		if s.future[it.vid] > 0 {
			s.live |= 1 << it.reg
		}
	}
	for _, r := range p.regs {
		if r < 15 {
			s.lastUse[r] = t
		}
	}
	s.events = append(s.events, tevent{t: t, op: op, regs: p.regs, x: x})
	s.last = t
	// Keep the open list to the gaps with spare room.
	for i := 0; i < p.n; i++ {
		at := p.items[i].gap
		if at < 0 || s.gaps[at].used < s.gaps[at].capacity() {
			continue
		}
		for k := len(s.open) - 1; k >= 0; k-- {
			if s.open[k] == at {
				s.open = append(s.open[:k], s.open[k+1:]...)
				break
			}
		}
	}
	if g.used < room {
		s.open = append(s.open, gi)
		s.spare += room - g.used
	}
}

// cached returns the register of mask holding v (numbered id), or -1.
func (s *tileState) cached(v uint32, id int32, mask uint16) int {
	// Values are loaded into registers of mask only when no register
	// of mask holds them: regOf is the one register holding each.
	if r := s.regOf[id]; r >= 0 && s.valid&mask&(1<<r) != 0 && s.val[r] == v {
		return int(r)
	}
	return -1
}

// minNeed is a lower bound on plan(ops, mask).need: the loads of the
// values not cached, less all the spare room they could be hoisted to.
func (s *tileState) minNeed(ops [3]uint32, ids [3]int32, mask uint16) int {
	n := 0
	for i, v := range ops {
		if v == 0 || (i > 0 && ops[0] == v) || (i > 1 && ops[1] == v) {
			continue
		}
		if s.cached(v, ids[i], mask) < 0 {
			n += codegen.ConstLen(v)
		}
	}
	return max(0, n-s.spare)
}

// finish places the sync: after the last event, and unless early is set
// after the tile's last word has left and its last word has arrived.
func (s *tileState) finish(early bool) {
	t := s.last + issue
	if !early {
		t = max(t, s.portFree, s.listenEnd)
	}
	s.sync = s.next(0, t)
}
