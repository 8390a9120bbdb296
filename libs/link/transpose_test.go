package link

import (
	"fmt"
	"strings"
	"testing"

	"ipu.local/libs/arch"
	"ipu.local/libs/lower"
	"ipu.local/libs/onnx"
)

// TestTransposeReadsLocalPieces: a transpose that moves the innermost
// axis permutes straight from the input's piece when the tile holds the
// source box (no staging copy; on one tile, no staging buffer at all),
// and stages only the boxes other tiles hold; the numbers are the
// reference's (FP16 and FP32, a batch axis kept, odd sizes).
func TestTransposeReadsLocalPieces(t *testing.T) {
	b := onnx.NewModel(21)
	b.AddInput("x", onnx.Float, []int64{3, 20, 37})
	b.AddNode("Cast", "xh", []string{"x"}, []string{"xh"}, onnx.IntAttr("to", int64(onnx.Float16)))
	b.AddNode("Transpose", "th", []string{"xh"}, []string{"yh"}, onnx.IntsAttr("perm", 0, 2, 1))
	b.AddNode("Transpose", "t", []string{"x"}, []string{"y"}, onnx.IntsAttr("perm", 2, 0, 1))
	b.AddOutput("yh", onnx.Float16, []int64{3, 37, 20})
	b.AddOutput("y", onnx.Float, []int64{37, 3, 20})
	data := b.Marshal()
	for _, tiles := range []int{1, 16, 1472} {
		t.Run(fmt.Sprint(tiles), func(t *testing.T) {
			pl, o, st, g, err := planLinkN(t, data, tiles, 2)
			if err != nil {
				t.Fatal(err)
			}
			pr, err := lower.Lower(pl, g, arch.MustLookup(pl.Arch))
			if err != nil {
				t.Fatal(err)
			}
			staged := 0
			for _, buf := range pr.Buffers {
				if strings.HasSuffix(buf.Name, ".staged") {
					staged++
				}
			}
			if tiles == 1 && staged != 0 {
				t.Errorf("%d staging buffers on one tile, want none", staged)
			}
			checkVerdict(t, o, st, g, 1)
			checkVerdict(t, o, st, g, 2)
		})
	}
}
