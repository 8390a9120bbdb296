package hostref

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path/filepath"
	"sort"
	"testing"

	"ipu.local/libs/graph"
	"ipu.local/libs/onnx"
	"ipu.local/libs/repodata"
)

// conformanceDir is the conformance data (libs/repodata:
// $IPU_CONFORMANCE, the shared folder beside the repository when present,
// else the committed copies under testdata/conformance).
func conformanceDir(t testing.TB) string {
	t.Helper()
	r, err := repodata.Conformance()
	if err != nil {
		t.Fatal(err)
	}
	return r.Dir
}

// conformanceCase is one case folder, loaded.
type conformanceCase struct {
	g       *graph.Graph
	inputs  []*onnx.Tensor
	outputs []*onnx.Tensor
}

// loadCase reads a case; a nil case with a nil error is a model the
// toolchain does not support (reason in the string).
func loadCase(dir string) (*conformanceCase, string, error) {
	m, err := onnx.ReadModelFile(filepath.Join(dir, "model.onnx"))
	if err != nil {
		return nil, "", err
	}
	// The inputs first: a model with symbolic dimensions is built for
	// their shapes.
	data := filepath.Join(dir, "test_data_set_0")
	var inputs []*onnx.Tensor
	for i := 0; ; i++ {
		t, err := onnx.ReadTensorFile(filepath.Join(data, fmt.Sprintf("input_%d.pb", i)))
		if errors.Is(err, fs.ErrNotExist) {
			break
		}
		if err != nil {
			return nil, "", err
		}
		inputs = append(inputs, t)
	}
	g, err := graph.BuildWith(m, graph.BuildOptions{InputShapes: graph.InputShapesOf(m, inputs)})
	if err != nil {
		return nil, err.Error(), nil
	}
	if len(inputs) != len(g.Inputs) {
		return nil, "", fmt.Errorf("%s: %d input files for %d inputs", data, len(inputs), len(g.Inputs))
	}
	c := &conformanceCase{g: g, inputs: inputs}
	for i := range g.Outputs {
		t, err := onnx.ReadTensorFile(filepath.Join(data, fmt.Sprintf("output_%d.pb", i)))
		if err != nil {
			return nil, "", err
		}
		c.outputs = append(c.outputs, t)
	}
	return c, "", nil
}

// within compares got with want element by element: bit for bit (NaN for
// NaN) where the bound is 0, within tol(err) otherwise, anything where it
// is infinite. It returns the first offence, or "".
func within(got, want, err []float64, tol func(e float64) float64) string {
	if len(got) != len(want) {
		return fmt.Sprintf("%d elements, want %d", len(got), len(want))
	}
	for i := range want {
		e := err[i]
		switch {
		case math.IsInf(e, 1):
		case math.IsNaN(want[i]) || math.IsNaN(got[i]):
			if math.IsNaN(want[i]) != math.IsNaN(got[i]) {
				return fmt.Sprintf("element %d: %g, want %g", i, got[i], want[i])
			}
		case e == 0:
			if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
				return fmt.Sprintf("element %d: %g, want exactly %g", i, got[i], want[i])
			}
		case math.Abs(got[i]-want[i]) > tol(e):
			return fmt.Sprintf("element %d: %g, want %g within %.3g (difference %.3g)", i, got[i], want[i], tol(e), math.Abs(got[i]-want[i]))
		}
	}
	return ""
}

// TestConformance evaluates every supported conformance case at FP32 and
// compares with the expected outputs, computed by onnxruntime (ort/) or
// PyTorch (onnx-pytorch/).
//
// The tolerance is derived per element, never tuned: ErrorBounds gives
// Err, the bound on how far an implementation of the stated accuracy model
// (one float32 rounding per elementary operation, transcendental functions
// within 4 ulps, sums within gamma(n) = n*2^-24/(1-n*2^-24) of the sum of
// magnitudes, casts rounding once) lands from the exact (float64) result,
// with input errors propagated through each operator. This evaluation and
// the expected one both meet the model, so they differ by at most 2*Err.
// Where Err is 0 (casts of exact values, data movement, Relu, Max,
// Clip, ...) the outputs must match bit for bit, NaN for NaN.
//
// As a check of the bounds themselves, the Device evaluation must land
// within Err of the FP64 reference.
func TestConformance(t *testing.T) {
	root := conformanceDir(t)
	for _, folder := range []string{"ort", "onnx-pytorch"} {
		dirs, _ := filepath.Glob(filepath.Join(root, folder, "*"))
		sort.Strings(dirs)
		var pass, fail int
		var unsupported []string
		for _, dir := range dirs {
			name := folder + "/" + filepath.Base(dir)
			c, reason, err := loadCase(dir)
			if err != nil {
				t.Errorf("%s: %v", name, err)
				fail++
				continue
			}
			if c == nil {
				unsupported = append(unsupported, fmt.Sprintf("%s: %s", name, reason))
				continue
			}
			ok := t.Run(name, func(t *testing.T) {
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
					if got[i].DType != c.outputs[i].DType {
						t.Errorf("output %d %q: element type %v, want %v", i, out.Name, got[i].DType, c.outputs[i].DType)
						continue
					}
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
			if ok {
				pass++
			} else {
				fail++
			}
		}
		total := pass + fail + len(unsupported)
		t.Logf("%s: %d of %d cases pass at fp32 (%d of %d supported), %d fail, %d unsupported",
			folder, pass, total, pass, pass+fail, fail, len(unsupported))
		for _, u := range unsupported {
			t.Logf("  UNSUPPORTED %s", u)
		}
	}
}

// valuesOf decodes a tensor of any runtime type as float64 (integers
// converted, exact below 2^53).
func valuesOf(t *onnx.Tensor) ([]float64, error) {
	d, err := decode(t)
	if err != nil {
		return nil, err
	}
	if d.i != nil {
		return toFloats(d.i), nil
	}
	return d.f, nil
}
