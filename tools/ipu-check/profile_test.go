package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"ipu.local/formats/ipuexe"
	"ipu.local/formats/profile"
	"ipu.local/libs/arch"
	"ipu.local/libs/graph"
	"ipu.local/libs/link"
	"ipu.local/libs/onnx"
	"ipu.local/libs/pack"
	"ipu.local/libs/planner"
)

// TestProfileCounters compiles qk-early for 64 tiles, loads it and runs
// ipu-check with --profile: every compute phase of the profile carries
// the counters the tiles stored in their profile buffers, read back from
// the device, and each is the simulator's tile cycles of that phase less
// the store's lag (link.ProfileCounterLag).
func TestProfileCounters(t *testing.T) {
	model := filepath.Join("..", "..", "testdata", "models", "qk-early.onnx")
	data, err := os.ReadFile(model)
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
	p, err := arch.Lookup("ipu21")
	if err != nil {
		t.Fatal(err)
	}
	pl, _, _, err := planner.Plan(g, p, planner.Options{Tiles: 64, Seed: 1, MaxAttempts: 2, ModelPath: "qk-early.onnx", ModelFingerprint: onnx.Fingerprint(data)})
	if err != nil {
		t.Fatal(err)
	}
	o, st, err := link.Link(pl, "test", link.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pkg, err := pack.Build(o, p)
	if err != nil {
		t.Fatal(err)
	}
	pkg.Object = strings.Repeat("0", 64) // no object file: any well-formed fingerprint
	enc, err := ipuexe.Marshal(pkg)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	pkgPath, dev, prof := filepath.Join(dir, "m.ipuexe"), filepath.Join(dir, "ipu0"), filepath.Join(dir, "m.capnp")
	if err := os.WriteFile(pkgPath, enc, 0o644); err != nil {
		t.Fatal(err)
	}
	if loaddevMain([]string{dev, pkgPath}) != 0 {
		t.Fatal("loaddev failed")
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"ipu-check", "--device", dev, "--inferences", "1", "--profile", prof, pkgPath}, &stdout, &stderr); code != 0 {
		t.Fatalf("ipu-check exit %d:\n%s%s", code, stdout.String(), stderr.String())
	}
	pb, err := os.ReadFile(prof)
	if err != nil {
		t.Fatal(err)
	}
	pr, err := profile.Read(pb)
	if err != nil {
		t.Fatal(err)
	}
	phases := 0
	for _, ph := range pr.Phases {
		if ph.Kind != profile.KindCompute {
			if len(ph.TileCounters) != 0 {
				t.Errorf("phase %d (%s): counters for a %s phase", ph.Index, ph.Name, ph.Kind)
			}
			continue
		}
		if len(ph.TileCounters) != pr.Tiles {
			t.Fatalf("phase %d (%s): %d counters, want %d", ph.Index, ph.Name, len(ph.TileCounters), pr.Tiles)
		}
		phases++
		for _, tl := range o.Tiles {
			if want := ph.TileCycles[tl.Index] - link.ProfileCounterLag; ph.TileCounters[tl.Index] != want {
				t.Errorf("phase %d (%s) tile %d: counter %d, tile cycles %d less %d = %d", ph.Index, ph.Name, tl.Index,
					ph.TileCounters[tl.Index], ph.TileCycles[tl.Index], link.ProfileCounterLag, want)
			}
		}
	}
	if phases == 0 {
		t.Fatal("no compute phase in the profile")
	}
	var sim int64
	for _, ph := range pr.Phases {
		if ph.Kind != profile.KindHost {
			sim += ph.Cycles + ph.SyncCycles
		}
	}
	if sim != st.FinalCycles {
		t.Errorf("simulated %d cycles, the linker's final_cycles %d", sim, st.FinalCycles)
	}
}
