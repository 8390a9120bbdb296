package sched

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestDistinctSet: the count is the sorted list's distinct non-zero
// values, for lists short and long, of few values and of many, zeros
// among them, one set counting them all in turn (its table kept, its
// generations wrapped once).
func TestDistinctSet(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	var s distinctSet
	for trial := range 3000 {
		if trial == 1500 {
			s.gen = ^uint32(0) - 1 // wraps within the next lists
		}
		n := r.IntN(400)
		spread := uint32(1 + r.IntN(1<<r.IntN(32)))
		vs := make([]uint32, n)
		for i := range vs {
			vs[i] = r.Uint32N(spread)
			if r.IntN(8) == 0 {
				vs[i] = 0
			}
		}
		sorted := slices.Clone(vs)
		slices.Sort(sorted)
		var want int64
		for i, v := range sorted {
			if v != 0 && (i == 0 || sorted[i-1] != v) {
				want++
			}
		}
		if got := s.count(vs); got != want {
			t.Fatalf("trial %d: %d values below %d: %d distinct, want %d", trial, n, spread, got, want)
		}
	}
}
