package lower

// Elementwise steps: unary and binary operators (numpy broadcasting) and
// casts, at float and float16, on any row-major layout. The output's
// pieces say where the node runs; each input must hold, on the same
// tile, the box of itself that the output piece reads (the piece's box
// projected by broadcasting). A piece's storage is walked as rows: the
// innermost axis is a row, outer axes merge into a row count while every
// array's stride stays regular, and the axes left over become separate
// launches. An input broadcast along the row is read one element per
// row (codegen's PerRow), a one-element constant is an immediate.

import (
	"fmt"
	"math"

	"ipu.local/formats/plan"
	"ipu.local/libs/codegen"
	"ipu.local/libs/graph"
	"ipu.local/libs/layout"
	"ipu.local/libs/numfmt"
	"ipu.local/libs/onnx"
	"ipu.local/libs/prog"
)

var unaryOps = map[string]codegen.UnaryOp{
	"Neg": codegen.Neg, "Abs": codegen.Abs, "Relu": codegen.Relu, "Tanh": codegen.Tanh,
	"Sigmoid": codegen.Sigmoid, "Exp": codegen.Exp, "Sqrt": codegen.Sqrt, "Clip": codegen.Clip, "Gelu": codegen.GeluErf,
	"Log": codegen.Log, "Erf": codegen.Erf, "Softplus": codegen.Softplus, "LeakyRelu": codegen.LeakyRelu,
	"Elu": codegen.Elu, "Selu": codegen.Selu, "HardSigmoid": codegen.HardSigmoid, "HardSwish": codegen.HardSwish,
}

var binaryOps = map[string]codegen.BinaryOp{
	"Add": codegen.Add, "Sub": codegen.Sub, "Mul": codegen.Mul, "Div": codegen.Div,
	"Pow": codegen.Pow, "Max": codegen.Max, "Min": codegen.Min, "Sum": codegen.Add, "Mean": codegen.Add,
}

// unaryRoundings is the FP32 roundings of each unary kernel (codegen's
// arithmetic): exact operations none. A transcendental function (exp,
// tanh, erf, pow) counts one more: IEEE 754 does not require it to be
// correctly rounded, and the libraries that compute reference outputs
// are not (their tanh and exp err by up to an ulp), so the device's
// correctly rounded result and a reference may differ in the last bit.
var unaryRoundings = map[codegen.UnaryOp]int64{
	codegen.Neg: 0, codegen.Abs: 0, codegen.Relu: 0, codegen.Clip: 0,
	codegen.Exp: 2, codegen.Sqrt: 1, codegen.Tanh: 2, codegen.Sigmoid: 4,
	codegen.GeluErf: 6, codegen.GeluTanh: 10,
	// log, erf: one transcendental. Softplus: exp, +1, log, + (6);
	// LeakyRelu: x*alpha; Elu: exp, -1, *alpha (4); Selu: exp, *alpha,
	// -alpha, *gamma (5); HardSigmoid: *alpha, +beta; HardSwish: the
	// constant 1/6, *c, +0.5, x*h (4).
	codegen.Log: 2, codegen.Erf: 2, codegen.Softplus: 6, codegen.LeakyRelu: 1,
	codegen.Elu: 4, codegen.Selu: 5, codegen.HardSigmoid: 2, codegen.HardSwish: 4,
}

// operand is one array of an elementwise launch: a piece's storage, or
// an immediate.
type operand struct {
	geo   layout.Geometry
	ref   prog.Ref
	shape []int // the operand value's shape (nil: the output's)
	konst bool
	value float32
}

// array of one launch: base reference, row stride (elements) and whether
// it is read one element per row.
type array struct {
	ref    prog.Ref
	stride int
	perRow bool
	konst  bool
	value  float32
}

// launch is one kernel's geometry: R rows of N elements, the output
// first in arrays.
type launch struct {
	R, N   int
	arrays []array
}

