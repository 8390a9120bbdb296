package link

import (
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"ipu.local/libs/onnx"
)

// triluModel: Trilu on computed float, float16 and int64 values (upper
// with k -1, lower with k 2, upper with k omitted), and an exporter's
// causal mask: torch.triu(torch.full((5, 5), -inf), diagonal=1) added to
// scores, which folds to a constant.
func triluModel() []byte {
	b := onnx.NewModel(14)
	b.AddInput("x", onnx.Float, []int64{2, 5, 7})
	b.AddInput("h", onnx.Float16, []int64{6, 4})
	b.AddInput("i", onnx.Int64, []int64{4, 6})
	b.AddInput("s", onnx.Float, []int64{5, 5})
	b.AddInitializer(onnx.NewInt64("km1", []int64{}, []int64{-1}))
	b.AddInitializer(onnx.NewInt64("k2", []int64{}, []int64{2}))
	b.AddInitializer(onnx.NewInt64("k1", []int64{}, []int64{1}))
	b.AddInitializer(onnx.NewInt64("side", []int64{2}, []int64{5, 5}))
	b.AddNode("Trilu", "t1", []string{"x", "km1"}, []string{"y1"})
	b.AddNode("Trilu", "t2", []string{"h", "k2"}, []string{"y2"}, onnx.IntAttr("upper", 0))
	b.AddNode("Trilu", "t3", []string{"i"}, []string{"y3"})
	b.AddNode("ConstantOfShape", "full", []string{"side"}, []string{"ninf"},
		onnx.TensorAttr("value", onnx.NewFloat32("v", []int64{1}, []float32{float32(math.Inf(-1))})))
	b.AddNode("Trilu", "causal", []string{"ninf", "k1"}, []string{"mask"})
	b.AddNode("Add", "masked", []string{"s", "mask"}, []string{"y4"})
	b.AddOutput("y1", onnx.Float, []int64{2, 5, 7})
	b.AddOutput("y2", onnx.Float16, []int64{6, 4})
	b.AddOutput("y3", onnx.Int64, []int64{4, 6})
	b.AddOutput("y4", onnx.Float, []int64{5, 5})
	return b.Marshal()
}

// TestTrilu checks every output bit for bit against Trilu's definition
// applied here to the inputs.
func TestTrilu(t *testing.T) {
	data := triluModel()
	for _, tiles := range []int{1, 5, 64} {
		t.Run(fmt.Sprint(tiles), func(t *testing.T) {
			o, st, _, _, raw := linkedInputs(t, data, tiles, 3)
			outs, res := runObject(t, o, raw)
			// keep reports whether element p of a [..., m, n] stays.
			keep := func(p, m, n, k int, upper bool) bool {
				i, j := p%(m*n)/n, p%n
				return upper && j-i >= k || !upper && j-i <= k
			}
			want := make([][]byte, 4)
			for p := 0; p < 70; p++ {
				v := binary.LittleEndian.Uint32(raw[0][4*p:])
				if !keep(p, 5, 7, -1, true) {
					v = 0
				}
				want[0] = binary.LittleEndian.AppendUint32(want[0], v)
			}
			for p := 0; p < 24; p++ {
				v := binary.LittleEndian.Uint16(raw[1][2*p:])
				if !keep(p, 6, 4, 2, false) {
					v = 0
				}
				want[1] = binary.LittleEndian.AppendUint16(want[1], v)
			}
			for p := 0; p < 24; p++ {
				v := binary.LittleEndian.Uint64(raw[2][8*p:])
				if !keep(p, 4, 6, 0, true) {
					v = 0
				}
				want[2] = binary.LittleEndian.AppendUint64(want[2], v)
			}
			for p := 0; p < 25; p++ {
				s := math.Float32frombits(binary.LittleEndian.Uint32(raw[3][4*p:]))
				if keep(p, 5, 5, 1, true) {
					s = float32(math.Inf(-1))
				} else {
					s += 0 // the mask's zeros: -0 + 0 is +0, as the device adds
				}
				want[3] = binary.LittleEndian.AppendUint32(want[3], math.Float32bits(s))
			}
			for j, w := range want {
				if string(outs[j]) != string(w) {
					t.Errorf("output %s:\n got %x\nwant %x", o.Host.Outputs[j].Name, outs[j], w)
				}
			}
			checkCyclesOnly(t, st, res)
		})
	}
}
