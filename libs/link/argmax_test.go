package link

import (
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"ipu.local/libs/hostref"
	"ipu.local/libs/numfmt"
	"ipu.local/libs/onnx"
)

// TestArgMax: ArgMax and ArgMin over float, float16, int64 and int32
// values with ties (few distinct values), on every kind of axis, with
// keepdims either way and select_last_index, at opsets 13 and 18 (axes
// an attribute and an input), on 1 and 5 tiles, against the first (or
// last) index of the extreme computed here.
func TestArgMax(t *testing.T) {
	type arg struct {
		op         string
		dt         onnx.DataType
		shape      []int64
		axis       int64
		keep, last bool
	}
	cases := []arg{
		{"ArgMax", onnx.Float, []int64{3, 7}, 1, false, false},
		{"ArgMin", onnx.Int64, []int64{4, 5, 3}, -2, true, false},
		{"ArgMax", onnx.Int32, []int64{6, 5}, 1, true, true},
		{"ArgMax", onnx.Float16, []int64{5, 4}, 0, false, false},
		{"ArgMin", onnx.Float, []int64{2, 3, 9}, 2, false, true},
	}
	for _, opset := range []int64{13, 18} {
		b := onnx.NewModel(opset)
		for i, c := range cases {
			in, out := fmt.Sprintf("x%d", i), fmt.Sprintf("y%d", i)
			b.AddInput(in, c.dt, c.shape)
			b.AddNode(c.op, fmt.Sprintf("n%d", i), []string{in}, []string{out}, onnx.IntAttr("axis", c.axis),
				onnx.IntAttr("keepdims", int64(b2byte(c.keep))), onnx.IntAttr("select_last_index", int64(b2byte(c.last))))
			b.AddOutputInfo(onnx.ValueInfo{Name: out, DType: onnx.Int64})
		}
		data := b.Marshal()
		for _, tiles := range []int{1, 5} {
			t.Run(fmt.Sprintf("opset%d/%d", opset, tiles), func(t *testing.T) {
				o, st, g, ins, raw := linkedInputs(t, data, tiles, 29)
				for i, c := range cases {
					// few distinct values, so that ties come up
					for p := int64(0); p < ins[i].NumElements(); p++ {
						v := float64((p*7+int64(i))%5) - 2
						switch c.dt {
						case onnx.Float:
							binary.LittleEndian.PutUint32(raw[i][4*p:], math.Float32bits(float32(v)))
						case onnx.Float16:
							binary.LittleEndian.PutUint16(raw[i][2*p:], numfmt.F64ToF16(v))
						case onnx.Int64:
							binary.LittleEndian.PutUint64(raw[i][8*p:], uint64(int64(v)))
						case onnx.Int32:
							binary.LittleEndian.PutUint32(raw[i][4*p:], uint32(int32(v)))
						}
					}
				}
				outs, res := runObject(t, o, raw)
				ref, err := hostref.Eval(g, ins, hostref.Options{Precision: hostref.Device, Threads: 1})
				if err != nil {
					t.Fatal(err)
				}
				for i, c := range cases {
					val := func(p int64) float64 { return float64((p*7+int64(i))%5) - 2 }
					a := (c.axis + int64(len(c.shape))) % int64(len(c.shape))
					inner := int64(1)
					for _, d := range c.shape[a+1:] {
						inner *= d
					}
					L, n := c.shape[a], int64(1)
					for _, d := range c.shape {
						n *= d
					}
					var want []byte
					for q := int64(0); q < n/L; q++ {
						base := q/inner*L*inner + q%inner
						best := int64(0)
						for j := int64(1); j < L; j++ {
							x, y := val(base+j*inner), val(base+best*inner)
							better := x > y
							if c.op == "ArgMin" {
								better = x < y
							}
							if better || c.last && x == y {
								best = j
							}
						}
						want = binary.LittleEndian.AppendUint64(want, uint64(best))
					}
					if string(outs[i]) != string(want) {
						t.Errorf("%s %v axis %d: got %x\nwant %x", c.op, c.dt, c.axis, outs[i], want)
					}
					if string(ref[i].Raw) != string(want) {
						t.Errorf("%s %v axis %d: the host reference gives %x", c.op, c.dt, c.axis, ref[i].Raw)
					}
				}
				checkCyclesOnly(t, st, res)
			})
		}
	}
}
