package link

import (
	"bytes"
	"errors"
	"testing"

	"ipu.local/formats/plan"
	"ipu.local/libs/arch"
	"ipu.local/libs/graph"
	"ipu.local/libs/lower"
	"ipu.local/libs/onnx"
	"ipu.local/libs/planner"
)

// cutProduct is a product model for TestCutSplits: [batch..., M, K] x
// [K, N], FP16 inputs cast to float (FP16 products), float inputs (FP32
// products) or float inputs cast through FP8 (FP8 products), optionally
// followed by a bias Add over the columns.
func cutProduct(batch []int64, m, k, n int64, typ string, bias bool) []byte {
	b := onnx.NewModel(21)
	as := append(append([]int64(nil), batch...), m, k)
	ys := append(append([]int64(nil), batch...), m, n)
	a, w := "a", "b"
	switch typ {
	case "f16":
		b.AddInput("a", onnx.Float16, as)
		b.AddInput("b", onnx.Float16, []int64{k, n})
		b.AddNode("Cast", "af_Cast", []string{"a"}, []string{"af"}, onnx.IntAttr("to", int64(onnx.Float)))
		b.AddNode("Cast", "bf_Cast", []string{"b"}, []string{"bf"}, onnx.IntAttr("to", int64(onnx.Float)))
		a, w = "af", "bf"
	case "fp8":
		b.AddInput("a", onnx.Float, as)
		b.AddInput("b", onnx.Float, []int64{k, n})
		for _, v := range []string{"a", "b"} {
			b.AddNode("Cast", v+"8_Cast", []string{v}, []string{v + "8"}, onnx.IntAttr("to", int64(onnx.Float8E4M3FNUZ)), onnx.IntAttr("saturate", 1))
			b.AddNode("Cast", v+"f_Cast", []string{v + "8"}, []string{v + "f"}, onnx.IntAttr("to", int64(onnx.Float)))
		}
		a, w = "af", "bf"
	default:
		b.AddInput("a", onnx.Float, as)
		b.AddInput("b", onnx.Float, []int64{k, n})
	}
	y := "y"
	if bias {
		y = "p"
	}
	b.AddNode("MatMul", "y_MatMul", []string{a, w}, []string{y})
	if bias {
		b.AddInitializer(onnx.NewFloat32("c", []int64{n}, ramp(int(n), 0.25)))
		b.AddNode("Add", "y_Add", []string{"p", "c"}, []string{"y"})
	}
	b.AddOutput("y", onnx.Float, ys)
	return b.Marshal()
}

