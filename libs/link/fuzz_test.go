package link

import (
	"os"
	"testing"

	"ipu.local/formats/plan"
	"ipu.local/libs/onnx"
)

// FuzzLink links mutated plans of qk-early and of the node models: Link
// may refuse a plan, never panic, and what it links validates as an
// object (Link checks that itself).
func FuzzLink(f *testing.F) {
	seed := func(model []byte, tiles int) {
		pl, _, _, _, _ := planLinkN(f, model, tiles, 1)
		out, err := plan.Marshal(pl)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(out)
	}
	for _, tc := range nodeModels {
		b := onnx.NewModel(tc.opset)
		tc.build(b)
		seed(b.Marshal(), 4)
	}
	qk, err := os.ReadFile("../../testdata/models/qk-early.onnx")
	if err != nil {
		f.Fatal(err)
	}
	seed(qk, 16)
	seed(qk, 4)
	f.Fuzz(func(t *testing.T, data []byte) {
		pl, err := plan.Read(data)
		if err != nil || pl.Tiles > 64 {
			return // unreadable, or too large for a short run
		}
		_, _, _ = Link(pl, "fuzz", Options{})
	})
}
