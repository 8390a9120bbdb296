package planner

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"ipu.local/formats/plan"
	"ipu.local/libs/arch"
	"ipu.local/libs/graph"
	"ipu.local/libs/layout"
)

// The halved row layouts a tile's code refuses are the ones with a piece
// on it, in order.
func TestRowsOn(t *testing.T) {
	halved := map[int][]layout.Piece{
		7: {{Tile: 3}, {Tile: 4}},
		2: {{Tile: 4}, {Tile: 5}},
		9: {{Tile: 6}},
	}
	for _, tc := range []struct {
		tile int
		want []int
	}{{4, []int{2, 7}}, {6, []int{9}}, {0, nil}} {
		if got := rowsOn(halved, tc.tile); !slices.Equal(got, tc.want) {
			t.Errorf("tile %d: rows %v, want %v", tc.tile, got, tc.want)
		}
	}
}

// While the start is made, a candidate refused for the code of a tile
// holding halved row layouts ends it with that error (startFitting then
// lays those rows out whole); otherwise cheapest passes over it.
func TestCheapestRefusedForCode(t *testing.T) {
	g, _ := graph.Canonicalize(load(t, "transformers/bert_small_layer_fp16/model"))
	pl, err := newPlanner(g, arch.MustLookup("ipu21"), 1472)
	if err != nil {
		t.Fatal(err)
	}
	pt, _, err := pl.start(pl.wide)
	if err != nil {
		t.Fatal(err)
	}
	ok := pt[0]
	refused := ok
	refused.Stationary = "refused" // a point of its own, priced below
	p := pt.clone()
	pl.decide(p, 0, refused)
	pl.cache[p.key()] = &result{mem: &CodeError{Tile: 3, Bytes: 300000, Limit: 212992, Rows: []int{7}}}
	for _, starting := range []bool{false, true} {
		pl.starting = starting
		best, bestR, _, err := pl.cheapest(pt, 0, []plan.Decision{refused, ok}, noCeiling)
		var ce *CodeError
		switch {
		case starting && (!errors.As(err, &ce) || !slices.Equal(ce.Rows, []int{7})):
			t.Errorf("starting: cheapest = %v, want the code error of rows [7]", err)
		case !starting && (err != nil || bestR == nil || best.Stationary == refused.Stationary):
			t.Errorf("searching: cheapest = %+v, %v; want the candidate that fits", best, err)
		}
	}
	pl.starting = false
}

// The state records the row layouts the start laid out whole, and a
// resumed search keeps them (rowLayout then lays those rows out whole,
// as the first run priced its points); a value beyond the model is
// refused.
func TestStateWholeRows(t *testing.T) {
	g, p := load(t, "transformers/bert_small_layer_fp16/model"), arch.MustLookup("ipu21")
	opt := Options{Tiles: 64, Seed: 1, MaxAttempts: 1, ModelFingerprint: "fp"}
	_, s, _, err := Plan(g, p, opt)
	if err != nil {
		t.Fatal(err)
	}
	if s.Whole != nil {
		t.Fatalf("state whole rows %v, want none", s.Whole)
	}
	cg, _ := graph.Canonicalize(g)
	sm := -1 // the softmax input
	for _, n := range cg.Nodes {
		if n.Op == "Softmax" {
			sm = n.Inputs[0].Index
		}
	}
	s.Whole = []int{sm}
	resumed := opt
	resumed.State = s
	_, s2, _, err := Plan(g, p, resumed)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(s2.Whole, []int{sm}) {
		t.Errorf("resumed: whole rows %v, want [%d] kept", s2.Whole, sm)
	}
	s2.Whole = []int{len(cg.Values)}
	resumed.State = s2
	if _, _, _, err := Plan(g, p, resumed); err == nil || !strings.Contains(err.Error(), "whole_rows") {
		t.Errorf("error %v, want the value beyond the model refused", err)
	}
}
