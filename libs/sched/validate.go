package sched

import (
	"cmp"
	"fmt"
	"slices"
	"sort"

	"ipu.local/libs/arch"
	"ipu.local/libs/isa"
)

// Validate replays the plan's code under the simulator's exchange rules,
// trusting nothing but the code: it issues every tile's instructions with
// their timing (6 cycles apart, delay, a send stalled by its busy port),
// then checks the supertile buses, that every arriving word meets a recv
// window listening to its sender in that very cycle and every window gets
// all its words, and that each destination receives exactly its
// transfers' words. It also checks the plan's cycles and events against
// the replay, and, without EarlySync, that every tile syncs after its
// traffic.
func Validate(p *arch.Preset, phase []Transfer, pl *Plan) error {
	if err := check(p, phase, pl.Options); err != nil {
		return err
	}
	if len(pl.Events) != len(phase) {
		return fmt.Errorf("sched: validate: %d events for %d transfers", len(pl.Events), len(phase))
	}
	r, err := replay(p, phase, pl.Tiles, pl.Options.EarlySync)
	if err != nil {
		return fmt.Errorf("sched: validate: %w", err)
	}
	var makespan int64
	for i, tc := range pl.Tiles {
		if r.cycles[i] != tc.Cycles {
			return fmt.Errorf("sched: validate: tile %d: replay takes %d cycles, plan says %d", tc.Tile, r.cycles[i], tc.Cycles)
		}
		makespan = max(makespan, tc.Cycles)
	}
	makespan = max(makespan, lastArrival(pl.Events))
	if makespan != pl.Makespan {
		return fmt.Errorf("sched: validate: replay takes %d cycles, plan says %d", makespan, pl.Makespan)
	}
	return r.checkEvents(phase, pl.Events)
}

// replay issues the tiles' code and checks the bus, the exchange and the
// delivered words against the phase.
func replay(p *arch.Preset, phase []Transfer, tiles []TileCode, early bool) (*replayer, error) {
	r := newReplayer(p)
	r.reserve(tiles)
	for i := range tiles {
		tc := &tiles[i]
		if tc.Tile < 0 || tc.Tile >= p.Tiles || (i > 0 && tc.Tile <= tiles[i-1].Tile) {
			return nil, fmt.Errorf("tile list entry %d: tile %d out of order or range", i, tc.Tile)
		}
		cycles, err := r.run(tc)
		if err != nil {
			return nil, fmt.Errorf("tile %d %w", tc.Tile, err)
		}
		r.cycles = append(r.cycles, cycles)
	}
	if err := r.checkBus(); err != nil {
		return nil, err
	}
	got, err := r.resolve(early)
	if err != nil {
		return nil, err
	}
	n := 0
	for _, x := range phase {
		n += x.Dests()
	}
	want := make([]segment, 0, n)
	for _, x := range phase {
		for u := x.Dst; u <= x.Last(); u += x.Step() {
			want = append(want, segment{u, x.DstAddr, x.Src, x.SrcAddr, uint32(x.Words)})
		}
	}
	want = mergeSegments(want)
	if len(got) != len(want) {
		return nil, fmt.Errorf("%d delivered runs, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			return nil, fmt.Errorf("delivered %s, want %s", got[i], want[i])
		}
	}
	return r, nil
}

// rsend is a replayed send; rrecv a replayed recv.
type (
	rsend struct {
		tile, pc int
		t        int64
		lo, n    int
		stride   int // tiles from one receiver to the next (>= 1)
		addr     uint32
		words    uint32
		pair     bool
	}
	rrecv struct {
		pc    int
		t     int64
		src   int
		addr  uint32
		words uint32
	}
)

// replayer holds the replayed events, by tile where they are per tile.
type replayer struct {
	p      *arch.Preset
	sends  []rsend
	sendOf [][2]int // by tile: its sends, sends[lo:hi] (one tile's code runs at once)
	recvs  [][]rrecv
	synced []bool  // by tile: it has code
	syncs  []int64 // by tile: sync issue cycle
	port   []int64 // by tile: cycle its port frees
	cycles []int64 // per tile of the code, in order
}

