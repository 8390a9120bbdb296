package link

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"testing"

	"ipu.local/libs/numfmt"
	"ipu.local/libs/onnx"
	"ipu.local/libs/sim"
)

// floatToIntModel: casts from float, float16 and a computed product to
// int64 and int32.
func floatToIntModel() []byte {
	b := onnx.NewModel(14)
	b.AddInput("x", onnx.Float, []int64{6, 13})
	b.AddInput("h", onnx.Float16, []int64{5, 7})
	b.AddInput("a", onnx.Float, []int64{4, 8})
	b.AddInput("w", onnx.Float, []int64{8, 6})
	b.AddNode("Cast", "x64", []string{"x"}, []string{"x64"}, onnx.IntAttr("to", int64(onnx.Int64)))
	b.AddNode("Cast", "x32", []string{"x"}, []string{"x32"}, onnx.IntAttr("to", int64(onnx.Int32)))
	b.AddNode("Cast", "h64", []string{"h"}, []string{"h64"}, onnx.IntAttr("to", int64(onnx.Int64)))
	b.AddNode("MatMul", "p", []string{"a", "w"}, []string{"p"})
	b.AddNode("Cast", "p32", []string{"p"}, []string{"p32"}, onnx.IntAttr("to", int64(onnx.Int32)))
	b.AddOutput("x64", onnx.Int64, []int64{6, 13})
	b.AddOutput("x32", onnx.Int32, []int64{6, 13})
	b.AddOutput("h64", onnx.Int64, []int64{5, 7})
	b.AddOutput("p32", onnx.Int32, []int64{4, 6})
	return b.Marshal()
}

// floatToIntValues are FP32 inputs of the casts: the in-range extremes,
// signed zeros, fractions either side of integers, subnormals and
// assorted magnitudes.
var floatToIntValues = []float32{0x1p31 - 128, -0x1p31, -0x1p31 + 128, 0, float32(math.Copysign(0, -1)), 0.5, -0.5,
	1.9999999, -1.9999999, 2.5, -3.5, 0x1p-149, -0x1p-126, 0x1p24 + 2, -0x1p23 - 1, 123456.78, -98765.4, 7, -7.25}

// TestFloatToInt checks the casts bit for bit against truncation
// computed here, and the product's cast against the host reference.
func TestFloatToInt(t *testing.T) {
	data := floatToIntModel()
	for _, tiles := range []int{1, 5, 64} {
		t.Run(fmt.Sprint(tiles), func(t *testing.T) {
			o, st, g, _, in := linkedInputs(t, data, tiles, 11)
			x := make([]float32, 78)
			for i := range x {
				x[i] = floatToIntValues[(i*5)%len(floatToIntValues)] * float32(1+i%3)
				if math.Abs(float64(x[i])) >= 0x1p31 {
					x[i] /= 3
				}
				binary.LittleEndian.PutUint32(in[0][4*i:], math.Float32bits(x[i]))
			}
			h := make([]uint16, 35)
			for i := range h {
				// every finite FP16 exponent, both signs
				h[i] = uint16(i*1871) & 0xFBFF
				binary.LittleEndian.PutUint16(in[1][2*i:], h[i])
			}
			outs, res := runObject(t, o, in)
			want := make([][]byte, 3)
			for _, v := range x {
				want[0] = binary.LittleEndian.AppendUint64(want[0], uint64(int64(v)))
				want[1] = binary.LittleEndian.AppendUint32(want[1], uint32(int32(v)))
			}
			for _, v := range h {
				want[2] = binary.LittleEndian.AppendUint64(want[2], uint64(int64(numfmt.F16ToF64(v))))
			}
			for k, w := range want {
				if string(outs[k]) != string(w) {
					t.Errorf("output %s:\n got %x\nwant %x", o.Host.Outputs[k].Name, outs[k], w)
				}
			}
			checkCyclesOnly(t, st, res)
			checkVerdict(t, o, st, g, 11)
		})
	}
}

// A value the integer cannot hold faults the device instead of
// saturating.
func TestFloatToIntOutOfRange(t *testing.T) {
	b := onnx.NewModel(14)
	b.AddInput("x", onnx.Float, []int64{3, 5})
	b.AddNode("Cast", "y", []string{"x"}, []string{"y"}, onnx.IntAttr("to", int64(onnx.Int64)))
	b.AddOutput("y", onnx.Int64, []int64{3, 5})
	o, _, _, _, in := linkedInputs(t, b.Marshal(), 2, 3)
	for _, v := range []float32{0x1p31, -0x1p31 - 256, float32(math.Inf(1)), float32(math.NaN())} {
		x := append([]byte(nil), in[0]...)
		binary.LittleEndian.PutUint32(x[4*13:], math.Float32bits(v))
		_, _, err := Simulate(o, [][]byte{x}, sim.Options{})
		if err == nil || !strings.Contains(strings.ToLower(err.Error()), "outside") {
			t.Errorf("%g: run error %v, want a fault outside tile memory", v, err)
		}
	}
}
