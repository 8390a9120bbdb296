package lower

import (
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	"ipu.local/libs/prog"
)

// multicastSimple is multicast's definition, done the plain way: the
// distinct (source, addresses, words) in first-seen order, each one's
// destination tiles sorted and cut into groups (eachDestGroup).
func multicastSimple(xs []prog.Transfer) []prog.Transfer {
	type key struct {
		src      int
		from, to prog.Ref
		words    int
	}
	var keys []key
	dests := map[key][]int{}
	for _, x := range xs {
		k := key{x.Src, x.From, x.To, x.Words}
		if _, ok := dests[k]; !ok {
			keys = append(keys, k)
		}
		for u := x.Dst; u <= x.Last(); u += x.Step() {
			dests[k] = append(dests[k], u)
		}
	}
	var out []prog.Transfer
	for _, k := range keys {
		ts := dests[k]
		sort.Ints(ts)
		eachDestGroup(k.src, ts, func(first, n, stride int) {
			x := prog.Transfer{Src: k.src, Dst: first, DstN: n, Words: k.words, From: k.from, To: k.to}
			if stride > 1 {
				x.Stride = stride
			}
			out = append(out, x)
		})
	}
	return out
}

// TestMulticast checks multicast against its plain definition on random
// phases: repeated sends of one source's words to scattered and
// contiguous tiles, multicasts already merged, sources among their
// destinations' runs, and sources with one transfer, a few keys or more
// than smallKeys.
func TestMulticast(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	bufs := []*prog.Buffer{{ID: 0}, {ID: 1}, {ID: 2}}
	ref := func() prog.Ref {
		return prog.Ref{Buf: bufs[r.IntN(len(bufs))], Off: uint32(4 * r.IntN(3))}
	}
	wide := 0 // trials with a source of more than smallKeys keys
	for trial := 0; trial < 500; trial++ {
		tiles, sends := 2+r.IntN(40), r.IntN(60)
		if trial%2 == 1 {
			tiles, sends = 2+r.IntN(3), r.IntN(200) // many keys a source
		}
		var xs []prog.Transfer
		for range sends {
			src := r.IntN(tiles)
			x := prog.Transfer{Src: src, Words: 1 + r.IntN(2), From: ref(), To: ref()}
			copies := 1 + r.IntN(4)
			for range copies {
				dst := r.IntN(tiles)
				if dst == src {
					continue
				}
				n := 1
				if r.IntN(4) == 0 {
					// An already merged multicast, stopping before src.
					for dst+n < tiles && dst+n != src && n < 5 {
						n++
					}
				}
				y := x
				y.Dst, y.DstN = dst, n
				if n == 1 && r.IntN(2) == 0 {
					y.DstN = 0
				}
				xs = append(xs, y)
			}
		}
		keys := map[int]map[[2]prog.Ref]bool{}
		for _, x := range xs {
			if keys[x.Src] == nil {
				keys[x.Src] = map[[2]prog.Ref]bool{}
			}
			keys[x.Src][[2]prog.Ref{x.From, x.To}] = true
		}
		for _, k := range keys {
			if len(k) > smallKeys {
				wide++
				break
			}
		}
		got, want := multicast(xs), multicastSimple(xs)
		if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b *prog.Buffer) bool { return a == b })); diff != "" {
			t.Fatalf("trial %d: multicast of %d transfers differs from its definition (-want +got):\n%s", trial, len(xs), diff)
		}
	}
	if wide < 100 {
		t.Fatalf("%d trials with a source of more than %d keys: the map is not tested", wide, smallKeys)
	}
}