// launches splits an output box into kernel launches over the arrays
// (the output first, then the inputs).
func launches(out layout.Geometry, outRef prog.Ref, outShape []int, ins []operand) ([]launch, error) {
	r := len(out.Box)
	ext := make([]int, r)
	for d := range ext {
		ext[d] = out.Box[d].Len()
	}
	na := 1 + len(ins)
	strides := make([][]int, na)
	base := make([]int, na)
	strides[0] = append([]int(nil), out.Strides...)
	for k, in := range ins {
		s := make([]int, r)
		if in.shape == nil && !in.konst && len(in.geo.Box) == len(outShape) {
			in.shape = outShape // nil: the output's (a rank-0 value keeps its empty shape)
		}
		if !in.konst {
			off := r - len(in.shape)
			lo := make([]int, len(in.shape))
			for d := range in.shape {
				lo[d] = in.geo.Box[d].Lo
				if in.shape[d] == outShape[off+d] {
					s[off+d] = in.geo.Strides[d]
				}
			}
			base[k+1] = in.geo.Offset(lo)
		}
		strides[k+1] = s
	}
	// The axes that count (extent above 1), and the last axis, innermost
	// last.
	var axes []int
	for d := 0; d < r-1; d++ {
		if ext[d] > 1 {
			axes = append(axes, d)
		}
	}
	if r > 0 {
		axes = append(axes, r-1)
	} else {
		axes = []int{0}
		ext = []int{1}
		for a := range strides {
			strides[a] = []int{1}
			if a > 0 && ins[a-1].konst {
				strides[a] = []int{0}
			}
		}
	}
	inner := axes[len(axes)-1]
	if strides[0][inner] != 1 {
		return nil, fmt.Errorf("output rows are not contiguous")
	}
	N := ext[inner]
	perRow := make([]bool, na)
	for a := 1; a < na; a++ {
		switch strides[a][inner] {
		case 1:
		case 0:
			perRow[a] = true
		default:
			return nil, fmt.Errorf("input %d is not contiguous along the output's rows", a-1)
		}
	}
	// Merge outer axes into the row while every array stays contiguous
	// (or constant along it).
	k := len(axes) - 2
	for ; k >= 0; k-- {
		d := axes[k]
		ok := true
		for a := 0; a < na && ok; a++ {
			if perRow[a] {
				ok = strides[a][d] == 0
			} else {
				ok = strides[a][d] == N
			}
		}
		if !ok {
			break
		}
		N *= ext[d]
	}
	// The next axis gives the rows; outer axes merge while regular.
	R := 1
	rowStride := make([]int, na)
	rowAxes := 0
	if k >= 0 {
		d := axes[k]
		R = ext[d]
		for a := range rowStride {
			rowStride[a] = strides[a][d]
		}
		rowAxes = 1
		for k--; k >= 0; k-- {
			d := axes[k]
			ok := true
			for a := 0; a < na && ok; a++ {
				ok = strides[a][d] == rowStride[a]*R
			}
			if !ok {
				break
			}
			R *= ext[d]
			rowAxes++
		}
	}
	_ = rowAxes
	outer := axes[:k+1]
	var out2 []launch
	idx := make([]int, len(outer))
	for {
		l := launch{R: R, N: N, arrays: make([]array, na)}
		for a := 0; a < na; a++ {
			off := base[a]
			for i, d := range outer {
				off += idx[i] * strides[a][d]
			}
			if a == 0 {
				l.arrays[0] = array{ref: outRef.Add(off * out.Size), stride: rowStride[0]}
				continue
			}
			in := ins[a-1]
			if in.konst {
				l.arrays[a] = array{konst: true, value: in.value}
				continue
			}
			l.arrays[a] = array{ref: in.ref.Add(off * in.geo.Size), stride: rowStride[a], perRow: perRow[a]}
		}
		out2 = append(out2, l)
		i := len(idx) - 1
		for i >= 0 {
			idx[i]++
			if idx[i] < ext[outer[i]] {
				break
			}
			idx[i] = 0
			i--
		}
		if i < 0 {
			break
		}
	}
	return out2, nil
}

