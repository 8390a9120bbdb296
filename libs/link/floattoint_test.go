package link

import (
	"encoding/binary"
	"fmt"
	"math"
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

// A value beyond int32 saturates to its range and a NaN gives 0, as
// f32toi32 does (ONNX leaves them undefined; T5 casts log(0) = -Inf and
// selects it away): no fault.
func TestFloatToIntOutOfRange(t *testing.T) {
	b := onnx.NewModel(14)
	b.AddInput("x", onnx.Float, []int64{3, 5})
	b.AddNode("Cast", "y", []string{"x"}, []string{"y"}, onnx.IntAttr("to", int64(onnx.Int64)))
	b.AddOutput("y", onnx.Int64, []int64{3, 5})
	o, _, _, _, in := linkedInputs(t, b.Marshal(), 2, 3)
	for _, c := range []struct {
		v    float32
		want int64
	}{{0x1p31, math.MaxInt32}, {-0x1p31 - 256, math.MinInt32}, {float32(math.Inf(1)), math.MaxInt32},
		{float32(math.Inf(-1)), math.MinInt32}, {float32(math.NaN()), 0}, {-0x1p31, math.MinInt32}} {
		x := append([]byte(nil), in[0]...)
		binary.LittleEndian.PutUint32(x[4*13:], math.Float32bits(c.v))
		outs, _, err := Simulate(o, [][]byte{x}, sim.Options{})
		if err != nil {
			t.Fatalf("%g: %v", c.v, err)
		}
		if got := int64(binary.LittleEndian.Uint64(outs[0][8*13:])); got != c.want {
			t.Errorf("%g: %d, want %d", c.v, got, c.want)
		}
	}
}

// TestIntAbsNeg: Abs and Neg of int64 and int32 on the device (built as
// Sub and Where), bit for bit.
func TestIntAbsNeg(t *testing.T) {
	b := onnx.NewModel(14)
	b.AddInput("i", onnx.Int64, []int64{4, 9})
	b.AddInput("k", onnx.Int32, []int64{13})
	b.AddNode("Abs", "ia", []string{"i"}, []string{"ia"})
	b.AddNode("Neg", "in", []string{"i"}, []string{"in"})
	b.AddNode("Abs", "ka", []string{"k"}, []string{"ka"})
	b.AddOutput("ia", onnx.Int64, []int64{4, 9})
	b.AddOutput("in", onnx.Int64, []int64{4, 9})
	b.AddOutput("ka", onnx.Int32, []int64{13})
	data := b.Marshal()
	vals := []int64{0, 1, -1, 7, -12345, 1<<31 - 1, -(1<<31 - 1), 42}
	for _, tiles := range []int{1, 5} {
		t.Run(fmt.Sprint(tiles), func(t *testing.T) {
			o, st, _, _, in := linkedInputs(t, data, tiles, 13)
			var wa, wn, wk []byte
			for p := 0; p < 36; p++ {
				v := vals[(p*3)%len(vals)]
				binary.LittleEndian.PutUint64(in[0][8*p:], uint64(v))
				wa = binary.LittleEndian.AppendUint64(wa, uint64(max(v, -v)))
				wn = binary.LittleEndian.AppendUint64(wn, uint64(-v))
			}
			for p := 0; p < 13; p++ {
				v := int32(vals[(p*5)%len(vals)])
				binary.LittleEndian.PutUint32(in[1][4*p:], uint32(v))
				wk = binary.LittleEndian.AppendUint32(wk, uint32(max(v, -v)))
			}
			outs, res := runObject(t, o, in)
			for k, w := range [][]byte{wa, wn, wk} {
				if string(outs[k]) != string(w) {
					t.Errorf("output %s:\n got %x\nwant %x", o.Host.Outputs[k].Name, outs[k], w)
				}
			}
			checkCyclesOnly(t, st, res)
		})
	}
}
