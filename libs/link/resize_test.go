package link

import (
	"fmt"
	"math"
	"testing"

	"ipu.local/libs/onnx"
)

// resizeCase is a Resize (or Upsample) of x to want, by scales or sizes
// (over axes, every axis when nil), in its mode and coordinate mode.
type resizeCase struct {
	name          string
	op            string // "Resize" (default) or "Upsample"
	opset         int64
	dt            onnx.DataType
	x, want       []int64
	scales        []float32
	sizes         []int64
	axes          []int64
	mode, coord   string // "" takes the opset's default
	nearest       string
	legacyNearest bool // Upsample, Resize-10: truncate enlarging, round up shrinking
	rel           float64
}

var resizeCases = []resizeCase{
	// torch F.interpolate(scale_factor=2), nearest.
	{name: "nearest-x2", opset: 13, dt: onnx.Float, x: []int64{1, 2, 3, 4}, want: []int64{1, 2, 6, 8},
		scales: []float32{1, 1, 2, 2}, mode: "nearest", coord: "asymmetric", nearest: "floor"},
	{name: "linear-sizes", opset: 13, dt: onnx.Float, x: []int64{1, 2, 3, 4}, want: []int64{1, 2, 5, 7},
		sizes: []int64{1, 2, 5, 7}, mode: "linear", coord: "half_pixel"},
	{name: "linear-align", opset: 13, dt: onnx.Float, x: []int64{2, 3, 4, 4}, want: []int64{2, 3, 8, 6},
		scales: []float32{1, 1, 2, 1.5}, mode: "linear", coord: "align_corners"},
	{name: "linear-torch-down", opset: 13, dt: onnx.Float, x: []int64{1, 1, 7, 9}, want: []int64{1, 1, 3, 1},
		sizes: []int64{1, 1, 3, 1}, mode: "linear", coord: "pytorch_half_pixel"},
	{name: "nearest-ceil-down", opset: 13, dt: onnx.Float, x: []int64{1, 2, 9, 6}, want: []int64{1, 2, 4, 4},
		scales: []float32{1, 1, 0.5, 0.75}, mode: "nearest", coord: "half_pixel", nearest: "round_prefer_ceil"},
	{name: "nearest-default", opset: 13, dt: onnx.Float, x: []int64{1, 1, 5, 3}, want: []int64{1, 1, 8, 7},
		sizes: []int64{1, 1, 8, 7}},
	{name: "upsample9", op: "Upsample", opset: 9, dt: onnx.Float, x: []int64{1, 1, 3, 2}, want: []int64{1, 1, 6, 6},
		scales: []float32{1, 1, 2, 3}, mode: "nearest", legacyNearest: true},
	{name: "resize10-down", opset: 10, dt: onnx.Float, x: []int64{1, 1, 5, 5}, want: []int64{1, 1, 3, 3},
		scales: []float32{1, 1, 0.6, 0.6}, mode: "nearest", legacyNearest: true},
	{name: "tf-nn-fp16", opset: 11, dt: onnx.Float16, x: []int64{1, 3, 4, 5}, want: []int64{1, 3, 6, 3},
		sizes: []int64{1, 3, 6, 3}, mode: "nearest", coord: "tf_half_pixel_for_nn", nearest: "round_prefer_floor"},
	// The batch and channels keep their length at scale 1: left as they
	// are, although this coordinate mode and rounding would shift them.
	{name: "tf-nn-ceil", opset: 11, dt: onnx.Float, x: []int64{2, 3, 4, 5}, want: []int64{2, 3, 7, 3},
		sizes: []int64{2, 3, 7, 3}, mode: "nearest", coord: "tf_half_pixel_for_nn", nearest: "round_prefer_ceil"},
	// Resize-18's axes: the scales of the last two axes only.
	{name: "axes-linear-fp16", opset: 18, dt: onnx.Float16, x: []int64{2, 2, 3, 5}, want: []int64{2, 2, 6, 10},
		scales: []float32{2, 2}, axes: []int64{2, 3}, mode: "linear", coord: "half_pixel", rel: 1.0 / 1024},
	{name: "linear-3d-1axis", opset: 13, dt: onnx.Float, x: []int64{3, 4, 5}, want: []int64{3, 4, 9},
		sizes: []int64{3, 4, 9}, mode: "linear", coord: "asymmetric"},
}

func (c resizeCase) model() []byte {
	b := onnx.NewModel(c.opset)
	b.AddInput("x", c.dt, c.x)
	var attrs []onnx.Attr
	for _, a := range []struct{ name, v string }{{"mode", c.mode}, {"coordinate_transformation_mode", c.coord}, {"nearest_mode", c.nearest}} {
		if a.v != "" {
			attrs = append(attrs, onnx.StringAttr(a.name, a.v))
		}
	}
	if c.axes != nil {
		attrs = append(attrs, onnx.IntsAttr("axes", c.axes...))
	}
	ins := []string{"x"}
	if c.op == "Upsample" || c.opset < 11 {
		b.AddInitializer(onnx.NewFloat32("scales", []int64{int64(len(c.scales))}, c.scales))
		ins = append(ins, "scales")
	} else {
		ins = append(ins, "")
		if c.scales != nil {
			b.AddInitializer(onnx.NewFloat32("scales", []int64{int64(len(c.scales))}, c.scales))
			ins = append(ins, "scales")
		} else {
			b.AddInitializer(onnx.NewInt64("sizes", []int64{int64(len(c.sizes))}, c.sizes))
			ins = append(ins, "", "sizes")
		}
	}
	op := c.op
	if op == "" {
		op = "Resize"
	}
	b.AddNode(op, "resize", ins, []string{"y"}, attrs...)
	b.AddOutputInfo(onnx.ValueInfo{Name: "y", DType: c.dt})
	return b.Marshal()
}

