package planner

import (
	"bytes"
	"testing"
	"unsafe"

	"ipu.local/libs/arch"
	"ipu.local/libs/lower"
)

// TestConstantCopiesShare: in a program lowered with data, the tiles of
// a constant buffer whose bytes are equal (the copies of a replicated
// constant, the zero buffer) share one slice, and tiles whose bytes
// differ do not: the lowering touches each distinct content once.
func TestConstantCopiesShare(t *testing.T) {
	p := arch.MustLookup("ipu21")
	for _, tc := range []struct {
		model string
		tiles int
	}{{"mlp-small", 64}, {"shared/torch_attention/model", 64}, {"shared/bert_layer_fp16/model", 256}} {
		g := load(t, tc.model)
		pl, _, _, err := Plan(g, p, Options{Tiles: tc.tiles, Seed: 1, MaxAttempts: 2, SearchEstimate: true})
		if err != nil {
			t.Fatal(err)
		}
		pr, err := lower.LowerWith(pl, g, p, lower.Options{})
		if err != nil {
			t.Fatal(err)
		}
		shared, distinct := 0, 0
		for _, b := range pr.Buffers {
			var seen [][]byte
			for _, d := range b.Data {
				if len(d) == 0 {
					continue
				}
				for _, e := range seen {
					same := unsafe.SliceData(d) == unsafe.SliceData(e)
					if equal := bytes.Equal(d, e); same != equal {
						t.Fatalf("%s: buffer %s: two tiles' bytes equal %v, one slice %v", tc.model, b.Name, equal, same)
					}
				}
				if !containsSlice(seen, d) {
					seen = append(seen, d)
					distinct++
				} else {
					shared++
				}
			}
		}
		t.Logf("%s on %d tiles: %d constant tile copies shared, %d distinct", tc.model, tc.tiles, shared, distinct)
		if shared == 0 {
			t.Errorf("%s on %d tiles: no tile shares a constant copy", tc.model, tc.tiles)
		}
	}
}

func containsSlice(ss [][]byte, d []byte) bool {
	for _, s := range ss {
		if unsafe.SliceData(s) == unsafe.SliceData(d) {
			return true
		}
	}
	return false
}
