package link

import (
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"ipu.local/libs/hostref"
	"ipu.local/libs/onnx"
)

// whereModel: Where with a computed condition broadcast along columns
// ([3,5,1]), values broadcast the other way ([1,7]) and a full one, a
// constant -inf (an immediate), a scalar condition, and an int64 Where
// (values held as int32 on the device): every output checked bit for bit against values
// computed here from the inputs.
func whereModel() []byte {
	b := onnx.NewModel(13)
	b.AddInput("x", onnx.Float, []int64{3, 5, 7})
	b.AddInput("c", onnx.Float, []int64{3, 5, 1})
	b.AddInput("r", onnx.Float, []int64{1, 7})
	b.AddInput("s", onnx.Float, []int64{})
	b.AddInput("i", onnx.Int64, []int64{5, 7})
	b.AddInput("j", onnx.Int64, []int64{1, 7})
	b.AddInitializer(onnx.NewFloat32("ninf", []int64{}, []float32{float32(math.Inf(-1))}))
	b.AddInitializer(onnx.NewFloat32("zero", []int64{}, []float32{0}))
	b.AddNode("Greater", "gt", []string{"c", "zero"}, []string{"m"})
	b.AddNode("Where", "w1", []string{"m", "x", "r"}, []string{"y1"})
	b.AddNode("Where", "w2", []string{"m", "ninf", "x"}, []string{"y2"})
	b.AddNode("Less", "lt", []string{"s", "zero"}, []string{"sm"})
	b.AddNode("Where", "w3", []string{"sm", "x", "y1"}, []string{"y3"})
	b.AddNode("Where", "w4", []string{"sm", "i", "j"}, []string{"y4"})
	b.AddOutput("y1", onnx.Float, []int64{3, 5, 7})
	b.AddOutput("y2", onnx.Float, []int64{3, 5, 7})
	b.AddOutput("y3", onnx.Float, []int64{3, 5, 7})
	b.AddOutput("y4", onnx.Int64, []int64{5, 7})
	return b.Marshal()
}

func TestWhere(t *testing.T) {
	data := whereModel()
	for _, tiles := range []int{1, 5, 64} {
		for _, sv := range []float32{-1, 2} {
			t.Run(fmt.Sprintf("%d/s%v", tiles, sv), func(t *testing.T) {
				o, st, g, err := planLink(t, data, tiles)
				if err != nil {
					t.Fatal(err)
				}
				ins := hostref.GenerateInputs(g, 9)
				raw := make([][]byte, len(ins))
				for i, in := range ins {
					raw[i] = in.Raw
				}
				binary.LittleEndian.PutUint32(raw[3], math.Float32bits(sv))
				binary.LittleEndian.PutUint32(raw[0][8:], 0x7FC01234) // a NaN payload kept
				outs, res := runObject(t, o, raw)
				f32 := func(k, i int) uint32 { return binary.LittleEndian.Uint32(raw[k][4*i:]) }
				want := make([][]byte, 4)
				for i := 0; i < 105; i++ {
					row, col := i/7, i%7
					m := math.Float32frombits(f32(1, row)) > 0
					y1, y2 := f32(2, col), f32(0, i)
					if m {
						y1, y2 = f32(0, i), math.Float32bits(float32(math.Inf(-1)))
					}
					y3 := y1
					if sv < 0 {
						y3 = f32(0, i)
					}
					want[0] = binary.LittleEndian.AppendUint32(want[0], y1)
					want[1] = binary.LittleEndian.AppendUint32(want[1], y2)
					want[2] = binary.LittleEndian.AppendUint32(want[2], y3)
				}
				for i := 0; i < 35; i++ {
					v := int64(binary.LittleEndian.Uint64(raw[4][8*i:]))
					if sv >= 0 {
						v = int64(binary.LittleEndian.Uint64(raw[5][8*(i%7):]))
					}
					want[3] = binary.LittleEndian.AppendUint64(want[3], uint64(v))
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
}
