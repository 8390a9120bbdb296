package link

import (
	"testing"

	"ipu.local/formats/obj"
	"ipu.local/libs/arch"
	"ipu.local/libs/onnx"
	"ipu.local/libs/planner"
)

// fp8Product builds y = cast8(x @ w) @ cast8(u): the second product's
// FP8 A operand has m rows, its B operand n columns.
func fp8Product(m, n int) []byte {
	vals := func(k int, scale float32) []float32 {
		out := make([]float32, k)
		for i := range out {
			out[i] = scale * float32((i*29)%31-15)
		}
		return out
	}
	b := onnx.NewModel(21)
	b.AddInput("x", onnx.Float, []int64{int64(m), 24})
	b.AddInitializer(onnx.NewFloat32("w", []int64{24, 32}, vals(24*32, 0.5)))
	b.AddInitializer(onnx.NewFloat32("u", []int64{32, int64(n)}, vals(32*n, 0.25)))
	b.AddNode("MatMul", "m1", []string{"x", "w"}, []string{"h"})
	b.AddNode("Cast", "h8", []string{"h"}, []string{"h8v"}, onnx.IntAttr("to", int64(onnx.Float8E4M3FN)))
	b.AddNode("Cast", "hf", []string{"h8v"}, []string{"hfv"}, onnx.IntAttr("to", int64(onnx.Float)))
	b.AddNode("Cast", "u8", []string{"u"}, []string{"u8v"}, onnx.IntAttr("to", int64(onnx.Float8E4M3FN)))
	b.AddNode("Cast", "uf", []string{"u8v"}, []string{"ufv"}, onnx.IntAttr("to", int64(onnx.Float)))
	b.AddNode("MatMul", "m2", []string{"hfv", "ufv"}, []string{"y"})
	b.AddOutput("y", onnx.Float, []int64{int64(m), int64(n)})
	return b.Marshal()
}

// codeBytes sums the objects' tile code.
func codeBytes(o *obj.Object) int {
	n := 0
	for _, tl := range o.Tiles {
		for _, s := range tl.Segments {
			if s.Kind == obj.Code {
				n += int(s.Size)
			}
		}
	}
	return n
}

// linkPadBoth links one plan of model data with and without the
// padding-clear pass and runs both objects on the same inputs: their
// outputs must be identical, and each's simulated cycles its linked.
func linkPadBoth(t *testing.T, data []byte, tiles int) (on, off *Stats, onObj, offObj *obj.Object) {
	t.Helper()
	pl, o, st, g, err := planLinkN(t, data, tiles, 8)
	if err != nil {
		t.Fatal(err)
	}
	ko, kst, err := Link(pl, "test", Options{KeepPadClears: true})
	if err != nil {
		t.Fatal(err)
	}
	if kst.PadClearsRemoved != 0 {
		t.Errorf("removed %d with the pass disabled", kst.PadClearsRemoved)
	}
	checkModel(t, o, st, g)
	checkModel(t, ko, kst, g)
	sameRuns(t, g, o, st, ko, kst, "with and without the pass")
	return st, kst, o, ko
}

// TestPadClearsRemoved: the FP8 A operand of 10 rows pads its last group
// of 4 lanes; the product's result rows 10 and 11 are never read, so the
// pass removes the clears. (With 6 rows the one-tile program has had no
// clear to remove since FP8 packs put their words together with
// f32v2tof8hi; 2, 3, 5, 7 and 10 rows still have one.) Fewer instructions (and on one tile, where
// the pack is on the longest path, fewer cycles) than with the pass
// disabled, the same outputs.
func TestPadClearsRemoved(t *testing.T) {
	for _, tiles := range []int{1, 3} {
		st, kst, o, ko := linkPadBoth(t, fp8Product(10, 16), tiles)
		t.Logf("%d tiles: removed=%d code %d -> %d bytes, cycles %d -> %d", tiles, st.PadClearsRemoved, codeBytes(ko), codeBytes(o), kst.FinalCycles, st.FinalCycles)
		if st.PadClearsRemoved == 0 {
			t.Fatalf("%d tiles: no clear removed", tiles)
		}
		if n := plannedRemoved(t, fp8Product(10, 16), tiles); n != st.PadClearsRemoved {
			t.Errorf("%d tiles: the planner's stats say removed=%d, the link %d", tiles, n, st.PadClearsRemoved)
		}
		if codeBytes(o) >= codeBytes(ko) {
			t.Errorf("%d tiles: code %d bytes with the pass, %d without", tiles, codeBytes(o), codeBytes(ko))
		}
		// On one tile the pack is on the longest path; on 3 another
		// tile's work is longer.
		if st.FinalCycles > kst.FinalCycles || tiles == 1 && st.FinalCycles == kst.FinalCycles {
			t.Errorf("%d tiles: %d cycles with the pass, %d without", tiles, st.FinalCycles, kst.FinalCycles)
		}
	}
}

// TestPadClearsKept: an FP8 B operand of 10 columns pads its panel of
// 16; its padded lanes make result columns that the epilogue reads, so
// their clears stay: nothing is removed and the code is the same.
func TestPadClearsKept(t *testing.T) {
	st, kst, o, ko := linkPadBoth(t, fp8Product(8, 10), 1)
	if st.PadClearsRemoved != 0 {
		t.Errorf("removed %d needed clears", st.PadClearsRemoved)
	}
	if codeBytes(o) != codeBytes(ko) || st.FinalCycles != kst.FinalCycles {
		t.Errorf("code %d / %d bytes, cycles %d / %d with and without the pass", codeBytes(o), codeBytes(ko), st.FinalCycles, kst.FinalCycles)
	}
}

// plannedRemoved is the planner's count for the incumbent (the seed
// line's removed=), planned as planLinkN plans.
func plannedRemoved(t *testing.T, data []byte, tiles int) int {
	t.Helper()
	g := modelGraph(t, data)
	p, _ := arch.Lookup("ipu21")
	_, _, st, err := planner.Plan(g, p, planner.Options{Tiles: tiles, Seed: 1, MaxAttempts: 8})
	if err != nil {
		t.Fatal(err)
	}
	return st.PaddingClearsRemoved
}
