package graph

import (
	"fmt"
	"strings"
	"testing"

	"ipu.local/libs/onnx"
)

// cumsumWant is CumSum by the operator's definition (a sequential sum
// along axis of shape), on int64 values.
func cumsumWant(x []int64, shape []int64, axis int, exclusive, reverse bool) []int64 {
	inner := int64(1)
	for _, d := range shape[axis+1:] {
		inner *= d
	}
	L := shape[axis]
	out := make([]int64, len(x))
	for p := range x {
		i := int64(p) / inner % L
		base := int64(p) - i*inner
		var sum int64
		for j := int64(0); j < L; j++ {
			in := j <= i
			if reverse {
				in = j >= i
			}
			if exclusive && j == i {
				in = false
			}
			if in {
				sum += x[base+j*inner]
			}
		}
		out[p] = sum
	}
	return out
}

// TestCumSumFolds: CumSum of a constant folds to the operator's
// definition, for lengths not powers of two, every axis, negative axes,
// exclusive and reverse.
func TestCumSumFolds(t *testing.T) {
	for _, shape := range [][]int64{{7}, {1}, {0}, {3, 5}, {2, 9, 2}, {4, 1, 3}} {
		for axis := -len(shape); axis < len(shape); axis++ {
			for _, mode := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
				name := fmt.Sprintf("%v/axis%d/exclusive%v/reverse%v", shape, axis, mode[0], mode[1])
				t.Run(name, func(t *testing.T) {
					n := NumElements(shape)
					x := make([]int64, n)
					for i := range x {
						x[i] = int64(i*i%11) - 4
					}
					b := onnx.NewModel(14)
					b.AddInitializer(onnx.NewInt64("x", shape, x))
					b.AddInitializer(onnx.NewInt64("axis", []int64{}, []int64{int64(axis)}))
					b.AddNode("CumSum", "cs", []string{"x", "axis"}, []string{"y"}, onnx.IntAttr("exclusive", b2i(mode[0])), onnx.IntAttr("reverse", b2i(mode[1])))
					b.AddNode("Identity", "id", []string{"y"}, []string{"z"})
					b.AddOutput("z", onnx.Int64, shape)
					got := foldedInt64s(t, buildOf(t, b))
					a := (axis + len(shape)) % len(shape)
					if want := cumsumWant(x, shape, a, mode[0], mode[1]); fmt.Sprint(got) != fmt.Sprint(want) {
						t.Errorf("got  %v\nwant %v", got, want)
					}
				})
			}
		}
	}
}

// TestCumSumSteps: a computed input gets ceil(log2 L) shift-and-add
// steps, and the build names them in Built.
func TestCumSumSteps(t *testing.T) {
	b := onnx.NewModel(14)
	b.AddInput("x", onnx.Int64, []int64{2, 5})
	b.AddInitializer(onnx.NewInt64("axis", []int64{}, []int64{1}))
	b.AddNode("CumSum", "cs", []string{"x", "axis"}, []string{"y"})
	b.AddOutput("y", onnx.Int64, []int64{2, 5})
	g := buildOf(t, b)
	var ops []string
	for _, n := range g.Nodes {
		ops = append(ops, n.Op)
	}
	if got := strings.Join(ops, " "); got != "Slice Concat Add Slice Concat Add Slice Concat Add" {
		t.Errorf("nodes %s", got)
	}
	if g.Outputs[0].Name != "y" || g.Outputs[0].Producer.Op != "Add" {
		t.Errorf("output %s from %v", g.Outputs[0].Name, g.Outputs[0].Producer)
	}
	if len(g.Built) != 1 || g.Built[0].What != "CumSum along axis 1 of 5 as 3 shift-and-add steps" {
		t.Errorf("Built %v", g.Built)
	}
	if len(g.Folded) != 0 {
		t.Errorf("Folded %v: a CumSum of a computed input folds nothing", g.Folded)
	}
}

func TestCumSumErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		axis *onnx.Tensor // nil: a graph input
		want string
	}{
		{"float", onnx.NewInt64("axis", []int64{}, []int64{0}), `input 0: element type float of "x" is not supported by CumSum (int32 and int64 are`},
		{"computed axis", nil, `axis "axis" must be a constant`},
		{"axis of two", onnx.NewInt64("axis", []int64{2}, []int64{0, 1}), `axis "axis": int64[2], want an int32 or int64 scalar`},
		{"axis out of range", onnx.NewInt64("axis", []int64{}, []int64{2}), `axis 2 out of range for rank 2`},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := onnx.NewModel(14)
			dt := onnx.Int32
			if c.name == "float" {
				dt = onnx.Float
			}
			b.AddInput("x", dt, []int64{3, 4})
			if c.axis != nil {
				b.AddInitializer(c.axis)
			} else {
				b.AddInput("axis", onnx.Int64, []int64{})
			}
			b.AddNode("CumSum", "cs", []string{"x", "axis"}, []string{"y"})
			b.AddOutput("y", dt, nil)
			checkNodeErr(t, buildErr(t, b), `node "cs" (CumSum)`, c.want)
		})
	}
}
