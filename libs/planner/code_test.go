package planner

import (
	"slices"
	"testing"

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