// kernelMaker builds one launch's kernel.
type kernelMaker func(what string, l launch) *prog.Kernel

func elemTypeOf(d onnx.DataType) codegen.ElemType {
	if d == onnx.Float16 {
		return codegen.F16
	}
	return codegen.F32
}

func (a array) operand() (codegen.Operand, *prog.Ref) {
	switch {
	case a.konst:
		return codegen.Operand{Const: true, Value: a.value}, nil
	case a.perRow:
		r := a.ref
		return codegen.Operand{PerRow: true, Stride: a.stride}, &r
	}
	r := a.ref
	return codegen.Operand{Stride: a.stride}, &r
}

func binaryKernel(op codegen.BinaryOp, typ codegen.ElemType) kernelMaker {
	return func(what string, l launch) *prog.Kernel {
		p := &codegen.Binary{Op: op, N: l.N, R: l.R, Type: typ, YStride: l.arrays[0].stride, Workers: codegen.Slots}
		k := &prog.Kernel{What: what, Params: p}
		k.Fixes = append(k.Fixes, prog.Fix{Field: &p.Y, Ref: l.arrays[0].ref, Write: true})
		var ra, rb *prog.Ref
		p.A, ra = l.arrays[1].operand()
		p.B, rb = l.arrays[2].operand()
		if l.R <= 1 {
			p.R, p.YStride = 0, 0
			for _, o := range []*codegen.Operand{&p.A, &p.B} {
				if o.PerRow {
					o.PerRow, o.Scalar = false, true
				}
				o.Stride = 0
			}
		}
		if ra != nil {
			k.Fixes = append(k.Fixes, prog.Fix{Field: &p.A.Addr, Ref: *ra})
		}
		if rb != nil {
			k.Fixes = append(k.Fixes, prog.Fix{Field: &p.B.Addr, Ref: *rb})
		}
		return k
	}
}

func unaryKernel(base codegen.Unary) kernelMaker {
	return func(what string, l launch) *prog.Kernel {
		p := base
		p.N, p.R, p.YStride, p.XStride, p.Workers = l.N, l.R, l.arrays[0].stride, l.arrays[1].stride, codegen.Slots
		if l.R <= 1 {
			p.R, p.XStride, p.YStride = 0, 0, 0
		}
		k := &prog.Kernel{What: what, Params: &p}
		k.Fixes = []prog.Fix{{Field: &p.X, Ref: l.arrays[1].ref}, {Field: &p.Y, Ref: l.arrays[0].ref, Write: true}}
		return k
	}
}

func castKernel(base codegen.Cast) kernelMaker {
	return func(what string, l launch) *prog.Kernel {
		p := base
		p.N, p.R, p.YStride, p.XStride, p.Workers = l.N, l.R, l.arrays[0].stride, l.arrays[1].stride, codegen.Slots
		if l.R <= 1 {
			p.R, p.XStride, p.YStride = 0, 0, 0
		}
		k := &prog.Kernel{What: what, Params: &p}
		k.Fixes = []prog.Fix{{Field: &p.X, Ref: l.arrays[1].ref}, {Field: &p.Y, Ref: l.arrays[0].ref, Write: true}}
		return k
	}
}

// elementwiseLaunches adds the kernels of one output piece to s.
func (l *lowerer) elementwiseLaunches(what string, s *prog.Superstep, tile int, mk kernelMaker, out layout.Geometry, outRef prog.Ref, outShape []int, ins []operand) error {
	ls, err := launches(out, outRef, outShape, ins)
	if err != nil {
		return l.stepErr("%s on tile %d: %v", what, tile, err)
	}
	for _, ln := range ls {
		k := mk(what, ln)
		_, walksY := k.Params.(*codegen.Select)
		if len(ln.arrays) == 3 && !ln.arrays[1].isArray() && !ln.arrays[2].isArray() && !walksY {
			// Both operands broadcast: expand the first into the output,
			// then work in place. (A Select walks its output anyway.)
			x, err := l.expand(what, ln, out.Size)
			if err != nil {
				return err
			}
			s.Work[tile] = append(s.Work[tile], x)
			ln.arrays[1] = array{ref: ln.arrays[0].ref, stride: ln.arrays[0].stride}
			k = mk(what, ln)
		}
		if _, err := k.Cost(); err != nil {
			return l.notLowered(nil, "%s on tile %d: %v", what, tile, err)
		}
		s.Work[tile] = append(s.Work[tile], k)
	}
	return nil
}

