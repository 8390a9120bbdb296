package graph

import (
	"fmt"
	"slices"
	"strings"

	"ipu.local/libs/onnx"
)

// inferEinsum builds Einsum (opset 12) of one or two operands from
// Transpose, Reshape, ReduceSum and MatMul, through the builder: each
// operand first sums the letters no other operand and not the output
// names; two operands then move their letters to [batch, kept, summed]
// and [batch, summed, kept] (batch: in both and the output; summed: in
// both, not the output), reshape to [b, m, k] and [b, k, n], multiply,
// and reshape and transpose the product to the output's letters. An
// implicit output (no "->") is the letters named once, in alphabetical
// order. Letters are a to z and A to Z; a letter repeated within an
// operand (a diagonal), an ellipsis, more than two operands and
// dimensions that differ for one letter are refused in one line.
func inferEinsum(c *nodeCtx) error {
	if err := c.arity(1, 2); err != nil {
		return err
	}
	eq, err := c.n.AttrString("equation", "")
	if err != nil {
		return c.errf("%v", err)
	}
	e, err := parseEinsum(eq, len(c.n.Inputs))
	if err != nil {
		return c.errf("equation %q: %v", eq, err)
	}
	size := map[byte]int64{}
	var vals []*Value
	for i, letters := range e.in {
		v, err := c.arith(i)
		if err != nil {
			return err
		}
		if len(v.Shape) != len(letters) {
			return c.inErrf(i, "%q has rank %d, the equation names %d letters", v.Name, len(v.Shape), len(letters))
		}
		for k, l := range []byte(letters) {
			if d, ok := size[l]; ok && d != v.Shape[k] {
				return c.inErrf(i, "letter %c is %d here and %d in another operand", l, v.Shape[k], d)
			}
			size[l] = v.Shape[k]
		}
		vals = append(vals, v)
	}
	if len(vals) == 2 && vals[0].DType != vals[1].DType {
		return c.inErrf(1, "element type %v does not match %v", vals[1].DType, vals[0].DType)
	}
	w := &einsumBuild{s: c.built("Einsum %q as ReduceSum, Transpose, Reshape and MatMul", eq), size: size}
	// Each operand sums its own letters no one else names.
	names, letters := append([]string(nil), c.n.Inputs...), append([]string(nil), e.in...)
	for i := range letters {
		var other string
		if len(letters) == 2 {
			other = letters[1-i]
		}
		if names[i], letters[i], err = w.sumAlone(names[i], letters[i], other+e.out); err != nil {
			return err
		}
	}
	if len(letters) == 1 {
		return w.finish(names[0], letters[0], e.out)
	}
	a, b := letters[0], letters[1]
	var batch, kept, summed, keptB string
	for _, l := range []byte(a) {
		switch inB, inOut := strings.IndexByte(b, l) >= 0, strings.IndexByte(e.out, l) >= 0; {
		case inB && inOut:
			batch += string(l)
		case inB:
			summed += string(l)
		default:
			kept += string(l)
		}
	}
	for _, l := range []byte(b) {
		if strings.IndexByte(a, l) < 0 {
			keptB += string(l)
		}
	}
	x, err := w.arrange(names[0], a, batch+kept+summed, []string{batch, kept, summed})
	if err != nil {
		return err
	}
	y, err := w.arrange(names[1], b, batch+summed+keptB, []string{batch, summed, keptB})
	if err != nil {
		return err
	}
	p, err := w.s.node("MatMul", "product", []string{x, y}, "")
	if err != nil {
		return err
	}
	return w.finish(p, batch+kept+keptB, e.out)
}

// einsum is a parsed equation: the operands' letters and the output's.
type einsum struct {
	in  []string
	out string
}

