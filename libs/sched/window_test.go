package sched

import (
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"ipu.local/libs/arch"
)

// readPhase reads a gzipped JSON array of Transfer from testdata.
func readPhase(t *testing.T, name string) []Transfer {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var ph []Transfer
	if err := json.NewDecoder(z).Decode(&ph); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return ph
}

// TestWindowedPass: on the two all-gathers of the GPT-2 base FP16 block
// on 1,472 tiles (the operands of its Q/K/V and first FFN products: each
// tile's block multicast to the other tiles of its group of 12 or 44),
// the pass that serves the most loaded receivers first among the
// transfers starting within a 32-cycle step ends at least 5% sooner than
// the earliest-start pass with the same send2 rule, and Schedule keeps
// the shorter.
func TestWindowedPass(t *testing.T) {
	p := arch.MustLookup("ipu21")
	earliest, windowed := strategies[0], strategies[1]
	if earliest.window != 0 || windowed.window == 0 || earliest.anyBus != windowed.anyBus || earliest.byWords != windowed.byWords {
		t.Fatalf("strategies %+v, %+v: want the same rules, the second windowed", earliest, windowed)
	}
	for _, name := range []string{"gpt2_block_qkv_operands.json.gz", "gpt2_block_ffn_operands.json.gz"} {
		t.Run(name, func(t *testing.T) {
			ph := readPhase(t, name)
			ix := newPhaseIndex(p.Tiles, ph)
			e, _ := scheduleAligned(p, ph, Options{}, earliest, ix)
			w, _ := scheduleAligned(p, ph, Options{}, windowed, ix)
			if 100*w.makespan > 95*e.makespan {
				t.Errorf("windowed pass %d cycles, earliest-start pass %d: want at least 5%% fewer", w.makespan, e.makespan)
			}
			pl, err := Schedule(p, ph, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if err := Validate(p, ph, pl); err != nil {
				t.Fatal(err)
			}
			if pl.Makespan > min(w.makespan, e.makespan) {
				t.Errorf("Schedule %d cycles, its passes %d and %d", pl.Makespan, e.makespan, w.makespan)
			}
			t.Logf("%d transfers: earliest start %d, windowed %d, schedule %d, bound %d", len(ph), e.makespan, w.makespan, pl.Makespan, pl.LowerBound)
		})
	}
}
