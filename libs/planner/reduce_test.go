package planner

import (
	"strings"
	"testing"

	"ipu.local/libs/arch"
	"ipu.local/libs/graph"
	"ipu.local/libs/onnx"
)

// A reduction with no row kernel and no rewrite (ReduceMax of int32) is
// refused as not lowered, naming the node, instead of being planned as an
// elementwise operator (which panicked).
func TestReductionWithoutKernelRefused(t *testing.T) {
	b := onnx.NewModel(13)
	b.AddNode("ReduceMax", "rmax", []string{"x"}, []string{"y"}, onnx.IntsAttr("axes", 1), onnx.IntAttr("keepdims", 0))
	b.AddInput("x", onnx.Int32, []int64{3, 4})
	b.AddOutput("y", onnx.Int32, []int64{3})
	m, err := onnx.ReadModel(b.Marshal())
	if err != nil {
		t.Fatal(err)
	}
	g, err := graph.Build(m)
	if err != nil {
		t.Fatal(err)
	}
	g, _ = graph.Canonicalize(g)
	_, _, _, err = Plan(g, arch.MustLookup("ipu21"), Options{Tiles: 4, Seed: 1, MaxAttempts: 2, ModelFingerprint: "fp"})
	if err == nil || !strings.Contains(err.Error(), `"rmax"`) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("err = %v, want one line naming node \"rmax\"", err)
	}
	t.Log(err)
}
