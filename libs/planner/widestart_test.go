package planner

import "testing"

// The start prices splits that copy a constant more than startCopies
// times only when the products' constants, once, take a small share of
// the tiles' memory (wideWeights).
func TestWideStart(t *testing.T) {
	for _, tc := range []struct {
		k, n, tiles int
		wide        bool
	}{
		{768, 3072, 1472, true}, // 9.4 MB over 1472 tiles
		{768, 3072, 64, false},  // the same on 64 tiles
		{64, 64, 4, true},
	} {
		pl, _ := lnProduct(t, 128, tc.k, tc.n, tc.tiles)
		if pl.wide != tc.wide {
			t.Errorf("%v: wide %v, want %v", tc, pl.wide, tc.wide)
		}
	}
}
