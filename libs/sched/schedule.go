package sched

import (
	"fmt"
	"slices"

	"ipu.local/libs/arch"
	"ipu.local/libs/isa"
	"ipu.local/libs/par"
)

// Schedule lowers one exchange phase to per-tile code (see the package
// doc). The phase is checked first: tiles, ranges, alignment, no tile
// sending to itself, no two transfers writing the same bytes of a tile.
func Schedule(p *arch.Preset, phase []Transfer, opt Options) (*Plan, error) {
	pl, _, err := ScheduleStats(p, phase, opt)
	return pl, err
}

// ScheduleStats is Schedule that also returns the instruction-alignment
// validation figures of the pass the plan comes from.
func ScheduleStats(p *arch.Preset, phase []Transfer, opt Options) (*Plan, AlignStats, error) {
	if err := check(p, phase, opt); err != nil {
		return nil, AlignStats{}, err
	}
	passes := opt.Passes
	if passes <= 0 {
		passes = defaultPasses(phase)
	}
	// Greedy schedules are brittle: run a few strategies, keep the
	// shortest (the first of equals). The first passes are independent
	// and run in parallel; later ones serve first the tiles that ended
	// last in the best schedule so far.
	runs := make([]*scheduler, min(passes, len(strategies)))
	ix := newPhaseIndex(p.Tiles, phase)
	stats := make([]AlignStats, len(runs))
	par.For(len(runs), len(runs), func(_, k int) {
		runs[k], stats[k] = scheduleAligned(p, phase, opt, strategies[k], ix)
	})
	var best *scheduler
	var align AlignStats
	for k, s := range runs {
		if best == nil || s.makespan < best.makespan {
			best, align = s, stats[k]
		}
	}
	for k := len(runs); k < passes; k++ {
		st := strategies[k%len(strategies)]
		st.bonus = make([]int64, p.Tiles)
		for id, t := range best.tiles {
			if t != nil {
				st.bonus[id] = t.sync + 1
			}
		}
		s, a := scheduleAligned(p, phase, opt, st, ix)
		if s.makespan < best.makespan {
			best, align = s, a
		}
	}
	pl := &Plan{Events: best.events, Options: opt, LowerBound: bound(p, phase, opt), Makespan: best.makespan}
	for id, t := range best.tiles {
		if t == nil {
			continue
		}
		code, err := t.code()
		if err != nil {
			return nil, AlignStats{}, fmt.Errorf("sched: tile %d: %w", id, err)
		}
		pl.Tiles = append(pl.Tiles, TileCode{Tile: id, Code: code, Cycles: t.sync + 1})
	}
	return pl, align, nil
}

// DefaultPasses is the number of scheduling passes when Options.Passes
// is 0, for phases of up to LargePhase receptions; larger ones get
// LargePasses (their first two strategies, run side by side: in the
// transformer layers measured, the later passes never won on a large
// phase and doubled its time).
const (
	DefaultPasses = 4
	LargePasses   = 2
	LargePhase    = 1 << 11
)

func defaultPasses(phase []Transfer) int {
	n := 0
	for _, x := range phase {
		if n += x.Dests(); n > LargePhase {
			return LargePasses
		}
	}
	return DefaultPasses
}

// strategy is one pass's heuristic choices.
type strategy struct {
	// byWords orders equal starts by transfer length only, not by the
	// load left on the transfer's tiles.
	byWords bool
	// anyBus takes send2 whenever it ends the stream sooner; otherwise
	// only when no partner tile has a pending send that could start
	// before it ends.
	anyBus bool
	// window orders the transfers by their earliest start counted in
	// steps of 1<<window cycles: among those starting within a step, the
	// most loaded tiles go first (0: the earliest start first).
	window uint8
	// bonus is added to a tile's load: the previous pass's cycles.
	bonus []int64
}

