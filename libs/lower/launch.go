package lower

// The launches of an elementwise step: an output piece walked as rows,
// its operands (arrays, broadcasts, immediates), and the kernel makers.

import (
	"fmt"

	"ipu.local/libs/codegen"
	"ipu.local/libs/layout"
	"ipu.local/libs/onnx"
	"ipu.local/libs/prog"
)

// operand is one array of an elementwise launch: a piece's storage, or
// an immediate.
type operand struct {
	geo   layout.Geometry
	ref   prog.Ref
	shape []int // the operand value's shape (nil: the output's)
	konst bool
	value float32
}

// array of one launch: base reference, row stride (elements) and whether
// it is read one element per row.
type array struct {
	ref    prog.Ref
	stride int
	perRow bool
	konst  bool
	value  float32
}

// launch is one kernel's geometry: R rows of N elements, the output
// first in arrays.
type launch struct {
	R, N   int
	arrays []array
}

// launches splits an output box into kernel launches over the arrays
// (the output first, then the inputs).
func launches(out layout.Geometry, outRef prog.Ref, outShape []int, ins []operand) ([]launch, error) {
	r := len(out.Box)
	ext := make([]int, r)
	for d := range ext {
		ext[d] = out.Box[d].Len()
	}
	strides, base := arrayStrides(out, outShape, ins)
	// The axes that count (extent above 1), and the last axis, innermost
	// last.
	var axes []int
	for d := 0; d < r-1; d++ {
		if ext[d] > 1 {
			axes = append(axes, d)
		}
	}
	if r > 0 {
		axes = append(axes, r-1)
	} else {
		axes = []int{0}
		ext = []int{1}
		for a := range strides {
			strides[a] = []int{1}
			if a > 0 && ins[a-1].konst {
				strides[a] = []int{0}
			}
		}
	}
	g, err := rowsOf(axes, ext, strides)
	if err != nil {
		return nil, err
	}
	var out2 []launch
	idx := make([]int, len(g.outer))
	for {
		l := launch{R: g.R, N: g.N, arrays: make([]array, len(strides))}
		for a := range strides {
			off := base[a]
			for i, d := range g.outer {
				off += idx[i] * strides[a][d]
			}
			if a == 0 {
				l.arrays[0] = array{ref: outRef.Add(off * out.Size), stride: g.rowStride[0]}
				continue
			}
			in := ins[a-1]
			if in.konst {
				l.arrays[a] = array{konst: true, value: in.value}
				continue
			}
			l.arrays[a] = array{ref: in.ref.Add(off * in.geo.Size), stride: g.rowStride[a], perRow: g.perRow[a]}
		}
		out2 = append(out2, l)
		i := len(idx) - 1
		for i >= 0 {
			idx[i]++
			if idx[i] < ext[g.outer[i]] {
				break
			}
			idx[i] = 0
			i--
		}
		if i < 0 {
			break
		}
	}
	return out2, nil
}

// arrayStrides returns, per array (the output, then the inputs), its
// element strides along the output's axes (0 along a broadcast axis)
// and the offset of its first element.
func arrayStrides(out layout.Geometry, outShape []int, ins []operand) (strides [][]int, base []int) {
	r := len(out.Box)
	strides = make([][]int, 1+len(ins))
	base = make([]int, 1+len(ins))
	strides[0] = append([]int(nil), out.Strides...)
	for k, in := range ins {
		s := make([]int, r)
		if in.shape == nil && !in.konst && len(in.geo.Box) == len(outShape) {
			in.shape = outShape // nil: the output's (a rank-0 value keeps its empty shape)
		}
		if !in.konst {
			off := r - len(in.shape)
			lo := make([]int, len(in.shape))
			for d := range in.shape {
				lo[d] = in.geo.Box[d].Lo
				if in.shape[d] == outShape[off+d] {
					s[off+d] = in.geo.Strides[d]
				}
			}
			base[k+1] = in.geo.Offset(lo)
		}
		strides[k+1] = s
	}
	return strides, base
}

// launchRows is the launches' common shape: R rows of N elements, each
// array's row stride and whether it is read one element per row, and
// the outer axes the launches walk.
type launchRows struct {
	R, N      int
	rowStride []int
	perRow    []bool
	outer     []int
}

