package planner

import (
	"math/rand/v2"
	"testing"

	"ipu.local/libs/prog"
)

// TestLivePeaks checks the sweep against a count of the bytes live at
// every superstep, on random programs, with the sweep's array cut to
// one tile, a few tiles and the whole program at a time.
func TestLivePeaks(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 50 {
		steps, n := 1+rng.IntN(40), 1+rng.IntN(20)
		pr := &prog.Program{Steps: make([]*prog.Superstep, steps)}
		for range rng.IntN(60) {
			b := &prog.Buffer{Size: uint32(8 * (1 + rng.IntN(100)))}
			b.First = rng.IntN(steps + 1)
			b.Last = b.First + rng.IntN(steps+1-b.First) - 1 // may be First-1: live nowhere
			if b.Last < b.First {
				b.Last = b.First
			}
			switch rng.IntN(8) {
			case 0:
				b.Permanent = true
			case 1:
				b.Data = map[int][]byte{}
			}
			for tile := range n {
				if rng.IntN(3) == 0 {
					b.Tiles = append(b.Tiles, tile)
				}
			}
			pr.Buffers = append(pr.Buffers, b)
		}
		want := make([]int64, n)
		for s := 0; s <= steps; s++ {
			live := make([]int64, n)
			for _, b := range pr.Buffers {
				if b.Data != nil || b.Permanent || s < b.First || s > b.Last {
					continue
				}
				for _, tile := range b.Tiles {
					live[tile] += int64(b.Size)
				}
			}
			for tile := range n {
				want[tile] = max(want[tile], live[tile])
			}
		}
		for _, entries := range []int{1, 3 * (steps + 2), 1 << 20} {
			got := livePeaks(pr, n, entries, nil)
			for tile := range n {
				if got[tile] != want[tile] {
					t.Fatalf("trial %d, %d entries: tile %d peak %d, want %d", trial, entries, tile, got[tile], want[tile])
				}
			}
		}
	}
}
