package graph

// Shared shape inference of the data-movement operators (see opinfer.go).

import (
	"ipu.local/libs/onnx"
)

// axisIn checks a resolved axis against a rank.
func axisIn(what string, axis, rank int) error {
	if axis < 0 || axis >= rank {
		return nodeFail("%s %d out of range [0,%d) for rank %d", what, axis, rank, rank)
	}
	return nil
}

// increasing checks that axes are strictly increasing in [0, rank).
func increasing(axes []int, rank int) error {
	for i, ax := range axes {
		if ax < 0 || ax >= rank || (i > 0 && axes[i-1] >= ax) {
			return nodeFail("axes %v are not increasing axes of rank %d", axes, rank)
		}
	}
	return nil
}

func shapeGather(n *Node) ([]onnx.DataType, [][]int64, error) {
	a, err := attrsAs[Gather](n)
	if err != nil {
		return fail(err)
	}
	if err := inputsOf(n, 2, 2); err != nil {
		return fail(err)
	}
	data, err := inputOf(n, 0, nil)
	if err != nil {
		return fail(err)
	}
	idx, err := inputOf(n, 1, isInt)
	if err != nil {
		return fail(err)
	}
	r := len(data.Shape)
	if r == 0 {
		return fail(inputFail(0, "%q is a scalar", data.Name))
	}
	if err := axisIn("axis", a.Axis, r); err != nil {
		return fail(err)
	}
	out := append(append(copyShape(data.Shape[:a.Axis]), idx.Shape...), data.Shape[a.Axis+1:]...)
	return single(data.DType, out)
}

func shapeConcat(n *Node) ([]onnx.DataType, [][]int64, error) {
	a, err := attrsAs[Concat](n)
	if err != nil {
		return fail(err)
	}
	if err := inputsOf(n, 1, -1); err != nil {
		return fail(err)
	}
	first, err := inputOf(n, 0, nil)
	if err != nil {
		return fail(err)
	}
	r := len(first.Shape)
	if err := axisIn("axis", a.Axis, r); err != nil {
		return fail(err)
	}
	out := copyShape(first.Shape)
	for i := 1; i < len(n.Inputs); i++ {
		v, err := inputOf(n, i, nil)
		if err != nil {
			return fail(err)
		}
		if err := sameTypeAs(i, v, first); err != nil {
			return fail(err)
		}
		mismatch := len(v.Shape) != r
		for k := 0; !mismatch && k < r; k++ {
			mismatch = k != a.Axis && v.Shape[k] != first.Shape[k]
		}
		if mismatch {
			return fail(inputFail(i, "shape %s does not match %s outside axis %d", ShapeString(v.Shape), ShapeString(first.Shape), a.Axis))
		}
		if out[a.Axis] += v.Shape[a.Axis]; out[a.Axis] > MaxElements {
			return fail(nodeFail("axis %d sums to more than %d", a.Axis, MaxElements))
		}
	}
	return single(first.DType, out)
}

// sliceCount is the number of elements a resolved slice takes.
func sliceCount(start, end, step int64) int64 {
	switch {
	case step > 0 && end > start:
		return (end - start + step - 1) / step
	case step < 0 && start > end:
		return (start - end - step - 1) / -step
	}
	return 0
}

func shapeSlice(n *Node) ([]onnx.DataType, [][]int64, error) {
	a, x, err := oneInput[Slice](n)
	if err != nil {
		return fail(err)
	}
	k := len(a.Axes)
	if len(a.Starts) != k || len(a.Ends) != k || len(a.Steps) != k {
		return fail(nodeFail("%d axes, %d starts, %d ends, %d steps: want as many of each", k, len(a.Starts), len(a.Ends), len(a.Steps)))
	}
	out := copyShape(x.Shape)
	seen := make([]bool, len(x.Shape))
	for i, ax := range a.Axes {
		if err := axisIn("axis", ax, len(x.Shape)); err != nil {
			return fail(err)
		}
		if seen[ax] {
			return fail(nodeFail("axis %d sliced twice", ax))
		}
		seen[ax] = true
		d, start, end, step := x.Shape[ax], a.Starts[i], a.Ends[i], a.Steps[i]
		var ok bool
		switch {
		case step > 0:
			ok = step <= MaxElements+1 && start >= 0 && start <= d && end >= 0 && end <= d
		case step < 0:
			ok = step >= -MaxElements-1 && start >= 0 && start <= d-1 && end >= -1 && end <= d-1
		}
		if d == 0 {
			ok = step != 0 && start == 0 && end == 0
		}
		if !ok {
			return fail(nodeFail("axis %d of dimension %d: start %d, end %d, step %d are not resolved", ax, d, start, end, step))
		}
		out[ax] = sliceCount(start, end, step)
	}
	return single(x.DType, out)
}

