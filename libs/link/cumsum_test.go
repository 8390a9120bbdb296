package link

import (
	"encoding/binary"
	"fmt"
	"testing"

	"ipu.local/libs/hostref"
	"ipu.local/libs/onnx"
)

// cumsumModel: CumSum of computed values: int64 [3, 9] along its rows,
// int32 [4, 6] exclusive and reversed down its columns, and RoBERTa's
// position ids as its exporter writes them: mask = Cast(Not(Equal(ids,
// pad)), int32), pos = Cast(CumSum(mask, 1) * mask, int64) + pad.
func cumsumModel() []byte {
	b := onnx.NewModel(14)
	b.AddInput("i", onnx.Int64, []int64{3, 9})
	b.AddInput("j", onnx.Int32, []int64{4, 6})
	b.AddInput("ids", onnx.Int64, []int64{2, 11})
	b.AddInitializer(onnx.NewInt64("one", []int64{}, []int64{1}))
	b.AddInitializer(onnx.NewInt64("zero", []int64{}, []int64{0}))
	b.AddInitializer(onnx.NewInt64("pad", []int64{}, []int64{1}))
	b.AddNode("CumSum", "c1", []string{"i", "one"}, []string{"y1"})
	b.AddNode("CumSum", "c2", []string{"j", "zero"}, []string{"y2"}, onnx.IntAttr("exclusive", 1), onnx.IntAttr("reverse", 1))
	b.AddNode("Equal", "eq", []string{"ids", "pad"}, []string{"is_pad"})
	b.AddNode("Not", "not", []string{"is_pad"}, []string{"keep"})
	b.AddNode("Cast", "mask", []string{"keep"}, []string{"m"}, onnx.IntAttr("to", int64(onnx.Int32)))
	b.AddNode("CumSum", "c3", []string{"m", "one"}, []string{"cs"})
	b.AddNode("Mul", "mul", []string{"cs", "m"}, []string{"inc"})
	b.AddNode("Cast", "long", []string{"inc"}, []string{"inc64"}, onnx.IntAttr("to", int64(onnx.Int64)))
	b.AddNode("Add", "pos", []string{"inc64", "pad"}, []string{"y3"})
	b.AddOutput("y1", onnx.Int64, []int64{3, 9})
	b.AddOutput("y2", onnx.Int32, []int64{4, 6})
	b.AddOutput("y3", onnx.Int64, []int64{2, 11})
	return b.Marshal()
}

// TestCumSum checks every output bit for bit against sums computed here.
func TestCumSum(t *testing.T) {
	data := cumsumModel()
	for _, tiles := range []int{1, 5, 64} {
		t.Run(fmt.Sprint(tiles), func(t *testing.T) {
			o, st, g, ins, in := linkedInputs(t, data, tiles, 5)
			// Token ids with padding (1) here and there.
			for k := 0; k < 22; k++ {
				v := uint64(k*7%5 + 1)
				binary.LittleEndian.PutUint64(in[2][8*k:], v)
			}
			outs, res := runObject(t, o, in)
			var w1, w3 []byte
			for r := 0; r < 3; r++ {
				var sum int64
				for c := 0; c < 9; c++ {
					sum += int64(binary.LittleEndian.Uint64(in[0][8*(9*r+c):]))
					w1 = binary.LittleEndian.AppendUint64(w1, uint64(sum))
				}
			}
			w2 := make([]byte, 4*24)
			for c := 0; c < 6; c++ {
				var sum int32
				for r := 3; r >= 0; r-- {
					binary.LittleEndian.PutUint32(w2[4*(6*r+c):], uint32(sum))
					sum += int32(binary.LittleEndian.Uint32(in[1][4*(6*r+c):]))
				}
			}
			for r := 0; r < 2; r++ {
				var n int64
				for c := 0; c < 11; c++ {
					pos := int64(1)
					if binary.LittleEndian.Uint64(in[2][8*(11*r+c):]) != 1 {
						n++
						pos += n
					}
					w3 = binary.LittleEndian.AppendUint64(w3, uint64(pos))
				}
			}
			ref, err := hostref.Eval(g, ins, hostref.Options{Precision: hostref.Device, Threads: 1})
			if err != nil {
				t.Fatal(err)
			}
			for k, w := range [][]byte{w1, w2, w3} {
				if string(outs[k]) != string(w) {
					t.Errorf("output %s:\n got %x\nwant %x", o.Host.Outputs[k].Name, outs[k], w)
				}
				if string(ref[k].Raw) != string(w) {
					t.Errorf("output %s: the host reference gives %x", o.Host.Outputs[k].Name, ref[k].Raw)
				}
			}
			checkCyclesOnly(t, st, res)
		})
	}
}
