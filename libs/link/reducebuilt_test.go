package link

import (
	"fmt"
	"math"
	"testing"

	"ipu.local/libs/onnx"
)

// TestReduceBuilt: ReduceSumSquare, ReduceL2, ReduceL1, ReduceLogSum and
// ReduceLogSumExp over one or several axes, kept or not, by attribute
// (opset 13) and by input (18), and PRelu with a per-channel slope: the
// built graph at FP64 against the definition, and the device against
// the host reference, on 1 and 5 tiles.
func TestReduceBuilt(t *testing.T) {
	x := []int64{3, 4, 5}
	for _, c := range []struct {
		op    string
		opset int64
		axes  []int64 // nil: every axis
		keep  int64
	}{
		{"ReduceSumSquare", 13, []int64{1}, 1},
		{"ReduceL2", 13, []int64{-1}, 0},
		{"ReduceL2", 18, []int64{1, 2}, 1},
		{"ReduceL1", 18, nil, 0},
		{"ReduceLogSum", 13, []int64{2}, 1},
		{"ReduceLogSumExp", 13, []int64{1, 2}, 0},
		{"ReduceLogSumExp", 18, []int64{0}, 1},
		{"ReduceL1", 18, []int64{0, 2}, 1},
		{"ReduceSumSquare", 13, []int64{2, 0}, 0},
	} {
		b := onnx.NewModel(c.opset)
		b.AddInput("x", onnx.Float, x)
		attrs := []onnx.Attr{onnx.IntAttr("keepdims", c.keep)}
		ins := []string{"x"}
		if c.axes != nil && c.opset < 18 {
			attrs = append(attrs, onnx.IntsAttr("axes", c.axes...))
		} else if c.axes != nil {
			b.AddInitializer(onnx.NewInt64("axes", []int64{int64(len(c.axes))}, c.axes))
			ins = append(ins, "axes")
		}
		src := "x"
		if c.op == "ReduceLogSum" {
			// a positive operand: the sum's logarithm
			b.AddNode("Exp", "pos", []string{"x"}, []string{"p"})
			src = "p"
		}
		ins[0] = src
		b.AddNode(c.op, "r", ins, []string{"y"}, attrs...)
		b.AddOutputInfo(onnx.ValueInfo{Name: "y", DType: onnx.Float})
		data := b.Marshal()
		red := make([]bool, 3)
		for i := range red {
			red[i] = c.axes == nil
		}
		for _, a := range c.axes {
			red[(a+3)%3] = true
		}
		def := func(v []float64) []float64 {
			// the reduction of each kept index, in row-major order
			var out []float64
			acc := map[int]float64{}
			mx := map[int]float64{}
			order := []int{}
			for i, val := range v {
				idx := []int{i / 20, i / 5 % 4, i % 5}
				k := 0
				for d, n := range []int{3, 4, 5} {
					if !red[d] {
						k = k*n + idx[d]
					}
				}
				if _, ok := mx[k]; !ok {
					mx[k] = math.Inf(-1)
					order = append(order, k)
				}
				mx[k] = math.Max(mx[k], val)
			}
			for i, val := range v {
				idx := []int{i / 20, i / 5 % 4, i % 5}
				k := 0
				for d, n := range []int{3, 4, 5} {
					if !red[d] {
						k = k*n + idx[d]
					}
				}
				switch c.op {
				case "ReduceSumSquare", "ReduceL2":
					acc[k] += val * val
				case "ReduceL1":
					acc[k] += math.Abs(val)
				case "ReduceLogSum":
					acc[k] += math.Exp(val)
				case "ReduceLogSumExp":
					acc[k] += math.Exp(val - mx[k])
				}
			}
			for k := range len(order) {
				a := acc[k]
				switch c.op {
				case "ReduceL2":
					a = math.Sqrt(a)
				case "ReduceLogSum":
					a = math.Log(a)
				case "ReduceLogSumExp":
					a = math.Log(a) + mx[k]
				}
				out = append(out, a)
			}
			return out
		}
		for _, tiles := range []int{1, 5} {
			t.Run(fmt.Sprint(c.op, c.axes, c.opset, "/", tiles), func(t *testing.T) {
				o, st, g, ins, _ := linkedInputs(t, data, tiles, 61)
				// ReduceLogSum's Exp is float32 in the model: a relative
				// 1e-6 covers it; the others are exact at FP64.
				checkDefinition(t, g, ins, 1e-6, func(v [][]float64) []float64 { return def(v[0]) })
				checkVerdict(t, o, st, g, 61)
			})
		}
	}
	b := onnx.NewModel(13)
	b.AddInput("x", onnx.Float, []int64{2, 3, 4})
	b.AddInitializer(onnx.NewFloat32("slope", []int64{3, 1}, []float32{0.25, -0.5, 2}))
	b.AddNode("PRelu", "pr", []string{"x", "slope"}, []string{"y"})
	b.AddOutputInfo(onnx.ValueInfo{Name: "y", DType: onnx.Float})
	data := b.Marshal()
	for _, tiles := range []int{1, 5} {
		t.Run(fmt.Sprint("PRelu/", tiles), func(t *testing.T) {
			o, st, g, ins, _ := linkedInputs(t, data, tiles, 61)
			checkDefinition(t, g, ins, 0, func(v [][]float64) []float64 {
				y := make([]float64, len(v[0]))
				for i, a := range v[0] {
					y[i] = a
					if a < 0 {
						y[i] = a * []float64{0.25, -0.5, 2}[i/4%3]
					}
				}
				return y
			})
			checkVerdict(t, o, st, g, 61)
		})
	}
}
