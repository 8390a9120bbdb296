package link

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"ipu.local/formats/plan"
	"ipu.local/libs/arch"
	"ipu.local/libs/graph"
	"ipu.local/libs/planner"
	"ipu.local/libs/repodata"
)

// TestPatchLayoutPlace lays out runs of loop values: a run already
// stored and one whose start equals the stored end reuse stored words,
// another is appended; without sharing every run is appended.
func TestPatchLayoutPlace(t *testing.T) {
	runs := [][]uint32{{7, 0x80000, 9, 0x80100}, {1, 2, 3}, {9, 0x80100}, {2, 3, 4, 5}, {6}}
	lay := &patchLayout{}
	var at []int
	shared := 0
	for _, r := range runs {
		a, s := lay.place(r, true)
		at = append(at, a)
		if s {
			shared++
		}
	}
	want := []uint32{7, 0x80000, 9, 0x80100, 1, 2, 3, 4, 5, 6}
	if !equalWords(lay.words, want) || shared != 2 {
		t.Fatalf("stored %v (%d runs shared), want %v (2 shared)", lay.words, shared, want)
	}
	for k, r := range runs {
		if !equalWords(lay.words[at[k]:at[k]+len(r)], r) {
			t.Errorf("run %d %v at %d reads %v", k, r, at[k], lay.words[at[k]:at[k]+len(r)])
		}
	}
	flat := &patchLayout{}
	n := 0
	for _, r := range runs {
		if a, s := flat.place(r, false); s || a != n {
			t.Fatalf("without sharing: run at %d (shared %v), want %d", a, s, n)
		}
		n += len(r)
	}
}

// TestPatchSharing links the torch attention case on 64 tiles, its steps
// in order (compacted, the supersteps that repeat merge), where tiles
// run the same irregular exchange patches in several supersteps,
// with and without sharing patch runs: sharing stores fewer bytes,
// exactly the ones it reports, and the simulator runs both in the
// linker's cycles with bit-identical outputs. The point is fixed: the
// search's own choices share no patch run on the small models (the
// GPT-2 block it linked before stopped when the planner copied weights
// further, this case when the start priced the projections' class as a
// whole).
func TestPatchSharing(t *testing.T) {
	if testing.Short() {
		t.Skip("links and simulates an attention model twice")
	}
	r, err := repodata.Models()
	if err != nil {
		t.Skip(err)
	}
	// The q, k and v projections each on all 64 tiles with K in 16 parts
	// and the scores' product in 4x2x2x4 blocks: a point the search found
	// once, whose reduce exchanges repeat loop values across supersteps.
	proj := plan.Split{B: 1, M: 1, N: 4, K: 16, Parts: "cols"}
	pl, g := planAt(t, filepath.Join(r.Dir, "torch_attention", "model.onnx"), 64, map[int]plan.Split{
		0: proj, 4: proj, 8: proj, 12: {B: 4, M: 2, N: 2, K: 4},
	})
	pl.Supersteps = "" // compacted, the repeated supersteps merge
	o, st, err := Link(pl, "test", Options{})
	if err != nil {
		t.Fatal(err)
	}
	flat, fst, err := Link(pl, "test", Options{NoPatchSharing: true})
	if err != nil {
		t.Fatal(err)
	}
	pp, fp := st.PatchPlacement, fst.PatchPlacement
	if pp.SharedRuns == 0 || pp.SavedBytes == 0 {
		t.Fatalf("no patch run shared: %+v", pp)
	}
	if fp.SharedRuns != 0 || fp.SavedBytes != 0 || fp.TableBytes != pp.TableBytes {
		t.Fatalf("without sharing: %+v, want nothing shared of %d bytes", fp, pp.TableBytes)
	}
	if a, b := textBytes(o), textBytes(flat); b-a != pp.SavedBytes {
		t.Errorf("code %d bytes with sharing, %d without: %d saved, reported %d", a, b, b-a, pp.SavedBytes)
	}
	if st.FinalCycles != fst.FinalCycles {
		t.Errorf("final cycles %d with sharing, %d without", st.FinalCycles, fst.FinalCycles)
	}
	sameRuns(t, g, o, st, flat, fst, "with shared patch runs")
	t.Logf("%d of %d patch runs shared: %d of %d table bytes saved (largest tile %d)", pp.SharedRuns, pp.Runs, pp.SavedBytes, pp.TableBytes, pp.MaxSaved)
}

// planAt plans the model at path on tiles: the search's start with the
// given splits (by product node, each on all tiles) in place of its own.
func planAt(t *testing.T, path string, tiles int, splits map[int]plan.Split) (*plan.Plan, *graph.Graph) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	g := modelGraph(t, data)
	p := arch.MustLookup("ipu21")
	_, s, _, err := planner.Plan(g, p, planner.Options{Tiles: tiles, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	ds := s.Incumbent.Decisions
	set := 0
	for i, d := range ds {
		if sp, ok := splits[d.Node]; ok {
			ds[i].Split, ds[i].Tiles = sp, [2]int{0, tiles}
			set++
		}
	}
	if set != len(splits) {
		t.Fatalf("%d of the %d splits' nodes are products", set, len(splits))
	}
	pl, err := planner.Build(g, p, tiles, ds)
	if err != nil {
		t.Fatal(err)
	}
	return pl, g
}

// TestPatchSharingNothing links qk-early on 64 tiles, whose one
// exchange superstep's loops load no run another loop stored: nothing
// moves, the line says 0, and the object is the one without sharing.
func TestPatchSharingNothing(t *testing.T) {
	pl, _, st, _ := linkModel(t, "../../testdata/models/qk-early.onnx", "ipu21", 64)
	if pp := st.PatchPlacement; pp.SharedRuns != 0 || pp.SavedBytes != 0 || pp.Runs == 0 {
		t.Fatalf("qk-early: %+v, want runs and none shared", pp)
	}
	var buf bytes.Buffer
	o, _, err := Link(pl, "test", Options{Log: slog.New(slog.NewTextHandler(&buf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	flat, _, err := Link(pl, "test", Options{NoPatchSharing: true})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(encode(t, o), encode(t, flat)) {
		t.Fatal("the object differs with sharing, which shared nothing")
	}
	var line string
	for _, l := range strings.Split(buf.String(), "\n") {
		if strings.Contains(l, `msg="placed exchange patch tables sharing equal loop values"`) {
			line = l
		}
	}
	if !strings.Contains(line, " moved_runs=0 saved_bytes=0 ") {
		t.Fatalf("no placement line saying nothing moved:\n%s", buf.String())
	}
}
