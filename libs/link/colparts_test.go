package link

import (
	"fmt"
	"testing"

	"ipu.local/formats/plan"
	"ipu.local/libs/arch"
	"ipu.local/libs/codegen"
	"ipu.local/libs/graph"
	"ipu.local/libs/layout"
	"ipu.local/libs/lower"
	"ipu.local/libs/onnx"
)

// f16Product is y = a x b with FP16 operands and an FP16 result: the
// cast to FP16 is the product's only epilogue (fused into a k split's
// sums).
func f16Product(m, k, n int64) []byte {
	b := onnx.NewModel(21)
	b.AddInput("a", onnx.Float16, []int64{m, k})
	b.AddInput("b", onnx.Float16, []int64{k, n})
	b.AddNode("MatMul", "y_MatMul", []string{"a", "b"}, []string{"y"})
	b.AddOutput("y", onnx.Float16, []int64{m, n})
	return b.Marshal()
}

// TestColumnParts links k splits whose blocks have fewer row groups than
// k blocks: where the decision says so, the reduce-scatter cuts the
// blocks' columns too (plan "parts": "cols"), every k block's tile owns a
// part, and the programs run within the host reference's tolerance with
// every superstep's cycles the linker's (FP32 and FP16 results, a last
// panel narrower than 16 columns, a cut split; column parts in one matrix
// launch, of even and of uneven widths (4 and 3, 5 and 4, 3, 3 and 2
// panels), or of one panel each with C's panels apart).
func TestColumnParts(t *testing.T) {
	for _, tc := range []struct {
		name   string
		model  []byte
		split  plan.Split
		parts  string
		owners int    // tiles owning a part of the result
		launch string // one matrix launch over the column parts (matmulParts)
	}{
		// 4 row groups of 16 rows, 7 panels (100 columns) under 8 k
		// blocks: 2 column parts per row group (4 and 3 panels).
		{"f16-in-k8", cutProduct(nil, 16, 256, 100, "f16", false), plan.Split{B: 1, M: 1, N: 1, K: 8, Parts: "cols"}, "cols", 8, "parts 2"},
		{"f32-k8", cutProduct(nil, 16, 256, 100, "f32", false), plan.Split{B: 1, M: 1, N: 1, K: 8, Parts: "cols"}, "cols", 8, ""},
		// Row parts only, as the decision says: 4 of 8 tiles own a part.
		{"f16-in-k8-rows", cutProduct(nil, 16, 256, 100, "f16", false), plan.Split{B: 1, M: 1, N: 1, K: 8}, "", 4, ""},
		// 4 row groups, 2 panels per block under 16 k blocks: 2 column
		// parts per row group, one panel each.
		{"f16-k16", f16Product(16, 512, 64), plan.Split{B: 1, M: 1, N: 2, K: 16, Parts: "cols"}, "cols", 16, "panels"},
		// 2 row groups, 8 panels under 8 k blocks: 4 column parts of 2
		// panels per row group, one launch over the 16 items; 3 panels
		// a part under 4 k blocks (2 parts, a 12-column last panel); one
		// row group in parts of 5 and 4 panels, of 3, 3 and 2.
		{"f16-k8-parts2", f16Product(8, 512, 128), plan.Split{B: 1, M: 1, N: 1, K: 8, Parts: "cols"}, "cols", 8, "parts 4"},
		{"f16-k4-parts3", f16Product(8, 256, 92), plan.Split{B: 1, M: 1, N: 1, K: 4, Parts: "cols"}, "cols", 4, "parts 2"},
		{"f16-k2-parts54", f16Product(4, 384, 144), plan.Split{B: 1, M: 1, N: 1, K: 2, Parts: "cols"}, "cols", 2, "parts 2"},
		{"f16-k3-parts332", f16Product(4, 384, 128), plan.Split{B: 1, M: 1, N: 1, K: 3, Parts: "cols"}, "cols", 3, "parts 3"},
		// 3 k blocks over 2 row groups: row parts only, one tile idle.
		{"f16-k3-rows", f16Product(8, 96, 64), plan.Split{B: 1, M: 1, N: 1, K: 3, Parts: "cols"}, "", 2, ""},
		// Rows cut at 16: 4 row groups (2 column parts each) and 2 (4
		// each).
		{"f16-rows-cut-k8", cutProduct(nil, 24, 256, 64, "f16", false),
			plan.Split{B: 1, M: 1, N: 1, K: 8, Parts: "cols", Rest: &plan.Rest{Axis: "m", At: 16, M: 1, N: 1}}, "cols", 16, "parts 2"},
		// Row blocks of 3 and 2 row groups under 4 k blocks: the first in
		// row parts (3 owners), the second in 2 column parts of 2 row
		// groups. A bias row added after the product would be read in
		// overlapping boxes ([0:64] and [0:32]): the Add runs on the
		// default layout.
		{"f16-in-bias-mixed-k4", cutProduct(nil, 20, 256, 64, "f16", true), plan.Split{B: 1, M: 2, N: 1, K: 4, Parts: "cols"}, "cols", 7, "parts 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, pl := buildCut(t, tc.model, tc.split, "", "b")
			var st *plan.Step
			for i := range pl.Steps {
				if pl.Steps[i].Split != nil {
					st = &pl.Steps[i]
				}
			}
			if st.Split.Parts != tc.parts {
				t.Errorf("split parts %q, want %q", st.Split.Parts, tc.parts)
			}
			owners := map[int]bool{}
			for _, p := range pl.Tensors[st.Outputs[0]].Pieces {
				owners[p.Tile] = true
			}
			if len(owners) != tc.owners {
				t.Errorf("%d tiles own result pieces, want %d", len(owners), tc.owners)
			}
			if got := matmulParts(t, pl, g); got != tc.launch {
				t.Errorf("matrix launch over the column parts %q, want %q", got, tc.launch)
			}
			o, stats, err := Link(pl, "test", Options{})
			if err != nil {
				t.Fatal(err)
			}
			checkModel(t, o, stats, g)
		})
	}
}

