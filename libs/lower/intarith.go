package lower

// Int32 arithmetic (ONNX int32 and int64 tensors; int64 is held as int32
// on the device): Add, Sub and Mul as codegen.IntBinary, one launch per row of
// each elementwise launch (the kernel is one-dimensional), a result
// outside int32 faulting the device; the comparisons of integers and the
// casts from integers to BOOL (x != 0) and from BOOL to integers as its
// comparison ops, to BOOL words and from them; the casts from float to
// integers as its IntTrunc.

import (
	"ipu.local/formats/plan"
	"ipu.local/libs/codegen"
	"ipu.local/libs/graph"
	"ipu.local/libs/layout"
	"ipu.local/libs/onnx"
	"ipu.local/libs/prog"
)

var intOps = map[string]codegen.IntOp{"Add": codegen.IntAdd, "Sub": codegen.IntSub, "Mul": codegen.IntMul,
	"Max": codegen.IntMax, "Min": codegen.IntMin}

// isInt reports whether d is an integer type the device computes in.
func isInt(d onnx.DataType) bool { return d == onnx.Int32 || d == onnx.Int64 }

func (l *lowerer) intBinary(st *plan.Step, n *graph.Node) error {
	op, ok := intOps[n.Op]
	if !ok || len(n.Inputs) != 2 {
		return l.notLowered(n, "output %q of type %s: the device's integer kernels are Add, Sub, Mul, Max and Min of two inputs", n.Outputs[0].Name, n.Outputs[0].DType)
	}
	return l.intElementwise(st, n, op, false)
}

// intCompareOps are the comparisons of integers, as IntBinary ops, and
// whether the operands swap (a > b is b < a).
var intCompareOps = map[string]struct {
	op   codegen.IntOp
	swap bool
}{
	"Equal": {codegen.IntEq, false}, "Less": {codegen.IntLess, false}, "LessOrEqual": {codegen.IntLessEq, false},
	"Greater": {codegen.IntLess, true}, "GreaterOrEqual": {codegen.IntLessEq, true},
}

// intCompare lowers a comparison of two integer inputs, or a cast of an
// integer to BOOL (x != 0): exact, Accumulate 0.
func (l *lowerer) intCompare(st *plan.Step, n *graph.Node) error {
	if n.Op == "Cast" {
		return l.intElementwise(st, n, codegen.IntNe, false)
	}
	c, ok := intCompareOps[n.Op]
	if !ok {
		return l.notLowered(n, "input %q of type %s (%s reads bool)", n.Inputs[0].Name, n.Inputs[0].DType, n.Op)
	}
	for _, v := range n.Inputs[1:] {
		if !isInt(v.DType) {
			return l.stepErr("inputs of types %s and %s", n.Inputs[0].DType, v.DType)
		}
	}
	return l.intElementwise(st, n, c.op, c.swap)
}

// intElementwise lowers n as IntBinary op over its inputs (swapped when
// swap), a node of one input (a cast) taking 0 as its second.
func (l *lowerer) intElementwise(st *plan.Step, n *graph.Node, op codegen.IntOp, swap bool) error {
	ins, outs, err := l.ioTensors(st, n)
	if err != nil {
		return err
	}
	imm := make([]operand, 2)
	if len(ins) == 1 {
		ins = append(ins, nil)
		imm[1] = operand{konst: true, value: 0}
	}
	if len(ins) != 2 {
		return l.stepErr("%d inputs, want 2", len(ins))
	}
	var refs [2][]prog.Ref
	for k, t := range ins {
		if t == nil {
			if k < len(n.Inputs) {
				if imm[k], err = l.wordImmediate(n, k); err != nil {
					return err
				}
			}
			continue
		}
		if t.Kind != layout.RowMajor {
			return l.stepErr("input tensor %d (%q) is %s: integer arithmetic works on row-major layouts", t.ID, t.Name, t.Kind)
		}
		if refs[k], err = l.read(t); err != nil {
			return err
		}
	}
	if swap {
		ins[0], ins[1] = ins[1], ins[0]
		imm[0], imm[1] = imm[1], imm[0]
		refs[0], refs[1] = refs[1], refs[0]
	}
	if ins[0] == nil && ins[1] == nil {
		return l.notLowered(n, "both inputs are immediates")
	}
	y := outs[0]
	yRefs, err := l.write(y)
	if err != nil {
		return err
	}
	s := l.compute(n.Name)
	for i, pc := range y.Pieces {
		yg := y.Geometry(i)
		ops := []operand{imm[0], imm[1]}
		for k, t := range ins {
			if t == nil {
				continue
			}
			want := layout.Project(pc.Box, t.Shape, y.Shape)
			j := pieceOn(t, pc.Tile, want)
			if j < 0 {
				return l.stepErr("input tensor %d (%q) has no piece %s on tile %d, which output piece %s of tensor %d needs", t.ID, t.Name, want, pc.Tile, pc.Box, y.ID)
			}
			ops[k] = operand{geo: t.Geometry(j), ref: refs[k][j], shape: t.Shape}
		}
		ls, err := launches(yg, yRefs[i], y.Shape, ops)
		if err != nil {
			return l.stepErr("%s on tile %d: %v", n.Name, pc.Tile, err)
		}
		for _, ln := range ls {
			for r := 0; r < max(ln.R, 1); r++ {
				k, err := l.intKernel(n.Name, op, ln, r)
				if err != nil {
					return err
				}
				s.Work[pc.Tile] = append(s.Work[pc.Tile], k)
			}
		}
	}
	return nil
}

// intKernel is row r of launch ln as an IntBinary.
func (l *lowerer) intKernel(what string, op codegen.IntOp, ln launch, r int) (*prog.Kernel, error) {
	p := &codegen.IntBinary{Op: op, N: ln.N, Workers: codegen.Slots}
	k := &prog.Kernel{What: what, Params: p}
	row := func(a array) prog.Ref { return a.ref.Add(4 * r * a.stride) }
	k.Fixes = append(k.Fixes, prog.Fix{Field: &p.Y, Ref: row(ln.arrays[0]), Write: true})
	for j, o := range []*codegen.Operand{&p.A, &p.B} {
		a := ln.arrays[1+j]
		switch {
		case a.konst:
			*o = codegen.Operand{Const: true, Value: a.value}
			continue
		case a.perRow:
			*o = codegen.Operand{Scalar: true}
		}
		k.Fixes = append(k.Fixes, prog.Fix{Field: &o.Addr, Ref: row(a)})
	}
	if _, err := k.Cost(); err != nil {
		return nil, l.notLowered(nil, "%s: %v", what, err)
	}
	return k, nil
}
