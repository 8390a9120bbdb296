package link

import (
	"fmt"
	"testing"

	"ipu.local/libs/onnx"
)

// convTCase is a ConvTranspose of x by w ([C, M/G, k...]) to want.
type convTCase struct {
	name    string
	dt      onnx.DataType
	x, w    []int64
	groups  int64
	bias    bool
	attrs   []onnx.Attr
	want    []int64
	s, d    []int64 // strides, dilations
	pb      []int64 // begin pads the definition applies
	rel     float64
	outPads []int64
}

var convTCases = []convTCase{
	// a decoder's 2x upsampling: k 3, stride 2, pads 1, output_padding 1
	{name: "up2", dt: onnx.Float, x: []int64{1, 3, 4, 5}, w: []int64{3, 2, 3, 3}, bias: true,
		attrs: []onnx.Attr{onnx.IntsAttr("strides", 2, 2), onnx.IntsAttr("pads", 1, 1, 1, 1), onnx.IntsAttr("output_padding", 1, 1)},
		want:  []int64{1, 2, 8, 10}, s: []int64{2, 2}, d: []int64{1, 1}, pb: []int64{1, 1}},
	{name: "1d-grouped-dilated", dt: onnx.Float, x: []int64{2, 4, 5}, w: []int64{4, 3, 2}, groups: 2, bias: true,
		attrs: []onnx.Attr{onnx.IntAttr("group", 2), onnx.IntsAttr("strides", 3), onnx.IntsAttr("dilations", 2), onnx.IntsAttr("pads", 1, 0)},
		want:  []int64{2, 6, 14}, s: []int64{3}, d: []int64{2}, pb: []int64{1}},
	{name: "k2s2", dt: onnx.Float, x: []int64{1, 2, 3, 3}, w: []int64{2, 4, 2, 2},
		attrs: []onnx.Attr{onnx.IntsAttr("strides", 2, 2)},
		want:  []int64{1, 4, 6, 6}, s: []int64{2, 2}, d: []int64{1, 1}, pb: []int64{0, 0}},
	{name: "output-shape", dt: onnx.Float, x: []int64{1, 1, 3, 3}, w: []int64{1, 1, 3, 3},
		attrs: []onnx.Attr{onnx.IntsAttr("strides", 2, 2), onnx.IntsAttr("output_shape", 6, 6)},
		want:  []int64{1, 1, 6, 6}, s: []int64{2, 2}, d: []int64{1, 1}, pb: []int64{1, 1}},
	{name: "same-upper-fp16", dt: onnx.Float16, x: []int64{1, 2, 3, 4}, w: []int64{2, 2, 3, 3},
		attrs: []onnx.Attr{onnx.IntsAttr("strides", 2, 2), onnx.StringAttr("auto_pad", "SAME_UPPER")},
		want:  []int64{1, 2, 6, 8}, s: []int64{2, 2}, d: []int64{1, 1}, pb: []int64{0, 0}, rel: 1.0 / 512},
	// three spatial axes, each with its own stride, dilation and pads
	{name: "3d", dt: onnx.Float, x: []int64{1, 2, 2, 3, 2}, w: []int64{2, 3, 2, 2, 3}, bias: true,
		attrs: []onnx.Attr{onnx.IntsAttr("strides", 1, 2, 3), onnx.IntsAttr("dilations", 2, 1, 1), onnx.IntsAttr("pads", 0, 1, 1, 1, 0, 2), onnx.IntsAttr("output_padding", 1, 0, 2)},
		want:  []int64{1, 3, 4, 5, 5}, s: []int64{1, 2, 3}, d: []int64{2, 1, 1}, pb: []int64{0, 1, 1}},
	// pads beyond the kernel's span crop the input
	{name: "crop", dt: onnx.Float, x: []int64{1, 1, 4}, w: []int64{1, 1, 2},
		attrs: []onnx.Attr{onnx.IntsAttr("pads", 2, 2)},
		want:  []int64{1, 1, 1}, s: []int64{1}, d: []int64{1}, pb: []int64{2}},
}

func (c convTCase) model() []byte {
	b := onnx.NewModel(13)
	b.AddInput("x", c.dt, c.x)
	b.AddInput("w", c.dt, c.w)
	ins := []string{"x", "w"}
	if c.bias {
		b.AddInput("b", c.dt, []int64{c.want[1]})
		ins = append(ins, "b")
	}
	b.AddNode("ConvTranspose", "ct", ins, []string{"y"}, c.attrs...)
	b.AddOutputInfo(onnx.ValueInfo{Name: "y", DType: c.dt})
	return b.Marshal()
}

// direct is the transposed convolution by its definition, in float64:
// every input element times every kernel element scattered to output
// position i*s + k*d - pad along each axis.
func (c convTCase) direct(x, w, bias []float64) []float64 {
	r := len(c.x) - 2
	out := c.want
	g := max(c.groups, 1)
	cg, mg := c.x[1]/g, out[1]/g
	sp := func(dims []int64) int64 {
		n := int64(1)
		for _, d := range dims {
			n *= d
		}
		return n
	}
	inSp, kSp, outSp := sp(c.x[2:]), sp(c.w[2:]), sp(out[2:])
	y := make([]float64, sp(out))
	for img := int64(0); img < out[0]; img++ {
		for m := int64(0); m < out[1]; m++ {
			for o := int64(0); o < outSp; o++ {
				if bias != nil {
					y[(img*out[1]+m)*outSp+o] = bias[m]
				}
			}
			grp := m / mg
			for ch := grp * cg; ch < (grp+1)*cg; ch++ {
				for i := int64(0); i < inSp; i++ {
					for k := int64(0); k < kSp; k++ {
						at, inside := int64(0), true
						fi, fk := i, k
						pos := make([]int64, r)
						for a := r - 1; a >= 0; a-- {
							ia, ka := fi%c.x[2+a], fk%c.w[2+a]
							fi, fk = fi/c.x[2+a], fk/c.w[2+a]
							pos[a] = ia*c.s[a] + ka*c.d[a] - c.pb[a]
						}
						for a := 0; a < r; a++ {
							if pos[a] < 0 || pos[a] >= out[2+a] {
								inside = false
								break
							}
							at = at*out[2+a] + pos[a]
						}
						if inside {
							y[(img*out[1]+m)*outSp+at] += x[(img*c.x[1]+ch)*inSp+i] * w[(ch*mg+m%mg)*kSp+k]
						}
					}
				}
			}
		}
	}
	return y
}

// TestConvTranspose: ConvTranspose built as zeros inserted, the weight
// flipped and a Conv, with strides, dilations, groups, pads,
// output_padding, output_shape, auto_pad and pads that crop, float and
// float16: the built graph at FP64 against the definition, and the
// device against the host reference on 1 and 5 tiles.
func TestConvTranspose(t *testing.T) {
	for _, c := range convTCases {
		data := c.model()
		for _, tiles := range []int{1, 5} {
			t.Run(fmt.Sprint(c.name, "/", tiles), func(t *testing.T) {
				o, st, g, ins, _ := linkedInputs(t, data, tiles, 53)
				if got := g.Outputs[0].Shape; fmt.Sprint(got) != fmt.Sprint(c.want) {
					t.Fatalf("output shape %v, want %v", got, c.want)
				}
				rel := c.rel
				if rel == 0 {
					rel = 1e-9
				}
				checkDefinition(t, g, ins, rel, func(v [][]float64) []float64 {
					var b []float64
					if c.bias {
						b = v[2]
					}
					return c.direct(v[0], v[1], b)
				})
				checkVerdict(t, o, st, g, 53)
			})
		}
	}
}