func shapeSplit(n *Node) ([]onnx.DataType, [][]int64, error) {
	a, x, err := oneInput[Split](n)
	if err != nil {
		return fail(err)
	}
	if err := axisIn("axis", a.Axis, len(x.Shape)); err != nil {
		return fail(err)
	}
	if len(a.Sizes) != len(n.Outputs) {
		return fail(nodeFail("%d sizes for %d outputs", len(a.Sizes), len(n.Outputs)))
	}
	var sum int64
	types := make([]onnx.DataType, len(a.Sizes))
	shapes := make([][]int64, len(a.Sizes))
	for i, s := range a.Sizes {
		if s < 0 || s > MaxElements {
			return fail(nodeFail("sizes %v: size %d out of range", a.Sizes, s))
		}
		sum += s
		types[i] = x.DType
		shapes[i] = copyShape(x.Shape)
		shapes[i][a.Axis] = s
	}
	if sum != x.Shape[a.Axis] {
		return fail(nodeFail("sizes %v sum to %d, axis %d has dimension %d", a.Sizes, sum, a.Axis, x.Shape[a.Axis]))
	}
	return types, shapes, nil
}

func shapeSqueeze(n *Node) ([]onnx.DataType, [][]int64, error) {
	a, x, err := oneInput[Squeeze](n)
	if err != nil {
		return fail(err)
	}
	if err := increasing(a.Axes, len(x.Shape)); err != nil {
		return fail(err)
	}
	out := []int64{}
	k := 0
	for i, d := range x.Shape {
		if k < len(a.Axes) && a.Axes[k] == i {
			k++
			if d != 1 {
				return fail(nodeFail("axis %d has dimension %d, not 1", i, d))
			}
			continue
		}
		out = append(out, d)
	}
	return single(x.DType, out)
}

func shapeUnsqueeze(n *Node) ([]onnx.DataType, [][]int64, error) {
	a, x, err := oneInput[Unsqueeze](n)
	if err != nil {
		return fail(err)
	}
	rank := len(x.Shape) + len(a.Axes)
	if err := increasing(a.Axes, rank); err != nil {
		return fail(err)
	}
	out := make([]int64, 0, rank)
	k, j := 0, 0
	for i := 0; i < rank; i++ {
		if k < len(a.Axes) && a.Axes[k] == i {
			k++
			out = append(out, 1)
			continue
		}
		out = append(out, x.Shape[j])
		j++
	}
	return single(x.DType, out)
}

func shapeExpand(n *Node) ([]onnx.DataType, [][]int64, error) {
	a, x, err := oneInput[Expand](n)
	if err != nil {
		return fail(err)
	}
	if !Unidirectional(x.Shape, a.Shape) {
		return fail(inputFail(0, "shape %s does not broadcast to %s", ShapeString(x.Shape), ShapeString(a.Shape)))
	}
	return single(x.DType, copyShape(a.Shape))
}

func shapeTile(n *Node) ([]onnx.DataType, [][]int64, error) {
	a, x, err := oneInput[Tile](n)
	if err != nil {
		return fail(err)
	}
	if len(a.Repeats) != len(x.Shape) {
		return fail(nodeFail("repeats %v: %d entries, input rank is %d", a.Repeats, len(a.Repeats), len(x.Shape)))
	}
	out := make([]int64, len(x.Shape))
	for i, r := range a.Repeats {
		if r < 0 || r > MaxElements {
			return fail(nodeFail("repeats %v: entry %d out of range [0,%d]", a.Repeats, r, MaxElements))
		}
		out[i] = x.Shape[i] * r
	}
	return single(x.DType, out)
}
