package graph

import (
	"testing"

	"ipu.local/libs/onnx"
)

// TestEinsumShapes: the output's shape, implicit outputs (the letters
// named once, alphabetical) included.
func TestEinsumShapes(t *testing.T) {
	for _, c := range []struct {
		eq   string
		a, b []int64
		want string
	}{
		{"ij,jk", []int64{2, 3}, []int64{3, 4}, "[2,4]"},
		{"ba,ca", []int64{2, 3}, []int64{5, 3}, "[2,5]"},
		{"bhqd,bhkd->bhqk", []int64{2, 3, 5, 4}, []int64{2, 3, 6, 4}, "[2,3,5,6]"},
		{"i,i->", []int64{7}, []int64{7}, "[]"},
		{"ij", []int64{2, 3}, nil, "[2,3]"},
		{"ji", []int64{2, 3}, nil, "[3,2]"},
		{"ij->", []int64{2, 3}, nil, "[]"},
	} {
		t.Run(c.eq, func(t *testing.T) {
			b := onnx.NewModel(13)
			b.AddInput("a", onnx.Float, c.a)
			ins := []string{"a"}
			if c.b != nil {
				b.AddInput("b", onnx.Float, c.b)
				ins = append(ins, "b")
			}
			b.AddNode("Einsum", "es", ins, []string{"y"}, onnx.StringAttr("equation", c.eq))
			b.AddOutputInfo(onnx.ValueInfo{Name: "y", DType: onnx.Float})
			if got := ShapeString(buildOf(t, b).Outputs[0].Shape); got != c.want {
				t.Errorf("shape %s, want %s", got, c.want)
			}
		})
	}
}

func TestEinsumErrors(t *testing.T) {
	for _, c := range []struct {
		eq   string
		b    []int64
		want string
	}{
		{"...ij,jk->...ik", []int64{3, 4}, `an ellipsis (...) is not supported`},
		{"ii,ij->j", []int64{3, 4}, `letter i twice in operand "ii" (a diagonal) is not supported`},
		{"ij,jk,kl->il", []int64{3, 4}, `3 operands named, the node has 2 inputs`},
		{"ij,jk->ik", []int64{4, 4}, `input 1: letter j is 4 here and 3 in another operand`},
		{"ij,j1->i", []int64{3, 4}, `'1' is not a letter`},
		{"ij,jk->iz", []int64{3, 4}, `output letter z names no operand's axis`},
	} {
		t.Run(c.eq, func(t *testing.T) {
			b := onnx.NewModel(13)
			b.AddInput("a", onnx.Float, []int64{2, 3})
			b.AddInput("b", onnx.Float, c.b)
			b.AddNode("Einsum", "es", []string{"a", "b"}, []string{"y"}, onnx.StringAttr("equation", c.eq))
			b.AddOutputInfo(onnx.ValueInfo{Name: "y", DType: onnx.Float})
			checkNodeErr(t, buildErr(t, b), `node "es" (Einsum)`, c.want)
		})
	}
}