// matmulParts lowers pl and returns how its matrix launches cover
// several column parts: "parts N" for the most column parts (CParts) of
// one, else "panels" when one has C panels apart (CPanel), else "".
func matmulParts(t *testing.T, pl *plan.Plan, g *graph.Graph) string {
	t.Helper()
	pr, err := lower.Lower(pl, g, arch.MustLookup(pl.Arch))
	if err != nil {
		t.Fatal(err)
	}
	parts, panels := 0, false
	for _, s := range pr.Steps {
		for _, ks := range s.Work {
			for _, k := range ks {
				if mm, ok := k.Params.(*codegen.MatMul); ok {
					parts = max(parts, mm.CParts)
					panels = panels || mm.CPanel != 0
				}
			}
		}
	}
	switch {
	case parts > 0:
		return fmt.Sprintf("parts %d", parts)
	case panels:
		return "panels"
	}
	return ""
}

// PartBox partitions a block: the parts of every k block tile cover the
// block once, in whole row groups and panels, and without ColCut they
// are PartBlock's rows.
func TestPartBox(t *testing.T) {
	for _, c := range []struct{ rows, cols, gk, align int }{
		{64, 64, 8, 16}, {64, 48, 32, 4}, {16, 100, 8, 4}, {64, 64, 16, 4}, {12, 16, 8, 4}, {20, 64, 3, 4}, {8, 200, 64, 4},
	} {
		for _, cut := range []bool{false, true} {
			s := layout.Split{GM: 1, GN: 1, GK: c.gk, Align: c.align, ColCut: cut}
			seen := make([]int, c.rows*c.cols)
			for l := 0; l < c.gk; l++ {
				lo, hi, clo, chi := s.PartBox(c.rows, c.cols, l)
				if !cut {
					plo, phi := s.PartBlock(c.rows, l)
					if lo != plo || hi != phi || lo < hi && (clo != 0 || chi != c.cols) {
						t.Errorf("%+v part %d: %d..%d x %d..%d, want PartBlock's %d..%d x all", c, l, lo, hi, clo, chi, plo, phi)
					}
				}
				if lo < hi && (lo%max(c.align, layout.AGroup) != 0 || clo%layout.BGroup != 0) {
					t.Errorf("%+v part %d: %d..%d x %d..%d not on row groups and panels", c, l, lo, hi, clo, chi)
				}
				for r := lo; r < hi; r++ {
					for col := clo; col < chi; col++ {
						seen[r*c.cols+col]++
					}
				}
			}
			for i, n := range seen {
				if n != 1 {
					t.Fatalf("%+v cut %v: element (%d, %d) in %d parts", c, cut, i/c.cols, i%c.cols, n)
				}
			}
		}
	}
}
