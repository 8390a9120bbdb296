package sim

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
)

// arrival is one send's stream of words at one destination: n cycles from
// c0, per words each.
type arrival struct {
	c0   int64
	n    uint32
	per  uint32
	src  int
	send int // index in the source tile's sends
}

// exchangeScratch is the exchange resolution's state, reused across
// supersteps: each tile's arrivals, and the tiles that receive or listen
// (in tile order).
type exchangeScratch struct {
	arr  [][]arrival
	todo []int
}

// gatherArrivals collects every send of list's tiles as arrivals at its
// destinations, each tile's sorted by first cycle, then source, then
// send, and the tiles to resolve; it reports whether there are any.
func (m *Machine) gatherArrivals(list []int) bool {
	x := &m.xs
	if len(x.arr) != len(m.tiles) {
		x.arr = make([][]arrival, len(m.tiles))
	}
	for u := range x.arr {
		x.arr[u] = x.arr[u][:0]
	}
	busy := false
	for _, s := range list {
		r := &m.tiles[s].res
		for si := range r.sends {
			sd := &r.sends[si]
			a := arrival{n: sd.n, per: 1, src: s, send: si}
			if sd.pair {
				a.n, a.per = sd.n/2, 2
			}
			for k, u := uint32(0), int(sd.dstLo); k < sd.dstN; k, u = k+1, u+int(sd.dstStride) {
				a.c0 = sd.t + int64(m.p.Latency(s, u))
				x.arr[u] = append(x.arr[u], a)
				busy = true
			}
		}
		if len(r.recvs) > 0 {
			busy = true
		}
	}
	x.todo = x.todo[:0]
	if !busy {
		return false
	}
	for u := range m.tiles {
		if len(x.arr[u]) > 0 || len(m.listens(u)) > 0 {
			x.todo = append(x.todo, u)
		}
	}
	m.eachReceiver(func(u int, _ *faultCand) {
		slices.SortFunc(x.arr[u], func(a, b arrival) int {
			if c := cmp.Compare(a.c0, b.c0); c != 0 {
				return c
			}
			if c := cmp.Compare(a.src, b.src); c != 0 {
				return c
			}
			return cmp.Compare(a.send, b.send)
		})
	}, nil)
	return true
}

// listens returns tile u's listening windows of this superstep (none when
// it is not running).
func (m *Machine) listens(u int) []recvRec {
	if t := &m.tiles[u]; t.active && !t.halted {
		return t.res.recvs
	}
	return nil
}

// resolveExchange matches every word that arrived at a tile with the
// tile's listening windows (gatherArrivals collected them), by cycle then
// tile. With store false it only offers the faults to best; with store
// true (called only when the superstep has no fault) it writes the
// received words to memory. The tiles are resolved side by side; best
// gets the same fault as from resolving them in tile order.
func (m *Machine) resolveExchange(phase int, best *faultCand, store bool) {
	m.eachReceiver(func(u int, fc *faultCand) {
		m.resolveTile(u, m.xs.arr[u], m.listens(u), phase, fc, store)
	}, best)
}

// receiverChunks is the number of parts per worker eachReceiver cuts the
// receiving tiles into (their work is uneven).
const receiverChunks = 4

// eachReceiver calls f for every tile of m.xs.todo, on up to m.parallel()
// goroutines. Each contiguous part of the tiles offers its faults to a
// candidate of its own, and the parts' candidates are offered to best in
// tile order afterwards (when best is not nil): the earliest fault, and
// of equal ones the first offered, as in one pass in tile order. A panic
// (a page of the device file that the host cannot provide) is raised
// again in the caller's goroutine, whose guard reports it.
func (m *Machine) eachReceiver(f func(u int, fc *faultCand), best *faultCand) {
	todo := m.xs.todo
	parts := min(len(todo), m.parallel()*receiverChunks)
	cands := make([]faultCand, parts)
	panics := make([]any, parts)
	m.inParts(parts, func(k int) {
		defer func() { panics[k] = recover() }()
		for _, u := range todo[k*len(todo)/parts : (k+1)*len(todo)/parts] {
			f(u, &cands[k])
		}
	})
	for k := range parts {
		if panics[k] != nil {
			panic(panics[k])
		}
		if best != nil && cands[k].f != nil {
			best.offer(cands[k].f, cands[k].class, cands[k].aux)
		}
	}
}

