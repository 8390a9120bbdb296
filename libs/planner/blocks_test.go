package planner

import (
	"math/rand/v2"
	"reflect"
	"testing"

	"ipu.local/libs/arch"
	"ipu.local/libs/graph"
)

// TestBlockMemo: a point's plan built with the block pieces of points
// built before is the plan a planner that never built one gives, for
// random walks over the splits of the torch attention case; and the
// memo hands the same pieces out again.
func TestBlockMemo(t *testing.T) {
	g, _ := graph.Canonicalize(load(t, "shared/torch_attention/model"))
	p := arch.MustLookup("ipu21")
	warm, err := newPlanner(g, p, 64)
	if err != nil {
		t.Fatal(err)
	}
	pt, _, err := warm.start(warm.wide)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 9))
	built := 0
	for range 16 {
		nb := warm.move(pt, rng)
		got, err := warm.buildPoint(nb)
		if err != nil {
			continue
		}
		cold, err := newPlanner(g, p, 64)
		if err != nil {
			t.Fatal(err)
		}
		want, err := cold.buildPoint(nb)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got.plan, want.plan) {
			t.Fatalf("point %v: the plan built with the memo differs from a fresh planner's", nb)
		}
		built++
		pt = nb
	}
	if built < 8 {
		t.Fatalf("%d points built", built)
	}
	pr := warm.products[0]
	d := pt[0]
	s := pr.split(d)
	a := warm.blocks.pieces(pr, s, d.Tiles[0], blocksA)
	if again := warm.blocks.pieces(pr, s, d.Tiles[0], blocksA); &again[0] != &a[0] {
		t.Fatal("the memo computed the pieces again")
	}
	if !reflect.DeepEqual(a, s.OperandPieces(pr.mm, d.Tiles[0], true)) {
		t.Fatal("the memo's pieces are not the split's")
	}

	// Full, the memo keeps no more and the plans are the same.
	defer func(n int64) { maxMemoPieces = n }(maxMemoPieces)
	maxMemoPieces = 300
	small, err := newPlanner(g, p, 64)
	if err != nil {
		t.Fatal(err)
	}
	for range 16 {
		nb := small.move(pt, rng)
		got, err := small.buildPoint(nb)
		if err != nil {
			continue
		}
		want, err := warm.buildPoint(nb)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got.plan, want.plan) {
			t.Fatalf("point %v: the plan built with a full memo differs", nb)
		}
		pt = nb
	}
	if k := small.blocks.kept.Load(); k == 0 || k > maxMemoPieces {
		t.Fatalf("the full memo keeps %d pieces (at most %d)", k, maxMemoPieces)
	}
}
