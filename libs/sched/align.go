package sched

import (
	"slices"
	"sort"
	"time"

	"ipu.local/libs/arch"
	"ipu.local/libs/isa"
)

// AlignStats describe the instruction-alignment validation of the pass
// a plan comes from. The fast pass schedules without the issue-slot
// constraint (a context issues only on its slot of the 6-cycle
// round-robin, so a gap of 6(m+1)+1 .. 6(m+2)-1 cycles after an event
// cannot hold m loads: a delay costs a whole issue period more); every
// transfer is then validated against it, with operand addresses checked
// for alignment. Failing transfers and those that depend on them (every
// later event on a tile they touch, transitively) are rescheduled
// exactly, the others keep their cycles, and the rescheduled tiles are
// validated again until the schedule holds. When those would be nearly
// the whole phase (repairMaxShare), the pass's exact schedule is the
// retry: Rescheduled is every transfer, in one round.
type AlignStats struct {
	Transfers   int           // transfers validated in the first round
	Failed      int           // transfers the first validation refused
	Rescheduled int           // transfers rescheduled over all rounds
	Rounds      int           // validation rounds (1: the fast schedule held, or the exact one is the retry)
	Success     bool          // the last validation found no failing transfer
	Elapsed     time.Duration // validation and rescheduling time
}

// Retried reports whether the fast schedule had to be repaired.
func (a AlignStats) Retried() bool { return a.Failed > 0 }

// maxRounds bounds the validation rounds; a phase still failing then
// takes the pass's exact schedule (Success false).
const maxRounds = 8

// alignRetryMax is the largest phase scheduled fast and then repaired.
// Beyond it the repair reaches most transfers (everything after a
// failure on its tiles) and costs more than scheduling under the exact
// rule from the start, which is what a larger phase gets: its figures
// show no validation round. A repaired phase is also scheduled exactly,
// and the shorter of the two is kept (the repair's figures still report
// the validation work done).
const alignRetryMax = 512

// A smaller phase can still fail where nearly all of it depends on the
// failures: qk-early's re-layout on 1,472 tiles (512 multicasts) has 16
// transfers refused and 497 planned after them on their tiles. Its
// repair is then the exact schedule made again, for as long as a pass
// takes. When more than repairMaxShare (in twentieths) of the phase would
// be rescheduled, the exact schedule, made already, is the retry: every
// transfer rescheduled under the exact rule, in one round.
const repairMaxShare = 19

// scheduleAligned schedules the phase with strategy st (see alignRetryMax).
func scheduleAligned(p *arch.Preset, phase []Transfer, opt Options, st strategy, ix *phaseIndex) (*scheduler, AlignStats) {
	exact := newSchedulerIx(p, phase, opt, st, ix)
	exact.run()
	if len(phase) > alignRetryMax {
		return exact, AlignStats{Success: true}
	}
	rep, a := scheduleChecked(newSchedulerIx(p, phase, opt, st, ix), exact)
	if exact.makespan < rep.makespan {
		return exact, a
	}
	return rep, a
}

// scheduleChecked runs one pass with s0's strategy: the fast schedule,
// then validation and incremental repair, or exact (its exact schedule)
// when the repair would reschedule nearly the whole phase or does not
// converge. The scheduler returned plans under the exact constraints.
func scheduleChecked(s0, exact *scheduler) (*scheduler, AlignStats) {
	fast := s0
	for _, t := range fast.tiles {
		if t != nil {
			t.loose = true
		}
	}
	fast.run()
	start := time.Now()
	var all []int
	for id, t := range fast.tiles {
		if t != nil {
			all = append(all, id)
		}
	}
	failed := fast.checkSlots(all)
	st := AlignStats{Transfers: len(fast.phase), Failed: len(failed), Rounds: 1}
	cur := fast
	for {
		dep := cur.dependents(failed)
		if st.Rounds == 1 && 20*marked(dep) > repairMaxShare*len(dep) {
			st.Rescheduled, st.Success = len(dep), true
			st.Elapsed = time.Since(start)
			return exact, st
		}
		// The exact replay: kept transfers at their cycles, the others
		// rescheduled.
		r, moved := cur.repair(dep)
		st.Rescheduled += len(moved)
		cur, failed = r, nil
		if len(moved) == 0 {
			break
		}
		failed = r.checkSlots(r.tilesOf(moved))
		st.Rounds++
		if len(failed) == 0 || st.Rounds >= maxRounds {
			break
		}
	}
	st.Success = len(failed) == 0
	if !st.Success {
		cur = exact
	}
	st.Elapsed = time.Since(start)
	return cur, st
}

// marked returns the number of true entries of dep.
func marked(dep []bool) int {
	n := 0
	for _, d := range dep {
		if d {
			n++
		}
	}
	return n
}

// opsOf returns the operands of event ev.
func (s *scheduler) opsOf(ev tevent) [3]uint32 {
	if ev.op == isa.RECV {
		return recvOps(s.phase[ev.x])
	}
	return sendOps(s.phase[ev.x])
}

// idsOf returns the numbers of event ev's operands on tile u.
func (s *scheduler) idsOf(u int, ev tevent) [3]int32 {
	if ev.op == isa.RECV {
		return s.ix.recvIDs(ev.x, s.phase[ev.x].IndexOf(u))
	}
	return s.ix.send[ev.x]
}

