package lower

import (
	"sort"
	"sync"

	"ipu.local/libs/prog"
)

// mcKey is what multicast merges transfers by.
type mcKey struct {
	src      int
	from, to prog.Ref
	words    int
}

// mcIndexes are multicast's key maps, kept cleared between calls: a
// relayout over every tile makes thousands of keys, and a fresh map of
// that size was most of multicast's time.
var mcIndexes = sync.Pool{New: func() any { return map[mcKey]int32{} }}

// multicast merges transfers of the same words to the same address into
// one per run of contiguous destination tiles.
func multicast(xs []prog.Transfer) []prog.Transfer {
	// One lookup per transfer: keys in first-seen order; the dests of
	// every key in one array (a key's in transfer order, then sorted),
	// not a slice per key.
	index := mcIndexes.Get().(map[mcKey]int32)
	defer func() {
		clear(index)
		mcIndexes.Put(index)
	}()
	keys := make([]mcKey, 0, len(xs))  // at most one a transfer: allocated once
	of := make([]int32, len(xs))       // each transfer's key
	count := make([]int32, 0, len(xs)) // dests by key
	for j, x := range xs {
		k := mcKey{x.Src, x.From, x.To, x.Words}
		i, ok := index[k]
		if !ok {
			i = int32(len(keys))
			index[k] = i
			keys, count = append(keys, k), append(count, 0)
		}
		of[j] = i
		count[i] += int32(x.Dests())
	}
	if len(keys) == 0 {
		return nil // nil when there are none, as callers may test
	}
	start := make([]int32, len(keys)+1)
	for i, c := range count {
		start[i+1] = start[i] + c
	}
	dests := make([]int, start[len(keys)])
	next := count // reused: each key's next free place
	copy(next, start)
	for j, x := range xs {
		i := of[j]
		for u := x.Dst; u < x.Dst+x.Dests(); u++ {
			dests[next[i]] = u
			next[i]++
		}
	}
	// Each key's dests sorted, and the transfers counted, so that out
	// is allocated once (growing it was most of multicast's allocation).
	n := 0
	for i, k := range keys {
		ts := dests[start[i]:start[i+1]]
		sort.Ints(ts)
		eachDestRun(k.src, ts, func(int, int) { n++ })
	}
	out := make([]prog.Transfer, 0, n)
	for i, k := range keys {
		eachDestRun(k.src, dests[start[i]:start[i+1]], func(a, b int) {
			out = append(out, prog.Transfer{Src: k.src, Dst: a, DstN: b - a, Words: k.words, From: k.from, To: k.to})
		})
	}
	return out
}

// eachDestRun calls f for each run [a, b) of contiguous tiles of the
// sorted dests ts that does not span the source tile src.
func eachDestRun(src int, ts []int, f func(a, b int)) {
	for a := 0; a < len(ts); {
		b := a + 1
		for b < len(ts) && ts[b] == ts[b-1]+1 && !(src > ts[a] && src < ts[b]) {
			b++
		}
		f(ts[a], ts[a]+b-a)
		a = b
	}
}
