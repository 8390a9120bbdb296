package graph

import (
	"fmt"
	"math"
	"testing"

	"ipu.local/libs/onnx"
)

// padWant is a constant-mode Pad by the operator's definition, on int64
// values: output element o takes input o - begin along every axis, or
// fill outside it.
func padWant(x []int64, shape, pads []int64, fill int64) ([]int64, []int64) {
	r := len(shape)
	out := make([]int64, r)
	for d := range out {
		out[d] = shape[d] + pads[d] + pads[d+r]
	}
	res := make([]int64, NumElements(out))
	for p := range res {
		rem, src, inside := int64(p), int64(0), true
		idx := make([]int64, r)
		for d := r - 1; d >= 0; d-- {
			idx[d] = rem % out[d]
			rem /= out[d]
		}
		for d := 0; d < r; d++ {
			i := idx[d] - pads[d]
			if i < 0 || i >= shape[d] {
				inside = false
				break
			}
			src = src*shape[d] + i
		}
		res[p] = fill
		if inside {
			res[p] = x[src]
		}
	}
	return res, out
}

// TestPadFolds: Pad of a constant folds to the definition, growing and
// cropping, with a fill value, on every axis or the ones axes names.
func TestPadFolds(t *testing.T) {
	for _, c := range []struct {
		shape, pads, axes []int64
		fill              int64
	}{
		{[]int64{3, 4}, []int64{1, 0, 2, 3}, nil, 0},
		{[]int64{2, 3, 4}, []int64{0, -1, 1, 1, 2, -2}, nil, 7},
		{[]int64{5}, []int64{-2, 3}, nil, -1},
		{[]int64{2, 3, 4}, []int64{2, 1}, []int64{-1}, 9},
	} {
		t.Run(fmt.Sprint(c.shape, c.pads, c.axes), func(t *testing.T) {
			x := make([]int64, NumElements(c.shape))
			for i := range x {
				x[i] = int64(i) + 1
			}
			b := onnx.NewModel(18)
			b.AddInitializer(onnx.NewInt64("x", c.shape, x))
			b.AddInitializer(onnx.NewInt64("pads", []int64{int64(len(c.pads))}, c.pads))
			b.AddInitializer(onnx.NewInt64("v", nil, []int64{c.fill}))
			ins := []string{"x", "pads", "v"}
			if c.axes != nil {
				b.AddInitializer(onnx.NewInt64("axes", []int64{int64(len(c.axes))}, c.axes))
				ins = append(ins, "axes")
			}
			b.AddNode("Pad", "pad", ins, []string{"y"})
			b.AddNode("Identity", "id", []string{"y"}, []string{"z"})
			b.AddOutputInfo(onnx.ValueInfo{Name: "z", DType: onnx.Int64})
			g := buildOf(t, b)
			got := foldedInt64s(t, g)
			full := c.pads
			if c.axes != nil {
				// the axes' pads spread over every axis
				r := len(c.shape)
				full = make([]int64, 2*r)
				for k, a := range c.axes {
					a = (a + int64(r)) % int64(r)
					full[a], full[int(a)+r] = c.pads[k], c.pads[k+len(c.axes)]
				}
			}
			want, shape := padWant(x, c.shape, full, c.fill)
			if fmt.Sprint(got) != fmt.Sprint(want) || ShapeString(g.Outputs[0].Shape) != ShapeString(shape) {
				t.Errorf("got  %s %v\nwant %s %v", ShapeString(g.Outputs[0].Shape), got, ShapeString(shape), want)
			}
		})
	}
}

func TestPadErrors(t *testing.T) {
	for _, c := range []struct {
		pads  []int64
		attrs []onnx.Attr
		want  string
	}{
		{[]int64{0, 0, 0}, nil, `pads [0 0 0]: 3 values, want 4`},
		{[]int64{0, 0, 0, 0}, []onnx.Attr{onnx.StringAttr("mode", "mirror")}, `mode "mirror" is not one of constant, edge, reflect and wrap`},
		{[]int64{0, 0, 0, 0}, []onnx.Attr{onnx.StringAttr("mode", "wrap")}, `mode "wrap" needs opset 19, the model imports 13`},
		{[]int64{3, 0, 0, 0}, []onnx.Attr{onnx.StringAttr("mode", "reflect")}, `pads [3 0 0 0], axis 0 of 3: reflect pads must be below the axis' size`},
		{[]int64{0, -2, 0, -2}, []onnx.Attr{onnx.StringAttr("mode", "edge")}, `pads [0 -2 0 -2], axis 1 of 4: no element left to pad from`},
		{[]int64{-2, 0, 1, 0}, []onnx.Attr{onnx.StringAttr("mode", "reflect")}, `pads [-2 0 1 0], axis 0 of 3: reflect pads must be below the axis' size`},
		{[]int64{-2, 0, -2, 0}, nil, `pads crop axis 0 of 3 by 2 and 2`},
		{[]int64{math.MinInt64, 0, 0, 0}, nil, `pads [-9223372036854775808 0 0 0]: -9223372036854775808 out of range for axis 0 of 3`},
		{[]int64{0, 1 << 62, 0, 0}, nil, `: 4611686018427387904 out of range for axis 1 of 4`},
	} {
		b := onnx.NewModel(13)
		b.AddInput("x", onnx.Float, []int64{3, 4})
		b.AddInitializer(onnx.NewInt64("pads", []int64{int64(len(c.pads))}, c.pads))
		b.AddNode("Pad", "pad", []string{"x", "pads"}, []string{"y"}, c.attrs...)
		b.AddOutputInfo(onnx.ValueInfo{Name: "y", DType: onnx.Float})
		checkNodeErr(t, buildErr(t, b), `node "pad" (Pad)`, c.want)
	}
}

