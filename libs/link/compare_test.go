package link

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"testing"

	"ipu.local/libs/hostref"
	"ipu.local/libs/numfmt"
	"ipu.local/libs/onnx"
)

const compareModel = "../../testdata/models/compare-bool.onnx"

// buildCompareModel is testdata/models/compare-bool.onnx: comparisons,
// logic and casts to and from BOOL at odd sizes, rank 3, broadcasting
// both ways, float and float16 operands.
func buildCompareModel() []byte {
	b := onnx.NewModel(13)
	b.AddInput("a", onnx.Float, []int64{3, 5, 7})
	b.AddInput("b", onnx.Float, []int64{5, 1})
	b.AddInput("h", onnx.Float16, []int64{3, 1, 7})
	b.AddInput("k", onnx.Float16, []int64{7})
	b.AddNode("Greater", "g", []string{"a", "b"}, []string{"g"})
	b.AddNode("GreaterOrEqual", "ge", []string{"b", "a"}, []string{"ge"})
	b.AddNode("Abs", "ha", []string{"h"}, []string{"ha"})
	b.AddNode("Equal", "e", []string{"h", "ha"}, []string{"e"})
	b.AddNode("Less", "lt", []string{"h", "k"}, []string{"lt"})
	b.AddNode("LessOrEqual", "le", []string{"k", "h"}, []string{"le"})
	b.AddNode("Not", "n", []string{"g"}, []string{"n"})
	b.AddNode("Or", "o", []string{"n", "lt"}, []string{"o"})
	b.AddNode("And", "x", []string{"o", "e"}, []string{"x"})
	b.AddNode("Cast", "cf", []string{"x"}, []string{"cf"}, onnx.IntAttr("to", int64(onnx.Float)))
	b.AddNode("Relu", "r", []string{"a"}, []string{"r"})
	b.AddNode("Cast", "cb", []string{"r"}, []string{"cb"}, onnx.IntAttr("to", int64(onnx.Bool)))
	b.AddNode("Cast", "c16", []string{"g"}, []string{"c16"}, onnx.IntAttr("to", int64(onnx.Float16)))
	b.AddNode("Cast", "hb", []string{"h"}, []string{"hb"}, onnx.IntAttr("to", int64(onnx.Bool)))
	b.AddOutput("g", onnx.Bool, []int64{3, 5, 7})
	b.AddOutput("ge", onnx.Bool, []int64{3, 5, 7})
	b.AddOutput("le", onnx.Bool, []int64{3, 1, 7})
	b.AddOutput("x", onnx.Bool, []int64{3, 5, 7})
	b.AddOutput("cf", onnx.Float, []int64{3, 5, 7})
	b.AddOutput("cb", onnx.Bool, []int64{3, 5, 7})
	b.AddOutput("c16", onnx.Float16, []int64{3, 5, 7})
	b.AddOutput("hb", onnx.Bool, []int64{3, 1, 7})
	return b.Marshal()
}

// TestCompareModel keeps testdata/models/compare-bool.onnx what
// buildCompareModel makes (UPDATE=1 rewrites it), links it at several
// tile counts and checks every output against values computed here in
// float64 from the inputs (not through codegen's emulation).
func TestCompareModel(t *testing.T) {
	data := buildCompareModel()
	if os.Getenv("UPDATE") != "" {
		if err := os.WriteFile(compareModel, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	file, err := os.ReadFile(compareModel)
	if err != nil {
		t.Fatal(err)
	}
	if string(file) != string(data) {
		t.Fatalf("%s is not what buildCompareModel makes (UPDATE=1 go test rewrites it)", compareModel)
	}
	for _, tiles := range []int{1, 4, 64} {
		t.Run(fmt.Sprint(tiles), func(t *testing.T) {
			o, st, g, err := planLink(t, file, tiles)
			if err != nil {
				t.Fatal(err)
			}
			ins := hostref.GenerateInputs(g, 5)
			raw := make([][]byte, len(ins))
			for i, in := range ins {
				raw[i] = in.Raw
			}
			// Some equal pairs and zeros: k repeats h's first row, b
			// holds an element of a.
			copy(raw[3], raw[2][:14])
			copy(raw[1][4:8], raw[0][4*8:4*9])
			binary.LittleEndian.PutUint16(raw[2][2:], 0x8000) // -0
			binary.LittleEndian.PutUint16(raw[3][2:], 0)      // +0
			outs, res := runObject(t, o, raw)
			f32 := func(k, i int) float64 {
				return float64(math.Float32frombits(binary.LittleEndian.Uint32(raw[k][4*i:])))
			}
			f16 := func(k, i int) float64 { return numfmt.F16ToF64(binary.LittleEndian.Uint16(raw[k][2*i:])) }
			b2 := func(c bool) byte {
				if c {
					return 1
				}
				return 0
			}
			want := make([][]byte, 8)
			for i := 0; i < 105; i++ {
				n, r, c := i/35, i/7%5, i%7
				a, bv := f32(0, i), f32(1, r)
				h, k := f16(2, n*7+c), f16(3, c)
				gt := a > bv
				x := (!gt || h < k) && h == math.Abs(h)
				want[0] = append(want[0], b2(gt))
				want[1] = append(want[1], b2(bv >= a))
				want[3] = append(want[3], b2(x))
				want[4] = binary.LittleEndian.AppendUint32(want[4], math.Float32bits(float32(b2(x))))
				want[5] = append(want[5], b2(math.Max(a, 0) != 0))
				want[6] = binary.LittleEndian.AppendUint16(want[6], numfmt.F64ToF16(float64(b2(gt))))
			}
			for i := 0; i < 21; i++ {
				h, k := f16(2, i), f16(3, i%7)
				want[2] = append(want[2], b2(k <= h))
				want[7] = append(want[7], b2(h != 0))
			}
			for j, w := range want {
				if string(outs[j]) != string(w) {
					t.Errorf("output %s:\n got %v\nwant %v", o.Host.Outputs[j].Name, outs[j], w)
				}
			}
			checkCyclesOnly(t, st, res)
		})
	}
}
