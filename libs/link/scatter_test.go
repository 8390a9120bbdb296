package link

import (
	"fmt"
	"testing"

	"ipu.local/libs/onnx"
)

// scatterModel: ScatterND with constant indices on computed values: a
// slice assignment mask[:, :, :, :3] = u as an exporter writes it
// (indices [1, 1, 6, 3, 4], one element each), whole rows of an int64
// [5, 4] with a duplicate (the last wins) and a negative index, and
// float16 rows of a rank-3 tensor by pairs of indices.
func scatterModel() ([]byte, [][]int64) {
	var mask []int64
	for i := int64(0); i < 6; i++ {
		for j := int64(0); j < 3; j++ {
			mask = append(mask, 0, 0, i, j)
		}
	}
	rows := []int64{3, 1, -2}
	pairs := []int64{1, 2, 0, 0}
	b := onnx.NewModel(16)
	b.AddInput("m", onnx.Float, []int64{1, 1, 6, 8})
	b.AddInput("u", onnx.Float, []int64{1, 1, 6, 3})
	b.AddInput("i", onnx.Int64, []int64{5, 4})
	b.AddInput("v", onnx.Int64, []int64{3, 4})
	b.AddInput("h", onnx.Float16, []int64{2, 3, 5})
	b.AddInput("w", onnx.Float16, []int64{2, 5})
	b.AddInitializer(onnx.NewInt64("mi", []int64{1, 1, 6, 3, 4}, mask))
	b.AddInitializer(onnx.NewInt64("ri", []int64{3, 1}, rows))
	b.AddInitializer(onnx.NewInt64("pi", []int64{2, 2}, pairs))
	b.AddNode("ScatterND", "s1", []string{"m", "mi", "u"}, []string{"y1"})
	b.AddNode("ScatterND", "s2", []string{"i", "ri", "v"}, []string{"y2"})
	b.AddNode("ScatterND", "s3", []string{"h", "pi", "w"}, []string{"y3"})
	b.AddOutput("y1", onnx.Float, []int64{1, 1, 6, 8})
	b.AddOutput("y2", onnx.Int64, []int64{5, 4})
	b.AddOutput("y3", onnx.Float16, []int64{2, 3, 5})
	return b.Marshal(), [][]int64{mask, rows, pairs}
}

// TestScatterND checks every output bit for bit against the scatter done
// here on the inputs' bytes.
func TestScatterND(t *testing.T) {
	data, idx := scatterModel()
	type sc struct {
		in, upd, q, size int
		shape            []int64
	}
	cases := []sc{{0, 1, 4, 4, []int64{1, 1, 6, 8}}, {2, 3, 1, 4, []int64{5, 4}}, {4, 5, 2, 2, []int64{2, 3, 5}}}
	for _, tiles := range []int{1, 5, 64} {
		t.Run(fmt.Sprint(tiles), func(t *testing.T) {
			o, st, _, _, in := linkedInputs(t, data, tiles, 13)
			outs, res := runObject(t, o, in)
			for k, c := range cases {
				// int64 is 8 bytes on the host.
				size := c.size
				if c.in == 2 {
					size = 8
				}
				want := append([]byte(nil), in[c.in]...)
				slice := int64(size)
				for _, d := range c.shape[c.q:] {
					slice *= d
				}
				ix := idx[k]
				for u := 0; u < len(ix)/c.q; u++ {
					var p int64
					for d := 0; d < c.q; d++ {
						v := ix[u*c.q+d]
						if v < 0 {
							v += c.shape[d]
						}
						p = p*c.shape[d] + v
					}
					copy(want[p*slice:(p+1)*slice], in[c.upd][int64(u)*slice:int64(u+1)*slice])
				}
				if string(outs[k]) != string(want) {
					t.Errorf("output %s:\n got %x\nwant %x", o.Host.Outputs[k].Name, outs[k], want)
				}
			}
			checkCyclesOnly(t, st, res)
		})
	}
}
