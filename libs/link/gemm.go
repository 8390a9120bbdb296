package link

import (
	"encoding/binary"
	"math"

	"ipu.local/formats/obj"
	"ipu.local/libs/codegen"
	"ipu.local/libs/cost"
	"ipu.local/libs/graph"
	"ipu.local/libs/onnx"
)

// gemmEpilogue is what a Gemm adds to its product: Y = Alpha*(A x B) +
// Beta*C. On each output piece: C *= Alpha (when not 1), then C += the
// piece of Beta*C, laid out like the piece (rows of the C block's row
// stride). A constant bias is scaled on the host (RN32(Beta*c), what the
// device's multiply would give); an input bias is fetched by the host
// superstep, row by row when it broadcasts over the rows, and scaled on
// the device when Beta is not 1.
type gemmEpilogue struct {
	alpha, beta float32
	bias        *graph.Value // nil: none (or Beta 0)
	node        *graph.Node
	m, n        int
	buf         uint32 // the bias buffer on the product's tiles
	tiles       []int
	// nodeBias is the address of the current piece's bias when another
	// node computes it (set by the caller per piece).
	nodeBias uint32
}

// epilogueOf reads a product node's Gemm attributes.
func (l *linker) epilogueOf(n *graph.Node, pr *cost.Product) (*gemmEpilogue, error) {
	ep := &gemmEpilogue{alpha: 1, beta: 1, node: n, m: pr.M, n: pr.N}
	g, ok := n.Attrs.(*graph.Gemm)
	if !ok {
		return ep, nil
	}
	ep.alpha, ep.beta = g.Alpha, g.Beta
	if len(n.Inputs) > 2 && n.Inputs[2] != nil && g.Beta != 0 {
		c := n.Inputs[2]
		if c.DType != onnx.Float {
			return nil, notLowered(n, "bias C of type %s (FP32 only)", c.DType)
		}
		if c.Producer != nil {
			if graph.NumElements(c.Shape) != int64(pr.M)*int64(pr.N) {
				return nil, notLowered(n, "bias C of shape %s from node %q broadcasts (a computed bias must be [M,N])", graph.ShapeString(c.Shape), c.Producer.Name)
			}
		} else if c.Const == nil {
			switch {
			case len(c.Shape) == 2 && c.Shape[0] == int64(pr.M) && c.Shape[1] == int64(pr.N):
			case len(c.Shape) == 1 && c.Shape[0] == int64(pr.N), len(c.Shape) == 2 && c.Shape[0] == 1 && c.Shape[1] == int64(pr.N):
			default:
				return nil, notLowered(n, "input bias C of shape %s (an input bias must be [N], [1,N] or [M,N])", graph.ShapeString(c.Shape))
			}
		}
		ep.bias = c
	}
	return ep, nil
}

// biasAt is the bias element (r, c) of the [M,N] result, numpy
// broadcasting.
func biasAt(v *graph.Value, vals []float64, m, n, r, c int) float64 {
	switch len(v.Shape) {
	case 0:
		return vals[0]
	case 1:
		if v.Shape[0] == 1 {
			return vals[0]
		}
		return vals[c]
	}
	rr, cc := r, c
	if v.Shape[0] == 1 {
		rr = 0
	}
	if v.Shape[1] == 1 {
		cc = 0
	}
	return vals[rr*int(v.Shape[1])+cc]
}

