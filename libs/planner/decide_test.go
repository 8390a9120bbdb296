package planner

import (
	"testing"

	"ipu.local/libs/arch"
	"ipu.local/libs/graph"
)

// The start prices a class's candidate on every later product of the
// class: decide sets each of them to the decision, on its own node and
// tile range, and leaves the products of other classes alone.
func TestDecideCopiesClass(t *testing.T) {
	g, _ := graph.Canonicalize(load(t, "transformers/bert_small_encoder2_fp16/model"))
	pl, err := newPlanner(g, arch.MustLookup("ipu21"), 1472)
	if err != nil {
		t.Fatal(err)
	}
	pt, _, err := pl.startFitting()
	if err != nil {
		t.Fatal(err)
	}
	i := -1 // the first product whose class repeats
	for j := range pl.products {
		for k := j + 1; k < len(pl.products) && i < 0; k++ {
			if pl.products[k].class() == pl.products[j].class() {
				i = j
			}
		}
	}
	if i < 0 {
		t.Fatal("no product class repeats in the two-layer encoder")
	}
	d := pt[i]
	d.Split.M, d.Split.N, d.Split.K, d.Split.Rest = 1, 1, 1, nil
	d.Tiles = [2]int{0, 1}
	nb := pt.clone()
	pl.decide(nb, i, d)
	copies := 0
	for k, pr := range pl.products {
		switch {
		case k == i || k > i && pr.class() == pl.products[i].class():
			if nb[k].Node != pr.idx || nb[k].Split.M != 1 || nb[k].Split.N != 1 || nb[k].Split.K != 1 || nb[k].Tiles[1]-nb[k].Tiles[0] != 1 {
				t.Errorf("product %d (%s): %+v, want the decision on its own node", k, pr.node.Name, nb[k])
			}
			if k != i {
				copies++
			}
		case nb[k].Split.M != pt[k].Split.M || nb[k].Split.N != pt[k].Split.N || nb[k].Split.K != pt[k].Split.K || nb[k].Node != pt[k].Node:
			t.Errorf("product %d (%s) of another class changed: %+v, was %+v", k, pr.node.Name, nb[k], pt[k])
		}
	}
	if copies == 0 {
		t.Error("decide copied the decision to no later product")
	}
}