func (a array) isArray() bool { return !a.konst && !a.perRow }

// expand writes a broadcast operand (one value per row, or one in all)
// over a launch's output rows: a gather whose column stride is 0.
func (l *lowerer) expand(what string, ln launch, size int) (*prog.Kernel, error) {
	a := ln.arrays[1]
	if a.konst {
		return nil, l.notLowered(nil, "%s: both operands of a kernel are immediates", what)
	}
	if size != 4 && size != 2 {
		return nil, l.notLowered(nil, "%s: an expansion of %d-byte elements", what, size)
	}
	g := &codegen.Gather{Size: size, R: max(ln.R, 1), C: ln.N, YStride: max(ln.arrays[0].stride, ln.N), RStride: a.stride, CStride: 0, Workers: codegen.Slots}
	return &prog.Kernel{What: what + ".expand", Params: g, Fixes: []prog.Fix{{Field: &g.X, Ref: a.ref}, {Field: &g.Y, Ref: ln.arrays[0].ref, Write: true}}}, nil
}

// elementwise lowers a node whose output pieces each read the projected
// boxes of its inputs on the same tile; mk makes the kernels.
func (l *lowerer) elementwise(st *plan.Step, n *graph.Node, ins []*layout.Tensor, y *layout.Tensor, mk kernelMaker, immediates []operand) error {
	yv := l.g.Values[y.Value]
	var inRefs [][]prog.Ref
	for k, t := range ins {
		if t == nil {
			if !immediates[k].konst {
				return l.stepErr("input %d has no tensor", k)
			}
			inRefs = append(inRefs, nil)
			continue
		}
		if t.Kind != y.Kind || t.Kind != layout.RowMajor && !samePanels(t, y) {
			return l.stepErr("input tensor %d (%q) is %s, output tensor %d (%q) %s: an elementwise node works on row-major layouts, or on one panel layout", t.ID, t.Name, t.Kind, y.ID, y.Name, y.Kind)
		}
		refs, err := l.read(t)
		if err != nil {
			return err
		}
		inRefs = append(inRefs, refs)
	}
	yRefs, err := l.write(y)
	if err != nil {
		return err
	}
	// A node's inputs are ready when it runs; it runs in the current
	// compute superstep (its inputs are on its tiles by construction).
	s := l.compute(n.Name)
	for i, pc := range y.Pieces {
		yg := y.Geometry(i)
		ops := make([]operand, len(ins))
		for k, t := range ins {
			if t == nil {
				ops[k] = immediates[k]
				continue
			}
			if y.Kind != layout.RowMajor {
				// A panel layout: the same pieces, walked flat.
				ops[k] = operand{geo: t.Geometry(i), ref: inRefs[k][i]}
				continue
			}
			want := layout.Project(pc.Box, t.Shape, y.Shape)
			j := pieceOn(t, pc.Tile, want)
			if j < 0 {
				return l.stepErr("input tensor %d (%q) has no piece %s on tile %d, which output piece %s of tensor %d needs", t.ID, t.Name, want, pc.Tile, pc.Box, y.ID)
			}
			ops[k] = operand{geo: t.Geometry(j), ref: inRefs[k][j], shape: t.Shape}
		}
		if y.Kind != layout.RowMajor {
			// Flat: one row over the whole piece storage.
			flat := layout.Geometry{Kind: layout.RowMajor, Size: yg.Size, Box: layout.Box{{Lo: 0, Hi: yg.Elems}}, Strides: []int{1}, Pitch: yg.Elems, Elems: yg.Elems}
			for k := range ops {
				if !ops[k].konst {
					g := ops[k].geo
					ops[k] = operand{geo: layout.Geometry{Kind: layout.RowMajor, Size: g.Size, Box: flat.Box, Strides: []int{1}, Pitch: g.Elems, Elems: g.Elems}, ref: ops[k].ref, shape: []int{yg.Elems}}
				}
			}
			if err := l.elementwiseLaunches(n.Name, s, pc.Tile, mk, flat, yRefs[i], []int{yg.Elems}, ops); err != nil {
				return err
			}
			continue
		}
		if err := l.elementwiseLaunches(n.Name, s, pc.Tile, mk, yg, yRefs[i], y.Shape, ops); err != nil {
			return err
		}
	}
	_ = yv
	return nil
}

