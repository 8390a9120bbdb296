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
