package sched

import (
	"math/rand"
	"slices"
	"testing"
)

// TestSortSegments checks that sortSegments orders runs as
// slices.SortFunc(bySegment) does, ties included.
func TestSortSegments(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for i := 0; i < 2000; i++ {
		n, tiles, addrs := r.Intn(200), 1+r.Intn(20), 1+r.Intn(400)
		segs := make([]segment, n)
		for k := range segs {
			segs[k] = segment{dst: r.Intn(tiles), dstAddr: uint32(4 * r.Intn(addrs)), src: r.Intn(1000), srcAddr: uint32(k), words: uint32(1 + r.Intn(9))}
		}
		want := slices.Clone(segs)
		slices.SortFunc(want, bySegment)
		sortSegments(segs)
		if !slices.Equal(segs, want) {
			t.Fatalf("case %d (%d runs): sortSegments differs from slices.SortFunc", i, n)
		}
	}
}