// parseEinsum parses an equation of n operands, spaces ignored.
func parseEinsum(eq string, n int) (einsum, error) {
	eq = strings.ReplaceAll(eq, " ", "")
	lhs, out, explicit := strings.Cut(eq, "->")
	var e einsum
	e.in = strings.Split(lhs, ",")
	if len(e.in) != n {
		return e, fmt.Errorf("%d operands named, the node has %d inputs", len(e.in), n)
	}
	count := map[byte]int{}
	for _, s := range append(append([]string(nil), e.in...), out) {
		if strings.Contains(s, ".") {
			return e, fmt.Errorf("an ellipsis (...) is not supported")
		}
		for _, l := range []byte(s) {
			if !(l >= 'a' && l <= 'z' || l >= 'A' && l <= 'Z') {
				return e, fmt.Errorf("%q is not a letter", l)
			}
		}
	}
	for _, s := range e.in {
		for k, l := range []byte(s) {
			if strings.IndexByte(s[k+1:], l) >= 0 {
				return e, fmt.Errorf("letter %c twice in operand %q (a diagonal) is not supported", l, s)
			}
			count[l]++
		}
	}
	if !explicit {
		var once []byte
		for l, k := range count {
			if k == 1 {
				once = append(once, l)
			}
		}
		slices.Sort(once)
		out = string(once)
	}
	for k, l := range []byte(out) {
		if count[l] == 0 {
			return e, fmt.Errorf("output letter %c names no operand's axis", l)
		}
		if strings.IndexByte(out[k+1:], l) >= 0 {
			return e, fmt.Errorf("output letter %c twice", l)
		}
	}
	e.out = out
	return e, nil
}

// einsumBuild appends an Einsum's steps.
type einsumBuild struct {
	s    *steps
	size map[byte]int64
}

// sumAlone sums the letters of x (named letters) that keep does not
// name, and returns the result and its letters.
func (w *einsumBuild) sumAlone(x, letters, keep string) (string, string, error) {
	var axes []int64
	var left string
	for k, l := range []byte(letters) {
		if strings.IndexByte(keep, l) < 0 {
			axes = append(axes, int64(k))
		} else {
			left += string(l)
		}
	}
	if len(axes) == 0 {
		return x, letters, nil
	}
	y, err := w.s.reduce("ReduceSum", x, axes, false, "")
	return y, left, err
}

// transpose moves x's letters (from) to the order to, if they differ.
func (w *einsumBuild) transpose(x, from, to string) (string, error) {
	if from == to {
		return x, nil
	}
	perm := make([]int64, len(to))
	for k, l := range []byte(to) {
		perm[k] = int64(strings.IndexByte(from, l))
	}
	return w.s.node("Transpose", "transpose", []string{x}, "", onnx.IntsAttr("perm", perm...))
}

// dims returns the sizes of letters.
func (w *einsumBuild) dims(letters string) []int64 {
	out := make([]int64, len(letters))
	for k, l := range []byte(letters) {
		out[k] = w.size[l]
	}
	return out
}

// arrange transposes x (letters from) to the order to and reshapes it to
// one axis per group of letters.
func (w *einsumBuild) arrange(x, from, to string, groups []string) (string, error) {
	t, err := w.transpose(x, from, to)
	if err != nil {
		return "", err
	}
	shape := make([]int64, len(groups))
	for k, g := range groups {
		shape[k] = NumElements(w.dims(g))
	}
	s, err := w.s.ints("shape", shape...)
	if err != nil {
		return "", err
	}
	return w.s.node("Reshape", "reshape", []string{t, s}, "")
}

// finish reshapes x to the dimensions of its letters and transposes them
// to the output's, into the Einsum's output.
func (w *einsumBuild) finish(x, letters, out string) error {
	s, err := w.s.ints("shape", w.dims(letters)...)
	if err != nil {
		return err
	}
	if x, err = w.s.node("Reshape", "unflatten", []string{x, s}, ""); err != nil {
		return err
	}
	if x, err = w.transpose(x, letters, out); err != nil {
		return err
	}
	return w.s.last("Identity", []string{x})
}
