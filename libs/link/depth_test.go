package link

import (
	"fmt"
	"testing"

	"ipu.local/libs/onnx"
)

// TestDepthToSpace: DepthToSpace in DCR and CRD modes and SpaceToDepth,
// float and float16, against their definitions element by element at
// FP64 and on the device on 1 and 5 tiles.
func TestDepthToSpace(t *testing.T) {
	for _, c := range []struct {
		op, mode string
		dt       onnx.DataType
		x        []int64
		b        int64
	}{
		{"DepthToSpace", "", onnx.Float, []int64{2, 8, 3, 5}, 2},
		{"DepthToSpace", "CRD", onnx.Float, []int64{1, 18, 2, 3}, 3},
		{"DepthToSpace", "DCR", onnx.Float16, []int64{1, 12, 4, 3}, 2},
		{"SpaceToDepth", "", onnx.Float, []int64{2, 3, 6, 4}, 2},
		{"SpaceToDepth", "", onnx.Float16, []int64{1, 2, 9, 3}, 3},
	} {
		b := onnx.NewModel(13)
		b.AddInput("x", c.dt, c.x)
		attrs := []onnx.Attr{onnx.IntAttr("blocksize", c.b)}
		if c.mode != "" {
			attrs = append(attrs, onnx.StringAttr("mode", c.mode))
		}
		b.AddNode(c.op, "d2s", []string{"x"}, []string{"y"}, attrs...)
		b.AddOutputInfo(onnx.ValueInfo{Name: "y", DType: c.dt})
		data := b.Marshal()
		n, ch, h, w, bs := c.x[0], c.x[1], c.x[2], c.x[3], c.b
		def := func(x []float64) []float64 {
			y := make([]float64, len(x))
			at := func(n0, c0, h0, w0 int64) int64 { return ((n0*ch+c0)*h+h0)*w + w0 }
			for i := int64(0); i < n; i++ {
				for cc := int64(0); cc < ch; cc++ {
					for hh := int64(0); hh < h; hh++ {
						for ww := int64(0); ww < w; ww++ {
							v := x[at(i, cc, hh, ww)]
							if c.op == "SpaceToDepth" {
								// y[n, (bi*b + bj)*C + c, h/b, w/b] = x[n, c, h, w]
								oc := ((hh%bs)*bs+ww%bs)*ch + cc
								y[((i*ch*bs*bs+oc)*(h/bs)+hh/bs)*(w/bs)+ww/bs] = v
								continue
							}
							// x[n, c, h, w] goes to y[n, c', h*b+bi, w*b+bj]
							cp, bi, bj := cc%(ch/(bs*bs)), cc/(ch/(bs*bs))/bs, cc/(ch/(bs*bs))%bs
							if c.mode == "CRD" {
								cp, bi, bj = cc/(bs*bs), cc%(bs*bs)/bs, cc%bs
							}
							oc := ch / (bs * bs)
							y[((i*oc+cp)*h*bs+hh*bs+bi)*w*bs+ww*bs+bj] = v
						}
					}
				}
			}
			return y
		}
		for _, tiles := range []int{1, 5} {
			t.Run(fmt.Sprint(c.op, c.mode, c.x, "/", tiles), func(t *testing.T) {
				o, st, g, ins, _ := linkedInputs(t, data, tiles, 47)
				checkDefinition(t, g, ins, 0, func(v [][]float64) []float64 { return def(v[0]) })
				checkVerdict(t, o, st, g, 47)
			})
		}
	}
}