// strategies are the passes' heuristics, the first LargePasses of them
// for a large phase. Measured over the exchange phases of the BERT-base
// layer and the GPT-2 base block (34 phases, 1,472 tiles), the windowed
// pass ends their large phases in 15,731 cycles where the earliest-start
// passes alone took 16,550: an all-gather among a few dozen tiles, whose
// multicasts each reach nearly every tile of the group, is served in the
// order of its most loaded receivers instead of whichever transfer could
// start first.
var strategies = []strategy{
	{anyBus: true},
	{anyBus: true, window: 5},
	{byWords: true},
}

// scheduler is one greedy pass.
type scheduler struct {
	p     *arch.Preset
	phase []Transfer
	opt   Options
	st    strategy
	mask  uint16

	tiles  []*tileState // by tile; nil when not involved
	remS   []int64      // words each tile has still to send
	remR   []int64      // words each tile has still to receive
	remI   []int64      // issue cycles each tile's pending events need, at most
	pend   [][]int      // each tile's sends (ix's: read only)
	ix     *phaseIndex
	done   []bool // committed transfers
	order  []int  // committed transfers, in commit order
	events []Event
	// makespan is the phase's cycles once run has placed the syncs.
	makespan int64

	// Plans of the transfer to commit: its sender, its receivers.
	sp  opPlan
	rps []opPlan
	// The loads the plans of transfer i need (opPlan.need) on its
	// sender and on its k-th receiver (needR[ix.recvAt[i]+k]), as of
	// the tile's version ver (0: not known).
	needS, needR []needMemo
	// block is the tile that last held each transfer's start back (-1:
	// none known): the first one to check when it is popped again.
	block   []int32
	rn, rn2 []int // scratch for evalFrom, busFree
	mns     []int // scratch for quick
}

// needMemo is the loads an event's plan needs as of a tile's version.
type needMemo struct {
	ver  uint32
	need int32
}

// sendNeed returns plan(...).need of transfer i's send on its sender.
func (s *scheduler) sendNeed(i int) int {
	t, m := s.tiles[s.phase[i].Src], &s.needS[i]
	if m.ver != t.ver {
		x := s.phase[i]
		m.ver, m.need = t.ver, int32(t.plan(sendOps(x), s.ix.send[i], s.mask).need)
	}
	return int(m.need)
}

// recvNeed returns plan(...).need of transfer i's recv on its k-th
// receiver.
func (s *scheduler) recvNeed(i, k int) int {
	r := s.ix.recvAt[i] + k
	x := s.phase[i]
	t, m := s.tiles[x.DestAt(k)], &s.needR[r]
	if m.ver != t.ver {
		m.ver, m.need = t.ver, int32(t.plan(recvOps(x), s.ix.recv[r], s.mask).need)
	}
	return int(m.need)
}

func newScheduler(p *arch.Preset, phase []Transfer, opt Options, st strategy) *scheduler {
	return newSchedulerIx(p, phase, opt, st, newPhaseIndex(p.Tiles, phase))
}

// newSchedulerIx is newScheduler with the phase's index made already.
func newSchedulerIx(p *arch.Preset, phase []Transfer, opt Options, st strategy, ix *phaseIndex) *scheduler {
	s := &scheduler{p: p, phase: phase, opt: opt, st: st, mask: opt.regs(), ix: ix,
		tiles: make([]*tileState, p.Tiles), remS: slices.Clone(ix.remS), remR: slices.Clone(ix.remR),
		remI: slices.Clone(ix.remI), pend: ix.pend, done: make([]bool, len(phase)),
		events: make([]Event, len(phase)), needS: make([]needMemo, len(phase)),
		needR: make([]needMemo, len(ix.recv)), block: make([]int32, len(phase))}
	// Every tile's events, gaps, loads (at most three an event: its d, a
	// and b) and sends in one allocation each: the tiles' lists fill up
	// to their capacity.
	total := 0
	for _, n := range ix.events {
		total += int(n)
	}
	evs, gaps, loads := make([]tevent, total), make([]gap, total), make([]load, loadsPerEvent*total)
	sends := make([]busUse, len(phase))
	off, soff := 0, 0
	for t, n := range ix.events {
		if n == 0 {
			continue
		}
		tl := newTile(t, slices.Clone(ix.future[t]))
		end, send := off+int(n), soff+len(ix.pend[t])
		tl.events, tl.gaps = evs[off:off:end], gaps[off:off:end]
		tl.loads = loads[loadsPerEvent*off : loadsPerEvent*off : loadsPerEvent*end]
		tl.sends = sends[soff:soff:send]
		off, soff = end, send
		s.tiles[t] = tl
	}
	return s
}