// padAxis pads the rows of n elements in v (row-major, the axis last)
// by the modes' definitions written as slabs: a negative pad crops
// first (onnxruntime's order), then edge repeats the border element,
// reflect appends the elements after the border in reverse, wrap the
// other end's.
func padAxis(v []int64, n int, mode string, begin, end int) []int64 {
	var out []int64
	for r := 0; r < len(v)/n; r++ {
		row := v[r*n+max(-begin, 0) : (r+1)*n-max(-end, 0)]
		n := len(row)
		var left, right []int64
		for k := max(begin, 0); k > 0; k-- { // the element begin-k+1 places before row[0] is left[begin-k]
			switch mode {
			case "edge":
				left = append(left, row[0])
			case "reflect":
				left = append(left, row[k])
			case "wrap":
				left = append(left, row[((n-k)%n+n)%n])
			}
		}
		for k := 1; k <= end; k++ {
			switch mode {
			case "edge":
				right = append(right, row[n-1])
			case "reflect":
				right = append(right, row[n-1-k])
			case "wrap":
				right = append(right, row[(k-1)%n])
			}
		}
		out = append(append(append(out, left...), row...), right...)
	}
	return out
}

// transpose2 transposes an r x c matrix.
func transpose2(v []int64, r, c int) []int64 {
	t := make([]int64, len(v))
	for i := 0; i < r; i++ {
		for j := 0; j < c; j++ {
			t[j*r+i] = v[i*c+j]
		}
	}
	return t
}

// TestPadModesFold: edge, reflect and wrap of a constant fold to the
// definitions, on both axes, growing and cropping, pads longer than the
// axis in wrap mode.
func TestPadModesFold(t *testing.T) {
	const rows, cols = 4, 5
	x := make([]int64, rows*cols)
	for i := range x {
		x[i] = int64(10*(i/cols) + i%cols)
	}
	for _, c := range []struct {
		mode string
		pads []int64 // begin 0, begin 1, end 0, end 1
	}{
		{"edge", []int64{2, 1, 0, 3}}, {"edge", []int64{-1, 6, 2, -2}},
		{"reflect", []int64{3, 4, 3, 4}}, {"reflect", []int64{1, -2, -1, 2}},
		{"wrap", []int64{4, 7, 9, 1}}, {"wrap", []int64{-2, 2, 1, -3}}, {"wrap", []int64{0, 0, 0, 0}},
		{"reflect", []int64{-2, 3, 1, -1}}, {"wrap", []int64{3, -3, -1, 5}},
	} {
		t.Run(fmt.Sprint(c.mode, c.pads), func(t *testing.T) {
			b := onnx.NewModel(19)
			b.AddInitializer(onnx.NewInt64("x", []int64{rows, cols}, x))
			b.AddInitializer(onnx.NewInt64("pads", []int64{4}, c.pads))
			b.AddNode("Pad", "pad", []string{"x", "pads"}, []string{"y"}, onnx.StringAttr("mode", c.mode))
			b.AddOutputInfo(onnx.ValueInfo{Name: "y", DType: onnx.Int64})
			g := buildOf(t, b)
			got := foldedInt64s(t, g)
			// along axis 1 (rows), then axis 0 (the transposed rows)
			p1, c1 := int(c.pads[1]), int(c.pads[3])
			w := padAxis(x, cols, c.mode, p1, c1)
			nc := cols + p1 + c1
			p0, c0 := int(c.pads[0]), int(c.pads[2])
			w = transpose2(padAxis(transpose2(w, rows, nc), rows, c.mode, p0, c0), nc, rows+p0+c0)
			shape := []int64{int64(rows + p0 + c0), int64(nc)}
			if fmt.Sprint(got) != fmt.Sprint(w) || ShapeString(g.Outputs[0].Shape) != ShapeString(shape) {
				t.Errorf("got  %s %v\nwant %s %v", ShapeString(g.Outputs[0].Shape), got, ShapeString(shape), w)
			}
		})
	}
}
