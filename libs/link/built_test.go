package link

import (
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"ipu.local/libs/onnx"
)

// TestReciprocal: Reciprocal (Div(1, x)) of float and float16 values
// and an inference Dropout before it, on 1, 5 and 64 tiles, bit for bit
// against the host reference at device precision.
func TestReciprocal(t *testing.T) {
	b := onnx.NewModel(13)
	b.AddInput("x", onnx.Float, []int64{3, 11})
	b.AddInput("h", onnx.Float16, []int64{2, 9})
	b.AddNode("Dropout", "drop", []string{"x"}, []string{"d"})
	b.AddNode("Reciprocal", "rx", []string{"d"}, []string{"r"})
	b.AddNode("Reciprocal", "rh", []string{"h"}, []string{"rh"})
	b.AddOutput("r", onnx.Float, []int64{3, 11})
	b.AddOutput("rh", onnx.Float16, []int64{2, 9})
	data := b.Marshal()
	for _, tiles := range []int{1, 5, 64} {
		t.Run(fmt.Sprint(tiles), func(t *testing.T) {
			o, st, g, err := planLink(t, data, tiles)
			if err != nil {
				t.Fatal(err)
			}
			outs, res, want := runWithReference(t, o, g, 11)
			for k := range want {
				if string(outs[k]) != string(want[k].Raw) {
					t.Errorf("output %s:\n got %x\nwant %x", o.Host.Outputs[k].Name, outs[k], want[k].Raw)
				}
			}
			checkCyclesOnly(t, st, res)
		})
	}
}

// TestXor: Xor of computed BOOLs on the device and of constants folded,
// against the truth table.
func TestXor(t *testing.T) {
	b := onnx.NewModel(13)
	b.AddInput("x", onnx.Float, []int64{4, 9})
	b.AddInput("y", onnx.Float, []int64{9})
	b.AddInitializer(onnx.NewBool("p", []int64{4}, []bool{false, false, true, true}))
	b.AddInitializer(onnx.NewBool("q", []int64{4}, []bool{false, true, false, true}))
	b.AddInitializer(onnx.NewFloat32("zero", []int64{}, []float32{0}))
	b.AddNode("Greater", "gx", []string{"x", "zero"}, []string{"a"})
	b.AddNode("Less", "ly", []string{"y", "zero"}, []string{"c"})
	b.AddNode("Xor", "xor", []string{"a", "c"}, []string{"z"})
	b.AddNode("Xor", "pq", []string{"p", "q"}, []string{"pq"})
	b.AddOutput("z", onnx.Bool, []int64{4, 9})
	b.AddOutput("pq", onnx.Bool, []int64{4})
	data := b.Marshal()
	for _, tiles := range []int{1, 5} {
		o, st, _, _, in := linkedInputs(t, data, tiles, 17)
		outs, res := runObject(t, o, in)
		var want []byte
		for p := 0; p < 36; p++ {
			a := math.Float32frombits(binary.LittleEndian.Uint32(in[0][4*p:])) > 0
			c := math.Float32frombits(binary.LittleEndian.Uint32(in[1][4*(p%9):])) < 0
			want = append(want, b2byte(a != c))
		}
		if string(outs[0]) != string(want) {
			t.Errorf("%d tiles: z:\n got %x\nwant %x", tiles, outs[0], want)
		}
		if string(outs[1]) != "\x00\x01\x01\x00" {
			t.Errorf("%d tiles: pq %x", tiles, outs[1])
		}
		checkCyclesOnly(t, st, res)
	}
}

func b2byte(v bool) byte {
	if v {
		return 1
	}
	return 0
}
