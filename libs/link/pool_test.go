package link

import (
	"fmt"
	"math"
	"testing"

	"ipu.local/libs/graph"
	"ipu.local/libs/hostref"
	"ipu.local/libs/onnx"
)

// poolCase is a pooling node over x [N, C, H, W] with kernel k, stride
// s and pads p (top, left, bottom, right).
type poolCase struct {
	name, op    string
	dt          onnx.DataType
	x           []int64
	k, s, p     [2]int64
	ceil, incl  bool
	wantOut     []int64
	extraAttrs  []onnx.Attr
	countsKnown bool
}

var poolCases = []poolCase{
	{name: "max-stem", op: "MaxPool", dt: onnx.Float, x: []int64{2, 3, 9, 10}, k: [2]int64{3, 3}, s: [2]int64{2, 2}, p: [2]int64{1, 1}, wantOut: []int64{2, 3, 5, 5}},
	{name: "max-ceil", op: "MaxPool", dt: onnx.Float, x: []int64{1, 2, 8, 8}, k: [2]int64{3, 3}, s: [2]int64{2, 2}, ceil: true, wantOut: []int64{1, 2, 4, 4}},
	{name: "avg-pad", op: "AveragePool", dt: onnx.Float, x: []int64{1, 4, 7, 6}, k: [2]int64{3, 2}, s: [2]int64{2, 2}, p: [2]int64{1, 1}, wantOut: []int64{1, 4, 4, 4}},
	{name: "avg-pad-incl", op: "AveragePool", dt: onnx.Float, x: []int64{1, 4, 7, 6}, k: [2]int64{3, 2}, s: [2]int64{2, 2}, p: [2]int64{1, 1}, incl: true, wantOut: []int64{1, 4, 4, 4}},
	{name: "max-fp16", op: "MaxPool", dt: onnx.Float16, x: []int64{1, 3, 6, 6}, k: [2]int64{2, 2}, s: [2]int64{2, 2}, wantOut: []int64{1, 3, 3, 3}},
}

func (c poolCase) model() []byte {
	b := onnx.NewModel(13)
	b.AddInput("x", c.dt, c.x)
	attrs := []onnx.Attr{onnx.IntsAttr("kernel_shape", c.k[0], c.k[1]), onnx.IntsAttr("strides", c.s[0], c.s[1]),
		onnx.IntsAttr("pads", c.p[0], c.p[1], c.p[0], c.p[1])}
	if c.ceil {
		attrs = append(attrs, onnx.IntAttr("ceil_mode", 1))
	}
	if c.incl {
		attrs = append(attrs, onnx.IntAttr("count_include_pad", 1))
	}
	b.AddNode(c.op, "pool", []string{"x"}, []string{"y"}, attrs...)
	b.AddOutputInfo(onnx.ValueInfo{Name: "y", DType: c.dt})
	return b.Marshal()
}

// direct is the pool by its definition: over each window's elements
// inside the input (ceil_mode's last window clipped), the maximum, or
// the mean over those (or over the whole window inside the padded
// input, count_include_pad).
func (c poolCase) direct(x []float64) []float64 {
	o := c.wantOut
	y := make([]float64, 0, o[0]*o[1]*o[2]*o[3])
	for n := int64(0); n < o[0]; n++ {
		for ch := int64(0); ch < o[1]; ch++ {
			for i := int64(0); i < o[2]; i++ {
				for j := int64(0); j < o[3]; j++ {
					m, s, cnt, all := math.Inf(-1), 0.0, 0.0, 0.0
					for a := int64(0); a < c.k[0]; a++ {
						for b := int64(0); b < c.k[1]; b++ {
							r, q := i*c.s[0]+a-c.p[0], j*c.s[1]+b-c.p[1]
							if r < c.x[2]+c.p[0] && q < c.x[3]+c.p[1] {
								all++
							}
							if r < 0 || q < 0 || r >= c.x[2] || q >= c.x[3] {
								continue
							}
							v := x[((n*c.x[1]+ch)*c.x[2]+r)*c.x[3]+q]
							m, s, cnt = math.Max(m, v), s+v, cnt+1
						}
					}
					switch {
					case c.op == "MaxPool":
						y = append(y, m)
					case c.incl:
						y = append(y, s/all)
					default:
						y = append(y, s/cnt)
					}
				}
			}
		}
	}
	return y
}

