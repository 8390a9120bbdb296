package lower

import (
	"fmt"
	"slices"

	"ipu.local/libs/codegen"
	"ipu.local/libs/graph"
	"ipu.local/libs/layout"
	"ipu.local/libs/onnx"
	"ipu.local/libs/prog"
)

// A product's output bias: the Add of a constant row vector that is the
// only reader of a MatMul's FP16 result (PyTorch's Linear over a batch
// of rows: MatMul, then Add of the bias). The product step writes the
// Add's output itself: its result rounded to FP16, then the bias added
// in FP16 (f16v4add, one rounding), the two roundings of the MatMul and
// the Add. With a k split the sum of the parts adds it
// (codegen.SumParts.Bias), else a Binary after the result's cast. The
// Add has no step of its own (the planner folds it).

// OutputBias returns the Add that adds a constant row vector to a
// MatMul's FP16 result, when it is that result's only reader and the
// result is no graph output; nil otherwise. The vector is FP16, of the
// result's last dimension (or one element), broadcast over every other
// axis; the Add's output has the result's shape.
func OutputBias(g *graph.Graph, n *graph.Node) *graph.Node {
	reader := foldableReader(g, n, "Add")
	if reader == nil || biasVector(reader, n.Outputs[0]) == nil {
		return nil
	}
	return reader
}

// foldableReader returns the two-input node of kind op that is the only
// reader of a MatMul's FP16 result, when the result is no graph output,
// no If may read it and the reader's FP16 output has the result's
// shape; nil otherwise (OutputBias, OutputScale).
func foldableReader(g *graph.Graph, n *graph.Node, op string) *graph.Node {
	out := n.Outputs[0]
	if n.Op != "MatMul" || out.DType != onnx.Float16 {
		return nil
	}
	for _, m := range g.Nodes {
		if _, ok := m.Attrs.(*graph.If); ok {
			return nil // a branch may read it
		}
	}
	reader := onlyReader(g, out)
	if reader == nil || reader.Op != op || len(reader.Inputs) != 2 {
		return nil
	}
	y := reader.Outputs[0]
	if y.DType != onnx.Float16 || !slices.Equal(y.Shape, out.Shape) {
		return nil
	}
	return reader
}

// onlyReader returns the one node of g reading v in one input slot, when
// v is no graph output; nil otherwise.
func onlyReader(g *graph.Graph, v *graph.Value) *graph.Node {
	if slices.Contains(g.Outputs, v) {
		return nil
	}
	var reader *graph.Node
	for _, m := range g.Nodes {
		for _, in := range m.Inputs {
			if in == v {
				if reader != nil {
					return nil
				}
				reader = m
			}
		}
	}
	return reader
}

// biasVector returns the Add's constant operand (the one that is not
// x) when it is an FP16 row vector for x's rows: nil otherwise.
func biasVector(add *graph.Node, x *graph.Value) *graph.Value {
	v := add.Inputs[0]
	if v == x {
		v = add.Inputs[1]
	} else if add.Inputs[1] != x {
		return nil
	}
	if v == nil || v == x || v.Const == nil || v.DType != onnx.Float16 || len(v.Shape) > len(x.Shape) {
		return nil
	}
	r := len(v.Shape)
	for i, d := range v.Shape {
		if i < r-1 && d != 1 {
			return nil
		}
	}
	n := int64(1)
	if r > 0 {
		n = v.Shape[r-1]
	}
	if n != 1 && n != x.Shape[len(x.Shape)-1] || len(v.Const.Raw) != 2*int(n) {
		return nil
	}
	return v
}

// biasBlock is the bias of one result part: rows x pitch FP16 elements,
// each row the vector's columns [c0, c0+width) then zeros.
type biasBlock struct {
	tile                int
	rows, pitch, c0, nc int
}

// biasBuffer makes the constant buffer of the blocks' biases and
// returns each block's place. A tile holds each distinct block once
// (8-byte aligned, one after the other): the batch indices of a tile's
// part share its columns, so they share one block. Tiles whose blocks
// are the same share one copy of the bytes.
func (l *lowerer) biasBuffer(name string, v *graph.Value, blocks []biasBlock) []prog.Ref {
	var tiles []int
	size := map[int]int{}
	refs := make([]prog.Ref, len(blocks))
	layouts := map[int][]biasBlock{} // each tile's distinct blocks, their tile cleared: its bytes
	at := map[biasBlock]int{}        // a block's offset on its tile
	for i, b := range blocks {
		off, ok := at[b]
		if !ok {
			tiles = append(tiles, b.tile)
			off = size[b.tile]
			at[b] = off
			size[b.tile] += (2*b.rows*b.pitch + 7) &^ 7
			c := b
			c.tile = 0
			layouts[b.tile] = append(layouts[b.tile], c)
		}
		refs[i].Off = uint32(off)
	}
	most := 0
	for _, s := range size {
		most = max(most, s)
	}
	buf := l.out.NewBuffer(name, prog.TileSet(tiles), most, 16, prog.AnyRegion)
	buf.Permanent = true
	for i := range refs {
		refs[i].Buf = buf
	}
	if l.opt.NoData {
		return refs
	}
	buf.Data = map[int][]byte{}
	made := map[string][]byte{}
	raw := v.Const.Raw
	for t, bs := range layouts {
		key := fmt.Sprint(bs)
		if d, ok := made[key]; ok {
			buf.Data[t] = d
			continue
		}
		d := make([]byte, most)
		off := 0
		for _, b := range bs {
			for r := 0; r < b.rows; r++ {
				for c := 0; c < b.nc; c++ {
					j := 0
					if len(raw) > 2 {
						j = b.c0 + c
					}
					copy(d[off+2*(r*b.pitch+c):], raw[2*j:2*j+2])
				}
			}
			off += (2*b.rows*b.pitch + 7) &^ 7
		}
		made[key] = d
		buf.Data[t] = d
	}
	return refs
}

// addBiasF16 adds the bias block at bias to the FP16 part at y (rows of
// pitch np) in place: the Binary of the Add the product folds.
func addBiasF16(what string, s *prog.Superstep, tile int, y, bias prog.Ref, rows, np int) {
	p := &codegen.Binary{Op: codegen.Add, Type: codegen.F16, N: rows * np, Workers: codegen.Slots}
	s.Work[tile] = append(s.Work[tile], &prog.Kernel{What: what, Params: p, Fixes: []prog.Fix{
		{Field: &p.A.Addr, Ref: y}, {Field: &p.B.Addr, Ref: bias}, {Field: &p.Y, Ref: y, Write: true}}})
}

// fuseBias makes the sum k, which writes the FP16 result, add the bias
// block at bias too.
func fuseBias(k *prog.Kernel, bias prog.Ref) {
	p := k.Params.(*codegen.SumParts)
	k.Fixes = append(k.Fixes, prog.Fix{Field: &p.Bias, Ref: bias})
	k.ClearCost()
}

// biasCols is the columns a result part's box covers (its last axis):
// the vector's elements it adds.
func biasCols(box layout.Box) (c0, n int) {
	r := box[len(box)-1]
	return r.Lo, r.Hi - r.Lo
}
