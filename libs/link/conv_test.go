package link

import (
	"fmt"
	"math"
	"testing"

	"ipu.local/libs/graph"
	"ipu.local/libs/hostref"
	"ipu.local/libs/onnx"
)

// convCase is a Conv's shapes and attributes.
type convCase struct {
	name     string
	dt       onnx.DataType
	x, w     []int64
	attrs    []onnx.Attr
	bias     bool
	wantOut  []int64
	pads     []int64 // the begin and end pads the attributes mean
	strides  []int64
	dilation []int64
	groups   int64 // 0: 1
}

var convCases = []convCase{
	{name: "2d", dt: onnx.Float, x: []int64{2, 3, 9, 11}, w: []int64{4, 3, 3, 2}, bias: true,
		attrs:   []onnx.Attr{onnx.IntsAttr("strides", 2, 1), onnx.IntsAttr("pads", 1, 0, 1, 1), onnx.IntsAttr("dilations", 1, 2)},
		wantOut: []int64{2, 4, 5, 10}, pads: []int64{1, 0, 1, 1}, strides: []int64{2, 1}, dilation: []int64{1, 2}},
	{name: "patchify", dt: onnx.Float, x: []int64{1, 3, 16, 16}, w: []int64{8, 3, 4, 4}, bias: true,
		attrs:   []onnx.Attr{onnx.IntsAttr("strides", 4, 4), onnx.IntsAttr("kernel_shape", 4, 4)},
		wantOut: []int64{1, 8, 4, 4}, pads: []int64{0, 0, 0, 0}, strides: []int64{4, 4}, dilation: []int64{1, 1}},
	{name: "1d", dt: onnx.Float, x: []int64{1, 5, 20}, w: []int64{6, 5, 3}, bias: true,
		attrs:   []onnx.Attr{onnx.IntsAttr("strides", 2), onnx.IntsAttr("pads", 1, 1)},
		wantOut: []int64{1, 6, 10}, pads: []int64{1, 1}, strides: []int64{2}, dilation: []int64{1}},
	{name: "same-upper", dt: onnx.Float, x: []int64{1, 2, 7, 7}, w: []int64{3, 2, 3, 3},
		attrs:   []onnx.Attr{onnx.IntsAttr("strides", 2, 2), onnx.StringAttr("auto_pad", "SAME_UPPER")},
		wantOut: []int64{1, 3, 4, 4}, pads: []int64{1, 1, 1, 1}, strides: []int64{2, 2}, dilation: []int64{1, 1}},
	{name: "depthwise", dt: onnx.Float, x: []int64{1, 6, 7, 7}, w: []int64{12, 1, 3, 3}, bias: true, groups: 6,
		attrs:   []onnx.Attr{onnx.IntAttr("group", 6), onnx.IntsAttr("pads", 1, 1, 1, 1)},
		wantOut: []int64{1, 12, 7, 7}, pads: []int64{1, 1, 1, 1}, strides: []int64{1, 1}, dilation: []int64{1, 1}},
	{name: "grouped", dt: onnx.Float, x: []int64{2, 4, 6, 5}, w: []int64{6, 2, 3, 2}, groups: 2,
		attrs:   []onnx.Attr{onnx.IntAttr("group", 2), onnx.IntsAttr("strides", 1, 2)},
		wantOut: []int64{2, 6, 4, 2}, pads: []int64{0, 0, 0, 0}, strides: []int64{1, 2}, dilation: []int64{1, 1}},
	{name: "3d", dt: onnx.Float, x: []int64{1, 2, 4, 5, 6}, w: []int64{3, 2, 2, 3, 2}, bias: true,
		attrs:   []onnx.Attr{onnx.IntsAttr("strides", 1, 2, 2), onnx.IntsAttr("pads", 0, 1, 0, 1, 1, 1), onnx.IntsAttr("dilations", 1, 1, 2)},
		wantOut: []int64{1, 3, 4, 3, 3}, pads: []int64{0, 1, 0, 1, 1, 1}, strides: []int64{1, 2, 2}, dilation: []int64{1, 1, 2}},
	{name: "patchify-fp16", dt: onnx.Float16, x: []int64{2, 3, 8, 8}, w: []int64{5, 3, 4, 4}, bias: true,
		attrs:   []onnx.Attr{onnx.IntsAttr("strides", 4, 4)},
		wantOut: []int64{2, 5, 2, 2}, pads: []int64{0, 0, 0, 0}, strides: []int64{4, 4}, dilation: []int64{1, 1}},
}