// loadsPerEvent is the loads a tile's list has room for per event: an
// event loads at most its three operands.
const loadsPerEvent = 3

// sendOps are the send's d, a, b operands.
func sendOps(x Transfer) [3]uint32 {
	d := uint32(x.Dst)
	if n := x.Dests(); n > 1 {
		d |= uint32(n) << 16
	}
	return [3]uint32{d, x.SrcAddr, isa.SendCount(x.Words, x.Step())}
}

// recvOps are a recv's d, a, b operands.
func recvOps(x Transfer) [3]uint32 {
	return [3]uint32{uint32(x.Src), x.DstAddr, uint32(x.Words)}
}

// cand is a transfer's earliest start as last evaluated (24 bytes: the
// heap moves them; the tile that last held it back is in
// scheduler.block).
type cand struct {
	start int64
	prio  int64 // the most loaded of its tiles, in remaining words
	x     int32
	words int32
}

// before orders candidates: earliest start counted in steps of 1<<sh
// cycles, then the most loaded tiles, then the earliest start, then the
// longest transfer, then phase order (sh 0: earliest start first).
func (a *cand) before(b *cand, sh uint8) bool {
	if qa, qb := a.start>>sh, b.start>>sh; qa != qb {
		return qa < qb
	}
	if a.prio != b.prio {
		return a.prio > b.prio
	}
	if a.start != b.start {
		return a.start < b.start
	}
	if a.words != b.words {
		return a.words > b.words
	}
	return a.x < b.x
}

// candHeap is a binary min-heap of candidates in the order before gives
// with shift sh (container/heap would box every push).
type candHeap struct {
	a  []cand
	sh uint8
}

func (h *candHeap) push(c cand) {
	h.a = append(h.a, c)
	a := h.a
	for i := len(a) - 1; i > 0; {
		up := (i - 1) / 2
		if !a[i].before(&a[up], h.sh) {
			break
		}
		a[i], a[up] = a[up], a[i]
		i = up
	}
}

func (h *candHeap) pop() cand {
	a := h.a
	top := a[0]
	n := len(a) - 1
	a[0] = a[n]
	h.a = a[:n]
	h.down()
	return top
}

// fix replaces the top candidate by c (the same transfer, re-evaluated)
// and restores the heap order: a pop and a push in one sift.
func (h *candHeap) fix(c cand) { h.sift(c) }

// down sifts the top candidate down to its place.
func (h *candHeap) down() {
	if len(h.a) > 0 {
		h.sift(h.a[0])
	}
}

// sift places c in the hole at the top: the earlier child moves up into
// the hole until c comes before both children.
func (h *candHeap) sift(c cand) {
	a := h.a
	n := len(a)
	i := 0
	for {
		m := 2*i + 1
		if m >= n {
			break
		}
		if r := m + 1; r < n && a[r].before(&a[m], h.sh) {
			m = r
		}
		if !a[m].before(&c, h.sh) {
			break
		}
		a[i] = a[m]
		i = m
	}
	a[i] = c
}

// next returns the candidate that would come first without the top one
// (nil when it is alone).
func (h *candHeap) next() *cand {
	a := h.a
	switch {
	case len(a) < 2:
		return nil
	case len(a) == 2 || a[1].before(&a[2], h.sh):
		return &a[1]
	}
	return &a[2]
}

