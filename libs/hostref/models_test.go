package hostref

import (
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"ipu.local/libs/graph"
)

// TestSharedTorchModels evaluates the PyTorch-exported cases committed
// under testdata/models/shared (int64 token ids, Shape/Gather/Concat
// chains, an If on a computed condition) against onnxruntime's outputs,
// with the tolerance of TestConformance.
func TestSharedTorchModels(t *testing.T) {
	dirs, _ := filepath.Glob(filepath.Join("..", "..", "testdata", "models", "shared", "torch_*"))
	if len(dirs) == 0 {
		t.Skip("no shared torch cases")
	}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			c, reason, err := loadCase(dir)
			if err != nil {
				t.Fatal(err)
			}
			if c == nil {
				t.Fatalf("unsupported: %s", reason)
			}
			got, err := Eval(c.g, c.inputs, Options{Precision: FP32, Threads: 2})
			if err != nil {
				t.Fatal(err)
			}
			bounds, err := ErrorBounds(c.g, c.inputs)
			if err != nil {
				t.Fatal(err)
			}
			device, err := EvalValues(c.g, c.inputs, Options{Precision: Device, Threads: 2})
			if err != nil {
				t.Fatal(err)
			}
			for i, out := range c.g.Outputs {
				g, err := valuesOf(got[i])
				if err != nil {
					t.Fatal(err)
				}
				w, err := valuesOf(c.outputs[i])
				if err != nil {
					t.Fatal(err)
				}
				if msg := within(g, w, bounds[i].Err, func(e float64) float64 { return 2 * e }); msg != "" {
					t.Errorf("output %d %q: %s", i, out.Name, msg)
				}
				if msg := within(device[out.Index], bounds[i].Ref, bounds[i].Err, func(e float64) float64 { return e }); msg != "" {
					t.Errorf("output %d %q: device precision outside the bound of the fp64 reference: %s", i, out.Name, msg)
				}
			}
		})
	}
}

// TestPassesKeepResults evaluates each shared torch case as built and as
// the device sees it (graph.Canonicalize: fusions, If predication) on the
// same inputs at FP64: the outputs agree far below FP32's resolution
// (fusions compute the same function in another order; predication
// selects the taken branch's value exactly).
func TestPassesKeepResults(t *testing.T) {
	dirs, _ := filepath.Glob(filepath.Join("..", "..", "testdata", "models", "shared", "torch_*"))
	// And the generated torch idioms at other sizes (genmodels -torch).
	more, _ := filepath.Glob(filepath.Join("..", "..", "testdata", "models", "torch-sizes", "t*"))
	dirs = append(dirs, more...)
	if len(dirs) == 0 {
		t.Skip("no shared torch cases")
	}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			c, reason, err := loadCase(dir)
			if err != nil || c == nil {
				t.Fatalf("%v %s", err, reason)
			}
			before, err := Eval(c.g, c.inputs, Options{Precision: FP64, Threads: 2})
			if err != nil {
				t.Fatal(err)
			}
			pg := graph.Encode(c.g) // Canonicalize edits in place: work on a copy
			g2, err := graph.Decode(&pg)
			if err != nil {
				t.Fatal(err)
			}
			g2, rw := graph.Canonicalize(g2)
			if (strings.HasPrefix(filepath.Base(dir), "torch_gate") || strings.HasPrefix(filepath.Base(dir), "tgate_")) && !slices.ContainsFunc(rw, func(r graph.Rewrite) bool { return strings.HasPrefix(r.What, "If predicated") }) {
				t.Fatalf("no If predicated: %v", rw)
			}
			after, err := Eval(g2, c.inputs, Options{Precision: FP64, Threads: 2})
			if err != nil {
				t.Fatal(err)
			}
			for i := range before {
				b, _ := valuesOf(before[i])
				a, _ := valuesOf(after[i])
				for j := range b {
					// Fused LayerNorm and GELU compute the same function in
					// another order: FP64 differences stay far below FP32's
					// resolution.
					if d := math.Abs(a[j] - b[j]); d > 1e-9*math.Max(1, math.Abs(b[j])) {
						t.Fatalf("output %d element %d: %v before the passes, %v after (%d rewrites)", i, j, b[j], a[j], len(rw))
					}
				}
			}
		})
	}
}
