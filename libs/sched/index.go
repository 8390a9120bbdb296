package sched

// phaseIndex is what every pass over one phase starts from, computed once
// and shared read-only by the passes: each tile's distinct operand values
// numbered (the register cache counts the pending events reading each
// value by number, not in a map), the operands' numbers of every send and
// reception, and the tiles' initial loads.
type phaseIndex struct {
	send   [][3]int32 // by transfer: its send operands' numbers on its sender
	recvAt []int      // by transfer: its first reception in recv
	recv   [][3]int32 // by reception: its recv operands' numbers on its tile
	nvals  []int32    // by tile: distinct operand values
	future [][]int32  // by tile: the events reading each value, before any
	events []int32    // by tile: sends and receptions
	pend   [][]int    // by tile: its sends
	remS   []int64    // by tile: words to send
	remR   []int64    // by tile: words to receive
	remI   []int64    // by tile: issue cycles of its events, at most
}

func newPhaseIndex(tiles int, phase []Transfer) *phaseIndex {
	ix := &phaseIndex{send: make([][3]int32, len(phase)), recvAt: make([]int, len(phase)+1),
		nvals: make([]int32, tiles), future: make([][]int32, tiles), events: make([]int32, tiles),
		pend: make([][]int, tiles), remS: make([]int64, tiles), remR: make([]int64, tiles), remI: make([]int64, tiles)}
	n := 0
	for i, x := range phase {
		ix.recvAt[i] = n
		n += x.Dests()
	}
	ix.recvAt[len(phase)] = n
	ix.recv = make([][3]int32, n)
	ids := make(map[uint64]int32, 2*len(phase))
	number := func(t int, ops [3]uint32) [3]int32 {
		var out [3]int32
		for k, v := range ops {
			key := uint64(t)<<32 | uint64(v)
			id, ok := ids[key]
			if !ok {
				id = ix.nvals[t]
				ids[key] = id
				ix.nvals[t]++
			}
			out[k] = id
		}
		return out
	}
	for i, x := range phase {
		ix.send[i] = number(x.Src, sendOps(x))
		ix.events[x.Src]++
		ix.pend[x.Src] = append(ix.pend[x.Src], i)
		ix.remS[x.Src] += int64(x.Words)
		ix.remI[x.Src] += issueCost(sendOps(x))
		ro := recvOps(x)
		for k := range x.Dests() {
			u := x.DestAt(k)
			ix.recv[ix.recvAt[i]+k] = number(u, ro)
			ix.events[u]++
			ix.remR[u] += int64(x.Words)
			ix.remI[u] += issueCost(ro)
		}
	}
	for t, nv := range ix.nvals {
		if nv > 0 {
			ix.future[t] = make([]int32, nv)
		}
	}
	for i, x := range phase {
		count(ix.future[x.Src], sendOps(x), ix.send[i], 1)
		ro := recvOps(x)
		for k := range x.Dests() {
			count(ix.future[x.DestAt(k)], ro, ix.recv[ix.recvAt[i]+k], 1)
		}
	}
	return ix
}

// count adds delta to the counts of the distinct non-zero values of ops
// (numbered ids), and reports the last of them whose count dropped to 0
// through mask bits (bit k: ops[k]).
func count(future []int32, ops [3]uint32, ids [3]int32, delta int32) (zero uint8) {
	for i, v := range ops {
		if v == 0 || (i > 0 && ops[0] == v) || (i > 1 && ops[1] == v) {
			continue
		}
		future[ids[i]] += delta
		if future[ids[i]] == 0 {
			zero |= 1 << i
		}
	}
	return zero
}

// recvIDs returns the numbers of transfer i's recv operands on its k-th
// receiver.
func (ix *phaseIndex) recvIDs(i, k int) [3]int32 { return ix.recv[ix.recvAt[i]+k] }