// run commits every transfer. Evaluations only go stale when a commit
// touches one of the transfer's tiles, so a popped candidate is
// re-evaluated and committed unless it got worse than it was. A cheap
// bound from its tiles' last events screens it first: a transfer stuck
// behind a busy tile (a gather) goes back without planning registers.
func (s *scheduler) run() {
	h := candHeap{a: make([]cand, 0, len(s.phase)), sh: s.st.window}
	for i := range s.phase {
		if !s.done[i] {
			h.push(s.eval(i))
		}
	}
	for len(h.a) > 0 {
		// The top stays in place while it goes back re-evaluated (fix):
		// any heap pops the same order, as before is a total order.
		old := h.a[0]
		x := s.phase[old.x]
		if b := s.block[old.x]; b >= 0 {
			// The tile that held it back last time usually still does:
			// one tile's bound screens it before all of them.
			if q := s.tileBound(int(old.x), int(b), old.start); q > old.start {
				old.start = q
				h.fix(old)
				continue
			}
		}
		// Commits on its tiles only lower their loads: with the
		// current priority it may no longer come first.
		if p := s.prio(x); p != old.prio {
			old.prio = p
			if n := h.next(); n != nil && n.before(&old, h.sh) {
				h.fix(old)
				continue
			}
		}
		c, pair, ok := s.evalFrom(int(old.x), old.start, old.prio)
		if !ok || old.before(&c, h.sh) {
			h.fix(c)
			continue
		}
		h.pop()
		s.sp, s.rps = s.plans(int(c.x), s.rps)
		s.commit(c, pair)
	}
	for _, t := range s.tiles {
		if t != nil {
			t.finish(s.opt.EarlySync)
			s.makespan = max(s.makespan, t.sync+1)
		}
	}
	s.makespan = max(s.makespan, lastArrival(s.events))
}

// lastArrival is the cycle after the phase's last word arrives: the
// superstep cannot end before (the simulator's rule).
func lastArrival(events []Event) int64 {
	var end int64
	for _, e := range events {
		for _, a := range e.Arrive {
			end = max(end, a+e.Cycles)
		}
	}
	return end
}

// tileBound is a lower bound on transfer i's start from t on, from tile
// u's timing alone (u is its sender or one of its receivers).
func (s *scheduler) tileBound(i, u int, t int64) int64 {
	x := s.phase[i]
	// Without loads first: a tile busy past t needs no register check.
	if u == x.Src {
		src := s.tiles[u]
		if q := src.nextSend(t, 0); q > t {
			return q
		}
		return src.nextSend(t, src.minNeed(sendOps(x), s.ix.send[i], s.mask))
	}
	l := int64(s.p.Latency(x.Src, u))
	r := s.tiles[u]
	if q := r.nextRecv(t+l, 0) - l; q > t {
		return q
	}
	return r.nextRecv(t+l, r.minNeed(recvOps(x), s.ix.recvIDs(i, x.IndexOf(u)), s.mask)) - l
}

// quick is a lower bound on transfer x's start, with send or send2: its
// tiles' timing with the fewest loads their events could need. It also
// returns the tile that raised the bound last (-1 when none did).
func (s *scheduler) quick(i int) (int64, int) {
	x := s.phase[i]
	src := s.tiles[x.Src]
	ms := src.minNeed(sendOps(x), s.ix.send[i], s.mask)
	ro := recvOps(x)
	s.mns = s.mns[:0]
	for u := x.Dst; u <= x.Last(); u += x.Step() {
		s.mns = append(s.mns, s.tiles[u].minNeed(ro, s.ix.recvIDs(i, x.IndexOf(u)), s.mask))
	}
	t, block := int64(0), -1
	for {
		t0 := t
		if t = src.nextSend(t, ms); t > t0 {
			block = x.Src
		}
		for k, m := range s.mns {
			u := x.DestAt(k)
			l := int64(s.p.Latency(x.Src, u))
			if r := s.tiles[u].nextRecv(t+l, m) - l; r > t {
				t, block = r, u
			}
		}
		if t == t0 {
			return t, block
		}
	}
}

// eval finds transfer i's earliest start, with send or send2.
func (s *scheduler) eval(i int) cand {
	c, _, _ := s.evalFrom(i, 0, s.prio(s.phase[i]))
	return c
}

