package graph

import (
	"fmt"
	"math"
	"testing"

	"ipu.local/libs/onnx"
)

// padWant is a constant-mode Pad by the operator's definition, on int64
// values: output element o takes input o - begin along every axis, or
// fill outside it.
func padWant(x []int64, shape, pads []int64, fill int64) ([]int64, []int64) {
	r := len(shape)
	out := make([]int64, r)
	for d := range out {
		out[d] = shape[d] + pads[d] + pads[d+r]
	}
	res := make([]int64, NumElements(out))
	for p := range res {
		rem, src, inside := int64(p), int64(0), true
		idx := make([]int64, r)
		for d := r - 1; d >= 0; d-- {
			idx[d] = rem % out[d]
			rem /= out[d]
		}
		for d := 0; d < r; d++ {
			i := idx[d] - pads[d]
			if i < 0 || i >= shape[d] {
				inside = false
				break
			}
			src = src*shape[d] + i
		}
		res[p] = fill
		if inside {
			res[p] = x[src]
		}
	}
	return res, out
}

// TestPadFolds: Pad of a constant folds to the definition, growing and
// cropping, with a fill value, on every axis or the ones axes names.
func TestPadFolds(t *testing.T) {
	for _, c := range []struct {
		shape, pads, axes []int64
		fill              int64
	}{
		{[]int64{3, 4}, []int64{1, 0, 2, 3}, nil, 0},
		{[]int64{2, 3, 4}, []int64{0, -1, 1, 1, 2, -2}, nil, 7},
		{[]int64{5}, []int64{-2, 3}, nil, -1},
		{[]int64{2, 3, 4}, []int64{2, 1}, []int64{-1}, 9},
	} {
		t.Run(fmt.Sprint(c.shape, c.pads, c.axes), func(t *testing.T) {
			x := make([]int64, NumElements(c.shape))
			for i := range x {
				x[i] = int64(i) + 1
			}
			b := onnx.NewModel(18)
			b.AddInitializer(onnx.NewInt64("x", c.shape, x))
			b.AddInitializer(onnx.NewInt64("pads", []int64{int64(len(c.pads))}, c.pads))
			b.AddInitializer(onnx.NewInt64("v", nil, []int64{c.fill}))
			ins := []string{"x", "pads", "v"}
			if c.axes != nil {
				b.AddInitializer(onnx.NewInt64("axes", []int64{int64(len(c.axes))}, c.axes))
				ins = append(ins, "axes")
			}
			b.AddNode("Pad", "pad", ins, []string{"y"})
			b.AddNode("Identity", "id", []string{"y"}, []string{"z"})
			b.AddOutputInfo(onnx.ValueInfo{Name: "z", DType: onnx.Int64})
			g := buildOf(t, b)
			got := foldedInt64s(t, g)
			full := c.pads
			if c.axes != nil {
				// the axes' pads spread over every axis
				r := len(c.shape)
				full = make([]int64, 2*r)
				for k, a := range c.axes {
					a = (a + int64(r)) % int64(r)
					full[a], full[int(a)+r] = c.pads[k], c.pads[k+len(c.axes)]
				}
			}
			want, shape := padWant(x, c.shape, full, c.fill)
			if fmt.Sprint(got) != fmt.Sprint(want) || ShapeString(g.Outputs[0].Shape) != ShapeString(shape) {
				t.Errorf("got  %s %v\nwant %s %v", ShapeString(g.Outputs[0].Shape), got, ShapeString(shape), want)
			}
		})
	}
}

func TestPadErrors(t *testing.T) {
	for _, c := range []struct {
		pads  []int64
		attrs []onnx.Attr
		want  string
	}{
		{[]int64{0, 0, 0}, nil, `pads [0 0 0]: 3 values, want 4`},
		{[]int64{0, 0, 0, 0}, []onnx.Attr{onnx.StringAttr("mode", "reflect")}, `mode "reflect" is not supported (only constant)`},
		{[]int64{-2, 0, -2, 0}, nil, `pads crop axis 0 of 3 by 2 and 2`},
		{[]int64{math.MinInt64, 0, 0, 0}, nil, `pads [-9223372036854775808 0 0 0]: -9223372036854775808 out of range for axis 0 of 3`},
		{[]int64{0, 1 << 62, 0, 0}, nil, `: 4611686018427387904 out of range for axis 1 of 4`},
	} {
		b := onnx.NewModel(13)
		b.AddInput("x", onnx.Float, []int64{3, 4})
		b.AddInitializer(onnx.NewInt64("pads", []int64{int64(len(c.pads))}, c.pads))
		b.AddNode("Pad", "pad", []string{"x", "pads"}, []string{"y"}, c.attrs...)
		b.AddOutputInfo(onnx.ValueInfo{Name: "y", DType: onnx.Float})
		checkNodeErr(t, buildErr(t, b), `node "pad" (Pad)`, c.want)
	}
}
