package planner

import (
	"errors"
	"slices"
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