// evalFrom is eval for a transfer that cannot start before t0, with
// priority prio (its current one). It takes the loads the tiles' plans
// need one by one and gives up (ok false) at the first tile that cannot
// take the transfer at t0: the candidate then has that tile's bound as
// its start and the tile as its block. Only the loads are kept (the
// tiles' plans are made again to commit it).
func (s *scheduler) evalFrom(i int, t0, prio int64) (c cand, pair, ok bool) {
	x := s.phase[i]
	c = cand{x: int32(i), prio: prio, words: int32(x.Words)}
	s.block[i] = -1
	sn := s.sendNeed(i)
	if q := s.tiles[x.Src].nextSend(t0, sn); q > t0 {
		c.start, s.block[i] = q, int32(x.Src)
		return c, false, false
	}
	s.rn = s.rn[:0]
	for k := range x.Dests() {
		u, rn := x.DestAt(k), s.recvNeed(i, k)
		l := int64(s.p.Latency(x.Src, u))
		if q := s.tiles[u].nextRecv(t0+l, rn) - l; q > t0 {
			c.start, s.block[i] = q, int32(u)
			return c, false, false
		}
		s.rn = append(s.rn, rn)
	}
	c.start = s.earliest(x, false, sn, s.rn)
	if !s.opt.NoSend2 && x.Words%2 == 0 {
		// send2 frees the port and the receivers sooner; take it when
		// the stream ends earlier and the partner tiles had nothing to
		// send meanwhile.
		t2 := s.earliest(x, true, sn, s.rn)
		if f2 := t2 + int64(x.Words/2); f2 < c.start+int64(x.Words) && s.busFree(x.Src, f2) {
			c.start, pair = t2, true
		}
	}
	return c, pair, true
}

// plans plans transfer i's operands on its sender and its receivers
// (appended to rps[:0]).
func (s *scheduler) plans(i int, rps []opPlan) (opPlan, []opPlan) {
	x := s.phase[i]
	sp := s.tiles[x.Src].plan(sendOps(x), s.ix.send[i], s.mask)
	rps = rps[:0]
	ro := recvOps(x)
	for k := range x.Dests() {
		rps = append(rps, s.tiles[x.DestAt(k)].plan(ro, s.ix.recvIDs(i, k), s.mask))
	}
	return sp, rps
}

// busFree reports whether no other tile of src's supertile has a pending
// send that could start before cycle end: a send2 until then would delay
// it.
func (s *scheduler) busFree(src int, end int64) bool {
	if s.st.anyBus {
		return true
	}
	capa := s.p.SupertileSize
	lo := s.p.Supertile(src) * capa
	for q := lo; q < min(lo+capa, s.p.Tiles); q++ {
		if q == src {
			continue
		}
		for _, j := range s.pend[q] {
			if s.done[j] {
				continue
			}
			if q, _ := s.quick(j); q >= end {
				// Done, or cannot start before end whatever its loads
				// (quick bounds earliest from below).
				continue
			}
			s.rn2 = s.rn2[:0]
			for k := range s.phase[j].Dests() {
				s.rn2 = append(s.rn2, s.recvNeed(j, k))
			}
			if s.earliest(s.phase[j], false, s.sendNeed(j), s.rn2) < end {
				return false
			}
		}
	}
	return true
}

// earliest returns the first send cycle at which the sender, the bus and
// every receiver can take transfer x, with sn loads before the send and
// rn[k] before the k-th receiver's recv.
func (s *scheduler) earliest(x Transfer, pair bool, sn int, rn []int) int64 {
	dur, slots := int64(x.Words), 1
	if pair {
		dur, slots = dur/2, 2
	}
	src := s.tiles[x.Src]
	t := int64(0)
	for {
		t0 := t
		t = src.nextSend(t, sn)
		t = s.nextBus(x.Src, t, dur, slots)
		for k, m := range rn {
			u := x.DestAt(k)
			l := int64(s.p.Latency(x.Src, u))
			t = s.tiles[u].nextRecv(t+l, m) - l
		}
		if t == t0 {
			return t
		}
	}
}

