package graph

import (
	"fmt"

	"ipu.local/libs/onnx"
)

// Operators built from others (Trilu, CumSum, ScatterND, Einsum, ArgMax
// and ArgMin, Pad, Dropout, Reciprocal, IsNaN, IsInf, a Cast from
// float16 or FP8 to an integer (infer_shape.go), Conv (infer_conv.go),
// ConvTranspose (infer_convt.go), the pools and BatchNormalization
// (infer_pool.go), InstanceNormalization and GroupNormalization
// (infer_norm.go), Resize and Upsample (infer_resize.go), DepthToSpace
// and SpaceToDepth (infer_depth.go), the L1, L2, sum-of-squares,
// log-sum and log-sum-exp reductions and PRelu (infer_reduce_built.go),
// integer Abs and Neg) become the nodes of the operators they are built
// from, each step through the builder (inference and folding), so that
// the planner, the device and the host reference see only operators
// they compute. Graph.Built lists them.

// maxBuiltIndices bounds an index table the builder makes (Conv's
// columns, a pool's windows, a Pad's gather), and maxBuiltBytes a
// constant slab (Pad's fill): an untrusted model's attributes cannot
// make the host allocate more (128 MB).
const (
	maxBuiltIndices = 1 << 24
	maxBuiltBytes   = 1 << 27
)

// steps appends the nodes of the operator c builds.
type steps struct {
	c *nodeCtx
	n int
}

// built records in Graph.Built what the operator became, and starts its
// steps.
func (c *nodeCtx) built(format string, args ...any) *steps {
	c.b.g.Built = append(c.b.g.Built, Rewrite{Node: c.name, What: fmt.Sprintf(format, args...)})
	return &steps{c: c}
}

// builtNode builds one node of an operator built from others through
// the builder, and marks the operator's own node done.
func (c *nodeCtx) builtNode(op, name string, inputs []string, out string, attrs ...onnx.Attr) error {
	c.done = true
	return c.b.node(&onnx.Node{Name: name, OpType: op, Inputs: inputs, Outputs: []string{out}, Attrs: attrs})
}

// node builds the operator's next step, op over ins, into out (a fresh
// value name when out is empty) and returns out. The step's node is
// named after the operator's: NODE/what and a count.
func (s *steps) node(op, what string, ins []string, out string, attrs ...onnx.Attr) (string, error) {
	s.n++
	name := fmt.Sprintf("%s/%s%d", s.c.name, what, s.n)
	if out == "" {
		out = s.c.b.freshName(name)
	}
	return out, s.c.builtNode(op, name, ins, out, attrs...)
}

// last builds the operator's last step, named as the operator, into its
// first output.
func (s *steps) last(op string, ins []string, attrs ...onnx.Attr) error {
	return s.c.builtNode(op, s.c.name, ins, s.c.n.Outputs[0], attrs...)
}

// constant makes a constant of the current scope for a step and returns
// its name.
func (s *steps) constant(what string, t *onnx.Tensor) (string, error) {
	v, err := s.c.b.freshConst(s.c.name+"/"+what, t)
	if err != nil {
		return "", s.c.errf("%v", err)
	}
	return v.Name, nil
}

// ints makes a 1-D int64 constant holding v.
func (s *steps) ints(what string, v ...int64) (string, error) {
	return s.constant(what, onnx.NewInt64("", []int64{int64(len(v))}, v))
}

// slice keeps elements [lo, hi) of x along axis.
func (s *steps) slice(x string, axis, lo, hi int64) (string, error) {
	var ins [3]string
	for i, v := range []int64{lo, hi, axis} {
		var err error
		if ins[i], err = s.ints("slice", v); err != nil {
			return "", err
		}
	}
	return s.node("Slice", "slice", []string{x, ins[0], ins[1], ins[2]}, "")
}

// reduce reduces x over axes with op (ReduceSum, ReduceMax or
// ReduceMin) into out (fresh when empty): the axes an attribute, or an
// input where the operator's opset takes them so (ReduceSum from 13, the
// others from 18).
func (s *steps) reduce(op, x string, axes []int64, keep bool, out string) (string, error) {
	keepdims := onnx.IntAttr("keepdims", b2i(keep))
	if s.c.b.opset < 13 || op != "ReduceSum" && s.c.b.opset < 18 {
		return s.node(op, "reduce", []string{x}, out, onnx.IntsAttr("axes", axes...), keepdims)
	}
	a, err := s.ints("axes", axes...)
	if err != nil {
		return "", err
	}
	return s.node(op, "reduce", []string{x, a}, out, keepdims)
}

// pad pads x, of shape shape (updated), along axis a by begin and end
// elements of fill (one element of type dt); a negative count crops.
func (s *steps) pad(x string, shape []int64, dt onnx.DataType, fill []byte, a int, begin, end int64) (string, error) {
	d := shape[a]
	if begin < 0 || end < 0 {
		lo, hi := max(-begin, 0), d-max(-end, 0)
		if lo > hi {
			return "", s.c.errf("pads crop axis %d of %d by %d and %d", a, d, -min(begin, 0), -min(end, 0))
		}
		var err error
		if x, err = s.slice(x, int64(a), lo, hi); err != nil {
			return "", err
		}
		shape[a] = hi - lo
		begin, end = max(begin, 0), max(end, 0)
	}
	if begin == 0 && end == 0 {
		return x, nil
	}
	parts := []string{x}
	for _, side := range []struct {
		n     int64
		first bool
	}{{begin, true}, {end, false}} {
		if side.n == 0 {
			continue
		}
		sh := copyShape(shape)
		sh[a] = side.n
		n, err := checkedElements(sh)
		if err == nil && n*int64(len(fill)) > maxBuiltBytes {
			err = fmt.Errorf("a slab of %s is more than %d bytes", ShapeString(sh), maxBuiltBytes)
		}
		if err != nil {
			return "", s.c.errf("pads along axis %d: %v", a, err)
		}
		raw := make([]byte, 0, n*int64(len(fill)))
		for i := int64(0); i < n; i++ {
			raw = append(raw, fill...)
		}
		slab, err := s.constant("fill", &onnx.Tensor{DType: dt, Dims: sh, Raw: raw})
		if err != nil {
			return "", err
		}
		if side.first {
			parts = append([]string{slab}, parts...)
		} else {
			parts = append(parts, slab)
		}
	}
	shape[a] += begin + end
	return s.node("Concat", "pad", parts, "", onnx.IntAttr("axis", int64(a)))
}

// freshConst makes a constant value of the current scope holding t,
// named freshName(name).
func (b *builder) freshConst(name string, t *onnx.Tensor) (*Value, error) {
	t.Name = b.freshName(name)
	return b.constValue(b.sc, t.Name, t)
}

// freshName returns a value name that neither the model nor the graph
// so far holds: name, or name_2, name_3, and so on.
func (b *builder) freshName(name string) string {
	unique := name
	for i := 2; b.reserved[unique] || b.taken[unique]; i++ {
		unique = fmt.Sprintf("%s_%d", name, i)
	}
	return unique
}
