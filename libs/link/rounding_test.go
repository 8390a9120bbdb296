package link

import (
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"ipu.local/libs/numfmt"
	"ipu.local/libs/onnx"
)

// roundingModel: Floor, Ceil, Round and Sign of float and float16 inputs, and
// the Floor of a quotient (torch's floor division of floats).
func roundingModel() []byte {
	b := onnx.NewModel(13)
	b.AddInput("x", onnx.Float, []int64{7, 11})
	b.AddInput("h", onnx.Float16, []int64{3, 10})
	b.AddInitializer(onnx.NewFloat32("d", []int64{}, []float32{0.75}))
	for _, op := range []string{"Floor", "Ceil", "Round", "Sign"} {
		b.AddNode(op, "x"+op, []string{"x"}, []string{"x" + op})
		b.AddNode(op, "h"+op, []string{"h"}, []string{"h" + op})
		b.AddOutput("x"+op, onnx.Float, []int64{7, 11})
		b.AddOutput("h"+op, onnx.Float16, []int64{3, 10})
	}
	b.AddNode("Div", "q", []string{"x", "d"}, []string{"q"})
	b.AddNode("Floor", "fq", []string{"q"}, []string{"fq"})
	b.AddOutput("fq", onnx.Float, []int64{7, 11})
	return b.Marshal()
}

// TestRounding checks each output bit for bit against Go's math on the
// inputs (halves, signed zeros, values near 2^23, specials), and the
// whole model against the host reference.
func TestRounding(t *testing.T) {
	data := roundingModel()
	vals := []float32{0.5, -0.5, 1.5, -2.5, 0.49999997, -0.3, 0, float32(math.Copysign(0, -1)), 0x1p23 - 0.5, -0x1p23 + 1.5,
		0x1p24 + 2, float32(math.Inf(-1)), 1e-40, 3.75, -7.25, 123456.5, -1.0000001, float32(math.NaN())}
	hv := []uint16{0x3800, 0xB800, 0x3E00, 0xC100, 0x8000, 0x0000, 0x6400, 0x63FF, 0xE3FF, 0x7BFF, 0xFC00, 0x0001, 0xBC01, 0x4B00, 0x7E00}
	for _, tiles := range []int{1, 5, 64} {
		t.Run(fmt.Sprint(tiles), func(t *testing.T) {
			o, st, g, _, in := linkedInputs(t, data, tiles, 5)
			x := make([]float32, 77)
			for i := range x {
				x[i] = vals[(i*5)%len(vals)] * float32(1+i%4)
				binary.LittleEndian.PutUint32(in[0][4*i:], math.Float32bits(x[i]))
			}
			h := make([]uint16, 30)
			for i := range h {
				h[i] = hv[(i*7)%len(hv)]
				binary.LittleEndian.PutUint16(in[1][2*i:], h[i])
			}
			outs, res := runObject(t, o, in)
			sign := func(v float64) float64 { // onnxruntime's: +0 for zeros and NaN
				switch {
				case v > 0:
					return 1
				case v < 0:
					return -1
				}
				return 0
			}
			for k, f := range []func(float64) float64{math.Floor, math.Ceil, math.RoundToEven, sign} {
				var wx, wh []byte
				for _, v := range x {
					wx = binary.LittleEndian.AppendUint32(wx, math.Float32bits(float32(f(float64(v)))))
				}
				for _, c := range h {
					w := numfmt.F64ToF16(f(numfmt.F16ToF64(c)))
					if k < 3 && f(numfmt.F16ToF64(c)) == 0 && math.Signbit(numfmt.F16ToF64(c)) {
						w = 0x8000
					}
					wh = binary.LittleEndian.AppendUint16(wh, w)
				}
				for j, w := range [][]byte{wx, wh} {
					if string(outs[2*k+j]) != string(w) {
						t.Errorf("output %s:\n got %x\nwant %x", o.Host.Outputs[2*k+j].Name, outs[2*k+j], w)
					}
				}
			}
			checkCyclesOnly(t, st, res)
			checkVerdict(t, o, st, g, 5)
		})
	}
}
