package link

import (
	"fmt"
	"math"
	"testing"

	"ipu.local/libs/graph"
	"ipu.local/libs/hostref"
	"ipu.local/libs/onnx"
)

// instanceNorm is InstanceNormalization by its definition in float64:
// per image and channel, over the spatial elements (sp of them).
func instanceNorm(x []float64, n, ch, sp int, scale, bias []float64, eps float32) []float64 {
	y := make([]float64, len(x))
	for i := 0; i < n*ch; i++ {
		v := x[i*sp : (i+1)*sp]
		mean, sq := 0.0, 0.0
		for _, a := range v {
			mean += a
		}
		mean /= float64(sp)
		for _, a := range v {
			sq += (a - mean) * (a - mean)
		}
		sd := math.Sqrt(sq/float64(sp) + float64(eps))
		for j, a := range v {
			y[i*sp+j] = (a-mean)/sd*scale[i%ch] + bias[i%ch]
		}
	}
	return y
}

// TestInstanceNorm: InstanceNormalization over one, two and three
// spatial axes, float and float16, and GroupNorm as torch exports it
// (Reshape to [N, G, -1], InstanceNormalization with unit scale and
// zero bias, Reshape back, the affine Mul and Add): the built graph at
// FP64 against the definition, the device against the host reference,
// on 1 and 5 tiles.
func TestInstanceNorm(t *testing.T) {
	for _, c := range []struct {
		name  string
		dt    onnx.DataType
		x     []int64
		group int64 // 0: InstanceNormalization alone
	}{
		{"1d", onnx.Float, []int64{2, 3, 7}, 0},
		{"2d", onnx.Float, []int64{1, 4, 5, 6}, 0},
		{"3d-fp16", onnx.Float16, []int64{1, 2, 3, 4, 5}, 0},
		{"groupnorm", onnx.Float, []int64{2, 6, 4, 5}, 3},
	} {
		ch := c.x[1]
		sp := int64(1)
		for _, d := range c.x[2:] {
			sp *= d
		}
		scale, bias := make([]float32, ch), make([]float32, ch)
		for i := range scale {
			scale[i], bias[i] = 0.5+0.25*float32(i), 0.1*float32(i)-0.2
		}
		b := onnx.NewModel(13)
		b.AddInput("x", c.dt, c.x)
		enc := func(name string, v []float32, dims []int64) {
			f := make([]float64, len(v))
			for i, a := range v {
				f[i] = float64(a)
			}
			e, err := hostref.Encode(name, c.dt, dims, f)
			if err != nil {
				t.Fatal(err)
			}
			b.AddInitializer(e)
		}
		const eps = 1e-3
		if c.group == 0 {
			enc("scale", scale, []int64{ch})
			enc("bias", bias, []int64{ch})
			b.AddNode("InstanceNormalization", "in", []string{"x", "scale", "bias"}, []string{"y"}, onnx.FloatAttr("epsilon", eps))
		} else {
			ones, zeros := make([]float32, c.group), make([]float32, c.group)
			for i := range ones {
				ones[i] = 1
			}
			enc("ones", ones, []int64{c.group})
			enc("zeros", zeros, []int64{c.group})
			b.AddInitializer(onnx.NewInt64("grouped", []int64{3}, []int64{c.x[0], c.group, -1}))
			b.AddInitializer(onnx.NewInt64("back", []int64{int64(len(c.x))}, c.x))
			enc("gamma", scale, []int64{ch, 1, 1})
			enc("beta", bias, []int64{ch, 1, 1})
			b.AddNode("Reshape", "r1", []string{"x", "grouped"}, []string{"g"})
			b.AddNode("InstanceNormalization", "in", []string{"g", "ones", "zeros"}, []string{"n"}, onnx.FloatAttr("epsilon", eps))
			b.AddNode("Reshape", "r2", []string{"n", "back"}, []string{"nb"})
			b.AddNode("Mul", "mul", []string{"nb", "gamma"}, []string{"m"})
			b.AddNode("Add", "add", []string{"m", "beta"}, []string{"y"})
		}
		b.AddOutputInfo(onnx.ValueInfo{Name: "y", DType: c.dt})
		data := b.Marshal()
		// The parameters as the model holds them (float16 rounds them),
		// and the tolerance the type gives: float16's epsilon rounds too.
		sc, bi := make([]float64, ch), make([]float64, ch)
		for i := range sc {
			sc[i], bi[i] = roundTo(c.dt, float64(scale[i])), roundTo(c.dt, float64(bias[i]))
		}
		rel := 1e-9
		if c.dt == onnx.Float16 {
			rel = 1.0 / 1024
		}
		for _, tiles := range []int{1, 5} {
			t.Run(fmt.Sprint(c.name, "/", tiles), func(t *testing.T) {
				o, st, g, ins, _ := linkedInputs(t, data, tiles, 43)
				checkDefinition(t, g, ins, rel, func(v [][]float64) []float64 {
					if c.group == 0 {
						return instanceNorm(v[0], int(c.x[0]), int(ch), int(sp), sc, bi, eps)
					}
					ones := make([]float64, c.group)
					for i := range ones {
						ones[i] = 1
					}
					n := instanceNorm(v[0], int(c.x[0]), int(c.group), int(ch/c.group*sp), ones, make([]float64, c.group), eps)
					for i := range n {
						k := (i / int(sp)) % int(ch)
						n[i] = n[i]*sc[k] + bi[k]
					}
					return n
				})
				checkVerdict(t, o, st, g, 43)
			})
		}
	}
}

