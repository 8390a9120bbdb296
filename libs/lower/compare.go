package lower

// Comparisons, logic on BOOL (FP32 words 0.0 and 1.0) and casts.

import (
	"ipu.local/formats/plan"
	"ipu.local/libs/codegen"
	"ipu.local/libs/graph"
	"ipu.local/libs/layout"
	"ipu.local/libs/onnx"
)

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
	if isInt(n.Inputs[0].DType) {
		return l.intCompare(st, n)
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
	if x.DType == a.To || x.DType == onnx.Bool && a.To == onnx.Float || isInt(x.DType) && isInt(a.To) {
		// BOOL is held as FP32 0.0 and 1.0: to float it is a copy; int64
		// is held as int32: between them too.
		return l.copyStep(n, ins[0], outs[0])
	}
	if x.DType == onnx.Bool && isInt(a.To) {
		// A BOOL word against 0: 0 or 1.
		return l.intElementwise(st, n, codegen.IntNonZero, false)
	}
	if a.To == onnx.Bool {
		return l.compare(st, n)
	}
	if x.DType == onnx.Float && isInt(a.To) {
		// Truncated toward zero, saturating at int32 (IntTrunc).
		return l.intElementwise(st, n, codegen.IntTrunc, false)
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
		return l.notLowered(n, "a cast from %s to %s (the cast kernels convert float to and from float16 and FP8, float16 to FP8, and int32 or int64 to and from float)", x.DType, a.To)
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
