package sched

import "ipu.local/libs/arch"

// Bound returns a lower bound on the cycles of any code for the phase
// under opt (send2 allowed unless opt.NoSend2; syncs after the tile's
// traffic unless opt.EarlySync). It is the largest of, per tile or
// supertile:
//
//   - send port: a send cannot issue before its non-zero operands are
//     loaded (6 cycles each), nor before its receivers' recvs could;
//     then every stream the tile sends occupies the port (send2 halves
//     an even one) and at least the 6 cycles to the next instruction;
//   - listening: the first word cannot arrive before its send could
//     issue plus the latency; then every incoming stream occupies the
//     receiver, and at least 6 cycles;
//   - bus: the supertile's words at SupertileSize words per cycle;
//   - issue: one instruction per event, one load per distinct non-zero
//     operand value, the sync, 6 cycles apart;
//
// with the sync after the last word (or, with EarlySync, 6 cycles after
// the last event); without EarlySync, a sender's last stream also has to
// reach its receivers. The bound ignores that gaps of 7 to 11 cycles
// cannot be issued, which is what most of the distance to it is made of
// in issue-bound phases (see RATIONALE.md).
func Bound(p *arch.Preset, phase []Transfer, opt Options) (int64, error) {
	if err := check(p, phase, opt); err != nil {
		return 0, err
	}
	return bound(p, phase, opt), nil
}

func bound(p *arch.Preset, phase []Transfer, opt Options) int64 {
	type acc struct {
		first   int64 // earliest first event of the resource
		busy    int64 // cycles the resource is busy
		longest int64 // longest single stream
		slack   int64 // most cycles a stream leaves idle before the next event
		lat     int64 // least latency to a receiver
	}
	const far = int64(1) << 62
	newAcc := func(n int) []acc {
		a := make([]acc, n)
		for i := range a {
			a[i].first, a[i].lat = far, far
		}
		return a
	}
	send, listen, bus := newAcc(p.Tiles), newAcc(p.Tiles), newAcc(p.Tiles/p.SupertileSize+1)
	events := make([]int64, p.Tiles)
	// The operand values each tile's events read, bucketed by tile.
	vals := newBuckets[uint32](p.Tiles)
	for _, x := range phase {
		vals.count(x.Src, 3)
		for u := x.Dst; u <= x.Last(); u += x.Step() {
			vals.count(u, 3)
		}
	}
	vals.alloc()
	// A tile's consecutive sends (and recvs) are instructions 6 cycles
	// apart at least, and each waits for the previous stream to end.
	add := func(a *acc, first, dur int64) {
		a.slack = max(a.slack, issue-dur)
		dur = max(dur, issue)
		a.first = min(a.first, first)
		a.busy += dur
		a.longest = max(a.longest, dur)
	}
	for _, x := range phase {
		dur := int64(x.Words)
		if !opt.NoSend2 && x.Words%2 == 0 {
			dur /= 2
		}
		so, ro := sendOps(x), recvOps(x)
		start := issue * int64(distinctNonZero(so))
		// The receivers' recvs need their own loads too.
		rstart := issue * int64(distinctNonZero(ro))
		for u := x.Dst; u <= x.Last(); u += x.Step() {
			start = max(start, rstart-int64(p.Latency(x.Src, u)))
		}
		add(&send[x.Src], start, dur)
		lat := far
		for u := x.Dst; u <= x.Last(); u += x.Step() {
			lat = min(lat, int64(p.Latency(x.Src, u)))
		}
		send[x.Src].lat = min(send[x.Src].lat, lat)
		b := &bus[p.Supertile(x.Src)]
		b.first = min(b.first, start)
		b.busy += int64(x.Words)
		b.longest = max(b.longest, int64(x.Words)) // a send's time on the bus, at most
		events[x.Src]++
		for _, v := range so {
			vals.put(x.Src, v)
		}
		for u := x.Dst; u <= x.Last(); u += x.Step() {
			add(&listen[u], start+int64(p.Latency(x.Src, u)), dur)
			events[u]++
			for _, v := range ro {
				vals.put(u, v)
			}
		}
	}
	// Distinct non-zero values per tile.
	loads := make([]int64, p.Tiles)
	var set distinctSet
	for t := range p.Tiles {
		loads[t] = set.count(vals.of(t))
	}
	// end returns the tile cycles after a resource busy from first on:
	// the sync issues no earlier than its last word, or 6 cycles after
	// its last event, which starts no earlier than busy-longest in.
	end := func(a acc) int64 {
		if a.first == far {
			return 0
		}
		if opt.EarlySync {
			return a.first + a.busy - a.longest + issue + 1
		}
		return a.first + a.busy + 1
	}
	var lb int64
	for t := 0; t < p.Tiles; t++ {
		lb = max(lb, end(send[t]), end(listen[t]))
		if a := send[t]; a.first != far && !opt.EarlySync {
			// The receivers of the last stream sync after its last word.
			lb = max(lb, a.first+a.busy-a.slack+a.lat+1)
		}
		if events[t] > 0 {
			lb = max(lb, issue*(events[t]+loads[t])+1)
		}
	}
	for _, b := range bus {
		c := int64(p.SupertileSize)
		b.busy = (b.busy + c - 1) / c
		lb = max(lb, end(b))
	}
	return lb
}

// distinctNonZero counts the registers an instruction's operands need
// loaded at least once: $mzero serves 0, equal values share one.
func distinctNonZero(ops [3]uint32) int {
	n := 0
	for i, v := range ops {
		if v == 0 {
			continue
		}
		dup := false
		for _, w := range ops[:i] {
			dup = dup || w == v
		}
		if !dup {
			n++
		}
	}
	return n
}