func newReplayer(p *arch.Preset) *replayer {
	return &replayer{p: p, sendOf: make([][2]int, p.Tiles), recvs: make([][]rrecv, p.Tiles),
		synced: make([]bool, p.Tiles), syncs: make([]int64, p.Tiles), port: make([]int64, p.Tiles)}
}

// reserve sizes the event lists for the sends and recvs the code holds
// (a repeat loop's issue more, which append): the 12-layer encoder's
// schedules replay millions of them.
func (r *replayer) reserve(tiles []TileCode) {
	sends := 0
	for i := range tiles {
		tc := &tiles[i]
		recvs := 0
		for _, in := range tc.Code {
			switch in.Op {
			case isa.SEND, isa.SEND2:
				sends++
			case isa.RECV:
				recvs++
			}
		}
		if tc.Tile >= 0 && tc.Tile < len(r.recvs) && recvs > 0 {
			r.recvs[tc.Tile] = make([]rrecv, 0, recvs)
		}
	}
	r.sends = make([]rsend, 0, sends)
	r.cycles = make([]int64, 0, len(tiles))
}

// sendAt returns the index of the send tile issued at cycle t.
func (r *replayer) sendAt(tile int, t int64) (int, bool) {
	lo, hi := r.sendOf[tile][0], r.sendOf[tile][1]
	// A tile issues its events at increasing cycles.
	k := lo + sort.Search(hi-lo, func(k int) bool { return r.sends[lo+k].t >= t })
	return k, k < hi && r.sends[k].t == t
}

// recvAt reports whether tile issued a recv at cycle t.
func (r *replayer) recvAt(tile int, t int64) bool {
	ws := r.recvs[tile]
	k := sort.Search(len(ws), func(k int) bool { return ws[k].t >= t })
	return k < len(ws) && ws[k].t == t
}

