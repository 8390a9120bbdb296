package lower

import (
	"slices"
	"sort"
	"sync"

	"ipu.local/libs/isa"
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
// one per group of destination tiles (eachDestGroup: a run of contiguous
// tiles, or tiles at one distance): per distinct (source, words,
// address) in the order of its first transfer, its groups in tile order.
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
		for u := x.Dst; u <= x.Last(); u += x.Step() {
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
		eachDestGroup(xs[f].Src, ts, func(int, int, int) { n++ })
	}
	out := make([]prog.Transfer, 0, n)
	for i, f := range keys {
		k := &xs[f]
		eachDestGroup(k.Src, dests[start[i]:start[i+1]], func(first, count, stride int) {
			x := prog.Transfer{Src: k.Src, Dst: first, DstN: count, Words: k.Words, From: k.From, To: k.To}
			if stride > 1 {
				x.Stride = stride
			}
			out = append(out, x)
		})
	}
	return out
}

// eachDestGroup calls f(first, count, stride) for the transfers that
// reach the sorted tiles ts from src, each the tiles first, first+stride,
// ...: one strided multicast when ts are equally spaced; when ts are
// runs of one length at one distance (a block's copies along the second
// axis of a grid of tiles, several tiles a copy), one strided multicast
// per place in a run if that takes fewer sends than the runs; otherwise
// the runs of consecutive tiles (eachDestRun). A sender's port is busy
// for every send of the same words, so fewer sends end it sooner.
//
// The source is often one of the tiles its block goes to (the owner of
// a row block in the row of tiles that reads it): then ts are such a
// shape with a hole at src, and the groups of ts and src together, each
// progression through src cut in two there, may take fewer sends than
// those of ts alone. The fewer of the two are taken (ts alone on a tie).
func eachDestGroup(src int, ts []int, f func(first, count, stride int)) {
	n := len(ts)
	if n < 2 || src <= ts[0] || src >= ts[n-1] {
		destGroups(src, src, ts, f)
		return
	}
	count := func(cut int, ts []int) int {
		sends := 0
		destGroups(src, cut, ts, func(int, int, int) { sends++ })
		return sends
	}
	// The groups with src win only as a progression or as a grid's
	// columns (runs alone take the sends ts's runs take); with tiles on
	// both sides of src they take two sends at least, and one only when
	// ts alone are a progression.
	at, _ := slices.BinarySearch(ts, src)
	if !gridWith(ts, at, src) {
		destGroups(src, src, ts, f)
		return
	}
	alone := count(src, ts)
	if alone <= 2 {
		destGroups(src, src, ts, f)
		return
	}
	var buf [64]int
	with := buf[:0]
	if n+1 > len(buf) {
		with = make([]int, 0, n+1)
	}
	with = append(append(append(with, ts[:at]...), src), ts[at:]...)
	if count(-1, with) < alone {
		destGroups(src, -1, with, f)
		return
	}
	destGroups(src, src, ts, f)
}

// gridWith reports whether ts with src inserted at index at are equally
// spaced, or runs of one length at one distance: the shapes destGroups
// makes progressions of (a necessary test, without the stride limits).
func gridWith(ts []int, at, src int) bool {
	tile := func(i int) int {
		switch {
		case i < at:
			return ts[i]
		case i == at:
			return src
		}
		return ts[i-1]
	}
	n := len(ts) + 1
	first := tile(1) - tile(0)
	if first > 1 {
		for i := 2; i < n; i++ {
			if tile(i)-tile(i-1) != first {
				return false
			}
		}
		return true
	}
	// Runs: length l, then a gap of d; every later run alike, the last
	// one complete.
	l := 1
	for l < n && tile(l)-tile(l-1) == 1 {
		l++
	}
	if l == n {
		return true
	}
	d := tile(l) - tile(l-1)
	for i := l; i < n; i++ {
		want := 1
		if i%l == 0 {
			want = d
		}
		if tile(i)-tile(i-1) != want {
			return false
		}
	}
	return n%l == 0
}

// destGroups is eachDestGroup's shapes of ts, whose runs eachDestRun
// cuts at cut (src, or -1 when ts hold src): every progression it finds
// goes to f through eachOffSource, which leaves src out.
func destGroups(src, cut int, ts []int, f func(first, count, stride int)) {
	if len(ts) >= 2 {
		if st := ts[1] - ts[0]; st > 1 && spaced(ts, st) {
			eachOffSource(src, ts[0], len(ts), st, f)
			return
		}
	}
	runs, length, alike := 0, 0, true
	var first, second int
	eachDestRun(cut, ts, func(a, b int) {
		switch runs {
		case 0:
			first, length = a, b-a
		case 1:
			second = a
		}
		alike = alike && b-a == length && (runs < 2 || a-first == runs*(second-first))
		runs++
	})
	if alike && runs > length && runs >= 2 && second-first <= isa.MaxSendStride {
		for j := range length {
			eachOffSource(src, first+j, runs, second-first, f)
		}
		return
	}
	eachDestRun(cut, ts, func(a, b int) { eachOffSource(src, a, b-a, 1, f) })
}

// eachOffSource calls f for the progression first, first+stride, ...
// (count tiles), or for its parts before and after src when src is on
// it; a part of one tile has stride 1.
func eachOffSource(src, first, count, stride int, f func(first, count, stride int)) {
	part := func(first, count int) {
		if count == 1 {
			f(first, 1, 1)
		} else if count > 1 {
			f(first, count, stride)
		}
	}
	if !inProgression(src, first, count, stride) {
		part(first, count)
		return
	}
	k := (src - first) / stride
	part(first, k)
	part(src+stride, count-k-1)
}

// spaced reports whether the sorted ts are stride apart, and stride a
// send's stride.
func spaced(ts []int, stride int) bool {
	if stride > isa.MaxSendStride {
		return false
	}
	for i := 2; i < len(ts); i++ {
		if ts[i]-ts[i-1] != stride {
			return false
		}
	}
	return true
}

// inProgression reports whether tile u is one of first, first+stride,
// ... (count of them).
func inProgression(u, first, count, stride int) bool {
	return u >= first && u <= first+(count-1)*stride && (u-first)%stride == 0
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
