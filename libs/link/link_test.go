package link

import (
	"fmt"
	"math"
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
	"ipu.local/libs/sim"
)

// pages is the host memory of a run: page<<24 | offset.
type pages map[uint8][]byte

func (h pages) at(addr uint32, n int) ([]byte, error) {
	pg, off := uint8(addr>>24), int(addr&0xFFFFFF)
	b, ok := h[pg]
	if !ok || off+n > len(b) {
		return nil, fmt.Errorf("host address %#x +%d outside the pages", addr, n)
	}
	return b[off : off+n], nil
}

func (h pages) ReadHost(addr uint32, dst []byte) error {
	b, err := h.at(addr, len(dst))
	if err == nil {
		copy(dst, b)
	}
	return err
}

func (h pages) WriteHost(addr uint32, src []byte) error {
	b, err := h.at(addr, len(src))
	if err == nil {
		copy(b, src)
	}
	return err
}

// runObject loads o on a fresh simulator, runs one call with inputs
// (raw row-major bytes by graph input) and returns the outputs and the
// run's result.
func runObject(t *testing.T, o *obj.Object, inputs [][]byte) ([][]byte, *sim.RunResult) {
	t.Helper()
	p, err := arch.Lookup(o.Arch)
	if err != nil {
		t.Fatal(err)
	}
	mem := make([][]byte, p.Tiles)
	m := sim.New(p, func(tile int) []byte {
		if mem[tile] == nil {
			mem[tile] = make([]byte, p.Memory.Size())
		}
		return mem[tile]
	}, sim.Options{})
	m.Reset()
	for _, tl := range o.Tiles {
		img := sim.Image{Entry: tl.Entry}
		for _, s := range tl.Segments {
			if s.Kind != obj.BSS {
				img.Segments = append(img.Segments, sim.Segment{Addr: s.Addr, Data: s.Data, Code: s.Kind == obj.Code})
			}
		}
		if err := m.Load(tl.Index, img); err != nil {
			t.Fatalf("load tile %d: %v", tl.Index, err)
		}
	}
	host := pages{}
	for _, pg := range o.Host.Pages {
		host[pg.ID] = make([]byte, pg.Bytes)
	}
	if _, err := m.Run(host, 0); err != nil { // startup to the first hsync
		t.Fatalf("startup: %v", err)
	}
	for i, in := range o.Host.Inputs {
		if err := in.Scatter(host[in.Page], inputs[i]); err != nil {
			t.Fatalf("input %q: %v", in.Name, err)
		}
	}
	res, err := m.Run(host, 0)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	var outs [][]byte
	for _, ot := range o.Host.Outputs {
		b, err := ot.Gather(host[ot.Page])
		if err != nil {
			t.Fatalf("output %q: %v", ot.Name, err)
		}
		outs = append(outs, b)
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
	m, err := onnx.ReadModel(data)
	if err != nil {
		t.Fatal(err)
	}
	g, err := graph.Build(m)
	if err != nil {
		t.Fatal(err)
	}
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

// checkModel runs a linked model against the host reference at device
// precision and compares the cycle cost with the simulator's.
func checkModel(t *testing.T, o *obj.Object, st *Stats, g *graph.Graph) {
	t.Helper()
	ins := hostref.GenerateInputs(g, 1)
	raw := make([][]byte, len(ins))
	for i, in := range ins {
		raw[i] = in.Raw
	}
	outs, res := runObject(t, o, raw)
	want, err := hostref.Eval(g, ins, hostref.Options{Precision: hostref.Device, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range want {
		got := outs[i]
		wv, _ := graph.DecodeFloats(w)
		gt := &onnx.Tensor{DType: w.DType, Dims: w.Dims, Raw: got}
		gv, err := graph.DecodeFloats(gt)
		if err != nil {
			t.Fatal(err)
		}
		var worst, maxw float64
		for k := range wv {
			worst = max(worst, math.Abs(gv[k]-wv[k]))
			maxw = max(maxw, math.Abs(wv[k]))
		}
		k := float64(o.Host.Outputs[i].Accumulate)
		tol := (k*0x1p-24/(1-k*0x1p-24) + 2*0x1p-24) * maxw
		if !(worst <= tol) {
			t.Errorf("output %q: max abs error %g > tolerance %g (first got %g want %g)", o.Host.Outputs[i].Name, worst, tol, gv[0], wv[0])
		}
	}
	// Cycles: the device supersteps between the host ones.
	if len(res.Phases) != len(st.Supersteps) {
		t.Fatalf("simulator ran %d supersteps, the linker costed %d", len(res.Phases), len(st.Supersteps))
	}
	var simCycles int64
	for i, ph := range res.Phases {
		s := st.Supersteps[i]
		if s.Kind == obj.HostExchange {
			continue
		}
		simCycles += ph.Cycles + ph.SyncCycles
		if ph.Cycles != s.Cycles {
			t.Errorf("superstep %d (%s): simulated %d cycles, costed %d", i, s.Name, ph.Cycles, s.Cycles)
		}
	}
	if simCycles != st.FinalCycles {
		t.Errorf("simulated final cycles %d, costed %d", simCycles, st.FinalCycles)
	}
}

func TestQKEarly(t *testing.T) {
	for _, tc := range []struct {
		model, arch string
		tiles       int
	}{
		{"../../../shared/conformance/ort/qk_early_e4m3fnuz/model.onnx", "ipu21", 1472},
		{"../../../shared/conformance/ort/qk_early_e5m2/model.onnx", "ipu21", 64},
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
	m, err := onnx.ReadModel(data)
	if err != nil {
		t.Fatal(err)
	}
	g, err := graph.Build(m)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := arch.Lookup("ipu21")
	pl, _, _, err := planner.Plan(g, p, planner.Options{Tiles: tiles, Seed: 1, MaxAttempts: 8})
	if err != nil {
		t.Fatal(err)
	}
	o, st, err := Link(pl, "test", Options{})
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
	}{
		{"plain", 8, 40, 32, 1, 1, "", false, false, 16},
		{"alpha-beta-input-mn", 12, 33, 48, 0.5, -2, "input-mn", false, false, 16},
		{"const-bias-transB", 20, 64, 40, 1, 1, "const-n", true, false, 64},
		{"input-bias-n-ksplit", 8, 300, 16, 2, 0.25, "input-n", false, false, 64},
		{"const-mn", 5, 7, 17, 1, 3, "const-mn", false, false, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := onnx.NewModel(17)
			b.AddInput("a", onnx.Float, []int64{int64(tc.m), int64(tc.k)})
			bs := []int64{int64(tc.k), int64(tc.n)}
			if tc.transB {
				bs = []int64{int64(tc.n), int64(tc.k)}
			}
			b.AddInitializer(onnx.NewFloat32("b", bs, vals(tc.k*tc.n, 0.125)))
			ins := []string{"a", "b"}
			switch tc.bias {
			case "const-n":
				b.AddInitializer(onnx.NewFloat32("c", []int64{int64(tc.n)}, vals(tc.n, 0.5)))
				ins = append(ins, "c")
			case "const-mn":
				b.AddInitializer(onnx.NewFloat32("c", []int64{int64(tc.m), int64(tc.n)}, vals(tc.m*tc.n, 0.25)))
				ins = append(ins, "c")
			case "input-n":
				b.AddInput("c", onnx.Float, []int64{int64(tc.n)})
				ins = append(ins, "c")
			case "input-mn":
				b.AddInput("c", onnx.Float, []int64{int64(tc.m), int64(tc.n)})
				ins = append(ins, "c")
			}
			tb := int64(0)
			if tc.transB {
				tb = 1
			}
			b.AddNode("Gemm", "g", ins, []string{"y"}, onnx.FloatAttr("alpha", tc.alpha), onnx.FloatAttr("beta", tc.beta), onnx.IntAttr("transB", tb))
			b.AddOutput("y", onnx.Float, []int64{int64(tc.m), int64(tc.n)})
			o, st, g := linkBytes(t, b.Marshal(), tc.tiles)
			checkModel(t, o, st, g)
		})
	}
}