func (c convCase) model() []byte {
	b := onnx.NewModel(13)
	b.AddInput("x", c.dt, c.x)
	b.AddInput("w", c.dt, c.w)
	ins := []string{"x", "w"}
	if c.bias {
		b.AddInput("b", c.dt, []int64{c.w[0]})
		ins = append(ins, "b")
	}
	b.AddNode("Conv", "conv", ins, []string{"y"}, c.attrs...)
	b.AddOutputInfo(onnx.ValueInfo{Name: "y", DType: c.dt})
	return b.Marshal()
}

// convDirect is the convolution by its definition, in float64.
func (c convCase) direct(x, w, bias []float64) []float64 {
	r := len(c.x) - 2
	out := c.wantOut
	n := int64(1)
	for _, d := range out {
		n *= d
	}
	y := make([]float64, n)
	sp := func(dims []int64) int64 {
		p := int64(1)
		for _, d := range dims {
			p *= d
		}
		return p
	}
	outSp, kSp, inSp := sp(out[2:]), sp(c.w[2:]), sp(c.x[2:])
	g := max(c.groups, 1)
	cg, mg := c.x[1]/g, out[1]/g
	oc, kc := make([]int64, r), make([]int64, r)
	for img := int64(0); img < out[0]; img++ {
		for m := int64(0); m < out[1]; m++ {
			for o := int64(0); o < outSp; o++ {
				f := o
				for i := r - 1; i >= 0; i-- {
					oc[i], f = f%out[2+i], f/out[2+i]
				}
				s := 0.0
				if bias != nil {
					s = bias[m]
				}
				for ch := m / mg * cg; ch < (m/mg+1)*cg; ch++ {
					for k := int64(0); k < kSp; k++ {
						g := k
						for i := r - 1; i >= 0; i-- {
							kc[i], g = g%c.w[2+i], g/c.w[2+i]
						}
						at, inside := int64(0), true
						for i := 0; i < r; i++ {
							p := oc[i]*c.strides[i] + kc[i]*c.dilation[i] - c.pads[i]
							if p < 0 || p >= c.x[2+i] {
								inside = false
								break
							}
							at = at*c.x[2+i] + p
						}
						if inside {
							s += x[(img*c.x[1]+ch)*inSp+at] * w[(m*cg+ch%cg)*kSp+k]
						}
					}
				}
				y[(img*out[1]+m)*outSp+o] = s
			}
		}
	}
	return y
}

// TestConv: Conv built as im2col and MatMul, with strides, pads,
// dilations, auto_pad, one, two and three spatial axes, float and float16:
// the built graph in the host reference at FP64 against the definition,
// and the device against the host reference, on 1 and 5 tiles.
func TestConv(t *testing.T) {
	for _, c := range convCases {
		data := c.model()
		for _, tiles := range []int{1, 5} {
			t.Run(fmt.Sprint(c.name, "/", tiles), func(t *testing.T) {
				o, st, g, ins, _ := linkedInputs(t, data, tiles, 29)
				if got := g.Outputs[0].Shape; fmt.Sprint(got) != fmt.Sprint(c.wantOut) {
					t.Fatalf("output shape %v, want %v", got, c.wantOut)
				}
				checkDefinition(t, g, ins, 1e-9, func(v [][]float64) []float64 {
					var bias []float64
					if c.bias {
						bias = v[2]
					}
					return c.direct(v[0], v[1], bias)
				})
				checkVerdict(t, o, st, g, 29)
			})
		}
	}
}

// checkDefinition evaluates a built graph in the host reference at FP64
// on ins and checks its first output against def of the inputs' values,
// within rel of each element's magnitude (plus rel): the operator's
// nodes against its definition, whatever the device does.
func checkDefinition(t *testing.T, g *graph.Graph, ins []*onnx.Tensor, rel float64, def func(vals [][]float64) []float64) {
	t.Helper()
	ref, err := hostref.Eval(g, ins, hostref.Options{Precision: hostref.FP64, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	vals := make([][]float64, len(ins))
	for i, in := range ins {
		if vals[i], err = graph.DecodeFloats(in); err != nil {
			t.Fatal(err)
		}
	}
	got, err := ref[0].Float64s() // FP64 outputs are double
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range def(vals) {
		if math.Abs(got[i]-w) > rel*(1+math.Abs(w)) {
			t.Fatalf("element %d: the built graph gives %g, the definition %g", i, got[i], w)
		}
	}
}