// TestPools: MaxPool and AveragePool built as Pad, Gather and a
// reduction, with pads, strides, ceil_mode and count_include_pad, float
// and float16: the built graph at FP64 against the definition, the
// device against the host reference, on 1 and 5 tiles.
func TestPools(t *testing.T) {
	for _, c := range poolCases {
		data := c.model()
		for _, tiles := range []int{1, 5} {
			t.Run(fmt.Sprint(c.name, "/", tiles), func(t *testing.T) {
				o, st, g, ins, _ := linkedInputs(t, data, tiles, 31)
				if got := g.Outputs[0].Shape; fmt.Sprint(got) != fmt.Sprint(c.wantOut) {
					t.Fatalf("output shape %v, want %v", got, c.wantOut)
				}
				checkDefinition(t, g, ins, 1e-12, func(v [][]float64) []float64 { return c.direct(v[0]) })
				checkVerdict(t, o, st, g, 31)
			})
		}
	}
}

// TestBatchNormAndGlobalPool: BatchNormalization with constant
// parameters (folded to one scale and shift per channel) and
// GlobalAveragePool, against the definitions at FP64 and on the device.
func TestBatchNormAndGlobalPool(t *testing.T) {
	const ch = 4
	b := onnx.NewModel(14)
	b.AddInput("x", onnx.Float, []int64{2, ch, 5, 3})
	prm := func(name string, v ...float32) { b.AddInitializer(onnx.NewFloat32(name, []int64{ch}, v)) }
	prm("scale", 1.5, -0.5, 2, 0.25)
	prm("bias", 0.1, 0, -1, 3)
	prm("mean", 0.2, -0.3, 1, 0)
	prm("var", 0.5, 2, 0.01, 1)
	b.AddNode("BatchNormalization", "bn", []string{"x", "scale", "bias", "mean", "var"}, []string{"y"}, onnx.FloatAttr("epsilon", 1e-3))
	b.AddNode("GlobalAveragePool", "gap", []string{"y"}, []string{"z"})
	b.AddOutputInfo(onnx.ValueInfo{Name: "y", DType: onnx.Float})
	b.AddOutputInfo(onnx.ValueInfo{Name: "z", DType: onnx.Float})
	data := b.Marshal()
	for _, tiles := range []int{1, 5} {
		t.Run(fmt.Sprint(tiles), func(t *testing.T) {
			o, st, g, ins, _ := linkedInputs(t, data, tiles, 37)
			ref, err := hostref.Eval(g, ins, hostref.Options{Precision: hostref.FP64, Threads: 1})
			if err != nil {
				t.Fatal(err)
			}
			x, _ := graph.DecodeFloats(ins[0])
			y, _ := ref[0].Float64s()
			z, _ := ref[1].Float64s()
			sc, bi, mu, va := []float64{1.5, -0.5, 2, 0.25}, []float64{0.1, 0, -1, 3}, []float64{0.2, -0.3, 1, 0}, []float64{0.5, 2, 0.01, 1}
			for i, v := range x {
				c := (i / 15) % ch
				w := (v-mu[c])/math.Sqrt(va[c]+float64(float32(1e-3)))*sc[c] + bi[c]
				if math.Abs(y[i]-w) > 1e-6*(1+math.Abs(w)) { // the constants fold in float32
					t.Fatalf("y[%d] = %g, want %g", i, y[i], w)
				}
			}
			for k := range z {
				s := 0.0
				for j := 0; j < 15; j++ {
					s += y[15*k+j]
				}
				if math.Abs(z[k]-s/15) > 1e-12 {
					t.Fatalf("z[%d] = %g, want %g", k, z[k], s/15)
				}
			}
			checkVerdict(t, o, st, g, 37)
		})
	}
}
