package link

import (
	"fmt"
	"sort"

	"ipu.local/libs/codegen"
	"ipu.local/libs/cost"
	"ipu.local/libs/graph"
	"ipu.local/libs/onnx"
	"ipu.local/libs/sched"
)

// Products of computed operands.
//
// A product operand whose root is computed by an earlier node (a product
// or any other node) lies in that node's regions: row-major FP32
// rectangles of the value, one per tile. A pack superstep converts each
// region on its tile into a source panel of the operand's kind (A: groups
// of 4 rows; B: panels of 16 columns) and AMP type (codegen.Pack, which
// also applies the chain's cast), then the operands exchange moves the
// panels' runs to the blocks, as for a cast before the exchange. The
// part of a region that its own tile needs is packed straight into the
// block, one pack per run (a run is a dense sub-rectangle of the region).
// The region's group axis must start at a multiple of the group width.

// checkFed reports whether an operand computed by an earlier node can be
// fed to a product of type t.
func (l *linker) checkFed(n *graph.Node, o *operand, t codegen.AMPType) error {
	c := o.chain
	cols, regs, size, ok := l.resultOf(c.Root)
	if !ok {
		return notLowered(n, "operand %s: %q is not computed on the tiles before the product", o.name, c.Root.Name)
	}
	if size != 4 || c.Root.DType != onnx.Float {
		return notLowered(n, "operand %s: %q is %s (a computed operand must be FP32)", o.name, c.Root.Name, c.Root.DType)
	}
	if len(c.Root.Shape) != 2 || int64(cols) != c.Root.Shape[1] {
		return notLowered(n, "operand %s: %q is laid out in rows of %d, not of its last axis", o.name, c.Root.Name, cols)
	}
	switch {
	case t == codegen.VecFP32 && !c.HasCast:
	case t == codegen.AMPFP16 && c.HasCast && c.Cast == codegen.F32ToF16:
	case t == codegen.AMPFP8 && c.HasCast && c.Cast == codegen.F32ToF8:
		for _, f := range c.Nodes {
			if ca, ok := f.Attrs.(*graph.Cast); ok && ca.To != onnx.Float {
				o.saturate = ca.Saturate
			}
		}
	default:
		return notLowered(n, "operand %s: %q of type %s as %s", o.name, c.Root.Name, c.Root.DType, t)
	}
	for _, r := range regs {
		if _, err := fedPanel(o, r); err != nil {
			return notLowered(n, "operand %s: %v", o.name, err)
		}
	}
	return nil
}

// fedPanel is the source panel of region r of the root for operand o.
func fedPanel(o *operand, r region) (panel, error) {
	w := cost.RowAlign
	if !o.a {
		w = cost.ColAlign
	}
	// The operand X is the root or its transpose; A groups X's rows, B
	// groups X's columns.
	groupRows := o.a != o.chain.Transpose
	var p panel
	p.a = o.a
	if groupRows {
		p.g0, p.g1, p.k0, p.k1 = r.r0, r.r1, r.c0, r.c1
	} else {
		p.g0, p.g1, p.k0, p.k1 = r.c0, r.c1, r.r0, r.r1
	}
	if p.g0%w != 0 {
		return p, &alignError{r.tile, p.g0, w}
	}
	p.gp, p.kp = pad(p.g1-p.g0, w), p.k1-p.k0
	return p, nil
}

type alignError struct{ tile, at, w int }

func (e *alignError) Error() string {
	return fmt.Sprintf("a region on tile %d starts at %d, not a multiple of %d", e.tile, e.at, e.w)
}

// packOf is the pack of the sub-rectangle of region r that panel p'
// (a sub-panel of the region's panel) covers, written at y.
func packOf(o *operand, r region, sub panel, t codegen.AMPType, fp8 codegen.FP8Config, y uint32) *codegen.Pack {
	kind := codegen.BPanel
	if o.a {
		kind = codegen.APanel
	}
	groupRows := o.a != o.chain.Transpose
	// The sub-rectangle of the region, in the root's coordinates.
	var r0, r1, c0, c1 int
	if groupRows {
		r0, r1, c0, c1 = sub.g0, min(sub.g1, r.r1), sub.k0, sub.k1
	} else {
		r0, r1, c0, c1 = sub.k0, sub.k1, sub.g0, min(sub.g1, r.c1)
	}
	return &codegen.Pack{Kind: kind, Transpose: o.chain.Transpose, R: r1 - r0, C: c1 - c0,
		X: r.addr + uint32(4*((r0-r.r0)*r.stride+c0-r.c0)), XStride: r.stride, Y: y, KP: sub.kp,
		Out: t, FP8: fp8, Workers: codegen.Slots}
}

