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
	"Floor": codegen.Floor, "Ceil": codegen.Ceil, "Round": codegen.Round, "Sign": codegen.Sign, "Sin": codegen.Sin, "Cos": codegen.Cos,
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
	// Floor, Ceil, Round and Sign are exact.
	codegen.Floor: 0, codegen.Ceil: 0, codegen.Round: 0, codegen.Sign: 0,
	// sin, cos: one transcendental each.
	codegen.Sin: 2, codegen.Cos: 2,
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

// unaryParams returns the Unary (no operands) of a unary node computing
// in typ, or why it cannot be one.
func unaryParams(n *graph.Node, typ codegen.ElemType) (codegen.Unary, string) {
	op, ok := unaryOps[n.Op]
	if !ok {
		return codegen.Unary{}, fmt.Sprintf("%s is not a unary kernel's operation", n.Op)
	}
	p := codegen.Unary{Op: op, Type: typ}
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
			return codegen.Unary{}, fmt.Sprintf("bounds %g, %g are not of the input's type", a.Min, a.Max)
		}
	}
	return p, ""
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
	p, why := unaryParams(n, typ)
	if why != "" {
		return l.notLowered(n, "%s", why)
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