// epilogue adds the Gemm's scaling and bias to the output piece rows
// [r0, r1) x cols [c0, c1) at src (row stride w) on tile t.
func (l *linker) epilogue(ep *gemmEpilogue, s *superstep, t int, src, cBase uint32, r0, r1, c0, c1, w int) error {
	nm := ep.node.Name
	elems := (r1 - r0) * w
	if ep.alpha != 1 {
		s.work[t] = append(s.work[t], &kernel{what: nm + ".alpha", bin: &codegen.Binary{Op: codegen.Mul, N: elems,
			A: codegen.Operand{Addr: src}, B: codegen.Operand{Const: true, Value: ep.alpha}, Y: src, Workers: codegen.Slots}})
	}
	if ep.bias == nil {
		return nil
	}
	if ep.bias.Producer != nil {
		// Computed by a node, brought to this piece at nodeBias: rows of
		// stride w, the last one only c1-c0 long.
		elems := (r1-r0-1)*w + c1 - c0
		b := ep.nodeBias
		if ep.beta != 1 {
			if err := l.biasBuffer(ep, t, cBase); err != nil {
				return err
			}
			scaled := ep.buf + (src - cBase)
			s.work[t] = append(s.work[t], &kernel{what: nm + ".beta", bin: &codegen.Binary{Op: codegen.Mul, N: elems,
				A: codegen.Operand{Addr: b}, B: codegen.Operand{Const: true, Value: ep.beta}, Y: scaled, Workers: codegen.Slots}})
			b = scaled
		}
		s.work[t] = append(s.work[t], &kernel{what: nm + ".bias", bin: &codegen.Binary{Op: codegen.Add, N: elems,
			A: codegen.Operand{Addr: src}, B: codegen.Operand{Addr: b}, Y: src, Workers: codegen.Slots}})
		return nil
	}
	// The bias buffer holds the piece's bias at the piece's offset in
	// the C block: allocate it once, at the size of the C buffer.
	if err := l.biasBuffer(ep, t, cBase); err != nil {
		return err
	}
	dst := ep.buf + (src - cBase)
	v := ep.bias
	if v.Const != nil {
		vals, err := graph.DecodeFloats(v.Const)
		if err != nil {
			return err
		}
		data := make([]byte, elems*4)
		for r := r0; r < r1; r++ {
			for c := c0; c < c1; c++ {
				x := float32(biasAt(v, vals, ep.m, ep.n, r, c))
				if ep.beta != 1 {
					x = ep.beta * x
				}
				binary.LittleEndian.PutUint32(data[4*((r-r0)*w+c-c0):], math.Float32bits(x))
			}
		}
		l.setDataAt(t, dst, data)
	} else {
		in := &l.inputs[l.inIndex[v]]
		if in.Blocks == nil {
			// One row-major copy of the bias in its page; tiles fetch
			// their columns of each row.
			bytes := uint32(v.NumElements() * 4)
			off, err := l.pageAlloc(in.Page, bytes)
			if err != nil {
				return err
			}
			rows, cols := 1, ep.n
			if len(v.Shape) == 2 {
				rows = int(v.Shape[0])
			}
			in.Blocks = append(in.Blocks, blockRowMajor(off, rows, cols))
		}
		off := in.Blocks[0].Offset
		for r := r0; r < r1; r++ {
			row := r
			if len(v.Shape) < 2 || v.Shape[0] == 1 {
				row = 0
			}
			l.steps[0].host[t] = append(l.steps[0].host[t], hostOp{in: true, page: in.Page,
				off: off + uint32(4*(row*ep.n+c0)), addr: dst + uint32(4*(r-r0)*w), bytes: uint32(4 * (c1 - c0))})
		}
		if ep.beta != 1 {
			s.work[t] = append(s.work[t], &kernel{what: nm + ".beta", bin: &codegen.Binary{Op: codegen.Mul, N: elems,
				A: codegen.Operand{Addr: dst}, B: codegen.Operand{Const: true, Value: ep.beta}, Y: dst, Workers: codegen.Slots}})
		}
	}
	s.work[t] = append(s.work[t], &kernel{what: nm + ".bias", bin: &codegen.Binary{Op: codegen.Add, N: elems,
		A: codegen.Operand{Addr: src}, B: codegen.Operand{Addr: dst}, Y: src, Workers: codegen.Slots}})
	return nil
}

func blockRowMajor(off uint32, rows, cols int) obj.Block {
	return obj.Block{Offset: off, R1: uint32(rows), C1: uint32(cols), Rows: uint32(rows), Cols: uint32(cols), Order: obj.RowMajor}
}

// biasBuffer allocates, once, a buffer the size of the C buffer at cBase
// on the product's tiles: a piece's bias sits at its piece's offset.
func (l *linker) biasBuffer(ep *gemmEpilogue, t int, cBase uint32) error {
	if ep.buf != 0 {
		return nil
	}
	var size uint32
	for _, b := range l.tile(t).bufs {
		if b.addr == cBase {
			size = b.size
		}
	}
	var err error
	ep.buf, err = l.allocate(ep.tiles, ep.node.Name+".bias", size, 8, true)
	if err != nil {
		return l.memErr(ep.node, err)
	}
	return nil
}
