package planner

import (
	"testing"

	"ipu.local/libs/arch"
	"ipu.local/libs/graph"
)

// startCands returns a fresh planner for qk-early on tiles and the start's
// points for its product: every screened split under every option.
func startCands(t *testing.T, tiles int) (*planner, []point) {
	t.Helper()
	g, _ := graph.Canonicalize(load(t, "qk-early"))
	pl, err := newPlanner(g, arch.MustLookup("ipu21"), tiles)
	if err != nil {
		t.Fatal(err)
	}
	pr := pl.products[0]
	orders, stats := pl.options(pr)
	grids, _, _ := pl.candidates(pr, pl.wide)
	var pts []point
	for _, s := range grids {
		for _, o := range orders {
			for _, st := range stats {
				d := decision(pr.idx, s, o, st)
				d.Split.Parts = pr.defaultParts(d.Split.K)
				pt := point{d}
				pl.placeRange(pt, 0)
				pts = append(pts, pt)
			}
		}
	}
	return pl, pts
}

// TestFloorPrunes: the floor (the host link's cycles for the fetch) is
// at most every point's price; pricing the start's points with it
// (evalBelow, as cheapest does) skips most of qk-early's on the full
// chip and finds the point that pricing all of them finds; a point whose
// floor reaches its ceiling is skipped, one below it priced.
func TestFloorPrunes(t *testing.T) {
	pl, pts := startCands(t, 1472)
	rs, errs := pl.evalAll(pts)
	best := -1
	for i, pt := range pts {
		if errs[i] != nil {
			t.Fatalf("%v: %v", pt, errs[i])
		}
		bp, err := pl.buildPoint(pt)
		if err != nil {
			t.Fatal(err)
		}
		if f := pl.floor(bp); f > rs[i].cost() || f <= 0 {
			t.Errorf("%v: floor %d, price %d", pt, f, rs[i].cost())
		}
		if rs[i].mem == nil && (best < 0 || rs[i].cost() < rs[best].cost()) {
			best = i
		}
	}
	if best < 0 {
		t.Fatal("no point fits")
	}

	pl2, pts2 := startCands(t, 1472)
	rs2, errs2 := pl2.evalBelow(pts2, ceilings(len(pts2), noCeiling), true)
	skipped, got := 0, -1
	for i := range pts2 {
		if rs2[i] == nil && errs2[i] == nil {
			skipped++
			continue
		}
		if errs2[i] != nil {
			t.Fatal(errs2[i])
		}
		if rs2[i].cost() != rs[i].cost() {
			t.Errorf("%v: priced %d pruning, %d not", pts2[i], rs2[i].cost(), rs[i].cost())
		}
		if rs2[i].mem == nil && (got < 0 || rs2[i].cost() < rs2[got].cost()) {
			got = i
		}
	}
	t.Logf("%d points, %d skipped; cheapest %v at %d", len(pts), skipped, pts[best], rs[best].cost())
	if got != best {
		t.Errorf("pruned pricing chose point %d, pricing all %d", got, best)
	}
	if skipped < len(pts)/2 {
		t.Errorf("skipped %d of %d points, want most (their host copies cost more than the cheapest)", skipped, len(pts))
	}

	pl3, pts3 := startCands(t, 1472)
	bp, err := pl3.buildPoint(pts3[best])
	if err != nil {
		t.Fatal(err)
	}
	f := pl3.floor(bp)
	two := []point{pts3[best], pts3[best]}
	rs3, errs3 := pl3.evalBelow(two[:1], []int64{f}, false)
	if rs3[0] != nil || errs3[0] != nil {
		t.Errorf("a point at its ceiling was priced")
	}
	if rs3, _ = pl3.evalBelow(two[1:], []int64{f + 1}, false); rs3[0] == nil || rs3[0].cost() != rs[best].cost() {
		t.Errorf("a point below its ceiling: %v, want priced at %d", rs3[0], rs[best].cost())
	}
}

// TestFloorDevice: under the device objective the host link is not in
// the price, and no point has a floor.
func TestFloorDevice(t *testing.T) {
	pl, pts := startCands(t, 64)
	pl.device = true
	for _, pt := range pts[:4] {
		bp, err := pl.buildPoint(pt)
		if err != nil {
			t.Fatal(err)
		}
		if f := pl.floor(bp); f != 0 {
			t.Errorf("%v: floor %d under the device objective", pt, f)
		}
	}
}
