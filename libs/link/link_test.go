package link

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"ipu.local/formats/obj"
	"ipu.local/formats/plan"
	"ipu.local/libs/arch"
	"ipu.local/libs/graph"
	"ipu.local/libs/hostref"
	"ipu.local/libs/onnx"
	"ipu.local/libs/planner"
	"ipu.local/libs/repodata"
	"ipu.local/libs/sim"
)

// runObject runs o on the simulator (Simulate), failing the test on an
// error.
func runObject(t *testing.T, o *obj.Object, inputs [][]byte) ([][]byte, *sim.RunResult) {
	t.Helper()
	outs, res, err := Simulate(o, inputs, sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return outs, res
}

// linkModel plans and links a model file.
func linkModel(t *testing.T, path, archName string, tiles int) (*plan.Plan, *obj.Object, *Stats, *graph.Graph) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	g := modelGraph(t, data)
	p, err := arch.Lookup(archName)
	if err != nil {
		t.Fatal(err)
	}
	pl, _, _, err := planner.Plan(g, p, planner.Options{Tiles: tiles, Seed: 1, MaxAttempts: 5, ModelPath: filepath.Base(path), ModelFingerprint: onnx.Fingerprint(data)})
	if err != nil {
		t.Fatal(err)
	}
	o, st, err := Link(pl, "test", Options{})
	if err != nil {
		t.Fatal(err)
	}
	return pl, o, st, g
}

// modelGraph decodes an ONNX model and builds its graph.
func modelGraph(t testing.TB, data []byte) *graph.Graph {
	t.Helper()
	m, err := onnx.ReadModel(data)
	if err != nil {
		t.Fatal(err)
	}
	g, err := graph.Build(m)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// checkModel runs a linked model against the host reference at device
// precision (inputs from seed 1) and compares the cycle cost with the
// simulator's: checkVerdict.
func checkModel(t *testing.T, o *obj.Object, st *Stats, g *graph.Graph) {
	t.Helper()
	checkVerdict(t, o, st, g, 1)
}

// conformanceModel is the model of a conformance case, where
// libs/repodata finds the conformance data (the shared copy beside the
// repository, or the committed one under testdata/conformance).
func conformanceModel(t *testing.T, c string) string {
	t.Helper()
	r, err := repodata.Conformance()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(r.Dir, c, "model.onnx")
}

func TestQKEarly(t *testing.T) {
	for _, tc := range []struct {
		model, arch string
		tiles       int
	}{
		{conformanceModel(t, "ort/qk_early_e4m3fnuz"), "ipu21", 1472},
		{conformanceModel(t, "ort/qk_early_e5m2"), "ipu21", 64},
		{"../../testdata/models/qk-early.onnx", "ipu21", 1472},
		{"../../testdata/models/qk-early.onnx", "ipu21", 64},
	} {
		t.Run(fmt.Sprintf("%s@%d", filepath.Base(filepath.Dir(tc.model)), tc.tiles), func(t *testing.T) {
			pl, o, st, g := linkModel(t, tc.model, tc.arch, tc.tiles)
			t.Logf("split %+v cast %s stationary %s: final %d exchange %d", pl.Steps[len(pl.Steps)-1].Split, pl.Steps[len(pl.Steps)-1].CastOrder, pl.Steps[len(pl.Steps)-1].Stationary, st.FinalCycles, st.FinalExchange)
			checkModel(t, o, st, g)
		})
	}
}

// linkBytes plans and links an in-memory model.
func linkBytes(t *testing.T, data []byte, tiles int) (*obj.Object, *Stats, *graph.Graph) {
	t.Helper()
	pl, o, st, g, err := planLinkN(t, data, tiles, 8)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range pl.Steps {
		t.Logf("step %s: %s split %+v %s %s", s.Name, s.Kernel, s.Split, s.CastOrder, s.Stationary)
	}
	return o, st, g
}

func TestGemm(t *testing.T) {
	vals := func(n int, scale float32) []float32 {
		out := make([]float32, n)
		for i := range out {
			out[i] = scale * float32((i*37)%23-11)
		}
		return out
	}
	for _, tc := range []struct {
		name        string
		m, k, n     int
		alpha, beta float32
		bias        string // "", "const-n", "input-n", "input-mn", "const-mn"
		transB      bool
		out16       bool
		tiles       int
		f16         bool // every operand and the result float16
	}{
		{"plain", 8, 40, 32, 1, 1, "", false, false, 16, false},
		{"alpha-beta-input-mn", 12, 33, 48, 0.5, -2, "input-mn", false, false, 16, false},
		{"const-bias-transB", 20, 64, 40, 1, 1, "const-n", true, false, 64, false},
		{"input-bias-n-ksplit", 8, 300, 16, 2, 0.25, "input-n", false, false, 64, false},
		{"const-mn", 5, 7, 17, 1, 3, "const-mn", false, false, 4, false},
		// FP16 Gemm with a bias, as torch exports nn.Linear in half
		// precision: the bias converted to FP32 for the epilogue.
		{"f16-const-bias-transB", 6, 66, 24, 1, 1, "const-n", true, false, 16, true},
		{"f16-input-mn-alpha-beta", 5, 33, 20, 0.5, -2, "input-mn", false, false, 4, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := onnx.NewModel(17)
			dt := onnx.Float
			if tc.f16 {
				dt = onnx.Float16
			}
			tensor := func(name string, dims []int64, v []float32) *onnx.Tensor {
				if !tc.f16 {
					return onnx.NewFloat32(name, dims, v)
				}
				f := make([]float64, len(v))
				for i, x := range v {
					f[i] = float64(x)
				}
				out, err := hostref.Encode(name, onnx.Float16, dims, f)
				if err != nil {
					t.Fatal(err)
				}
				return out
			}
			b.AddInput("a", dt, []int64{int64(tc.m), int64(tc.k)})
			bs := []int64{int64(tc.k), int64(tc.n)}
			if tc.transB {
				bs = []int64{int64(tc.n), int64(tc.k)}
			}
			b.AddInitializer(tensor("b", bs, vals(tc.k*tc.n, 0.125)))
			ins := []string{"a", "b"}
			switch tc.bias {
			case "const-n":
				b.AddInitializer(tensor("c", []int64{int64(tc.n)}, vals(tc.n, 0.5)))
				ins = append(ins, "c")
			case "const-mn":
				b.AddInitializer(tensor("c", []int64{int64(tc.m), int64(tc.n)}, vals(tc.m*tc.n, 0.25)))
				ins = append(ins, "c")
			case "input-n":
				b.AddInput("c", dt, []int64{int64(tc.n)})
				ins = append(ins, "c")
			case "input-mn":
				b.AddInput("c", dt, []int64{int64(tc.m), int64(tc.n)})
				ins = append(ins, "c")
			}
			tb := int64(0)
			if tc.transB {
				tb = 1
			}
			b.AddNode("Gemm", "g", ins, []string{"y"}, onnx.FloatAttr("alpha", tc.alpha), onnx.FloatAttr("beta", tc.beta), onnx.IntAttr("transB", tb))
			b.AddOutput("y", dt, []int64{int64(tc.m), int64(tc.n)})
			o, st, g := linkBytes(t, b.Marshal(), tc.tiles)
			checkModel(t, o, st, g)
		})
	}
}