// run issues one tile's code and returns its cycles.
func (r *replayer) run(tc *TileCode) (int64, error) {
	r.sendOf[tc.Tile] = [2]int{len(r.sends), len(r.sends)}
	cycles, port, err := issueCode(tc, true, func(e issued) error {
		switch e.op {
		case isa.SEND, isa.SEND2:
			return r.send(tc.Tile, e.pc, e.t, e.op == isa.SEND2, e.val)
		case isa.RECV:
			return r.recv(tc.Tile, e.pc, e.t, e.val[0], e.val[1], e.val[2])
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	r.sendOf[tc.Tile][1] = len(r.sends)
	r.synced[tc.Tile] = true
	r.syncs[tc.Tile] = cycles - 1
	r.port[tc.Tile] = port
	return cycles, nil
}

// issued is a send, send2 or recv as a tile's code issues it.
type issued struct {
	pc  int
	t   int64
	op  isa.Op
	val [3]uint32 // its operands: d, a, b
}

// issueCode issues a tile's code alone, calling visit for every send,
// send2 and recv, and returns its cycles (the sync's issue cycle + 1) and
// the cycle its send port frees. Besides the straight-line code Schedule
// emits it follows the repeat loops Compress makes: rpti, addi and
// post-increment ldm from the tile's patch table. With check, every
// instruction must encode.
func issueCode(tc *TileCode, check bool, visit func(issued) error) (int64, int64, error) {
	var regs [16]uint32
	now, portFree := int64(0), int64(none)
	var lp loop
	for pc := 0; pc < len(tc.Code); {
		in := tc.Code[pc]
		if check {
			if _, err := isa.Encode(in); err != nil {
				return 0, 0, fmt.Errorf("pc %d: %w", pc, err)
			}
		}
		wait, npc := int64(0), pc+1
		switch in.Op {
		case isa.LI:
			regs[in.D] = uint32(in.Imm)
		case isa.LIH:
			regs[in.D] = regs[in.D]&0xFFFF | uint32(in.Imm)<<16
		case isa.ADDI:
			regs[in.D] = regs[in.A] + uint32(in.Imm)
		case isa.LDMP:
			v, err := tc.patch(regs[in.A])
			if err != nil {
				return 0, 0, fmt.Errorf("pc %d: %w", pc, err)
			}
			regs[in.D] = v
			regs[in.A] += uint32(in.Imm)
		case isa.NOP:
		case isa.RPTI:
			count, n := int(in.Imm>>8), int(in.Imm&0xFF)
			if lp.on || count == 0 || npc+n > len(tc.Code) {
				return 0, 0, fmt.Errorf("pc %d: repeat of %d times %d instructions (nested, empty or past the code)", pc, count, n)
			}
			if n > 0 {
				lp = loop{true, npc, npc + n, count}
			}
		case isa.DELAY:
			wait = int64(in.Imm)
		case isa.SEND, isa.SEND2, isa.RECV:
			if in.Op != isa.RECV {
				now = max(now, portFree)
			}
			e := issued{pc, now, in.Op, [3]uint32{regs[in.D], regs[in.A], regs[in.B]}}
			if err := visit(e); err != nil {
				return 0, 0, err
			}
			switch in.Op {
			case isa.SEND:
				portFree = now + int64(isa.SendWords(e.val[2]))
			case isa.SEND2:
				portFree = now + int64(isa.SendWords(e.val[2])/2)
			}
		case isa.SYNC:
			if pc != len(tc.Code)-1 || lp.on {
				return 0, 0, fmt.Errorf("pc %d: sync before the end of the code", pc)
			}
			return now + 1, portFree, nil
		default:
			return 0, 0, fmt.Errorf("pc %d: %s is not exchange code", pc, in.Op)
		}
		regs[15] = 0
		now += issue + wait
		pc = lp.next(npc)
	}
	return 0, 0, fmt.Errorf("code does not end with sync")
}

// loop is the state of a repeat loop: while on, reaching end with more
// than one iteration left goes back to start.
type loop struct {
	on         bool
	start, end int
	rem        int
}

// next returns the pc after an instruction whose successor is npc.
func (l *loop) next(npc int) int {
	if !l.on || npc != l.end {
		return npc
	}
	if l.rem > 1 {
		l.rem--
		return l.start
	}
	l.on = false
	return npc
}

// patch returns the word of the tile's patch table at addr.
func (tc *TileCode) patch(addr uint32) (uint32, error) {
	i := (uint64(addr) - uint64(tc.TableAt)) / 4
	if addr < tc.TableAt || addr%4 != tc.TableAt%4 || i >= uint64(len(tc.Table)) {
		return 0, fmt.Errorf("load at %#x outside the patch table [%#x, +%d words)", addr, tc.TableAt, len(tc.Table))
	}
	return tc.Table[i], nil
}

// send replays a send (send2 when pair) issued at now with operands
// d, a, b.
func (r *replayer) send(tile, pc int, now int64, pair bool, ops [3]uint32) error {
	d, a, cnt := ops[0], ops[1], ops[2]
	b, stride := isa.SendWords(cnt), int(isa.SendStride(cnt))
	op := isa.SEND
	if pair {
		op = isa.SEND2
	}
	lo, n := int(d&0xFFFF), int(d>>16)
	if n == 0 {
		n = 1
	}
	switch {
	case b == 0 || (pair && b%2 != 0) || uint64(b) > uint64(r.p.Memory.Size()/4):
		return fmt.Errorf("pc %d: %s of %d words", pc, op, b)
	case lo+(n-1)*stride >= r.p.Tiles:
		return fmt.Errorf("pc %d: %s to %d tiles from %d every %d: beyond the device", pc, op, n, lo, stride)
	case !r.p.Memory.Contains(a, 4*b) || a%4 != 0:
		return fmt.Errorf("pc %d: %s reads [%#x, +%d words): not in tile memory or misaligned", pc, op, a, b)
	}
	r.sends = append(r.sends, rsend{tile, pc, now, lo, n, stride, a, b, pair})
	return nil
}

// recv replays a recv issued at now.
func (r *replayer) recv(tile, pc int, now int64, src, a, b uint32) error {
	switch {
	case int64(src) >= int64(r.p.Tiles):
		return fmt.Errorf("pc %d: recv from tile %d beyond the device", pc, src)
	case b == 0 || uint64(b) > uint64(r.p.Memory.Size()/4) || !r.p.Memory.Contains(a, 4*b) || a%4 != 0:
		return fmt.Errorf("pc %d: recv of %d words at %#x: empty, not in tile memory or misaligned", pc, b, a)
	}
	r.recvs[tile] = append(r.recvs[tile], rrecv{pc, now, int(src), a, b})
	return nil
}

// checkBus checks that no supertile's sends use more slots in one cycle
// than it has.
func (r *replayer) checkBus() error {
	type edge struct {
		t     int64
		delta int
		s     int // send index
	}
	// Each supertile's edges in one array cut by supertile, counted
	// first.
	n := r.p.Supertile(r.p.Tiles-1) + 1
	at := make([]int, n+1)
	for _, s := range r.sends {
		at[r.p.Supertile(s.tile)+1] += 2
	}
	for k := 1; k <= n; k++ {
		at[k] += at[k-1]
	}
	all := make([]edge, at[n])
	next := slices.Clone(at[:n])
	for i, s := range r.sends {
		dur, slots := int64(s.words), 1
		if s.pair {
			dur, slots = dur/2, 2
		}
		st := r.p.Supertile(s.tile)
		all[next[st]], all[next[st]+1] = edge{s.t, slots, i}, edge{s.t + dur, -slots, i}
		next[st] += 2
	}
	for k := range n {
		es := all[at[k]:at[k+1]]
		if len(es) == 0 {
			continue
		}
		slices.SortFunc(es, func(a, b edge) int {
			if a.t != b.t {
				return cmp.Compare(a.t, b.t)
			}
			if a.delta != b.delta {
				return cmp.Compare(a.delta, b.delta)
			}
			return cmp.Compare(a.s, b.s)
		})
		use := 0
		for _, e := range es {
			use += e.delta
			if use > r.p.SupertileSize {
				s := r.sends[e.s]
				return fmt.Errorf("tile %d pc %d: supertile %d uses %d bus slots at cycle %d, it has %d", s.tile, s.pc, k, use, e.t, r.p.SupertileSize)
			}
		}
	}
	return nil
}

// stream is one send's words at one destination: n cycles from c0, per
// words a cycle.
type stream struct {
	c0   int64
	n    int64
	per  uint32
	send int
}

// segment is a run of words delivered to tile dst at dstAddr from tile
// src's srcAddr.
type segment struct {
	dst     int
	dstAddr uint32
	src     int
	srcAddr uint32
	words   uint32
}

func (s segment) String() string {
	return fmt.Sprintf("%d words from tile %d %#x to tile %d %#x", s.words, s.src, s.srcAddr, s.dst, s.dstAddr)
}

// resolve matches arrivals with recv windows at every receiver and returns
// the delivered runs, merged and sorted.
func (r *replayer) resolve(early bool) ([]segment, error) {
	// Each receiver's arrivals, in one array cut by receiver (counted
	// first: a schedule of millions of words appends no slice per tile).
	at := make([]int, r.p.Tiles+1)
	for _, s := range r.sends {
		for k, u := 0, s.lo; k < s.n; k, u = k+1, u+s.stride {
			at[u+1]++
		}
	}
	for u := 1; u < len(at); u++ {
		at[u] += at[u-1]
	}
	all := make([]stream, at[r.p.Tiles])
	next := slices.Clone(at[:r.p.Tiles])
	for i, s := range r.sends {
		st := stream{n: int64(s.words), per: 1, send: i}
		if s.pair {
			st.n, st.per = st.n/2, 2
		}
		for k, u := 0, s.lo; k < s.n; k, u = k+1, u+s.stride {
			st.c0 = s.t + int64(r.p.Latency(s.tile, u))
			all[next[u]] = st
			next[u]++
		}
	}
	windows := 0
	for _, ws := range r.recvs {
		windows += len(ws)
	}
	segs := make([]segment, 0, windows+len(all))
	for u := range r.p.Tiles {
		ss := all[at[u]:at[u+1]]
		if len(ss) == 0 && len(r.recvs[u]) == 0 {
			continue
		}
		slices.SortFunc(ss, func(a, b stream) int {
			if a.c0 != b.c0 {
				return cmp.Compare(a.c0, b.c0)
			}
			return cmp.Compare(a.send, b.send)
		})
		for i := 1; i < len(ss); i++ {
			if a, b := ss[i-1], ss[i]; b.c0 < a.c0+a.n {
				return nil, fmt.Errorf("tile %d: tiles %d and %d both send to it at cycle %d", u, r.sends[a.send].tile, r.sends[b.send].tile, b.c0)
			}
		}
		sync, synced := r.syncs[u], r.synced[u]
		if len(ss) > 0 && !synced {
			return nil, fmt.Errorf("tile %d: words arrive at a tile with no code", u)
		}
		if n := len(ss); n > 0 && !early && ss[n-1].c0+ss[n-1].n > sync {
			return nil, fmt.Errorf("tile %d: syncs at cycle %d before its last word arrives at %d", u, sync, ss[n-1].c0+ss[n-1].n-1)
		}
		ws := r.recvs[u]
		si, off := 0, int64(0)
		at := func() int64 { return ss[si].c0 + off }
		for wi, w := range ws {
			if si < len(ss) && at() < w.t {
				s := r.sends[ss[si].send]
				return nil, fmt.Errorf("tile %d pc %d: word for tile %d arrives at cycle %d with nobody listening", s.tile, s.pc, u, at())
			}
			cut := int64(1) << 62
			if wi+1 < len(ws) {
				cut = ws[wi+1].t
			}
			// Consume the window a run of cycles at a time: within one
			// stream the words come every cycle from one sender, so only
			// a run's first cycle needs the checks.
			got := uint32(0)
			for c := w.t; got < w.words; {
				if c >= cut || si >= len(ss) || at() != c {
					return nil, fmt.Errorf("tile %d pc %d: listening to tile %d, no word at cycle %d (%d of %d arrived)", u, w.pc, w.src, c, got, w.words)
				}
				st := ss[si]
				s := r.sends[st.send]
				if s.tile != w.src {
					return nil, fmt.Errorf("tile %d pc %d: word for tile %d arrives at cycle %d, which listens to tile %d", s.tile, s.pc, u, c, w.src)
				}
				per := int64(st.per)
				need := int64(w.words - got)
				k := min(st.n-off, cut-c, (need+per-1)/per)
				words := k * per
				if words > need {
					// A send2's last cycle brings a word past the window.
					return nil, fmt.Errorf("tile %d pc %d: word for tile %d arrives at cycle %d after its recv completed", s.tile, s.pc, u, c+k-1)
				}
				segs = appendRun(segs, segment{u, w.addr + 4*got, s.tile, s.addr + 4*uint32(off*per), uint32(words)})
				got += uint32(words)
				c += k
				if off += k; off == st.n {
					si, off = si+1, 0
				}
			}
		}
		if si < len(ss) {
			s := r.sends[ss[si].send]
			return nil, fmt.Errorf("tile %d pc %d: word for tile %d arrives at cycle %d with nobody listening", s.tile, s.pc, u, at())
		}
	}
	if !early {
		for t, pf := range r.port {
			if !r.synced[t] {
				continue
			}
			if pf > r.syncs[t] {
				return nil, fmt.Errorf("tile %d: syncs at cycle %d before its port frees at %d", t, r.syncs[t], pf)
			}
		}
	}
	return mergeSegments(segs), nil
}

// appendRun appends a run, extending the last run when it continues it.
func appendRun(segs []segment, w segment) []segment {
	if n := len(segs); n > 0 {
		l := &segs[n-1]
		if l.dst == w.dst && l.src == w.src && l.dstAddr+4*l.words == w.dstAddr && l.srcAddr+4*l.words == w.srcAddr {
			l.words += w.words
			return segs
		}
	}
	return append(segs, w)
}

// mergeSegments sorts runs by destination and joins the contiguous ones.
func mergeSegments(segs []segment) []segment {
	sortSegments(segs)
	out := segs[:0] // in place: it never passes the run it reads
	for _, s := range segs {
		if n := len(out); n > 0 {
			l := &out[n-1]
			if l.dst == s.dst && l.src == s.src && l.dstAddr+4*l.words == s.dstAddr && l.srcAddr+4*l.words == s.srcAddr {
				l.words += s.words
				continue
			}
		}
		out = append(out, s)
	}
	return out
}

// checkEvents checks the plan's events against the replayed code.
func (r *replayer) checkEvents(phase []Transfer, evs []Event) error {
	for i, x := range phase {
		ev := evs[i]
		k, ok := r.sendAt(x.Src, ev.Send)
		if !ok {
			return fmt.Errorf("sched: validate: transfer %d: no send on tile %d at cycle %d", i, x.Src, ev.Send)
		}
		s := r.sends[k]
		dur := int64(x.Words)
		if ev.Pair {
			dur /= 2
		}
		if s.lo != x.Dst || s.n != x.Dests() || s.stride != x.Step() || s.addr != x.SrcAddr || s.words != uint32(x.Words) || s.pair != ev.Pair || ev.Cycles != dur {
			return fmt.Errorf("sched: validate: transfer %d: the send at cycle %d on tile %d is another one", i, ev.Send, x.Src)
		}
		if len(ev.Arrive) != x.Dests() {
			return fmt.Errorf("sched: validate: transfer %d: %d arrivals for %d destinations", i, len(ev.Arrive), x.Dests())
		}
		for j, a := range ev.Arrive {
			u := x.DestAt(j)
			if a != ev.Send+int64(r.p.Latency(x.Src, u)) {
				return fmt.Errorf("sched: validate: transfer %d: arrival at tile %d at cycle %d, latency says %d", i, u, a, ev.Send+int64(r.p.Latency(x.Src, u)))
			}
			if !r.recvAt(u, a) {
				return fmt.Errorf("sched: validate: transfer %d: no recv on tile %d at cycle %d", i, u, a)
			}
		}
	}
	return nil
}

// bySegment orders runs by destination tile and address.
func bySegment(a, b segment) int {
	if a.dst != b.dst {
		return cmp.Compare(a.dst, b.dst)
	}
	return cmp.Compare(a.dstAddr, b.dstAddr)
}

// sortSegments sorts runs with bySegment: by tile with a counting sort,
// then each tile's by address. Where two runs tie, the order of the
// tied runs is that of slices.SortFunc on the whole list, as before.
func sortSegments(segs []segment) {
	if len(segs) < 2 {
		return
	}
	top := 0
	for _, s := range segs {
		top = max(top, s.dst)
	}
	if top >= 4*len(segs)+1<<16 {
		slices.SortFunc(segs, bySegment)
		return
	}
	at := make([]int, top+2)
	for _, s := range segs {
		at[s.dst+1]++
	}
	for u := 1; u < len(at); u++ {
		at[u] += at[u-1]
	}
	orig := slices.Clone(segs)
	for _, s := range orig {
		segs[at[s.dst]] = s
		at[s.dst]++
	}
	// at[u] is now where tile u's runs end.
	lo := 0
	for u := 0; u <= top; u++ {
		slices.SortFunc(segs[lo:at[u]], bySegment)
		lo = at[u]
	}
	for i := 1; i < len(segs); i++ {
		if bySegment(segs[i-1], segs[i]) == 0 {
			copy(segs, orig)
			slices.SortFunc(segs, bySegment)
			return
		}
	}
}
