package hostref

import (
	"path/filepath"
	"testing"
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