// immediate returns a one-element constant input as an immediate operand
// of the given type.
func (l *lowerer) immediate(n *graph.Node, k int, typ codegen.ElemType) (operand, error) {
	v := n.Inputs[k]
	if v == nil || v.Const == nil || v.NumElements() != 1 {
		return operand{}, l.stepErr("input %d (%q) has no tensor and is not a one-element constant", k, v.Name)
	}
	f, err := graph.DecodeFloats(v.Const)
	if err != nil || len(f) != 1 {
		return operand{}, l.stepErr("constant %q: %v", v.Name, err)
	}
	x := float32(f[0])
	if float64(x) != f[0] && !math.IsNaN(f[0]) {
		return operand{}, l.notLowered(n, "constant %q = %g is not a float", v.Name, f[0])
	}
	if typ == codegen.F16 && numfmt.F16ToF64(numfmt.F64ToF16(f[0])) != f[0] && !math.IsNaN(f[0]) {
		return operand{}, l.notLowered(n, "constant %q = %g is not a float16", v.Name, f[0])
	}
	return operand{konst: true, value: x}, nil
}

// computeType is a node's arithmetic type: float or float16.
func (l *lowerer) computeType(n *graph.Node) (codegen.ElemType, error) {
	d := n.Outputs[0].DType
	switch d {
	case onnx.Float:
		return codegen.F32, nil
	case onnx.Float16:
		return codegen.F16, nil
	}
	return 0, l.notLowered(n, "output %q of type %s (the kernels compute in float and float16)", n.Outputs[0].Name, d)
}

func (l *lowerer) unary(st *plan.Step, n *graph.Node) error {
	ins, outs, err := l.ioTensors(st, n)
	if err != nil {
		return err
	}
	typ, err := l.computeType(n)
	if err != nil {
		return err
	}
	p := codegen.Unary{Op: unaryOps[n.Op], Type: typ}
	switch a := n.Attrs.(type) {
	case *graph.Gelu:
		if a.Tanh {
			p.Op = codegen.GeluTanh
		}
	case *graph.LeakyRelu:
		p.Alpha = a.Alpha
	case *graph.Elu:
		p.Alpha = a.Alpha
	case *graph.Selu:
		p.Alpha, p.Gamma = a.Alpha, a.Gamma
	case *graph.HardSigmoid:
		p.Alpha, p.Beta = a.Alpha, a.Beta
	case *graph.Clip:
		p.Min, p.Max = float32(a.Min), float32(a.Max)
		if typ == codegen.F16 {
			p.Min, p.Max = float32(numfmt.F16ToF64(numfmt.F64ToF16(a.Min))), float32(numfmt.F16ToF64(numfmt.F64ToF16(a.Max)))
		}
		if float64(p.Min) != a.Min && !math.IsInf(a.Min, 0) || float64(p.Max) != a.Max && !math.IsInf(a.Max, 0) {
			return l.notLowered(n, "bounds %g, %g are not of the input's type", a.Min, a.Max)
		}
	}
	if ins[0] == nil {
		return l.stepErr("input 0 has no tensor")
	}
	if err := l.elementwise(st, n, ins, outs[0], unaryKernel(p), nil); err != nil {
		return err
	}
	acc := l.acc[n.Inputs[0].Index] + unaryRoundings[p.Op]
	if typ == codegen.F16 {
		acc += F16Rounding
	}
	l.acc[n.Outputs[0].Index] = acc
	return nil
}

