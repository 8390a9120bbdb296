package graph

import (
	"fmt"
	"testing"

	"ipu.local/libs/onnx"
)

// triluWant is Trilu by the operator's definition, on a row-major
// [..., M, N] of int64 values.
func triluWant(x []int64, m, n, k int64, upper bool) []int64 {
	out := make([]int64, len(x))
	for p, v := range x {
		i, j := int64(p)%(m*n)/n, int64(p)%n
		if upper && j-i >= k || !upper && j-i <= k {
			out[p] = v
		}
	}
	return out
}

// TestTriluFolds: Trilu of a constant folds (through Where) to the
// operator's definition, over shapes square and not, with batch axes,
// for k from below the last row to beyond the last column, upper and
// lower.
func TestTriluFolds(t *testing.T) {
	for _, shape := range [][]int64{{3, 5}, {5, 3}, {2, 4, 4}, {1, 2, 3, 6}, {1, 1}} {
		for _, k := range []int64{-7, -2, -1, 0, 1, 3, 9} {
			for _, upper := range []int64{0, 1} {
				t.Run(fmt.Sprintf("%v/k%d/upper%d", shape, k, upper), func(t *testing.T) {
					n := int64(1)
					for _, d := range shape {
						n *= d
					}
					x := make([]int64, n)
					for i := range x {
						x[i] = int64(i) + 1
					}
					b := onnx.NewModel(14)
					b.AddInitializer(onnx.NewInt64("x", shape, x))
					b.AddInitializer(onnx.NewInt64("k", []int64{}, []int64{k}))
					b.AddNode("Trilu", "tri", []string{"x", "k"}, []string{"y"}, onnx.IntAttr("upper", upper))
					b.AddNode("Identity", "id", []string{"y"}, []string{"z"})
					b.AddOutput("z", onnx.Int64, shape)
					got := foldedInt64s(t, buildOf(t, b))
					want := triluWant(x, shape[len(shape)-2], shape[len(shape)-1], k, upper == 1)
					if fmt.Sprint(got) != fmt.Sprint(want) {
						t.Errorf("got  %v\nwant %v", got, want)
					}
				})
			}
		}
	}
}

// TestTriluOnDevice: Trilu of a computed value is a Where with a bool
// mask over its last two axes, k omitted meaning 0.
func TestTriluOnDevice(t *testing.T) {
	b := onnx.NewModel(14)
	b.AddInput("x", onnx.Float, []int64{2, 3, 4})
	b.AddNode("Trilu", "tri", []string{"x"}, []string{"y"})
	b.AddOutput("y", onnx.Float, []int64{2, 3, 4})
	g := buildOf(t, b)
	want := `graph "main" opset 14
input x float[2,3,4]
const tri/mask bool[3,4]
const tri/zero float[]
node "tri" Where (tri/mask, x, tri/zero) -> y float[2,3,4]
output y
`
	if got := g.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	mask := g.Nodes[0].Inputs[0].Const.Raw
	if fmt.Sprint(mask) != "[1 1 1 1 0 1 1 1 0 0 1 1]" {
		t.Errorf("mask %v", mask)
	}
}

func TestTriluErrors(t *testing.T) {
	for _, c := range []struct {
		name  string
		shape []int64
		k     *onnx.Tensor // nil: k is a graph input
		attrs []onnx.Attr
		want  string
	}{
		{"rank 1", []int64{4}, nil, nil, `has rank 1, want at least 2`},
		{"computed k", []int64{3, 3}, nil, nil, `k "k" must be a constant`},
		{"k of two", []int64{3, 3}, onnx.NewInt64("k", []int64{2}, []int64{0, 1}), nil, `k "k": int64[2], want an int64 scalar`},
		{"upper 2", []int64{3, 3}, onnx.NewInt64("k", []int64{}, []int64{0}), []onnx.Attr{onnx.IntAttr("upper", 2)}, `upper 2, want 0 or 1`},
		{"an empty batch", []int64{0, 1 << 20, 1 << 20}, onnx.NewInt64("k", []int64{}, []int64{0}), nil, `more than`},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := onnx.NewModel(14)
			b.AddInput("x", onnx.Float, c.shape)
			if c.k != nil {
				b.AddInitializer(c.k)
			} else {
				b.AddInput("k", onnx.Int64, []int64{})
			}
			b.AddNode("Trilu", "tri", []string{"x", "k"}, []string{"y"}, c.attrs...)
			b.AddOutput("y", onnx.Float, nil)
			checkNodeErr(t, buildErr(t, b), `node "tri" (Trilu)`, c.want)
		})
	}
}
