package link

import (
	"encoding/binary"
	"math/rand"
	"testing"

	"ipu.local/libs/onnx"
)

// TestFold16Agrees: float16 arithmetic and functions of constants fold
// to the bits the device computes for the same values: each operation
// once on an input fed the constant's values (on the device) and once
// on the constant (folded), over random FP16 values with zeros,
// subnormals, the largest finite, infinities and NaNs.
func TestFold16Agrees(t *testing.T) {
	r := rand.New(rand.NewSource(16))
	specials := []uint16{0x0000, 0x8000, 0x0001, 0x83FF, 0x0400, 0x7BFF, 0xFBFF, 0x7C00, 0xFC00, 0x7E00, 0x7C01, 0xFE7F, 0x3C00, 0xBC00, 0x3555, 0x5BFF}
	const n = 96
	vals := func() []byte {
		raw := make([]byte, 2*n)
		for i := range n {
			h := uint16(r.Intn(1 << 16))
			switch {
			case i < len(specials):
				h = specials[i]
			case i%3 == 0:
				h = uint16(0x3000 + r.Intn(0x1800)) // around 1
			}
			binary.LittleEndian.PutUint16(raw[2*i:], h)
		}
		return raw
	}
	xs, ds := vals(), vals()
	b := onnx.NewModel(13)
	b.AddInput("x", onnx.Float16, []int64{n})
	b.AddInitializer(&onnx.Tensor{Name: "c", DType: onnx.Float16, Dims: []int64{n}, Raw: xs})
	b.AddInitializer(&onnx.Tensor{Name: "d", DType: onnx.Float16, Dims: []int64{n}, Raw: ds})
	var ops []string
	for _, op := range []string{"Add", "Sub", "Mul", "Div"} {
		b.AddNode(op, "dev"+op, []string{"x", "d"}, []string{"dev" + op})
		b.AddNode(op, "fold"+op, []string{"c", "d"}, []string{"fold" + op})
		ops = append(ops, op)
	}
	for _, op := range []string{"Sqrt", "Exp", "Log", "Tanh", "Erf", "Sin", "Cos"} {
		b.AddNode(op, "dev"+op, []string{"x"}, []string{"dev" + op})
		b.AddNode(op, "fold"+op, []string{"c"}, []string{"fold" + op})
		ops = append(ops, op)
	}
	for _, op := range ops {
		b.AddOutput("dev"+op, onnx.Float16, []int64{n})
		b.AddOutput("fold"+op, onnx.Float16, []int64{n})
	}
	o, _, g := linkBytes(t, b.Marshal(), 3)
	for i, op := range ops {
		if g.Outputs[2*i].Const != nil || g.Outputs[2*i+1].Const == nil {
			t.Fatalf("%s: want the input's on the device and the constant's folded:\n%s", op, g)
		}
	}
	outs, _ := runObject(t, o, [][]byte{xs})
	for i, op := range ops {
		dev, fold := outs[2*i], outs[2*i+1]
		bad := 0
		for k := range n {
			hd, hf := binary.LittleEndian.Uint16(dev[2*k:]), binary.LittleEndian.Uint16(fold[2*k:])
			if hd != hf {
				if bad++; bad <= 3 {
					t.Errorf("%s(%#04x, %#04x): device %#04x, folded %#04x", op, binary.LittleEndian.Uint16(xs[2*k:]), binary.LittleEndian.Uint16(ds[2*k:]), hd, hf)
				}
			}
		}
	}
}
