package link

import (
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"ipu.local/libs/fmath"
	"ipu.local/libs/onnx"
)

// rotaryModel: the cos and sin tables of rotary position embeddings as
// LLaMA-style models compute them from position ids (Cast, times the
// inverse frequencies, the frequencies twice), and Sin and Cos of a
// float16 input.
func rotaryModel() []byte {
	b := onnx.NewModel(17)
	b.AddInput("pos", onnx.Int64, []int64{2, 12})
	b.AddInput("h", onnx.Float16, []int64{3, 6})
	inv := make([]float32, 8)
	for i := range inv {
		inv[i] = float32(1 / math.Pow(10000, float64(2*i)/16))
	}
	b.AddInitializer(onnx.NewFloat32("inv_freq", []int64{8}, inv))
	b.AddInitializer(onnx.NewInt64("last", []int64{1}, []int64{-1}))
	b.AddNode("Cast", "t", []string{"pos"}, []string{"t"}, onnx.IntAttr("to", int64(onnx.Float)))
	b.AddNode("Unsqueeze", "tu", []string{"t", "last"}, []string{"tu"})
	b.AddNode("Mul", "freqs", []string{"tu", "inv_freq"}, []string{"freqs"})
	b.AddNode("Concat", "emb", []string{"freqs", "freqs"}, []string{"emb"}, onnx.IntAttr("axis", -1))
	b.AddNode("Cos", "cos", []string{"emb"}, []string{"cos"})
	b.AddNode("Sin", "sin", []string{"emb"}, []string{"sin"})
	b.AddNode("Sin", "hs", []string{"h"}, []string{"hs"})
	b.AddNode("Cos", "hc", []string{"h"}, []string{"hc"})
	b.AddOutput("cos", onnx.Float, []int64{2, 12, 16})
	b.AddOutput("sin", onnx.Float, []int64{2, 12, 16})
	b.AddOutput("hs", onnx.Float16, []int64{3, 6})
	b.AddOutput("hc", onnx.Float16, []int64{3, 6})
	return b.Marshal()
}

// TestRotaryTables checks the tables bit for bit against fmath's sin and
// cos of the products computed here (positions up to 2047), and the
// whole model against the host reference.
func TestRotaryTables(t *testing.T) {
	data := rotaryModel()
	for _, tiles := range []int{1, 5, 64} {
		t.Run(fmt.Sprint(tiles), func(t *testing.T) {
			o, st, g, _, in := linkedInputs(t, data, tiles, 9)
			pos := make([]int64, 24)
			for i := range pos {
				pos[i] = int64(i*89) % 2048
				binary.LittleEndian.PutUint64(in[0][8*i:], uint64(pos[i]))
			}
			outs, res := runObject(t, o, in)
			var wc, ws []byte
			for _, p := range pos {
				for j := 0; j < 16; j++ {
					f := float32(p) * float32(1/math.Pow(10000, float64(2*(j%8))/16))
					wc = binary.LittleEndian.AppendUint32(wc, math.Float32bits(fmath.Cos(f)))
					ws = binary.LittleEndian.AppendUint32(ws, math.Float32bits(fmath.Sin(f)))
				}
			}
			for k, w := range [][]byte{wc, ws} {
				if string(outs[k]) != string(w) {
					t.Errorf("output %s:\n got %x\nwant %x", o.Host.Outputs[k].Name, outs[k], w)
				}
			}
			checkCyclesOnly(t, st, res)
			checkVerdict(t, o, st, g, 9)
		})
	}
}
