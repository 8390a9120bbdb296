package graph

import "ipu.local/libs/onnx"

// inferDepthToSpace builds DepthToSpace and SpaceToDepth through the
// builder as the ONNX definition writes them: a Reshape that splits the
// block out of the channels (or the spatial axes), a Transpose and a
// Reshape. DepthToSpace in DCR mode (the default) views x [N, C, H, W]
// as [N, b, b, C/b^2, H, W] and permutes it by [0, 3, 4, 1, 5, 2]; in
// CRD mode as [N, C/b^2, b, b, H, W] by [0, 1, 4, 2, 5, 3]; both end
// [N, C/b^2, H*b, W*b]. SpaceToDepth views x as [N, C, H/b, b, W/b, b],
// permutes it by [0, 3, 5, 1, 2, 4] and ends [N, C*b^2, H/b, W/b].
func inferDepthToSpace(c *nodeCtx) error {
	if err := c.arity(1, 1); err != nil {
		return err
	}
	x, err := c.input(0)
	if err != nil {
		return err
	}
	if len(x.Shape) != 4 {
		return c.inErrf(0, "shape %s: want [N, C, H, W]", ShapeString(x.Shape))
	}
	b, err := c.attrInt("blocksize", 0)
	if err != nil {
		return err
	}
	if b < 1 || b > 1<<15 {
		return c.errf("blocksize %d out of range [1, %d]", b, 1<<15)
	}
	n, ch, h, w := x.Shape[0], x.Shape[1], x.Shape[2], x.Shape[3]
	var split, perm, out []int64
	if c.n.OpType == "SpaceToDepth" {
		if h%b != 0 || w%b != 0 {
			return c.inErrf(0, "shape %s: H and W are not multiples of blocksize %d", ShapeString(x.Shape), b)
		}
		split, perm, out = []int64{n, ch, h / b, b, w / b, b}, []int64{0, 3, 5, 1, 2, 4}, []int64{n, ch * b * b, h / b, w / b}
	} else {
		if ch%(b*b) != 0 {
			return c.inErrf(0, "shape %s: C is not a multiple of blocksize %d squared", ShapeString(x.Shape), b)
		}
		mode, err := c.n.AttrString("mode", "DCR")
		if err != nil {
			return c.errf("%v", err)
		}
		switch mode {
		case "DCR":
			split, perm = []int64{n, b, b, ch / (b * b), h, w}, []int64{0, 3, 4, 1, 5, 2}
		case "CRD":
			split, perm = []int64{n, ch / (b * b), b, b, h, w}, []int64{0, 1, 4, 2, 5, 3}
		default:
			return c.errf("mode %q: want DCR or CRD", mode)
		}
		out = []int64{n, ch / (b * b), h * b, w * b}
	}
	st := c.built("%s of blocksize %d as Reshape, Transpose %v and Reshape", c.n.OpType, b, perm)
	sh, err := st.ints("blocks", split...)
	if err != nil {
		return err
	}
	cur, err := st.node("Reshape", "blocks", []string{c.n.Inputs[0], sh}, "")
	if err != nil {
		return err
	}
	if cur, err = st.node("Transpose", "moved", []string{cur}, "", onnx.IntsAttr("perm", perm...)); err != nil {
		return err
	}
	os, err := st.ints("out", out...)
	if err != nil {
		return err
	}
	return st.last("Reshape", []string{cur, os})
}