// TestCutSplits links products under splits cut in two along the
// columns and the rows (with k splits, batch blocks, both block orders,
// every product type, cast orders) and runs them against the host
// reference: the numbers exact, every superstep's cycles the linker's.
func TestCutSplits(t *testing.T) {
	for _, tc := range []struct {
		name  string
		model []byte
		split plan.Split
		cast  string
		stat  string
	}{
		{"f16-cols", cutProduct(nil, 100, 70, 300, "f16", false),
			plan.Split{B: 1, M: 3, N: 4, K: 1, Rest: &plan.Rest{Axis: "n", At: 256, M: 5, N: 1}}, "", "b"},
		{"f16-rows-k2-border", cutProduct(nil, 100, 70, 300, "f16", false),
			plan.Split{B: 1, M: 2, N: 3, K: 2, Order: "b", Rest: &plan.Rest{Axis: "m", At: 64, M: 3, N: 1}}, "", "b"},
		{"f32-batch-cols", cutProduct([]int64{3}, 40, 24, 100, "f32", false),
			plan.Split{B: 3, M: 2, N: 1, K: 1, Rest: &plan.Rest{Axis: "n", At: 64, M: 1, N: 2}}, "", "b"},
		{"fp8-cols-after", cutProduct(nil, 36, 64, 90, "fp8", false),
			plan.Split{B: 1, M: 2, N: 2, K: 1, Rest: &plan.Rest{Axis: "n", At: 64, M: 3, N: 1}}, plan.AfterExchange, "b"},
		{"fp8-rows-before", cutProduct(nil, 36, 64, 90, "fp8", false),
			plan.Split{B: 1, M: 1, N: 3, K: 2, Rest: &plan.Rest{Axis: "m", At: 16, M: 2, N: 2}}, plan.BeforeExchange, ""},
		{"bias-cols", cutProduct(nil, 50, 40, 80, "f32", true),
			plan.Split{B: 1, M: 2, N: 2, K: 1, Rest: &plan.Rest{Axis: "n", At: 64, M: 3, N: 1}}, "", "b"},
		// The bias' boxes would overlap under the result pieces: the Add
		// runs on the default layout.
		{"bias-rows", cutProduct(nil, 50, 40, 80, "f32", true),
			plan.Split{B: 1, M: 2, N: 2, K: 1, Rest: &plan.Rest{Axis: "m", At: 32, M: 1, N: 3}}, "", "b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, pl := buildCut(t, tc.model, tc.split, tc.cast, tc.stat)
			o, st, err := Link(pl, "test", Options{})
			if err != nil {
				t.Fatal(err)
			}
			if got := pl.Steps[len(pl.Steps)-1].Split; got == nil || got.Rest == nil {
				for _, s := range pl.Steps {
					if s.Split != nil && s.Split.Rest == nil {
						t.Fatalf("step %q: split %+v, not the pinned cut", s.Name, s.Split)
					}
				}
			}
			checkModel(t, o, st, g)
			if tc.split.K > 1 {
				return // partial sums added in another order: within tolerance
			}
			// Bit for bit the host's device-precision products.
			outs, _, want := runWithReference(t, o, g, 1)
			for i, w := range want {
				if !bytes.Equal(outs[i], w.Raw) {
					t.Errorf("output %d differs from the host's device-precision value", i)
				}
			}
		})
	}
}

// buildCut plans a product model under a pinned split over the first of
// 64 tiles.
func buildCut(t *testing.T, data []byte, s plan.Split, cast, stat string) (*graph.Graph, *plan.Plan) {
	t.Helper()
	g := modelGraph(t, data)
	node := -1
	for _, n := range g.Nodes {
		if n.Op == "MatMul" {
			node = n.Index
		}
	}
	p, _ := arch.Lookup("ipu21")
	d := plan.Decision{Node: node, Split: s, CastOrder: cast, Stationary: stat, Tiles: [2]int{0, int(s.Blocks())}}
	pl, err := planner.Build(g, p, 64, []plan.Decision{d})
	if err != nil {
		t.Fatal(err)
	}
	return g, pl
}

// TestCutBiasOverlap: a Gemm's bias read in overlapping boxes under a
// split cut along the rows is no candidate (not lowered), not a planner
// failure.
func TestCutBiasOverlap(t *testing.T) {
	b := onnx.NewModel(17)
	b.AddInput("a", onnx.Float, []int64{50, 40})
	b.AddInitializer(onnx.NewFloat32("b", []int64{40, 80}, ramp(40*80, 0.125)))
	b.AddInitializer(onnx.NewFloat32("c", []int64{80}, ramp(80, 0.5)))
	b.AddNode("Gemm", "g", []string{"a", "b", "c"}, []string{"y"})
	b.AddOutput("y", onnx.Float, []int64{50, 80})
	m, err := onnx.ReadModel(b.Marshal())
	if err != nil {
		t.Fatal(err)
	}
	g, err := graph.Build(m)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := arch.Lookup("ipu21")
	s := plan.Split{B: 1, M: 2, N: 2, K: 1, Rest: &plan.Rest{Axis: "m", At: 32, M: 1, N: 3}}
	_, err = planner.Build(g, p, 64, []plan.Decision{{Node: 0, Split: s, Stationary: "b", Tiles: [2]int{0, 7}}})
	var nl *lower.NotLoweredError
	if !errors.As(err, &nl) {
		t.Fatalf("Build: %v, want a not-lowered error", err)
	}
}