// feed brings a computed operand to the product's blocks.
func (l *linker) feed(n *graph.Node, o *operand, pr *cost.Product, e int, compute []int, blockOf func(int) (panel, int), dst uint32, pre, xch *superstep) error {
	c := o.chain
	_, regs, _, _ := l.resultOf(c.Root)
	var fp8 codegen.FP8Config
	if pr.Type == codegen.AMPFP8 {
		fp8 = codegen.FP8Config{FormatA: c.FP8, NaNOnOverflow: !o.saturate}
	}
	isCompute := map[int]bool{}
	for _, t := range compute {
		isCompute[t] = true
	}
	panels := make([]panel, len(regs))
	var srcTiles []int
	var most int
	for q, r := range regs {
		p, err := fedPanel(o, r)
		if err != nil {
			return notLowered(n, "operand %s: %v", o.name, err)
		}
		if pr.Type == codegen.AMPFP8 {
			p.kp = pad(p.kp, 2)
		}
		panels[q] = p
		srcTiles = append(srcTiles, r.tile)
		most = max(most, p.elems())
	}
	buf, err := l.allocate(uniqueTiles(srcTiles), n.Name+"."+o.name+".packed", uint32(most*e), 8, true)
	if err != nil {
		return l.memErr(n, err)
	}
	var moves []sched.Transfer
	for q, r := range regs {
		sp := panels[q]
		needed := false // by another tile
		for _, t := range compute {
			db, _ := blockOf(t)
			for _, ru := range runs(sp, db) {
				if t == r.tile {
					// Pack the run's sub-rectangle straight into the block.
					sub := subPanel(sp, ru)
					pre.work[t] = append(pre.work[t], &kernel{what: n.Name + ".pack-local-" + o.name,
						pack: packOf(o, r, sub, pr.Type, fp8, dst+uint32(ru.dst*e))})
					continue
				}
				if (ru.n*e)%4 != 0 || (ru.src*e)%4 != 0 || (ru.dst*e)%4 != 0 {
					return notLowered(n, "operand %s: a run of %d elements at %d is not word aligned", o.name, ru.n, ru.src)
				}
				needed = true
				moves = append(moves, sched.Transfer{Src: r.tile, Dst: t, Words: ru.n * e / 4,
					SrcAddr: buf + uint32(ru.src*e), DstAddr: dst + uint32(ru.dst*e)})
			}
		}
		if needed {
			pre.work[r.tile] = append(pre.work[r.tile], &kernel{what: n.Name + ".pack-" + o.name,
				pack: packOf(o, r, sp, pr.Type, fp8, buf)})
		}
	}
	xch.xfers = append(xch.xfers, multicast(moves)...)
	return nil
}

// subPanel is the part of panel p that run ru covers: whole groups from
// the run's first, over the run's k range, as a dense panel.
func subPanel(p panel, ru run) panel {
	w := p.w()
	group := ru.src / (w * p.kp)
	k0 := p.k0 + (ru.src%(w*p.kp))/w
	g0 := p.g0 + group*w
	if ru.n%(w*p.kp) == 0 && ru.src%(w*p.kp) == 0 {
		// Whole groups of the full k extent.
		ng := ru.n / (w * p.kp)
		return panel{a: p.a, g0: g0, g1: min(p.g1, g0+ng*w), k0: p.k0, k1: p.k1, gp: ng * w, kp: p.kp}
	}
	// One group, part of the k range.
	kl := ru.n / w
	return panel{a: p.a, g0: g0, g1: min(p.g1, g0+w), k0: k0, k1: k0 + kl, gp: w, kp: kl}
}

func uniqueTiles(ts []int) []int {
	seen := map[int]bool{}
	var out []int
	for _, t := range ts {
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	sort.Ints(out)
	return out
}
