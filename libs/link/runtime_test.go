package link

import (
	"encoding/binary"
	"reflect"
	"strings"
	"testing"

	"ipu.local/libs/arch"
	"ipu.local/libs/hostref"
	"ipu.local/libs/isa"
	"ipu.local/libs/sim"
)

// TestRuntimeLinked links qk-early on 64 tiles and checks that every
// tile program holds the runtime: its entry is rt_start, directly
// followed by the supervisor program; each rt_* symbol's code is the
// compiled routine's, with rt_loop's branch resolved to the supervisor
// program; the supervisor program launches only through the launch
// routines (it has no run or join of its own). The simulated cycles are
// the linker's.
func TestRuntimeLinked(t *testing.T) {
	_, o, st, g := linkModel(t, "../../testdata/models/qk-early.onnx", "ipu21", 64)
	p, err := arch.Lookup(o.Arch)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := buildRuntime(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range o.Tiles {
		text := tl.Segments[0]
		word := func(a uint32) uint32 { return binary.LittleEndian.Uint32(text.Data[a-text.Addr:]) }
		addr := map[string]uint32{}
		size := map[string]uint32{}
		for _, sym := range tl.Symbols {
			if sym.Code {
				addr[sym.Name], size[sym.Name] = sym.Addr, sym.Size
			}
		}
		start, ok1 := addr[rtStart]
		main, ok2 := addr[rtMain]
		loop, ok3 := addr[rtLoop]
		if !ok1 || !ok2 || !ok3 {
			t.Fatalf("tile %d: symbols %v lack the runtime's", tl.Index, addr)
		}
		if tl.Entry != start || main != start+4 {
			t.Errorf("tile %d: entry %#x, rt_start %#x, supervisor %#x: want the entry at rt_start, followed by the supervisor program", tl.Index, tl.Entry, start, main)
		}
		for name, a := range addr {
			r := rt.byName[name]
			if r == nil {
				continue
			}
			if int(size[name]) != 4*len(r.words) {
				t.Errorf("tile %d: %s has %d bytes, compiled %d", tl.Index, name, size[name], 4*len(r.words))
				continue
			}
			for k, w := range r.words {
				relocated := false
				for _, rl := range r.relocs {
					relocated = relocated || rl.at == k
				}
				if got := word(a + 4*uint32(k)); got != w && !relocated {
					t.Errorf("tile %d: %s word %d is %#x, compiled %#x", tl.Index, name, k, got, w)
				}
			}
		}
		br, err := isa.Decode(word(loop + 4))
		if err != nil || br.Op != isa.BR || loop+8+4*uint32(br.Imm) != main {
			t.Errorf("tile %d: rt_loop's branch %+v (%v) does not reach the supervisor program at %#x", tl.Index, br, err, main)
		}
		// Every launch in the supervisor program is a launch routine
		// expanded in place: its runs and join, word for word.
		launches := 0
		for a := main; a < main+size[rtMain]; a += 4 {
			in, err := isa.Decode(word(a))
			if err != nil || in.Op != isa.JOIN {
				continue
			}
			w := 0
			for ; w < 6; w++ {
				prev, err := isa.Decode(word(a - 4*uint32(w+1)))
				if err != nil || prev.Op != isa.RUN {
					break
				}
			}
			r := rt.byName[rtLaunch(w)]
			for k := 0; k <= w; k++ {
				if got := word(a - 4*uint32(w) + 4*uint32(k)); got != r.words[k] {
					t.Errorf("tile %d: the launch at %#x differs from %s word %d", tl.Index, a, r.name, k)
				}
			}
			launches++
		}
		if launches == 0 {
			t.Errorf("tile %d: no launch", tl.Index)
		}
	}
	ins := hostref.GenerateInputs(g, 1)
	inputs := make([][]byte, len(ins))
	for i, in := range ins {
		inputs[i] = in.Raw
	}
	_, res, err := Simulate(o, inputs, sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	checkCyclesOnly(t, st, res)
}

// TestRuntimeRelocations links runtimes by hand: rt_loop's branch lands
// where the runtime ends (the supervisor program), a routine the runtime
// lacks is an error, and so is a runtime without rt_start.
func TestRuntimeRelocations(t *testing.T) {
	p, err := arch.Lookup("ipu21")
	if err != nil {
		t.Fatal(err)
	}
	rt, err := buildRuntime(p)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := rt.link(map[string]bool{rtLaunch(2): true, rtLoop: true, rtStart: true})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(tr.syms); n != 3 || tr.syms[n-1].name != rtStart {
		t.Fatalf("syms %+v: want the launch, rt_loop, rt_start", tr.syms)
	}
	off, _ := tr.sym(rtLoop)
	br, err := isa.Decode(tr.words[off+1])
	if err != nil {
		t.Fatal(err)
	}
	if got := off + 2 + int(br.Imm); got != len(tr.words) {
		t.Errorf("rt_loop branches to word %d, the supervisor program is at %d", got, len(tr.words))
	}
	if _, err := rt.link(map[string]bool{rtLaunch(9): true, rtStart: true}); err == nil || !strings.Contains(err.Error(), "rt_launch_9") {
		t.Errorf("missing routine: err %v", err)
	}
	if _, err := rt.link(map[string]bool{rtLoop: true}); err == nil {
		t.Error("a runtime without rt_start linked")
	}
}

// TestRuntimeGiven links one plan with a runtime compiled beforehand
// (Options.Runtime, as ipu-plan's compile_runtime phase does): the object
// is the one the link's own compilation gives.
func TestRuntimeGiven(t *testing.T) {
	pl, o, _, _, err := planLinkN(t, fp8Product(6, 16), 5, 4)
	if err != nil {
		t.Fatal(err)
	}
	p, err := arch.Lookup(pl.Arch)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := CompileRuntime(p)
	if err != nil {
		t.Fatal(err)
	}
	o2, _, err := Link(pl, "test", Options{Runtime: rt})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(o, o2) {
		t.Error("the object differs with a runtime compiled beforehand")
	}
}