// TestEachDestGroup checks that the groups cover the tiles exactly, never
// reach the source, and take the fewest sends on the shapes a grid of
// tiles makes.
func TestEachDestGroup(t *testing.T) {
	tests := []struct {
		name string
		src  int
		ts   []int
		want [][3]int // first, count, stride
	}{
		{"one tile", 9, []int{4}, [][3]int{{4, 1, 1}}},
		{"a run", 0, []int{3, 4, 5}, [][3]int{{3, 3, 1}}},
		{"a run cut at the source", 4, []int{2, 3, 5, 6}, [][3]int{{2, 2, 1}, {5, 2, 1}}},
		{"every 8th tile", 3, []int{0, 8, 16, 24}, [][3]int{{0, 4, 8}}},
		{"every 8th tile but one", 16, []int{0, 8, 24}, [][3]int{{0, 2, 8}, {24, 1, 1}}},
		{"every 8th tile but one not the source", 17, []int{0, 8, 24}, [][3]int{{0, 1, 1}, {8, 1, 1}, {24, 1, 1}}},
		{"every 160th tile but the source", 229, []int{69, 389, 549, 709, 869, 1029, 1189}, [][3]int{{69, 1, 1}, {389, 6, 160}}},
		{"pairs every 10 tiles, the source in one", 10, []int{0, 1, 11, 20, 21, 30, 31}, [][3]int{{0, 1, 1}, {20, 2, 10}, {1, 4, 10}}},
		{"every other tile, the source between", 5, []int{1, 3, 7}, [][3]int{{1, 2, 2}, {7, 1, 1}}},
		{"the source in a gap that saves nothing", 4, []int{1, 3, 7}, [][3]int{{1, 1, 1}, {3, 1, 1}, {7, 1, 1}}},
		{"pairs every 10 tiles", 99, []int{0, 1, 10, 11, 20, 21}, [][3]int{{0, 3, 10}, {1, 3, 10}}},
		{"two runs of three", 99, []int{0, 1, 2, 10, 11, 12}, [][3]int{{0, 3, 1}, {10, 3, 1}}},
		{"runs of unequal length", 99, []int{0, 1, 10, 20, 21}, [][3]int{{0, 2, 1}, {10, 1, 1}, {20, 2, 1}}},
		{"runs unequally apart", 99, []int{0, 1, 10, 11, 30, 31}, [][3]int{{0, 2, 1}, {10, 2, 1}, {30, 2, 1}}},
		{"pairs, the source on a progression", 10, []int{0, 1, 20, 21, 30, 31}, [][3]int{{0, 2, 1}, {20, 2, 1}, {30, 2, 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got [][3]int
			eachDestGroup(tt.src, tt.ts, func(first, n, stride int) { got = append(got, [3]int{first, n, stride}) })
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Fatalf("groups (-want +got):\n%s", diff)
			}
		})
	}
	// Random sets: every tile once, never the source.
	r := rand.New(rand.NewPCG(3, 5))
	for trial := 0; trial < 2000; trial++ {
		src := r.IntN(64)
		seen := map[int]bool{}
		var ts []int
		for range 1 + r.IntN(12) {
			if u := r.IntN(64); u != src && !seen[u] {
				seen[u] = true
				ts = append(ts, u)
			}
		}
		if trial%3 == 0 { // a grid's column, or runs of a grid's rows
			ts, seen = nil, map[int]bool{}
			first, st, n, l := r.IntN(8), 2+r.IntN(9), 1+r.IntN(6), 1+r.IntN(3)
			for k := range n {
				for j := range min(l, st-1) {
					if u := first + k*st + j; u != src {
						seen[u] = true
						ts = append(ts, u)
					}
				}
			}
		}
		if len(ts) == 0 {
			continue
		}
		sort.Ints(ts)
		covered := map[int]int{}
		eachDestGroup(src, ts, func(first, n, stride int) {
			for k := range n {
				covered[first+k*stride]++
			}
		})
		for u, c := range covered {
			if !seen[u] || c != 1 || u == src {
				t.Fatalf("trial %d: src %d tiles %v: tile %d reached %d times", trial, src, ts, u, c)
			}
		}
		if len(covered) != len(ts) {
			t.Fatalf("trial %d: src %d tiles %v: %d reached", trial, src, ts, len(covered))
		}
		// The fewer sends of ts alone and of ts with the source (the
		// shortcuts of eachDestGroup skip neither when it wins).
		sends := func(cut int, ts []int) int {
			n := 0
			destGroups(src, cut, ts, func(int, int, int) { n++ })
			return n
		}
		want := sends(src, ts)
		if at, found := slices.BinarySearch(ts, src); !found && at > 0 && at < len(ts) {
			with := slices.Insert(slices.Clone(ts), at, src)
			want = min(want, sends(-1, with))
		}
		got := 0
		eachDestGroup(src, ts, func(int, int, int) { got++ })
		if got != want {
			t.Fatalf("trial %d: src %d tiles %v: %d sends, want %d", trial, src, ts, got, want)
		}
	}
}
