package link

import (
	"encoding/binary"
	"fmt"
	"testing"

	"ipu.local/libs/onnx"
)

// intCompareModel: comparisons of int64 and int32 values, broadcasting
// both ways and against a constant, and the casts between integers and
// BOOL and between int32 and int64.
func intCompareModel() []byte {
	b := onnx.NewModel(14)
	b.AddInput("i", onnx.Int64, []int64{3, 5, 7})
	b.AddInput("j", onnx.Int64, []int64{5, 1})
	b.AddInput("k", onnx.Int32, []int64{4, 9})
	b.AddInput("m", onnx.Int32, []int64{9})
	b.AddInitializer(onnx.NewInt64("c", []int64{}, []int64{3}))
	b.AddNode("Equal", "eq", []string{"i", "j"}, []string{"eq"})
	b.AddNode("Greater", "gt", []string{"i", "c"}, []string{"gt"})
	b.AddNode("GreaterOrEqual", "ge", []string{"j", "i"}, []string{"ge"})
	b.AddNode("Less", "lt", []string{"k", "m"}, []string{"lt"})
	b.AddNode("LessOrEqual", "le", []string{"m", "k"}, []string{"le"})
	b.AddNode("Cast", "nz", []string{"k"}, []string{"nz"}, onnx.IntAttr("to", int64(onnx.Bool)))
	b.AddNode("Cast", "back", []string{"lt"}, []string{"back"}, onnx.IntAttr("to", int64(onnx.Int64)))
	b.AddNode("Cast", "wide", []string{"k"}, []string{"wide"}, onnx.IntAttr("to", int64(onnx.Int64)))
	b.AddNode("Cast", "narrow", []string{"i"}, []string{"narrow"}, onnx.IntAttr("to", int64(onnx.Int32)))
	for _, o := range []struct {
		name  string
		dt    onnx.DataType
		shape []int64
	}{{"eq", onnx.Bool, []int64{3, 5, 7}}, {"gt", onnx.Bool, []int64{3, 5, 7}}, {"ge", onnx.Bool, []int64{3, 5, 7}},
		{"lt", onnx.Bool, []int64{4, 9}}, {"le", onnx.Bool, []int64{4, 9}}, {"nz", onnx.Bool, []int64{4, 9}},
		{"back", onnx.Int64, []int64{4, 9}}, {"wide", onnx.Int64, []int64{4, 9}}, {"narrow", onnx.Int32, []int64{3, 5, 7}}} {
		b.AddOutput(o.name, o.dt, o.shape)
	}
	return b.Marshal()
}

// TestIntCompare checks every output bit for bit against values computed
// here from the inputs, which hold few distinct values so that equal
// pairs come up.
func TestIntCompare(t *testing.T) {
	data := intCompareModel()
	for _, tiles := range []int{1, 5, 64} {
		t.Run(fmt.Sprint(tiles), func(t *testing.T) {
			o, st, _, _, in := linkedInputs(t, data, tiles, 7)
			small := []int64{-2, 0, 3, 4, -1 << 31, 1<<31 - 1}
			for k, size := range []int{8, 8, 4, 4} {
				for p := 0; p*size < len(in[k]); p++ {
					v := small[(p*7+k*3)%len(small)]
					if size == 8 {
						binary.LittleEndian.PutUint64(in[k][8*p:], uint64(v))
					} else {
						binary.LittleEndian.PutUint32(in[k][4*p:], uint32(int32(v)))
					}
				}
			}
			outs, res := runObject(t, o, in)
			i64 := func(k, p int) int64 { return int64(binary.LittleEndian.Uint64(in[k][8*p:])) }
			i32 := func(k, p int) int64 { return int64(int32(binary.LittleEndian.Uint32(in[k][4*p:]))) }
			truth := func(v bool) byte { // BOOL on the host: one byte
				if v {
					return 1
				}
				return 0
			}
			want := make([][]byte, 9)
			for p := 0; p < 105; p++ {
				a, c := i64(0, p), i64(1, p/7%5)
				want[0] = append(want[0], truth(a == c))
				want[1] = append(want[1], truth(a > 3))
				want[2] = append(want[2], truth(c >= a))
				want[8] = binary.LittleEndian.AppendUint32(want[8], uint32(int32(a)))
			}
			for p := 0; p < 36; p++ {
				a, c := i32(2, p), i32(3, p%9)
				want[3] = append(want[3], truth(a < c))
				want[4] = append(want[4], truth(c <= a))
				want[5] = append(want[5], truth(a != 0))
				lt := int64(0)
				if a < c {
					lt = 1
				}
				want[6] = binary.LittleEndian.AppendUint64(want[6], uint64(lt))
				want[7] = binary.LittleEndian.AppendUint64(want[7], uint64(a))
			}
			for k, w := range want {
				if string(outs[k]) != string(w) {
					t.Errorf("output %s:\n got %x\nwant %x", o.Host.Outputs[k].Name, outs[k], w)
				}
			}
			checkCyclesOnly(t, st, res)
		})
	}
}
