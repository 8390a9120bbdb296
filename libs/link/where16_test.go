package link

import (
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"ipu.local/libs/hostref"
	"ipu.local/libs/onnx"
)

// TestWhereFP16 selects float16 values: a computed condition broadcast
// along the rows ([3,5,1]) with values broadcast the other way ([1,7])
// and a full one, a constant float16 -inf (an immediate), a scalar
// condition, a condition and a value both one per row, and values at an
// odd row length (7: rows start inside 32-bit words). Every output is
// checked bit for bit (a NaN payload kept) against values picked here
// from the inputs, and the cycles against the linker's.
func TestWhereFP16(t *testing.T) {
	b := onnx.NewModel(13)
	b.AddInput("x", onnx.Float16, []int64{3, 5, 7})
	b.AddInput("c", onnx.Float, []int64{3, 5, 1})
	b.AddInput("r", onnx.Float16, []int64{1, 7})
	b.AddInput("s", onnx.Float, []int64{})
	b.AddInput("a", onnx.Float16, []int64{3, 5, 1})
	b.AddInitializer(&onnx.Tensor{Name: "ninf", DType: onnx.Float16, Dims: []int64{}, Raw: []byte{0x00, 0xfc}})
	b.AddInitializer(onnx.NewFloat32("zero", []int64{}, []float32{0}))
	b.AddNode("Greater", "gt", []string{"c", "zero"}, []string{"m"})
	b.AddNode("Where", "w1", []string{"m", "x", "r"}, []string{"y1"})
	b.AddNode("Where", "w2", []string{"m", "ninf", "x"}, []string{"y2"})
	b.AddNode("Less", "lt", []string{"s", "zero"}, []string{"sm"})
	b.AddNode("Where", "w3", []string{"sm", "x", "y1"}, []string{"y3"})
	b.AddNode("Where", "w4", []string{"m", "a", "x"}, []string{"y4"})
	for _, y := range []string{"y1", "y2", "y3", "y4"} {
		b.AddOutput(y, onnx.Float16, []int64{3, 5, 7})
	}
	data := b.Marshal()
	for _, tiles := range []int{1, 5, 64} {
		for _, sv := range []float32{-1, 2} {
			t.Run(fmt.Sprintf("%d/s%v", tiles, sv), func(t *testing.T) {
				o, st, g, err := planLink(t, data, tiles)
				if err != nil {
					t.Fatal(err)
				}
				ins := hostref.GenerateInputs(g, 11)
				raw := make([][]byte, len(ins))
				for i, in := range ins {
					raw[i] = append([]byte(nil), in.Raw...)
				}
				binary.LittleEndian.PutUint32(raw[3], math.Float32bits(sv))
				binary.LittleEndian.PutUint16(raw[0][6:], 0x7d23) // a signalling NaN kept
				outs, res := runObject(t, o, raw)
				h := func(k, i int) uint16 { return binary.LittleEndian.Uint16(raw[k][2*i:]) }
				want := make([][]byte, 4)
				for i := 0; i < 105; i++ {
					row, col := i/7, i%7
					m := math.Float32frombits(binary.LittleEndian.Uint32(raw[1][4*row:])) > 0
					y1, y2, y4 := h(2, col), h(0, i), h(0, i)
					if m {
						y1, y2, y4 = h(0, i), 0xfc00, h(4, row)
					}
					y3 := y1
					if sv < 0 {
						y3 = h(0, i)
					}
					for j, v := range []uint16{y1, y2, y3, y4} {
						want[j] = binary.LittleEndian.AppendUint16(want[j], v)
					}
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

// TestWherePerRowBoth selects float values where the condition and the
// value are both one element per row of the output (the select kernels
// take one such operand: the rows run one by one).
func TestWherePerRowBoth(t *testing.T) {
	b := onnx.NewModel(13)
	b.AddInput("x", onnx.Float, []int64{3, 5, 7})
	b.AddInput("c", onnx.Float, []int64{3, 5, 1})
	b.AddInput("a", onnx.Float, []int64{3, 5, 1})
	b.AddInitializer(onnx.NewFloat32("zero", []int64{}, []float32{0}))
	b.AddNode("Greater", "gt", []string{"c", "zero"}, []string{"m"})
	b.AddNode("Where", "w", []string{"m", "a", "x"}, []string{"y"})
	b.AddOutput("y", onnx.Float, []int64{3, 5, 7})
	data := b.Marshal()
	for _, tiles := range []int{1, 5} {
		t.Run(fmt.Sprint(tiles), func(t *testing.T) {
			o, st, g, err := planLink(t, data, tiles)
			if err != nil {
				t.Fatal(err)
			}
			ins := hostref.GenerateInputs(g, 5)
			raw := make([][]byte, len(ins))
			for i, in := range ins {
				raw[i] = in.Raw
			}
			outs, res := runObject(t, o, raw)
			w := func(k, i int) uint32 { return binary.LittleEndian.Uint32(raw[k][4*i:]) }
			var want []byte
			for i := 0; i < 105; i++ {
				v := w(0, i)
				if math.Float32frombits(w(1, i/7)) > 0 {
					v = w(2, i/7)
				}
				want = binary.LittleEndian.AppendUint32(want, v)
			}
			if string(outs[0]) != string(want) {
				t.Errorf("got %x\nwant %x", outs[0], want)
			}
			checkCyclesOnly(t, st, res)
		})
	}
}
