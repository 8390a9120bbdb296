package lower

import (
	"sort"
	"sync"

	"ipu.local/libs/prog"
)

// mcKey is what multicast merges one source tile's transfers by.
type mcKey struct {
	from, to prog.Ref
	words    int
}

// smallKeys is the most keys of one source firstOfKey looks up one by
// one before it takes a map.
const smallKeys = 8

// mcIndexes are multicast's key maps, kept cleared between calls. A map
// holds one source tile's keys at a time: a relayout over every tile
// makes tens of thousands of keys, and one map of them all missed the
// cache on most look-ups.
var mcIndexes = sync.Pool{New: func() any { return map[mcKey]int32{} }}

// multicast merges transfers of the same words to the same address into
// one per run of contiguous destination tiles: per distinct (source,
// words, address) in the order of its first transfer, its runs in tile
// order.
func multicast(xs []prog.Transfer) []prog.Transfer {
	if len(xs) == 0 {
		return nil // nil when there are none, as callers may test
	}
	first := firstOfKey(xs)
	// Keys numbered in first-seen order; the dests of every key in one
	// array (a key's in transfer order, then sorted), not a slice per key.
	id := make([]int32, len(xs))
	var keys []int32 // each key's first transfer
	for j := range xs {
		if f := first[j]; f == int32(j) {
			id[j] = int32(len(keys))
			keys = append(keys, f)
		} else {
			id[j] = id[f]
		}
	}
	start := make([]int32, len(keys)+1)
	for j, x := range xs {
		start[id[j]+1] += int32(x.Dests())
	}
	for i := range keys {
		start[i+1] += start[i]
	}
	dests := make([]int, start[len(keys)])
	next := append([]int32(nil), start[:len(keys)]...) // each key's next free place
	for j, x := range xs {
		i := id[j]
		for u := x.Dst; u < x.Dst+x.Dests(); u++ {
			dests[next[i]] = u
			next[i]++
		}
	}
	// Each key's dests sorted, and the transfers counted, so that out
	// is allocated once (growing it was most of multicast's allocation).
	n := 0
	for i, f := range keys {
		ts := dests[start[i]:start[i+1]]
		sort.Ints(ts)
		eachDestRun(xs[f].Src, ts, func(int, int) { n++ })
	}
	out := make([]prog.Transfer, 0, n)
	for i, f := range keys {
		k := &xs[f]
		eachDestRun(k.Src, dests[start[i]:start[i+1]], func(a, b int) {
			out = append(out, prog.Transfer{Src: k.Src, Dst: a, DstN: b - a, Words: k.Words, From: k.From, To: k.To})
		})
	}
	return out
}

// firstOfKey returns, for each transfer, the index of the first transfer
// with its source, words and addresses. The transfers are taken source
// by source (a counting sort, each source's in order). A source's first
// transfers of each key are looked up one by one while there are at
// most smallKeys of them (a pack's source sends a few runs to many
// tiles: hashing every transfer's key was most of multicast), and in a
// map of the source's own from then on.
func firstOfKey(xs []prog.Transfer) []int32 {
	tiles := 0
	for _, x := range xs {
		tiles = max(tiles, x.Src+1)
	}
	at := make([]int32, tiles+1)
	for _, x := range xs {
		at[x.Src+1]++
	}
	for t := 0; t < tiles; t++ {
		at[t+1] += at[t]
	}
	order := make([]int32, len(xs))
	fill := append([]int32(nil), at[:tiles]...)
	for j, x := range xs {
		order[fill[x.Src]] = int32(j)
		fill[x.Src]++
	}
	index := mcIndexes.Get().(map[mcKey]int32)
	defer mcIndexes.Put(index)
	first := make([]int32, len(xs))
	var keys [smallKeys]int32 // the source's first transfer of each key so far
	for t := 0; t < tiles; t++ {
		group := order[at[t]:at[t+1]]
		nk, mapped := 0, false
		for _, j := range group {
			x := &xs[j]
			if !mapped {
				f := int32(-1)
				for _, k := range keys[:nk] {
					if y := &xs[k]; y.From == x.From && y.To == x.To && y.Words == x.Words {
						f = k
						break
					}
				}
				if f >= 0 {
					first[j] = f
					continue
				}
				if nk < smallKeys {
					keys[nk], first[j] = j, j
					nk++
					continue
				}
				for _, k := range keys[:nk] {
					y := &xs[k]
					index[mcKey{y.From, y.To, y.Words}] = k
				}
				mapped = true
			}
			k := mcKey{x.From, x.To, x.Words}
			if f, ok := index[k]; ok {
				first[j] = f
			} else {
				index[k] = j
				first[j] = j
			}
		}
		if mapped {
			clear(index)
		}
	}
	return first
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