// nextBus returns the first cycle >= t from which tile src can use slots
// bus slots for dur cycles next to the other sends of its supertile.
func (s *scheduler) nextBus(src int, t, dur int64, slots int) int64 {
	capa := s.p.SupertileSize
	lo := s.p.Supertile(src) * capa
	hi := min(lo+capa, s.p.Tiles)
	var act [8]busUse
	for {
		// The partners' sends overlapping [t, t+dur): one tile's sends
		// never overlap each other.
		acts := act[:0]
		total := slots
		for q := lo; q < hi; q++ {
			if q == src || s.tiles[q] == nil {
				continue
			}
			us := s.tiles[q].sends
			k := searchEnd(us, t)
			for ; k < len(us) && us[k].start < t+dur; k++ {
				acts = append(acts, us[k])
				total += us[k].slots
			}
		}
		if total <= capa {
			return t
		}
		// The use only rises where a send starts: find the first such
		// cycle over capacity. Until the earliest end among the sends
		// active then, any start still covers that cycle.
		over := int64(-1)
		for _, a := range acts {
			c := max(a.start, t)
			if over >= 0 && c >= over {
				continue
			}
			use := slots
			for _, b := range acts {
				if b.start <= c && c < b.end {
					use += b.slots
				}
			}
			if use > capa {
				over = c
			}
		}
		if over < 0 {
			return t
		}
		end := int64(1) << 62
		for _, b := range acts {
			if b.start <= over && over < b.end {
				end = min(end, b.end)
			}
		}
		t = end
	}
}

// searchEnd returns the first send in us (sorted, disjoint) ending after t.
func searchEnd(us []busUse, t int64) int {
	lo, hi := 0, len(us)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if us[m].end > t {
			hi = m
		} else {
			lo = m + 1
		}
	}
	return lo
}

// commit places candidate c (with send2 when pair) with the plans in
// s.sp and s.rps.
func (s *scheduler) commit(c cand, pair bool) {
	x := s.phase[c.x]
	dur, slots, op := int64(x.Words), 1, isa.SEND
	if pair {
		dur, slots, op = dur/2, 2, isa.SEND2
	}
	src := s.tiles[x.Src]
	src.add(c.start, op, s.sp, int(c.x))
	src.portFree = c.start + dur
	src.sends = append(src.sends, busUse{c.start, c.start + dur, slots})
	s.remS[x.Src] -= int64(x.Words)
	s.remI[x.Src] -= issueCost(sendOps(x))
	src.expect(sendOps(x), s.ix.send[c.x], -1)
	ev := Event{Send: c.start, Pair: pair, Cycles: dur, Arrive: make([]int64, len(s.rps))}
	for k := range s.rps {
		u := x.DestAt(k)
		r := c.start + int64(s.p.Latency(x.Src, u))
		t := s.tiles[u]
		t.add(r, isa.RECV, s.rps[k], int(c.x))
		t.listenEnd = r + dur
		s.remR[u] -= int64(x.Words)
		s.remI[u] -= issueCost(recvOps(x))
		t.expect(recvOps(x), s.ix.recvIDs(int(c.x), k), -1)
		ev.Arrive[k] = r
	}
	s.events[c.x] = ev
	s.done[c.x] = true
	s.order = append(s.order, int(c.x))
}

// prio is the load of transfer x's most loaded tile.
func (s *scheduler) prio(x Transfer) int64 {
	p := s.load(x.Src)
	for u := x.Dst; u <= x.Last(); u += x.Step() {
		p = max(p, s.load(u))
	}
	return p
}

// issueCost is the issue cycles of an event and its loads when nothing is
// cached.
func issueCost(ops [3]uint32) int64 { return issue * int64(1+distinctNonZero(ops)) }

// load is the work left to tile t: the longest of its port, its
// listening and its issue slots.
func (s *scheduler) load(t int) int64 {
	if s.st.byWords {
		return 0
	}
	b := int64(0)
	if s.st.bonus != nil {
		b = s.st.bonus[t]
	}
	return max(s.remS[t], s.remR[t], s.remI[t]) + b
}