func (l *lowerer) binary(st *plan.Step, n *graph.Node) error {
	if isInt(n.Outputs[0].DType) {
		return l.intBinary(st, n)
	}
	ins, outs, err := l.ioTensors(st, n)
	if err != nil {
		return err
	}
	typ, err := l.computeType(n)
	if err != nil {
		return err
	}
	op := binaryOps[n.Op]
	imm := make([]operand, len(ins))
	var acc int64
	for k, t := range ins {
		if t == nil {
			if imm[k], err = l.immediate(n, k, typ); err != nil {
				return err
			}
		}
		acc = max(acc, l.acc[n.Inputs[k].Index])
	}
	rounds := int64(1)
	switch {
	case op == codegen.Pow:
		rounds = 2
	case typ == codegen.F16 && op != codegen.Div:
		rounds = 0 // f16v4: one FP16 rounding, counted below
	}
	if op == codegen.Max || op == codegen.Min {
		rounds = 0
	}
	y := outs[0]
	if len(ins) == 1 {
		// A Sum, Mean, Max or Min of one input is a copy of it.
		if ins[0] == nil {
			return l.stepErr("input 0 has no tensor")
		}
		l.acc[n.Outputs[0].Index] = acc
		return l.copyStep(n, ins[0], y)
	}
	if len(ins) == 2 {
		if err := l.elementwise(st, n, ins, y, binaryKernel(op, typ), imm); err != nil {
			return err
		}
	} else {
		// Variadic Sum, Max, Min: a chain over the inputs, into the output.
		if err := l.variadic(st, n, ins, y, op, typ, imm); err != nil {
			return err
		}
		rounds *= int64(len(ins) - 1)
	}
	acc += rounds
	if typ == codegen.F16 && op != codegen.Max && op != codegen.Min {
		acc += F16Rounding * int64(max(len(ins)-1, 1))
	}
	if n.Op == "Mean" {
		// The sum divided by the input count in place: one more
		// rounding (FP16: to FP16 from the FP32 quotient).
		if err := l.scaleDown(n, y, typ, len(ins)); err != nil {
			return err
		}
		acc++
		if typ == codegen.F16 {
			acc += F16Rounding
		}
	}
	l.acc[n.Outputs[0].Index] = acc
	return nil
}

// scaleDown divides the output y of a Mean by the count of its inputs,
// in place (codegen's Div: the correctly rounded quotient).
func (l *lowerer) scaleDown(n *graph.Node, y *layout.Tensor, typ codegen.ElemType, count int) error {
	yRefs := l.refs[y.ID]
	if len(yRefs) != len(y.Pieces) {
		return l.stepErr("output tensor %d (%q) is not written", y.ID, y.Name)
	}
	k := operand{konst: true, value: float32(count)}
	for i, pc := range y.Pieces {
		yg := y.Geometry(i)
		ops := []operand{{geo: yg, ref: yRefs[i], shape: y.Shape}, k}
		if err := l.elementwiseLaunches(n.Name, l.cur, pc.Tile, binaryKernel(codegen.Div, typ), yg, yRefs[i], y.Shape, ops); err != nil {
			return err
		}
	}
	return nil
}

