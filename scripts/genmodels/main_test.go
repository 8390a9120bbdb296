package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"ipu.local/libs/graph"
	"ipu.local/libs/onnx"
	"ipu.local/libs/repodata"
)

// The committed models must be exactly what the generator writes.
func TestCommittedModelsAreGenerated(t *testing.T) {
	dir := t.TempDir()
	if err := run(dir, defaultSeq, defaultDim); err != nil {
		t.Fatal(err)
	}
	for _, m := range append(models(defaultSeq, defaultDim), sideFiles()...) {
		t.Run(m.file, func(t *testing.T) {
			got, err := os.ReadFile(filepath.Join(dir, m.file))
			if err != nil {
				t.Fatal(err)
			}
			if again := m.build(); !bytes.Equal(got, again) {
				t.Fatal("two runs of the generator differ")
			}
			want, err := os.ReadFile(filepath.Join("..", "..", "testdata", "models", m.file))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("testdata/models/%s differs from the generator's output: regenerate it (cd scripts && go run ./genmodels -out ../testdata/models)", m.file)
			}
		})
	}
}

func buildGraph(t *testing.T, data []byte) *graph.Graph {
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

func TestModelGraphs(t *testing.T) {
	tests := []struct {
		file string
		want string
	}{
		{"qk-early.onnx", `graph "qk" opset 21
input q float[256,64]
input k float[256,64]
node "q8_Cast" Cast {To:float8e4m3fnuz Saturate:true} (q) -> q8 float8e4m3fnuz[256,64]
node "qf_Cast" Cast {To:float Saturate:true} (q8) -> qf float[256,64]
node "k8_Cast" Cast {To:float8e4m3fnuz Saturate:true} (k) -> k8 float8e4m3fnuz[256,64]
node "kf_Cast" Cast {To:float Saturate:true} (k8) -> kf float[256,64]
node "kt_Transpose" Transpose {Perm:[1 0]} (kf) -> kt float[64,256]
node "s_MatMul" MatMul (qf, kt) -> s float[256,256]
output s
`},
		{"matmul2048.onnx", `graph "matmul" opset 21
input a float16[2048,2048]
input b float16[2048,2048]
node "af_Cast" Cast {To:float Saturate:true} (a) -> af float[2048,2048]
node "bf_Cast" Cast {To:float Saturate:true} (b) -> bf float[2048,2048]
node "y_MatMul" MatMul (af, bf) -> y float[2048,2048]
output y
`},
		{"mlp-small.onnx", `graph "mlp" opset 21
input x float[16,64]
const w1 float[64,128]
const b1 float[128]
const w2 float[128,64]
node "h_MatMul" MatMul (x, w1) -> h float[16,128]
node "hb_Add" Add (h, b1) -> hb float[16,128]
node "g_Gelu" Gelu {Tanh:false} (hb) -> g float[16,128]
node "y_MatMul" MatMul (g, w2) -> y float[16,64]
output y
`},
	}
	all := map[string]func() []byte{}
	for _, m := range models(defaultSeq, defaultDim) {
		all[m.file] = m.build
	}
	delete(all, "mlp-external.onnx") // TestExternalModel
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			g := buildGraph(t, all[tt.file]())
			if diff := cmp.Diff(tt.want, g.String()); diff != "" {
				t.Errorf("graph mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestExternalModel: mlp-external.onnx, read with its weights file, is
// mlp-small.onnx: the same graph and constants.
func TestExternalModel(t *testing.T) {
	dir := t.TempDir()
	model, data := mlpExternal()
	path := filepath.Join(dir, "mlp-external.onnx")
	if err := os.WriteFile(path, model, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, mlpExternalData), data, 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := onnx.ReadModelFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !m.HasExternal() {
		t.Fatal("no tensor of mlp-external.onnx lies in another file")
	}
	g, err := graph.Build(m)
	if err != nil {
		t.Fatal(err)
	}
	want := buildGraph(t, mlpSmall())
	if diff := cmp.Diff(want.String(), g.String()); diff != "" {
		t.Errorf("graph mismatch (-mlp-small +mlp-external):\n%s", diff)
	}
	for i, v := range want.Values {
		if v.Const != nil && !bytes.Equal(v.Const.Raw, g.Values[i].Const.Raw) {
			t.Errorf("constant %s differs", v.Name)
		}
	}
}

func TestMLPWeights(t *testing.T) {
	m, err := onnx.ReadModel(mlpSmall())
	if err != nil {
		t.Fatal(err)
	}
	bounds := map[string]float32{"w1": 0.125, "b1": 0.5, "w2": 0.08838835}
	for _, init := range m.Graph.Initializers {
		v, err := init.Float32s()
		if err != nil {
			t.Fatal(err)
		}
		lim := bounds[init.Name]
		distinct := map[float32]bool{}
		for i, x := range v {
			if x < -lim || x > lim {
				t.Fatalf("%s[%d] = %v outside [-%v, %v]", init.Name, i, x, lim, lim)
			}
			distinct[x] = true
		}
		if len(distinct) < len(v)*9/10 {
			t.Errorf("%s: %d distinct values of %d", init.Name, len(distinct), len(v))
		}
	}
}

// qk-early has the structure of the conformance model ort/qk_early_e4m3fnuz
// at that model's size.
func TestQKEarlyMirrorsConformance(t *testing.T) {
	r, err := repodata.Conformance()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(r.Dir, "ort", "qk_early_e4m3fnuz", "model.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	want := buildGraph(t, data).String()
	got := buildGraph(t, qkEarly(64, 64)).String()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("graph mismatch (-want +got):\n%s", diff)
	}
}

func TestRunRejectsBadSizes(t *testing.T) {
	if err := run(t.TempDir(), 0, 64); err == nil {
		t.Error("run accepted -seq 0")
	}
}
