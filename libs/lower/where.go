package lower

// Where(c, a, b): per output piece, two Select launches into the output
// (codegen.Select): a where the condition is true, then b where it is
// false, so every element is written once by the one it takes. The
// condition is BOOL words; the values are any 4-byte device type (float,
// BOOL words, int32 and int64 held as int32) or float16 (codegen.Select
// with Type F16), moved bit for bit.
// Broadcasting is the elementwise operators' (numpy), and a one-element
// constant operand is an immediate.

import (
	"encoding/binary"
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

func selectKernel(whenTrue bool, typ codegen.ElemType) kernelMaker {
	return func(what string, l launch) *prog.Kernel {
		p := &codegen.Select{WhenTrue: whenTrue, Type: typ, N: l.N, R: l.R, YStride: l.arrays[0].stride, Workers: codegen.Slots}
		k := &prog.Kernel{What: what, Params: p}
		k.Fixes = append(k.Fixes, prog.Fix{Field: &p.Y, Ref: l.arrays[0].ref, Write: true})
		var rc, rv *prog.Ref
		p.C, rc = l.arrays[1].operand()
		p.V, rv = l.arrays[2].operand()
		if l.R <= 1 {
			p.R, p.YStride = 0, 0
			for _, o := range []*codegen.Operand{&p.C, &p.V} {
				if o.PerRow {
					o.PerRow, o.Scalar = false, true
				}
				o.Stride = 0
			}
		}
		if rc != nil {
			k.Fixes = append(k.Fixes, prog.Fix{Field: &p.C.Addr, Ref: *rc})
		}
		if rv != nil {
			k.Fixes = append(k.Fixes, prog.Fix{Field: &p.V.Addr, Ref: *rv})
		}
		return k
	}
}

func (l *lowerer) where(st *plan.Step, n *graph.Node) error {
	ins, outs, err := l.ioTensors(st, n)
	if err != nil {
		return err
	}
	y := outs[0]
	typ := codegen.F32
	if d := n.Outputs[0].DType; d == onnx.Float16 {
		typ = codegen.F16
	} else if DeviceSize(d) != 4 {
		return l.notLowered(n, "output %q of type %s: the select kernel moves 4-byte elements and float16", n.Outputs[0].Name, d)
	}
	if d := n.Inputs[0].DType; d != onnx.Bool {
		return l.stepErr("condition %q is %s, not bool", n.Inputs[0].Name, d)
	}
	imm := make([]operand, 3)
	for k, t := range ins {
		if t == nil {
			if imm[k], err = l.selectImmediate(n, k); err != nil {
				return err
			}
		}
	}
	if err := l.elementwise(st, n, []*layout.Tensor{ins[0], ins[1]}, y, selectKernel(true, typ), imm[:2]); err != nil {
		return err
	}
	// The second launch of each piece, in the same superstep.
	yRefs := l.refs[y.ID]
	s := l.cur
	var cRefs, bRefs []prog.Ref
	if ins[0] != nil {
		if cRefs, err = l.read(ins[0]); err != nil {
			return err
		}
	}
	if ins[2] != nil {
		if bRefs, err = l.read(ins[2]); err != nil {
			return err
		}
	}
	for i, pc := range y.Pieces {
		yg := y.Geometry(i)
		ops := []operand{imm[0], imm[2]}
		for k, in := range []struct {
			t    *layout.Tensor
			refs []prog.Ref
		}{{ins[0], cRefs}, {ins[2], bRefs}} {
			if in.t == nil {
				continue
			}
			want := layout.Project(pc.Box, in.t.Shape, y.Shape)
			j := pieceOn(in.t, pc.Tile, want)
			if j < 0 {
				return l.stepErr("input tensor %d (%q) has no piece %s on tile %d", in.t.ID, in.t.Name, want, pc.Tile)
			}
			ops[k] = operand{geo: in.t.Geometry(j), ref: in.refs[j], shape: in.t.Shape}
		}
		if err := l.elementwiseLaunches(n.Name, s, pc.Tile, selectKernel(false, typ), yg, yRefs[i], y.Shape, ops); err != nil {
			return err
		}
	}
	// Selection is exact: the output carries the longer accumulation of
	// the values it takes.
	l.acc[n.Outputs[0].Index] = max(l.acc[n.Inputs[1].Index], l.acc[n.Inputs[2].Index])
	return nil
}

// selectImmediate returns a one-element constant input as an immediate:
// a float16 value as its float (exact), else wordImmediate.
func (l *lowerer) selectImmediate(n *graph.Node, k int) (operand, error) {
	v := n.Inputs[k]
	if v != nil && v.Const != nil && v.NumElements() == 1 && v.DType == onnx.Float16 {
		raw := v.Const.Raw
		if len(raw) != 2 {
			return operand{}, l.stepErr("constant %q: %d bytes for one element", v.Name, len(raw))
		}
		return operand{konst: true, value: math.Float32frombits(numfmt.F16ToF32(binary.LittleEndian.Uint16(raw)))}, nil
	}
	return l.wordImmediate(n, k)
}

// wordImmediate returns a one-element constant input as an immediate of
// its device word: float bits, BOOL as 0.0 or 1.0, int32, int64 narrowed.
func (l *lowerer) wordImmediate(n *graph.Node, k int) (operand, error) {
	v := n.Inputs[k]
	if v == nil || v.Const == nil || v.NumElements() != 1 {
		return operand{}, l.stepErr("input %d has no tensor and is not a one-element constant", k)
	}
	raw := v.Const.Raw
	switch v.DType {
	case onnx.Bool:
		raw = BoolWords(raw)
	case onnx.Int64:
		var err error
		if raw, err = narrowInt64(fmt.Sprintf("constant %q", v.Name), raw); err != nil {
			return operand{}, l.stepErr("%v", err)
		}
	case onnx.Float, onnx.Int32:
	default:
		return operand{}, l.notLowered(n, "constant %q of type %s as a select operand", v.Name, v.DType)
	}
	if len(raw) != 4 {
		return operand{}, l.stepErr("constant %q: %d bytes for one element", v.Name, len(raw))
	}
	return operand{konst: true, value: math.Float32frombits(binary.LittleEndian.Uint32(raw))}, nil
}