// variadic lowers Sum, Max and Min of three or more inputs as a chain of
// binary kernels into the output: y = in0 op in1; y = y op in2; ...
func (l *lowerer) variadic(st *plan.Step, n *graph.Node, ins []*layout.Tensor, y *layout.Tensor, op codegen.BinaryOp, typ codegen.ElemType, imm []operand) error {
	if len(ins) < 2 {
		return l.notLowered(n, "a %s of %d inputs", n.Op, len(ins))
	}
	if err := l.elementwise(st, n, ins[:2], y, binaryKernel(op, typ), imm[:2]); err != nil {
		return err
	}
	yRefs := l.refs[y.ID]
	s := l.cur
	for k := 2; k < len(ins); k++ {
		t := ins[k]
		var refs []prog.Ref
		if t != nil {
			var err error
			if refs, err = l.read(t); err != nil {
				return err
			}
		}
		for i, pc := range y.Pieces {
			yg := y.Geometry(i)
			ops := []operand{{geo: yg, ref: yRefs[i], shape: y.Shape}, imm[k]}
			if t != nil {
				want := layout.Project(pc.Box, t.Shape, y.Shape)
				j := pieceOn(t, pc.Tile, want)
				if j < 0 {
					return l.stepErr("input tensor %d (%q) has no piece %s on tile %d", t.ID, t.Name, want, pc.Tile)
				}
				ops[1] = operand{geo: t.Geometry(j), ref: refs[j], shape: t.Shape}
			}
			if err := l.elementwiseLaunches(n.Name, s, pc.Tile, binaryKernel(op, typ), yg, yRefs[i], y.Shape, ops); err != nil {
				return err
			}
		}
	}
	return nil
}

// compareOps are the operators whose output is BOOL, as a comparison
// kernel (BOOL words 0.0/1.0) and whether the operands swap (a > b is
// b < a). On BOOL operands (FP32 words 0.0 and 1.0) And is min, Or max
// and Xor not-equal.
var compareOps = map[string]struct {
	op   codegen.BinaryOp
	swap bool
}{
	"Equal": {codegen.Equal, false}, "Less": {codegen.Less, false}, "LessOrEqual": {codegen.LessEq, false},
	"Greater": {codegen.Less, true}, "GreaterOrEqual": {codegen.LessEq, true},
	"And": {codegen.Min, false}, "Or": {codegen.Max, false}, "Xor": {codegen.NotEqual, false},
}

// operandType is the kernel type of a comparison's operands: float and
// BOOL (FP32 words) F32, float16 F16.
func (l *lowerer) operandType(n *graph.Node, v *graph.Value) (codegen.ElemType, error) {
	switch v.DType {
	case onnx.Float, onnx.Bool:
		return codegen.F32, nil
	case onnx.Float16:
		return codegen.F16, nil
	}
	return 0, l.notLowered(n, "input %q of type %s (comparisons read float, float16 and bool)", v.Name, v.DType)
}

// compare lowers a comparison, a logical operator, Not (x == 0) or a
// cast to BOOL (x != 0): exact, Accumulate 0.
func (l *lowerer) compare(st *plan.Step, n *graph.Node) error {
	ins, outs, err := l.ioTensors(st, n)
	if err != nil {
		return err
	}
	if len(n.Inputs) == 0 || n.Inputs[0] == nil {
		return l.stepErr("no input")
	}
	typ, err := l.operandType(n, n.Inputs[0])
	if err != nil {
		return err
	}
	for _, v := range n.Inputs[1:] {
		t2, err := l.operandType(n, v)
		if err != nil {
			return err
		}
		if t2 != typ || (v.DType == onnx.Bool) != (n.Inputs[0].DType == onnx.Bool) {
			return l.stepErr("inputs of types %s and %s", n.Inputs[0].DType, v.DType)
		}
	}
	var op codegen.BinaryOp
	var swap bool
	imm := make([]operand, len(ins))
	switch n.Op {
	case "Not", "Cast":
		// One input, against the immediate 0.
		op = codegen.Equal
		if n.Op == "Cast" {
			op = codegen.NotEqual
		}
		ins = append(ins, nil)
		imm = append(imm, operand{konst: true, value: 0})
	default:
		c := compareOps[n.Op]
		op, swap = c.op, c.swap
		if (op == codegen.Min || op == codegen.Max || op == codegen.NotEqual) && n.Inputs[0].DType != onnx.Bool {
			return l.notLowered(n, "input %q of type %s (logical operators read bool)", n.Inputs[0].Name, n.Inputs[0].DType)
		}
		for k, t := range ins {
			if t == nil {
				if imm[k], err = l.immediate(n, k, typ); err != nil {
					return err
				}
			}
		}
	}
	if len(ins) != 2 {
		return l.stepErr("%d inputs, want 2", len(ins))
	}
	if swap {
		ins[0], ins[1] = ins[1], ins[0]
		imm[0], imm[1] = imm[1], imm[0]
	}
	if ins[0] == nil && ins[1] == nil {
		return l.notLowered(n, "both inputs are immediates")
	}
	if err := l.elementwise(st, n, ins, outs[0], binaryKernel(op, typ), imm); err != nil {
		return err
	}
	l.acc[n.Outputs[0].Index] = 0
	return nil
}

