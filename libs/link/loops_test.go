package link

import (
	"bytes"
	"path/filepath"
	"testing"

	"ipu.local/formats/obj"
	"ipu.local/libs/graph"
	"ipu.local/libs/hostref"
	"ipu.local/libs/repodata"
)

// TestExchangeLoops links a BERT layer with its exchange code compressed
// into repeat loops and straight-line: the simulator runs both to the
// linker's cycles with bit-identical outputs, and the loops take less
// code.
func TestExchangeLoops(t *testing.T) {
	if testing.Short() {
		t.Skip("links and simulates a BERT layer twice")
	}
	r, err := repodata.Models()
	if err != nil {
		t.Skip(err)
	}
	pl, o, st, g := linkModel(t, filepath.Join(r.Dir, "bert_layer", "model.onnx"), "ipu21", 32)
	flat, fst, err := Link(pl, "test", Options{NoExchangeLoops: true})
	if err != nil {
		t.Fatal(err)
	}
	es := st.ExchangeStorage
	if es.Loops == 0 || es.TotalStored >= es.TotalStraight {
		t.Fatalf("no exchange code compressed: %+v", es)
	}
	if fst.ExchangeStorage.Loops != 0 || fst.ExchangeStorage.TotalStored != es.TotalStraight {
		t.Errorf("straight-line link: %+v, want %d bytes and no loop", fst.ExchangeStorage, es.TotalStraight)
	}
	if st.FinalCycles != fst.FinalCycles {
		t.Errorf("final cycles %d with loops, %d without", st.FinalCycles, fst.FinalCycles)
	}
	if a, b := textBytes(o), textBytes(flat); a+es.TotalStraight-es.TotalStored != b {
		t.Errorf("code %d bytes with loops, %d without: the loops save %d", a, b, es.TotalStraight-es.TotalStored)
	}
	sameRuns(t, g, o, st, flat, fst, "with loops")
	t.Logf("%d loops: exchange code of all tiles %d -> %d bytes; largest tile %d -> %d, patches %d, elided %d",
		es.Loops, es.TotalStraight, es.TotalStored, es.StraightBytes, es.TableBytes, es.PatchBytes, es.ElidedBytes)
}

// sameRuns simulates two objects of graph g on the same generated
// inputs: each runs to its linker's cycles, and their outputs are
// bit-identical (what names a's difference in the error).
func sameRuns(t *testing.T, g *graph.Graph, a *obj.Object, ast *Stats, b *obj.Object, bst *Stats, what string) {
	t.Helper()
	ins := hostref.GenerateInputs(g, 1)
	raw := make([][]byte, len(ins))
	for i, in := range ins {
		raw[i] = in.Raw
	}
	outs, res := runObject(t, a, raw)
	checkCyclesOnly(t, ast, res)
	want, bres := runObject(t, b, raw)
	checkCyclesOnly(t, bst, bres)
	for i := range want {
		if !bytes.Equal(outs[i], want[i]) {
			t.Errorf("output %s differs %s", a.Host.Outputs[i].Name, what)
		}
	}
}

// textBytes is the code of every tile of o.
func textBytes(o *obj.Object) int {
	n := 0
	for _, tl := range o.Tiles {
		for _, s := range tl.Segments {
			if s.Kind == obj.Code {
				n += int(s.Size)
			}
		}
	}
	return n
}
