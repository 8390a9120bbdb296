package graph

import "ipu.local/libs/onnx"

// Operators built from others, each through the builder (inference and
// folding): Dropout at inference is its input, Reciprocal is 1 / x.

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
	if err := c.b.node(&onnx.Node{Name: c.name, OpType: "Identity", Inputs: c.n.Inputs[:1], Outputs: c.n.Outputs[:1]}); err != nil {
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
	c.done = true
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
	v, err := c.b.freshConst(c.name+"_one", one)
	if err != nil {
		return c.errf("%v", err)
	}
	if err := c.b.node(&onnx.Node{Name: c.name, OpType: "Div", Inputs: []string{v.Name, c.n.Inputs[0]}, Outputs: c.n.Outputs[:1]}); err != nil {
		return err
	}
	c.done = true
	return nil
}