// rowsOf merges the axes that count (axes, innermost last, of extents
// ext) into the launches' rows: the innermost, with the outer axes
// merged into it while every array stays contiguous (or constant) along
// it; then the next axis gives the rows, the outer axes merged into it
// while regular; the rest are walked.
func rowsOf(axes, ext []int, strides [][]int) (launchRows, error) {
	na := len(strides)
	inner := axes[len(axes)-1]
	if strides[0][inner] != 1 {
		return launchRows{}, fmt.Errorf("output rows are not contiguous")
	}
	g := launchRows{R: 1, N: ext[inner], rowStride: make([]int, na), perRow: make([]bool, na)}
	for a := 1; a < na; a++ {
		switch strides[a][inner] {
		case 1:
		case 0:
			g.perRow[a] = true
		default:
			return launchRows{}, fmt.Errorf("input %d is not contiguous along the output's rows", a-1)
		}
	}
	k := len(axes) - 2
	for ; k >= 0; k-- {
		d := axes[k]
		ok := true
		for a := 0; a < na && ok; a++ {
			if g.perRow[a] {
				ok = strides[a][d] == 0
			} else {
				ok = strides[a][d] == g.N
			}
		}
		if !ok {
			break
		}
		g.N *= ext[d]
	}
	if k >= 0 {
		d := axes[k]
		g.R = ext[d]
		for a := range g.rowStride {
			g.rowStride[a] = strides[a][d]
		}
		for k--; k >= 0; k-- {
			d := axes[k]
			ok := true
			for a := 0; a < na && ok; a++ {
				ok = strides[a][d] == g.rowStride[a]*g.R
			}
			if !ok {
				break
			}
			g.R *= ext[d]
		}
	}
	g.outer = axes[:k+1]
	return g, nil
}

// kernelMaker builds one launch's kernel.
type kernelMaker func(what string, l launch) *prog.Kernel

func elemTypeOf(d onnx.DataType) codegen.ElemType {
	if d == onnx.Float16 {
		return codegen.F16
	}
	return codegen.F32
}

func (a array) operand() (codegen.Operand, *prog.Ref) {
	switch {
	case a.konst:
		return codegen.Operand{Const: true, Value: a.value}, nil
	case a.perRow:
		r := a.ref
		return codegen.Operand{PerRow: true, Stride: a.stride}, &r
	}
	r := a.ref
	return codegen.Operand{Stride: a.stride}, &r
}

func binaryKernel(op codegen.BinaryOp, typ codegen.ElemType) kernelMaker {
	return func(what string, l launch) *prog.Kernel {
		p := &codegen.Binary{Op: op, N: l.N, R: l.R, Type: typ, YStride: l.arrays[0].stride, Workers: codegen.Slots}
		k := &prog.Kernel{What: what, Params: p}
		k.Fixes = append(k.Fixes, prog.Fix{Field: &p.Y, Ref: l.arrays[0].ref, Write: true})
		var ra, rb *prog.Ref
		p.A, ra = l.arrays[1].operand()
		p.B, rb = l.arrays[2].operand()
		if l.R <= 1 {
			p.R, p.YStride = 0, 0
			for _, o := range []*codegen.Operand{&p.A, &p.B} {
				if o.PerRow {
					o.PerRow, o.Scalar = false, true
				}
				o.Stride = 0
			}
		}
		if ra != nil {
			k.Fixes = append(k.Fixes, prog.Fix{Field: &p.A.Addr, Ref: *ra})
		}
		if rb != nil {
			k.Fixes = append(k.Fixes, prog.Fix{Field: &p.B.Addr, Ref: *rb})
		}
		return k
	}
}

func unaryKernel(base codegen.Unary) kernelMaker {
	return func(what string, l launch) *prog.Kernel {
		p := base
		p.N, p.R, p.YStride, p.XStride, p.Workers = l.N, l.R, l.arrays[0].stride, l.arrays[1].stride, codegen.Slots
		if l.R <= 1 {
			p.R, p.XStride, p.YStride = 0, 0, 0
		}
		k := &prog.Kernel{What: what, Params: &p}
		k.Fixes = []prog.Fix{{Field: &p.X, Ref: l.arrays[1].ref}, {Field: &p.Y, Ref: l.arrays[0].ref, Write: true}}
		return k
	}
}

