package link

import (
	"encoding/binary"
	"testing"

	"ipu.local/formats/obj"
	"ipu.local/libs/arch"
	"ipu.local/libs/hostref"
	"ipu.local/libs/sim"
)

// TestProfileBuffer links qk-early on 64 tiles and checks the profile
// buffer: its size is profile_bytes and every tile's object has it; the
// available ranges miss every tile's code and buffers; after a run, the
// counters each tile stored are the simulator's tile cycles of its
// compute supersteps less ProfileCounterLag; and the simulated cycles are
// still the linker's.
func TestProfileBuffer(t *testing.T) {
	_, o, st, g := linkModel(t, "../../testdata/models/qk-early.onnx", "ipu21", 64)
	p, err := arch.Lookup(o.Arch)
	if err != nil {
		t.Fatal(err)
	}
	compute := 0
	for _, s := range st.Supersteps {
		if s.Kind == obj.Compute {
			compute++
		}
	}
	if compute == 0 || st.ProfileBytes == 0 {
		t.Fatalf("profile_bytes %d for %d compute supersteps", st.ProfileBytes, compute)
	}
	if want := (4*compute + 7) &^ 7; st.ProfileBytes != want {
		t.Errorf("profile_bytes %d, want %d (a word per compute superstep)", st.ProfileBytes, want)
	}
	overlaps := func(lo, hi uint32) bool {
		for _, r := range st.Available {
			if r.Lo < hi && lo < r.Hi {
				return true
			}
		}
		return false
	}
	for _, tl := range o.Tiles {
		var found bool
		for _, sym := range tl.Symbols {
			if sym.Name == ProfileSymbol {
				found = true
				if sym.Addr != st.ProfileAddr || int(sym.Size) != st.ProfileBytes {
					t.Errorf("tile %d: profile symbol [%#x +%d), stats say [%#x +%d)", tl.Index, sym.Addr, sym.Size, st.ProfileAddr, st.ProfileBytes)
				}
			}
		}
		if !found {
			t.Errorf("tile %d: no %s symbol", tl.Index, ProfileSymbol)
		}
		for _, seg := range tl.Segments {
			if overlaps(seg.Addr, seg.Addr+seg.Size) {
				t.Errorf("tile %d: segment %s [%#x, %#x) is in available_ranges %v", tl.Index, seg.Name, seg.Addr, seg.Addr+seg.Size, st.Available)
			}
		}
	}
	if overlaps(p.Memory.Lo, p.Executable.Lo) {
		t.Errorf("available_ranges %v include memory below the executable range", st.Available)
	}

	ins := hostref.GenerateInputs(g, 1)
	inputs := make([][]byte, len(ins))
	for i, in := range ins {
		inputs[i] = in.Raw
	}
	_, res, mem, err := simulate(o, inputs, sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	checkCyclesOnly(t, st, res)
	word := 0
	for i, s := range st.Supersteps {
		if s.Kind != obj.Compute {
			continue
		}
		for _, tl := range o.Tiles {
			at := st.ProfileAddr + 4*uint32(word) - p.Memory.Lo
			got := int64(binary.LittleEndian.Uint32(mem[tl.Index][at:]))
			if want := res.Phases[i].TileCycles[tl.Index] - ProfileCounterLag; got != want {
				t.Errorf("superstep %d (%s) tile %d: counter %d, simulated tile cycles %d less %d = %d", i, s.Name, tl.Index, got, res.Phases[i].TileCycles[tl.Index], ProfileCounterLag, want)
			}
		}
		word++
	}
}