// resolveTile resolves the exchange at receiving tile u. arr is sorted by
// first cycle; recvs are u's windows in issue order. A window ends when its
// words have arrived or the next recv starts; the barrier does not end it.
func (m *Machine) resolveTile(u int, arr []arrival, recvs []recvRec, phase int, best *faultCand, store bool) {
	// Two streams overlapping in time: the first overlap is at the start
	// of the later one.
	twoAt := never
	maxEnd, maxIdx := int64(-1), -1
	for i := range arr {
		if arr[i].c0 < maxEnd {
			twoAt = arr[i].c0
			pc := uint32(0)
			for _, w := range recvs {
				if w.t <= twoAt {
					pc = w.pc
				}
			}
			best.offer(&Fault{Kind: FaultTwoSenders, Tile: u, Context: supCtx, PC: pc, Phase: phase, Cycle: twoAt,
				Detail: fmt.Sprintf("tiles %d and %d both send to tile %d", arr[maxIdx].src, arr[i].src, u)}, 3, u)
			break
		}
		if e := arr[i].c0 + int64(arr[i].n); e > maxEnd {
			maxEnd, maxIdx = e, i
		}
	}
	mem := m.mem(u)
	noListener := func(a *arrival, c int64, why string) {
		sd := &m.tiles[a.src].res.sends[a.send]
		best.offer(&Fault{Kind: FaultNoListener, Tile: a.src, Context: supCtx, PC: sd.pc, Phase: phase, Cycle: c,
			Detail: fmt.Sprintf("word for tile %d, %s", u, why)}, 3, u)
	}

	ai, aoff := 0, uint32(0) // next arrival: arr[ai], cycle aoff of it
	wi, cur := 0, -1         // next window to open; open window
	var ce, cut int64        // open window: next expected cycle, end
	var got, need uint32
	for {
		ca := never
		if ai < len(arr) {
			ca = arr[ai].c0 + int64(aoff)
		}
		if ca >= twoAt {
			ca = never
		}
		if cur >= 0 {
			w := &recvs[cur]
			if ce >= cut || ca != ce {
				best.offer(&Fault{Kind: FaultSilent, Tile: u, Context: supCtx, PC: w.pc, Phase: phase, Cycle: ce,
					Detail: fmt.Sprintf("listening to tile %d: %d of %d words arrived", w.src, got, need)}, 3, u)
				return
			}
			a := &arr[ai]
			if uint32(a.src) != w.src {
				noListener(a, ca, fmt.Sprintf("which listens to tile %d", w.src))
				return
			}
			sd := &m.tiles[a.src].res
			widx := sd.sends[a.send].off + aoff*a.per
			// The run of cycles that can fault nowhere: the arrival's
			// cycles left, before the next window and the overlap, and
			// whose words the window still takes. Its words at once.
			if r := min(int64(a.n-aoff), cut-ce, twoAt-ca); r > 1 && uint64(r)*uint64(a.per) <= uint64(need-got) {
				n := uint32(r) * a.per
				if store {
					off := w.addr + 4*got - m.p.Memory.Lo
					copy(mem[off:off+4*n], sd.sendBytes[4*widx:4*(widx+n)])
				}
				got += n
				ce += r
				if aoff += uint32(r); aoff == a.n {
					ai, aoff = ai+1, 0
				}
				if got == need {
					cur = -1
				}
				continue
			}
			for k := uint32(0); k < a.per; k++ {
				if got == need {
					noListener(a, ca, fmt.Sprintf("after its recv of %d words from tile %d completed", need, w.src))
					return
				}
				if store {
					off := w.addr + 4*got - m.p.Memory.Lo
					copy(mem[off:off+4], sd.sendBytes[4*(widx+k):4*(widx+k+1)])
				}
				got++
			}
			ce++
			if aoff++; aoff == a.n {
				ai, aoff = ai+1, 0
			}
			if got == need {
				cur = -1
			}
			continue
		}
		ws := never
		if wi < len(recvs) {
			ws = recvs[wi].t
		}
		if ca == never && ws == never {
			return
		}
		if ca < ws {
			noListener(&arr[ai], ca, "which is not listening")
			return
		}
		cur, ce, got, need = wi, ws, 0, recvs[wi].words
		wi++
		cut = never
		if wi < len(recvs) {
			cut = recvs[wi].t
		}
		if need == 0 {
			cur = -1
		}
	}
}

// checkBus finds supertiles whose tiles use more exchange bus slots in one
// cycle than the bus has: send takes one slot per cycle, send2 two. The
// fault is at the send that issued later (by tile index on a tie).
func (m *Machine) checkBus(list []int, phase int, best *faultCand) {
	type use struct {
		start, end int64
		slots      int
		tile       int
		pc         uint32
	}
	capacity := m.p.SupertileSize
	if capacity < 1 {
		return
	}
	var uses, active []use
	for i := 0; i < len(list); {
		st := m.p.Supertile(list[i])
		j := i
		senders := 0
		uses = uses[:0]
		for ; j < len(list) && m.p.Supertile(list[j]) == st; j++ {
			r := &m.tiles[list[j]].res
			if len(r.sends) > 0 {
				senders++
			}
			for _, sd := range r.sends {
				u := use{start: sd.t, end: sd.t + int64(sd.n), slots: 1, tile: list[j], pc: sd.pc}
				if sd.pair {
					u.end, u.slots = sd.t+int64(sd.n/2), 2
				}
				uses = append(uses, u)
			}
		}
		i = j
		if senders < 2 && capacity >= 2 {
			continue
		}
		sort.Slice(uses, func(a, b int) bool {
			if uses[a].start != uses[b].start {
				return uses[a].start < uses[b].start
			}
			return uses[a].tile < uses[b].tile
		})
		active = active[:0]
		for _, u := range uses {
			n := 0
			for _, a := range active {
				if a.end > u.start {
					active[n] = a
					n++
				}
			}
			active = active[:n]
			total := u.slots
			other := -1
			for _, a := range active {
				total += a.slots
				if a.tile != u.tile {
					other = a.tile
				}
			}
			if total > capacity {
				best.offer(&Fault{Kind: FaultBus, Tile: u.tile, Context: supCtx, PC: u.pc, Phase: phase, Cycle: u.start,
					Detail: fmt.Sprintf("tiles %d and %d need %d of the supertile's %d bus slots", other, u.tile, total, capacity)}, 2, 0)
				break
			}
			active = append(active, u)
		}
	}
}