// checkSlots replays the events of the given tiles under the exact issue
// constraints, with the register loads a fresh plan needs, and returns
// the transfers (sorted) whose event there cannot issue at its cycle or
// whose addresses are misaligned; a tile's replay stops at its first
// failure (everything after it depends on it).
func (s *scheduler) checkSlots(tiles []int) []int {
	bad := map[int]bool{}
	// The replays' lists, reused from tile to tile.
	var evs []tevent
	var gaps []gap
	var loads []load
	for _, u := range tiles {
		ts := s.tiles[u]
		v := newTile(u, make([]int32, s.ix.nvals[u]))
		v.events, v.gaps, v.loads = slices.Grow(evs[:0], len(ts.events)), slices.Grow(gaps[:0], len(ts.gaps)), slices.Grow(loads[:0], len(ts.loads))
		for _, ev := range ts.events {
			count(v.future, s.opsOf(ev), s.idsOf(u, ev), 1)
		}
		for _, ev := range ts.events {
			x := s.phase[ev.x]
			ops, ids := s.opsOf(ev), s.idsOf(u, ev)
			p := v.plan(ops, ids, s.mask)
			dur := s.events[ev.x].Cycles
			ok := x.SrcAddr%4 == 0 && x.DstAddr%4 == 0
			if ev.op == isa.RECV {
				ok = ok && v.nextRecv(ev.t, p.need) == ev.t
			} else {
				ok = ok && v.nextSend(ev.t, p.need) == ev.t
			}
			if !ok {
				bad[ev.x] = true
				break
			}
			v.add(ev.t, ev.op, p, ev.x)
			v.expect(ops, ids, -1)
			if ev.op == isa.RECV {
				v.listenEnd = ev.t + dur
			} else {
				v.portFree = ev.t + dur
			}
		}
		evs, gaps, loads = v.events, v.gaps, v.loads
	}
	out := make([]int, 0, len(bad))
	for x := range bad {
		out = append(out, x)
	}
	sort.Ints(out)
	return out
}

// tilesOf returns the tiles the transfers touch, sorted.
func (s *scheduler) tilesOf(xs []int) []int {
	seen := map[int]bool{}
	for _, i := range xs {
		x := s.phase[i]
		seen[x.Src] = true
		for u := x.Dst; u <= x.Last(); u += x.Step() {
			seen[u] = true
		}
	}
	out := make([]int, 0, len(seen))
	for u := range seen {
		out = append(out, u)
	}
	sort.Ints(out)
	return out
}

// dependents marks the failed transfers and every transfer with an
// event at or after a marked transfer's event on one of its tiles,
// transitively: what a tile issues later was planned after them.
func (s *scheduler) dependents(failed []int) []bool {
	dep := make([]bool, len(s.phase))
	cut := make([]int64, len(s.tiles))
	for i := range cut {
		cut[i] = 1 << 62
	}
	queue := append([]int(nil), failed...)
	for _, i := range failed {
		dep[i] = true
	}
	lower := func(u int, t int64) {
		if t >= cut[u] {
			return
		}
		old := cut[u]
		cut[u] = t
		evs := s.tiles[u].events
		k := sort.Search(len(evs), func(k int) bool { return evs[k].t >= t })
		for ; k < len(evs) && evs[k].t < old; k++ {
			if j := evs[k].x; !dep[j] {
				dep[j] = true
				queue = append(queue, j)
			}
		}
	}
	for len(queue) > 0 {
		i := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		x, ev := s.phase[i], s.events[i]
		lower(x.Src, ev.Send)
		for k, a := range ev.Arrive {
			lower(x.DestAt(k), a)
		}
	}
	return dep
}

// repair builds an exact scheduler holding every transfer not in dep at
// the cycle s gave it, in s's commit order, then schedules the others.
// It returns the transfers it scheduled anew: those of dep, and any kept
// one that no longer fits its cycle.
func (s *scheduler) repair(dep []bool) (*scheduler, []int) {
	r := newSchedulerIx(s.p, s.phase, s.opt, s.st, s.ix)
	var moved []int
	for _, i := range s.order {
		if dep[i] || !r.place(i, s.events[i].Send, s.events[i].Pair) {
			moved = append(moved, i)
		}
	}
	r.run()
	sort.Ints(moved)
	return r, moved
}

// place commits transfer i at send cycle t (send2 when pair) if every
// tile and the bus take it exactly then.
func (s *scheduler) place(i int, t int64, pair bool) bool {
	x := s.phase[i]
	dur, slots := int64(x.Words), 1
	if pair {
		dur, slots = dur/2, 2
	}
	s.sp, s.rps = s.plans(i, s.rps)
	if s.tiles[x.Src].nextSend(t, s.sp.need) != t || s.nextBus(x.Src, t, dur, slots) != t {
		return false
	}
	for k := range s.rps {
		u := x.DestAt(k)
		l := int64(s.p.Latency(x.Src, u))
		if s.tiles[u].nextRecv(t+l, s.rps[k].need) != t+l {
			return false
		}
	}
	s.commit(cand{x: int32(i), start: t, prio: s.prio(x), words: int32(x.Words)}, pair)
	return true
}
