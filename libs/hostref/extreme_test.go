package hostref

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"ipu.local/libs/graph"
	"ipu.local/libs/onnx"
)

// TestExtremeTreeKeepsResults: graph.Canonicalize rewrites ReduceMax and
// ReduceMin as halving trees of elementwise Max and Min (the device has
// no row kernel for them); on odd lengths, several and non-trailing
// axes, all axes, with and without keepdims, the outputs are exactly
// those of the reduction, and no reduction is left. Axes that are one
// block before kept ones (middle) are halved in place: no Transpose.
func TestExtremeTreeKeepsResults(t *testing.T) {
	for _, tc := range []struct {
		op     string
		shape  []int64
		axes   []int64 // nil: every axis
		keep   int64
		middle bool
	}{
		{"ReduceMax", []int64{3, 1}, nil, 0, false},
		{"ReduceMax", []int64{2, 7}, []int64{-1}, 1, false},
		{"ReduceMin", []int64{2, 7}, []int64{1}, 0, false},
		{"ReduceMax", []int64{3, 5, 4}, []int64{0, 2}, 1, false},
		{"ReduceMin", []int64{3, 5, 4}, []int64{1}, 0, true},
		{"ReduceMax", []int64{1, 13}, []int64{0}, 1, true},
		{"ReduceMax", []int64{33}, nil, 1, false},
		{"ReduceMax", []int64{2, 3, 4, 5}, []int64{2, 1}, 0, true},
		{"ReduceMin", []int64{4, 7, 1, 6}, []int64{-3}, 1, true},
		{"ReduceMax", []int64{5, 2, 9}, []int64{0, 1}, 0, true},
		{"ReduceMax", []int64{2, 3, 4, 5}, []int64{1, 3}, 1, false},
	} {
		t.Run(fmt.Sprintf("%s%v%v_keep%d", tc.op, tc.shape, tc.axes, tc.keep), func(t *testing.T) {
			b := onnx.NewModel(13)
			attrs := []onnx.Attr{onnx.IntAttr("keepdims", tc.keep)}
			if tc.axes != nil {
				attrs = append(attrs, onnx.IntsAttr("axes", tc.axes...))
			}
			b.AddNode(tc.op, "r", []string{"x"}, []string{"y"}, attrs...)
			b.AddInput("x", onnx.Float, tc.shape)
			var out []int64
			for d, n := range tc.shape {
				red := tc.axes == nil
				for _, a := range tc.axes {
					red = red || a == int64(d) || a+int64(len(tc.shape)) == int64(d)
				}
				switch {
				case !red:
					out = append(out, n)
				case tc.keep == 1:
					out = append(out, 1)
				}
			}
			b.AddOutput("y", onnx.Float, out)
			m, err := onnx.ReadModel(b.Marshal())
			if err != nil {
				t.Fatal(err)
			}
			g, err := graph.Build(m)
			if err != nil {
				t.Fatal(err)
			}
			n := graph.NumElements(tc.shape)
			r := rand.New(rand.NewPCG(1, uint64(n)))
			v := make([]float32, n)
			for i := range v {
				v[i] = float32(r.NormFloat64())
			}
			x := []*onnx.Tensor{onnx.NewFloat32("x", tc.shape, v)}
			before, err := Eval(g, x, Options{Precision: FP64, Threads: 1})
			if err != nil {
				t.Fatal(err)
			}
			g2, rw := graph.Canonicalize(g)
			if len(rw) == 0 {
				t.Fatal("no rewrite")
			}
			for _, nd := range g2.Nodes {
				if nd.Op == tc.op {
					t.Fatalf("%s left after canonicalization", tc.op)
				}
				if nd.Op == "Transpose" && tc.middle {
					t.Fatalf("a Transpose for axes %v of %v (%v)", tc.axes, tc.shape, rw)
				}
			}
			after, err := Eval(g2, x, Options{Precision: FP64, Threads: 1})
			if err != nil {
				t.Fatal(err)
			}
			bv, _ := before[0].Float64s()
			av, _ := after[0].Float64s()
			if fmt.Sprint(bv) != fmt.Sprint(av) || fmt.Sprint(before[0].Dims) != fmt.Sprint(after[0].Dims) {
				t.Fatalf("before %v %v, after %v %v (%v)", before[0].Dims, bv, after[0].Dims, av, rw)
			}
		})
	}
}
