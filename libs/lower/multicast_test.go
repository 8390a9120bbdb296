package lower

import (
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	"ipu.local/libs/prog"
)

// multicastSimple is multicast's definition, done the plain way: the
// distinct (source, addresses, words) in first-seen order, each one's
// destination tiles sorted and cut into runs (eachDestRun).
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
		for u := x.Dst; u < x.Dst+x.Dests(); u++ {
			dests[k] = append(dests[k], u)
		}
	}
	var out []prog.Transfer
	for _, k := range keys {
		ts := dests[k]
		sort.Ints(ts)
		eachDestRun(k.src, ts, func(a, b int) {
			out = append(out, prog.Transfer{Src: k.src, Dst: a, DstN: b - a, Words: k.words, From: k.from, To: k.to})
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