// coordinate is output position o's source coordinate on an axis of
// length in resized to n at scale s, in float32, as the ONNX
// specification writes it.
func (c resizeCase) coordinate(o, in, n int64, s float32) float32 {
	f := float32(o)
	switch c.coord {
	case "", "half_pixel":
		if c.legacyNearest {
			return f / s
		}
		return float32(float32(f+0.5)/s) - 0.5
	case "pytorch_half_pixel":
		if n > 1 {
			return float32(float32(f+0.5)/s) - 0.5
		}
		return 0
	case "align_corners":
		if n == 1 {
			return 0
		}
		return float32(f*float32(in-1)) / float32(n-1)
	case "tf_half_pixel_for_nn":
		return float32(f+0.5) / s
	}
	return f / s
}

// direct resizes x by the definition: per output element, each axis's
// nearest input index, or the multilinear blend of the 2^k corners.
func (c resizeCase) direct(x []float64) []float64 {
	r := len(c.x)
	scale := make([]float32, r)
	for i := range scale {
		scale[i] = float32(c.want[i]) / float32(c.x[i])
	}
	if c.scales != nil {
		axes := c.axes
		if axes == nil {
			for i := range c.x {
				axes = append(axes, int64(i))
			}
		}
		for k, a := range axes {
			scale[a] = c.scales[k]
		}
	}
	n := int64(1)
	for _, d := range c.want {
		n *= d
	}
	y := make([]float64, n)
	pos := make([]int64, r)
	for e := range y {
		f := int64(e)
		for i := r - 1; i >= 0; i-- {
			pos[i], f = f%c.want[i], f/c.want[i]
		}
		lo, hi := make([]int64, r), make([]int64, r)
		w0, w1 := make([]float64, r), make([]float64, r) // float32 weights, as onnxruntime's
		for i := 0; i < r; i++ {
			co := float64(c.coordinate(pos[i], c.x[i], c.want[i], scale[i]))
			if c.want[i] == c.x[i] && scale[i] == 1 {
				co = float64(pos[i])
			}
			if c.mode != "linear" {
				lo[i] = min(max(c.round(co, scale[i]), 0), c.x[i]-1)
				continue
			}
			co = min(max(co, 0), float64(c.x[i]-1))
			lo[i] = int64(math.Floor(co))
			hi[i] = min(lo[i]+1, c.x[i]-1)
			f := float32(co) - float32(lo[i])
			w0[i], w1[i] = float64(1-f), float64(f)
		}
		if c.mode != "linear" {
			y[e] = x[offsetIn(lo, c.x)]
			continue
		}
		for corner := 0; corner < 1<<r; corner++ {
			at, wt := make([]int64, r), 1.0
			for i := 0; i < r; i++ {
				if corner>>i&1 == 1 {
					at[i], wt = hi[i], wt*w1[i]
				} else {
					at[i], wt = lo[i], wt*w0[i]
				}
			}
			y[e] += wt * x[offsetIn(at, c.x)]
		}
	}
	return y
}

// round is nearest_mode's rounding of a coordinate.
func (c resizeCase) round(v float64, s float32) int64 {
	switch {
	case c.legacyNearest && s >= 1:
		return int64(v)
	case c.legacyNearest:
		return int64(math.Ceil(v))
	case c.nearest == "floor":
		return int64(math.Floor(v))
	case c.nearest == "ceil":
		return int64(math.Ceil(v))
	case v-math.Floor(v) == 0.5 && c.nearest == "round_prefer_ceil":
		return int64(math.Ceil(v))
	case v-math.Floor(v) == 0.5:
		return int64(math.Floor(v))
	}
	return int64(math.Round(v))
}

// offsetIn is the row-major offset of index at in dims.
func offsetIn(at, dims []int64) int64 {
	f := int64(0)
	for i, v := range at {
		f = f*dims[i] + v
	}
	return f
}

// TestResize: Resize and Upsample in nearest and linear modes, by scales
// and by sizes, enlarging and shrinking, in every supported coordinate
// and rounding mode, float and float16: the built graph at FP64 against
// the definition, the device against the host reference, on 1 and 5
// tiles.
func TestResize(t *testing.T) {
	for _, c := range resizeCases {
		data := c.model()
		for _, tiles := range []int{1, 5} {
			t.Run(fmt.Sprint(c.name, "/", tiles), func(t *testing.T) {
				o, st, g, ins, _ := linkedInputs(t, data, tiles, 41)
				if got := g.Outputs[0].Shape; fmt.Sprint(got) != fmt.Sprint(c.want) {
					t.Fatalf("output shape %v, want %v", got, c.want)
				}
				rel := c.rel
				if rel == 0 {
					rel = 1e-12
				}
				checkDefinition(t, g, ins, rel, func(v [][]float64) []float64 { return c.direct(v[0]) })
				checkVerdict(t, o, st, g, 41)
			})
		}
	}
}