func castKernel(base codegen.Cast) kernelMaker {
	return func(what string, l launch) *prog.Kernel {
		p := base
		p.N, p.R, p.YStride, p.XStride, p.Workers = l.N, l.R, l.arrays[0].stride, l.arrays[1].stride, codegen.Slots
		if l.R <= 1 {
			p.R, p.XStride, p.YStride = 0, 0, 0
		}
		k := &prog.Kernel{What: what, Params: &p}
		k.Fixes = []prog.Fix{{Field: &p.X, Ref: l.arrays[1].ref}, {Field: &p.Y, Ref: l.arrays[0].ref, Write: true}}
		return k
	}
}

// elementwiseLaunches adds the kernels of one output piece to s.
func (l *lowerer) elementwiseLaunches(what string, s *prog.Superstep, tile int, mk kernelMaker, out layout.Geometry, outRef prog.Ref, outShape []int, ins []operand) error {
	ls, err := launches(out, outRef, outShape, ins)
	if err != nil {
		return l.stepErr("%s on tile %d: %v", what, tile, err)
	}
	// A Select whose condition and value are both one element per row
	// (the kernels take one such operand) runs row by row, both then
	// single values.
	// (The kernel is made to ask only of a launch that could split, and
	// ls copied only once one does.)
	var split []launch
	for i, ln := range ls {
		if ln.R <= 1 || len(ln.arrays) != 3 || !ln.arrays[1].perRow || !ln.arrays[2].perRow {
			if split != nil {
				split = append(split, ln)
			}
			continue
		}
		if _, sel := mk(what, ln).Params.(*codegen.Select); !sel {
			if split != nil {
				split = append(split, ln)
			}
			continue
		}
		if split == nil {
			split = append(make([]launch, 0, len(ls)+ln.R), ls[:i]...)
		}
		for r := 0; r < ln.R; r++ {
			row := launch{R: 1, N: ln.N, arrays: append([]array(nil), ln.arrays...)}
			row.arrays[0].ref = ln.arrays[0].ref.Add(r * ln.arrays[0].stride * out.Size)
			for a := 1; a < 3; a++ {
				row.arrays[a].ref = ln.arrays[a].ref.Add(r * ln.arrays[a].stride * ins[a-1].geo.Size)
			}
			split = append(split, row)
		}
	}
	if split != nil {
		ls = split
	}
	for _, ln := range ls {
		k := mk(what, ln)
		_, walksY := k.Params.(*codegen.Select)
		if len(ln.arrays) == 3 && !ln.arrays[1].isArray() && !ln.arrays[2].isArray() && !walksY {
			// Both operands broadcast: expand the first into the output,
			// then work in place. (A Select walks its output anyway.)
			x, err := l.expand(what, ln, out.Size)
			if err != nil {
				return err
			}
			s.Work[tile] = append(s.Work[tile], x)
			ln.arrays[1] = array{ref: ln.arrays[0].ref, stride: ln.arrays[0].stride}
			k = mk(what, ln)
		}
		if _, err := k.Cost(); err != nil {
			return l.notLowered(nil, "%s on tile %d: %v", what, tile, err)
		}
		s.Work[tile] = append(s.Work[tile], k)
	}
	return nil
}

func (a array) isArray() bool { return !a.konst && !a.perRow }

// expand writes a broadcast operand (one value per row, or one in all)
// over a launch's output rows: a gather whose column stride is 0.
func (l *lowerer) expand(what string, ln launch, size int) (*prog.Kernel, error) {
	a := ln.arrays[1]
	if a.konst {
		return nil, l.notLowered(nil, "%s: both operands of a kernel are immediates", what)
	}
	if size != 4 && size != 2 {
		return nil, l.notLowered(nil, "%s: an expansion of %d-byte elements", what, size)
	}
	g := &codegen.Gather{Size: size, R: max(ln.R, 1), C: ln.N, YStride: max(ln.arrays[0].stride, ln.N), RStride: a.stride, CStride: 0, Workers: codegen.Slots}
	return &prog.Kernel{What: what + ".expand", Params: g, Fixes: []prog.Fix{{Field: &g.X, Ref: a.ref}, {Field: &g.Y, Ref: ln.arrays[0].ref, Write: true}}}, nil
}
