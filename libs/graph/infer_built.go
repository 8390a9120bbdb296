package graph

import (
	"fmt"
	"math"

	"ipu.local/libs/onnx"
)

// Operators built from others (built.go): Dropout at inference is its
// input, Reciprocal is 1 / x, IsNaN and IsInf are comparisons.

// inferDropout builds an inference Dropout as Identity, and its optional
// mask output as a constant of trues. Training is refused: before opset
// 7 a Dropout without is_test = 1, from opset 12 a training_mode input
// that is not the constant false.
func inferDropout(c *nodeCtx) error {
	if err := c.arity(1, 3); err != nil {
		return err
	}
	x, err := c.input(0)
	if err != nil {
		return err
	}
	if c.b.opset < 7 {
		isTest, err := c.attrInt("is_test", 0)
		if err != nil {
			return err
		}
		if isTest != 1 {
			return c.errf("is_test %d: a training Dropout is not supported (inference needs is_test 1)", isTest)
		}
	}
	if c.has(2) {
		t, err := c.constInput(2, "training_mode")
		if err != nil {
			return err
		}
		v, err := t.Bools()
		if err != nil || len(v) != 1 {
			return c.inErrf(2, "training_mode %q: %v%s, want a bool scalar", t.Name, t.DType, ShapeString(t.Dims))
		}
		if v[0] {
			return c.inErrf(2, "training_mode is true: a training Dropout is not supported")
		}
	}
	if err := c.built("inference Dropout as Identity").last("Identity", c.n.Inputs[:1]); err != nil {
		return err
	}
	if len(c.n.Outputs) > 1 && c.n.Outputs[1] != "" {
		trues := make([]bool, NumElements(x.Shape))
		for i := range trues {
			trues[i] = true
		}
		if err := c.constOutput(1, onnx.NewBool("", x.Shape, trues)); err != nil {
			return err
		}
	}
	return nil
}

// inferReciprocal builds Reciprocal as Div(1, x), one rounding (the
// device's division).
func inferReciprocal(c *nodeCtx) error {
	if err := c.arity(1, 1); err != nil {
		return err
	}
	x, err := c.arith(0)
	if err != nil {
		return err
	}
	one := onnx.NewFloat32("", []int64{}, []float32{1})
	if x.DType == onnx.Float16 {
		one = &onnx.Tensor{DType: onnx.Float16, Dims: []int64{}, Raw: []byte{0x00, 0x3C}}
	}
	st := c.built("Reciprocal as Div(1, x)")
	v, err := st.constant("one", one)
	if err != nil {
		return err
	}
	return st.last("Div", []string{v, c.n.Inputs[0]})
}

// inferIsNaN builds IsNaN as Not(Equal(x, x)): only a NaN differs from
// itself.
func inferIsNaN(c *nodeCtx) error {
	if err := c.arity(1, 1); err != nil {
		return err
	}
	if _, err := c.arith(0); err != nil {
		return err
	}
	st := c.built("IsNaN as Not(Equal(x, x))")
	same, err := st.node("Equal", "same", []string{c.n.Inputs[0], c.n.Inputs[0]}, "")
	if err != nil {
		return err
	}
	return st.last("Not", []string{same})
}

// inferIsInf builds IsInf as Equal against +Inf (detect_positive),
// -Inf (detect_negative) or, both detected (the default), +Inf against
// Abs(x); neither detected is all false.
func inferIsInf(c *nodeCtx) error {
	if err := c.arity(1, 1); err != nil {
		return err
	}
	x, err := c.arith(0)
	if err != nil {
		return err
	}
	pos, err := c.attrBool("detect_positive", true)
	if err != nil {
		return err
	}
	neg, err := c.attrBool("detect_negative", true)
	if err != nil {
		return err
	}
	if !pos && !neg {
		return c.constOutput(0, onnx.NewBool("", x.Shape, make([]bool, NumElements(x.Shape))))
	}
	inf := math.Inf(1)
	if !pos {
		inf = math.Inf(-1)
	}
	raw, err := floatFill(x.DType, inf)
	if err != nil {
		return c.errf("%v", err)
	}
	desc := fmt.Sprintf("Equal(x, %v)", inf)
	if pos && neg {
		desc = "Equal(Abs(x), +Inf)"
	}
	st := c.built("IsInf as %s", desc)
	v, err := st.constant("inf", &onnx.Tensor{DType: x.DType, Dims: []int64{}, Raw: raw})
	if err != nil {
		return err
	}
	src := c.n.Inputs[0]
	if pos && neg {
		if src, err = st.node("Abs", "abs", []string{src}, ""); err != nil {
			return err
		}
	}
	return st.last("Equal", []string{src, v})
}

// inferAbsNeg is Abs and Neg: of floats the unary kernels; of int32 and
// int64 built as Sub(0, x), Abs as Where(Less(x, 0), Sub(0, x), x) (an
// int32 -2^31 overflows the device's subtraction, which faults).
func inferAbsNeg(c *nodeCtx) error {
	if err := c.arity(1, 1); err != nil {
		return err
	}
	x, err := c.input(0)
	if err != nil {
		return err
	}
	if !isInt(x.DType) {
		return inferUnary(c)
	}
	op := c.n.OpType
	how := "Sub(0, x)"
	if op == "Abs" {
		how = "Where(Less(x, 0), Sub(0, x), x)"
	}
	st := c.built("%s of %s as %s", op, x.DType, how)
	zero, err := st.constant("zero", intTensor("", x.DType, []int64{}, []int64{0}))
	if err != nil {
		return err
	}
	if op == "Neg" {
		return st.last("Sub", []string{zero, c.n.Inputs[0]})
	}
	neg, err := st.node("Sub", "neg", []string{zero, c.n.Inputs[0]}, "")
	if err != nil {
		return err
	}
	less, err := st.node("Less", "sign", []string{c.n.Inputs[0], zero}, "")
	if err != nil {
		return err
	}
	return st.last("Where", []string{less, neg, c.n.Inputs[0]})
}
