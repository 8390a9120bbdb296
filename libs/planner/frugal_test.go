package planner

import (
	"testing"

	"ipu.local/libs/arch"
)

// TestFewTilesSpreadWeights: on 6 and 7 tiles no split of
// bert_layer_fp16's second FFN product (a 512 KiB weight) keeps its
// constants within their share, and the widest split copies the weight
// whole to every tile, which left no product room. The start then takes
// the splits that spread the constants most (frugalSplits), and the
// layer plans, its weight spread over several tiles.
func TestFewTilesSpreadWeights(t *testing.T) {
	g := load(t, "shared/bert_layer_fp16/model")
	for _, tiles := range []int{6, 7} {
		pl, err := newPlanner(g, arch.MustLookup("ipu21"), tiles)
		if err != nil {
			t.Fatal(err)
		}
		var fallback bool
		for _, pr := range pl.products {
			if ss, _ := pl.screenN(pr, pl.tiles, 0, startCopies); len(ss) > 0 {
				continue
			}
			fallback = true
			fs := pl.frugalSplits(pr)
			if len(fs) == 0 {
				t.Fatalf("%d tiles: %s: no frugal split", tiles, pr.node.Name)
			}
			w := int64(pr.mm.K) * int64(pr.mm.N) * int64(pr.typ.Size())
			if isConst(pr.a.w) {
				w = int64(pr.mm.M) * int64(pr.mm.K) * int64(pr.typ.Size())
			}
			if c := pl.constBytes(pr, decision(pr.idx, fs[0], "", "")); 2*c > w {
				t.Errorf("%d tiles: %s: frugal split %+v holds %d of its weight's %d bytes on a tile", tiles, pr.node.Name, fs[0], c, w)
			}
		}
		if !fallback {
			t.Fatalf("%d tiles: every product has a split within its share: the test no longer exercises the fallback", tiles)
		}
		if _, _, _, err := Plan(g, arch.MustLookup("ipu21"), Options{Tiles: tiles, Seed: 1, MaxAttempts: 5}); err != nil {
			t.Errorf("%d tiles: %v", tiles, err)
		}
	}
}