// roundTo rounds v to type dt (float or float16).
func roundTo(dt onnx.DataType, v float64) float64 {
	e, err := hostref.Encode("", dt, nil, []float64{v})
	if err != nil {
		panic(err)
	}
	f, err := graph.DecodeFloats(e)
	if err != nil {
		panic(err)
	}
	return f[0]
}

// TestGroupNorm: GroupNormalization at opset 18 (a scale and bias per
// group) and 21 (per channel), float and float16, against the
// definition at FP64 (each group's channels and spatial elements
// normalized together) and on the device on 1 and 5 tiles.
func TestGroupNorm(t *testing.T) {
	for _, c := range []struct {
		name   string
		opset  int64
		dt     onnx.DataType
		x      []int64
		groups int64
	}{
		{"op18", 18, onnx.Float, []int64{2, 6, 3, 4}, 3},
		{"op21", 21, onnx.Float, []int64{1, 8, 5}, 2},
		{"op21-fp16", 21, onnx.Float16, []int64{1, 4, 3, 3}, 4},
	} {
		ch := c.x[1]
		per := c.groups
		if c.opset >= 21 {
			per = ch
		}
		sp := int64(1)
		for _, d := range c.x[2:] {
			sp *= d
		}
		sc, bi := make([]float64, per), make([]float64, per)
		for i := range sc {
			sc[i], bi[i] = roundTo(c.dt, 0.75+0.125*float64(i)), roundTo(c.dt, 0.05*float64(i)-0.1)
		}
		b := onnx.NewModel(c.opset)
		b.AddInput("x", c.dt, c.x)
		for _, p := range []struct {
			name string
			v    []float64
		}{{"scale", sc}, {"bias", bi}} {
			e, err := hostref.Encode(p.name, c.dt, []int64{per}, p.v)
			if err != nil {
				t.Fatal(err)
			}
			b.AddInitializer(e)
		}
		const eps = 1e-4
		b.AddNode("GroupNormalization", "gn", []string{"x", "scale", "bias"}, []string{"y"}, onnx.IntAttr("num_groups", c.groups), onnx.FloatAttr("epsilon", eps))
		b.AddOutputInfo(onnx.ValueInfo{Name: "y", DType: c.dt})
		data := b.Marshal()
		rel := 1e-9
		if c.dt == onnx.Float16 {
			rel = 1.0 / 1024
		}
		for _, tiles := range []int{1, 5} {
			t.Run(fmt.Sprint(c.name, "/", tiles), func(t *testing.T) {
				o, st, g, ins, _ := linkedInputs(t, data, tiles, 59)
				checkDefinition(t, g, ins, rel, func(v [][]float64) []float64 {
					ones := make([]float64, c.groups)
					for i := range ones {
						ones[i] = 1
					}
					y := instanceNorm(v[0], int(c.x[0]), int(c.groups), int(ch/c.groups*sp), ones, make([]float64, c.groups), eps)
					for i := range y {
						k := (i / int(sp)) % int(ch) // the channel
						if per != ch {
							k /= int(ch / c.groups) // its group
						}
						y[i] = y[i]*sc[k] + bi[k]
					}
					return y
				})
				checkVerdict(t, o, st, g, 59)
			})
		}
	}
}
