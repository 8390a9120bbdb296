package link

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"ipu.local/libs/onnx"
	"ipu.local/libs/sim"
)

// intModel: int64 Add, Sub and Mul (held as int32 on the device) with
// broadcasting both ways, a constant operand and a rank-3 output.
var minus3 = int64(-3)

func intModel() []byte {
	b := onnx.NewModel(13)
	b.AddInput("a", onnx.Int64, []int64{3, 5, 7})
	b.AddInput("b", onnx.Int64, []int64{5, 1})
	b.AddInput("c", onnx.Int64, []int64{7})
	k := &onnx.Tensor{Name: "k", DType: onnx.Int64, Dims: []int64{}, Raw: binary.LittleEndian.AppendUint64(nil, uint64(minus3))}
	b.AddInitializer(k)
	b.AddNode("Mul", "m", []string{"a", "b"}, []string{"m"})
	b.AddNode("Sub", "s", []string{"c", "m"}, []string{"s"})
	b.AddNode("Add", "y", []string{"s", "k"}, []string{"y"})
	b.AddOutput("y", onnx.Int64, []int64{3, 5, 7})
	return b.Marshal()
}

func TestIntArithmetic(t *testing.T) {
	data := intModel()
	for _, tiles := range []int{1, 3, 64} {
		t.Run(fmt.Sprint(tiles), func(t *testing.T) {
			o, st, _, err := planLink(t, data, tiles)
			if err != nil {
				t.Fatal(err)
			}
			val := func(i int) int64 { return int64(i*7919%2001) - 1000 }
			in := func(n, off int) []byte {
				var raw []byte
				for i := 0; i < n; i++ {
					raw = binary.LittleEndian.AppendUint64(raw, uint64(val(i+off)))
				}
				return raw
			}
			raw := [][]byte{in(105, 0), in(5, 200), in(7, 300)}
			outs, res := runObject(t, o, raw)
			var want []byte
			for i := 0; i < 105; i++ {
				r, c := i/7%5, i%7
				y := val(c+300) - val(i)*val(r+200) - 3
				want = binary.LittleEndian.AppendUint64(want, uint64(y))
			}
			if string(outs[0]) != string(want) {
				t.Errorf("y:\n got %x\nwant %x", outs[0], want)
			}
			checkCyclesOnly(t, st, res)

			// A product outside int32 faults the device instead of
			// wrapping.
			binary.LittleEndian.PutUint64(raw[0][8*17:], uint64(int64(1<<20)))
			binary.LittleEndian.PutUint64(raw[1][8*2:], uint64(int64(1<<12)))
			if _, _, err := Simulate(o, raw, sim.Options{}); err == nil || !strings.Contains(strings.ToLower(err.Error()), "outside") && !strings.Contains(err.Error(), "0x0") {
				t.Errorf("an int32 overflow: %v, want a device fault", err)
			}
		})
	}
}
