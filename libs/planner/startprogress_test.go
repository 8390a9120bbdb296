package planner

import (
	"bytes"
	"testing"

	"ipu.local/formats/plan"
	"ipu.local/libs/arch"
)

// TestStartProgress: the start reports the products it has decided, from
// 0 of n to n of n, one more each time (from 0 again only when the start
// is made again), and the plan is the one made without the callback.
func TestStartProgress(t *testing.T) {
	g := projGraph(t, 128, 128, 128, 3, true)
	p := arch.MustLookup("ipu21")
	var calls [][2]int
	opt := Options{Tiles: 64, Seed: 1, MaxAttempts: 3, StartProgress: func(decided, products int) {
		calls = append(calls, [2]int{decided, products})
	}}
	with, _, _, err := Plan(g, p, opt)
	if err != nil {
		t.Fatal(err)
	}
	opt.StartProgress = nil
	without, _, _, err := Plan(g, p, opt)
	if err != nil {
		t.Fatal(err)
	}
	a, err := plan.Marshal(with)
	if err != nil {
		t.Fatal(err)
	}
	b, err := plan.Marshal(without)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Error("the plan made with StartProgress differs from the one without")
	}
	n := 4 // three projections and the product that reads one (dep)
	if len(calls) < n+1 || calls[0] != [2]int{0, n} || calls[len(calls)-1] != [2]int{n, n} {
		t.Fatalf("calls %v: want 0 of %d first, %d of %d last", calls, n, n, n)
	}
	for i, c := range calls {
		if c[1] != n {
			t.Errorf("call %d: %v: want %d products", i, c, n)
		}
		if i > 0 && c[0] != calls[i-1][0]+1 && c[0] != 0 {
			t.Errorf("call %d: %d decided after %d", i, c[0], calls[i-1][0])
		}
	}
}
