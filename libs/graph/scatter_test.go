package graph

import (
	"fmt"
	"testing"

	"ipu.local/libs/onnx"
)

// scatterWant is ScatterND by the operator's definition: a copy of data
// with each update's slice written in order.
func scatterWant(data []int64, shape []int64, idx []int64, q int, upd []int64) []int64 {
	out := append([]int64(nil), data...)
	s := NumElements(shape[q:])
	for k := 0; k < len(idx)/q; k++ {
		var p int64
		for d := 0; d < q; d++ {
			v := idx[k*q+d]
			if v < 0 {
				v += shape[d]
			}
			p = p*shape[d] + v
		}
		copy(out[p*s:(p+1)*s], upd[int64(k)*s:int64(k+1)*s])
	}
	return out
}

// TestScatterNDFolds: constant data, indices and updates fold to the
// operator's definition: whole slices (q < rank), single elements
// (q = rank), negative indices, a duplicate (the last wins) and indices
// of rank 3.
func TestScatterNDFolds(t *testing.T) {
	for _, c := range []struct {
		shape, idxDims, idx []int64
	}{
		{[]int64{4, 3}, []int64{2, 1}, []int64{2, 0}},
		{[]int64{4, 3}, []int64{3, 2}, []int64{0, 1, -1, 2, 3, 0}},
		{[]int64{2, 3, 4}, []int64{2, 2}, []int64{1, 2, 0, -3}},
		{[]int64{2, 3, 4}, []int64{3, 1}, []int64{1, 0, 1}},
		{[]int64{5, 2}, []int64{2, 2, 1}, []int64{4, 0, 2, 4}},
	} {
		t.Run(fmt.Sprint(c.shape, c.idxDims, c.idx), func(t *testing.T) {
			q := int(c.idxDims[len(c.idxDims)-1])
			ushape := append(append([]int64(nil), c.idxDims[:len(c.idxDims)-1]...), c.shape[q:]...)
			data := make([]int64, NumElements(c.shape))
			for i := range data {
				data[i] = int64(i)
			}
			upd := make([]int64, NumElements(ushape))
			for i := range upd {
				upd[i] = 100 + int64(i)
			}
			b := onnx.NewModel(16)
			b.AddInitializer(onnx.NewInt64("data", c.shape, data))
			b.AddInitializer(onnx.NewInt64("idx", c.idxDims, c.idx))
			b.AddInitializer(onnx.NewInt64("upd", ushape, upd))
			b.AddNode("ScatterND", "sc", []string{"data", "idx", "upd"}, []string{"y"})
			b.AddNode("Identity", "id", []string{"y"}, []string{"z"})
			b.AddOutput("z", onnx.Int64, c.shape)
			got := foldedInt64s(t, buildOf(t, b))
			if want := scatterWant(data, c.shape, c.idx, q, upd); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("got  %v\nwant %v", got, want)
			}
		})
	}
}

func TestScatterNDErrors(t *testing.T) {
	for _, c := range []struct {
		name         string
		idx, idxDims []int64
		ushape       []int64
		attrs        []onnx.Attr
		computed     bool
		want         string
	}{
		{"computed indices", []int64{0}, []int64{1, 1}, []int64{1, 3}, nil, true, `input 1: indices "idx" must be a constant`},
		{"out of range", []int64{4}, []int64{1, 1}, []int64{1, 3}, nil, false, `input 1: indices "idx": update 0's index 4 along axis 0 is out of range [-4, 4)`},
		{"updates shape", []int64{1}, []int64{1, 1}, []int64{1, 2}, nil, false, `input 2: updates "upd": shape [1,2], want [1,3]`},
		{"deep indices", []int64{0, 0, 0}, []int64{1, 3}, []int64{1}, nil, false, `last dimension 3, want 1 to data's rank 2`},
		{"reduction", []int64{1}, []int64{1, 1}, []int64{1, 3}, []onnx.Attr{onnx.StringAttr("reduction", "add")}, false, `reduction "add" is not supported (only none)`},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := onnx.NewModel(16)
			b.AddInput("x", onnx.Float, []int64{4, 3})
			b.AddInput("upd", onnx.Float, c.ushape)
			if c.computed {
				b.AddInput("idx", onnx.Int64, c.idxDims)
			} else {
				b.AddInitializer(onnx.NewInt64("idx", c.idxDims, c.idx))
			}
			b.AddNode("ScatterND", "sc", []string{"x", "idx", "upd"}, []string{"y"}, c.attrs...)
			b.AddOutput("y", onnx.Float, nil)
			checkNodeErr(t, buildErr(t, b), `node "sc" (ScatterND)`, c.want)
		})
	}
}