// castKind returns the cast kernel of a conversion.
func castKind(from, to onnx.DataType) (codegen.CastKind, bool) {
	f8, t8 := isFP8(from), isFP8(to)
	switch {
	case from == onnx.Float && to == onnx.Float16:
		return codegen.F32ToF16, true
	case from == onnx.Float16 && to == onnx.Float:
		return codegen.F16ToF32, true
	case from == onnx.Float && t8:
		return codegen.F32ToF8, true
	case f8 && to == onnx.Float:
		return codegen.F8ToF32, true
	case from == onnx.Float16 && t8:
		return codegen.F16ToF8, true
	case (from == onnx.Int32 || from == onnx.Int64) && to == onnx.Float:
		// int64 is held as int32 on the device (DeviceSize).
		return codegen.I32ToF32, true
	}
	return 0, false
}

func (l *lowerer) cast(st *plan.Step, n *graph.Node) error {
	ins, outs, err := l.ioTensors(st, n)
	if err != nil {
		return err
	}
	x, out := n.Inputs[0], n.Outputs[0]
	a := n.Attrs.(*graph.Cast)
	if ins[0] == nil {
		return l.stepErr("input 0 has no tensor")
	}
	if x.DType == a.To || x.DType == onnx.Bool && a.To == onnx.Float {
		// BOOL is held as FP32 0.0 and 1.0: to float it is a copy.
		return l.copyStep(n, ins[0], outs[0])
	}
	if a.To == onnx.Bool {
		return l.compare(st, n)
	}
	if x.DType == onnx.Bool && a.To == onnx.Float16 {
		if err := l.elementwise(st, n, ins, outs[0], castKernel(codegen.Cast{Kind: codegen.F32ToF16}), nil); err != nil {
			return err
		}
		l.acc[out.Index] = 0 // 0 and 1 are FP16 values
		return nil
	}
	kind, ok := castKind(x.DType, a.To)
	if !ok {
		return l.notLowered(n, "a cast from %s to %s (the cast kernels convert float to and from float16 and FP8, float16 to FP8, and int32 or int64 to float)", x.DType, a.To)
	}
	c := codegen.Cast{Kind: kind, Saturate: a.Saturate}
	switch kind {
	case codegen.F32ToF8, codegen.F16ToF8:
		c.Format, _ = graph.FP8Format(a.To)
	case codegen.F8ToF32:
		c.Format, _ = graph.FP8Format(x.DType)
	}
	if err := l.elementwise(st, n, ins, outs[0], castKernel(c), nil); err != nil {
		return err
	}
	acc := l.acc[x.Index]
	switch kind {
	case codegen.F32ToF16:
		acc += F16Rounding
	case codegen.F32ToF8, codegen.F16ToF8:
		acc++ // an FP8 cast must match exactly when it is the whole chain
	case codegen.I32ToF32:
		acc = 1 // exact below 2^24, one rounding above
	}
	l.acc[out.Index] = acc
	return nil
}

// samePanels reports whether two panel tensors hold the same boxes on the
// same tiles (whatever their element types).
func samePanels(a, b *layout.Tensor) bool {
	if a.Kind != b.Kind || a.Transposed != b.Transposed || len(a.Pieces) != len(b.Pieces) {
		return false
	}
	for i, p := range a.Pieces {
		if p.Tile != b.Pieces[i].Tile || !p.Box.Equal(b.Pieces[i].Box) {
			return false
		}
	}
	return true
}
