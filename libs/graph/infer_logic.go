package graph

// Building the selection, comparison and logic operators and the
// activations with attributes.

import "math"

func inferWhere(c *nodeCtx) error {
	if err := c.arity(3, 3); err != nil {
		return err
	}
	for i := 0; i < 3; i++ {
		v, err := c.input(i)
		if err != nil {
			return err
		}
		c.node.Inputs = append(c.node.Inputs, v)
	}
	return c.finish()
}

// inferCompare builds Equal, Greater, GreaterOrEqual, Less, LessOrEqual,
// And and Or: numpy broadcasting, or before opset 7 the legacy broadcast
// attribute where it means the same.
func inferCompare(c *nodeCtx) error {
	if err := c.arity(2, 2); err != nil {
		return err
	}
	ok := compareTypes(c.n.OpType)
	for i := 0; i < 2; i++ {
		v, err := c.input(i)
		if err != nil {
			return err
		}
		if !ok(v.DType) {
			return c.inErrf(i, "element type %v of %q is not supported by %s", v.DType, v.Name, c.n.OpType)
		}
		c.node.Inputs = append(c.node.Inputs, v)
	}
	if c.b.opset < 7 {
		if _, err := c.legacyBroadcast(c.node.Inputs[0], c.node.Inputs[1]); err != nil {
			return err
		}
	}
	return c.finish()
}

func inferNot(c *nodeCtx) error {
	if err := c.arity(1, 1); err != nil {
		return err
	}
	x, err := c.input(0)
	if err != nil {
		return err
	}
	c.node.Inputs = []*Value{x}
	return c.finish()
}

// inferActivation builds the activations with attributes: LeakyRelu,
// Elu, Selu and HardSigmoid, with ONNX's defaults.
func inferActivation(c *nodeCtx) error {
	if err := c.arity(1, 1); err != nil {
		return err
	}
	x, err := c.arith(0)
	if err != nil {
		return err
	}
	f := func(name string, def float32) float32 {
		v, e := c.attrFloat(name, def)
		if e == nil && (math.IsNaN(float64(v)) || math.IsInf(float64(v), 0)) {
			e = c.errf("attribute %q is %v, want a finite value", name, v)
		}
		if e != nil && err == nil {
			err = e
		}
		return v
	}
	switch c.n.OpType {
	case "LeakyRelu":
		c.node.Attrs = &LeakyRelu{Alpha: f("alpha", 0.01)}
	case "Elu":
		c.node.Attrs = &Elu{Alpha: f("alpha", 1)}
	case "Selu":
		c.node.Attrs = &Selu{Alpha: f("alpha", 1.67326319217681884765625), Gamma: f("gamma", 1.05070102214813232421875)}
	case "HardSigmoid":
		c.node.Attrs = &HardSigmoid{Alpha: f("alpha", 0.2), Beta: f("beta", 0.5)}
	}
	if err != nil {
		return err
	}
	c.node.Inputs = []*Value{x}
	return c.finish()
}
