// Package planner maps a graph onto the tiles: for every matrix product
// it chooses a split (gm, gn, gk), a cast order and a stationary operand,
// costed with libs/cost, and writes the result as a formats/plan Plan.
//
// The search is deterministic for a seed: an analytic start (per product,
// the best of the splits whose block shapes differ, screened by compute
// cycles under several tile budgets, from all the tiles down to one, so
// that splits using fewer tiles compete, and then costed fully), then
// MaxAttempts seeded local moves
// (change one split factor, flip the cast order, swap the stationary
// operand), keeping improvements and, with a small seeded probability,
// walking onto a worse point. The state (attempts, RNG, current point,
// incumbent, visited set) goes to a plan.State, so two runs of N
// attempts equal one of 2N.
//
// Scope: MatMul and Gemm (2-D) are planned, with the Cast and Transpose
// nodes feeding them folded in (see cost.TraceOperand), and a Cast of the
// result to FP16 (cost.OutputCast). Every other node is planned
// trivially: it runs on the tiles and rows of its first input's layout
// (elementwise and row ops split rows), costed as one elementwise kernel
// on the largest piece; the linker chooses those nodes' layouts itself
// (libs/link), so their cost here is rough, and ipu-plan reports the
// linked program's cycles. Gemm's bias and alpha are not costed.
package planner

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"ipu.local/formats/plan"
	"ipu.local/libs/arch"
	"ipu.local/libs/codegen"
	"ipu.local/libs/cost"
	"ipu.local/libs/graph"
)

// Options control Plan.
type Options struct {
	Tiles       int    // tiles to use (0: the preset's)
	Seed        uint64 // search seed
	MaxAttempts int    // local moves this call makes
	// State resumes an earlier search (nil: fresh).
	State *plan.State
	// ModelPath and ModelFingerprint go into the plan and state.
	ModelPath, ModelFingerprint string
}

// Stats are the figures of the planner's log lines.
type Stats struct {
	Attempts  int  // attempts of this call
	Resuming  bool // the call continued a saved state
	Evaluated int  // points costed (attempts not already visited, plus the start)
	// Exchange geometry of the incumbent.
	EstimatedRowBytes        int64 // largest per-tile exchange code, from the transfers
	HeuristicRowBytes        int64 // the same at the worst case of 5 instructions per transfer
	GeometryFragmentsPerTile int   // most transfers touching one tile
	FragmentLimit            int
	// PaddingClearsRemoved counts FP8 cast outputs whose padding (rows of
	// A past M, columns of B past N) is never read, so needs no clear.
	PaddingClearsRemoved int
	Transfers            int // transfers of every exchange phase of the incumbent
}

// FragmentLimit is the most exchange fragments one tile's table takes.
const FragmentLimit = 16384

// product is a planned matrix product.
type product struct {
	*cost.Product
	idx int // node index
}

// planner holds one Plan call.
type planner struct {
	g        *graph.Graph
	p        *arch.Preset
	tiles    int
	products []product
	folded   map[int]int // folded node -> product node
}

func newPlanner(g *graph.Graph, p *arch.Preset, tiles int) *planner {
	pl := &planner{g: g, p: p, tiles: tiles, folded: map[int]int{}}
	uses := map[*graph.Value]int{}
	for _, n := range g.Nodes {
		for _, v := range n.Inputs {
			if v != nil {
				uses[v]++
			}
		}
	}
	for _, v := range g.Outputs {
		uses[v]++
	}
	for _, n := range g.Nodes {
		pr, err := cost.ProductOf(n)
		if err != nil {
			continue
		}
		// Fold a chain only when nothing else reads its values.
		for _, c := range []*cost.Chain{&pr.A, &pr.B} {
			for k := len(c.Nodes) - 1; k >= 0; k-- {
				if uses[c.Nodes[k].Outputs[0]] != 1 {
					*c = cost.TraceOperand(c.Nodes[k].Outputs[0]) // stop here
					break
				}
			}
		}
		pr.Align = cost.ResultAlign(g, n)
		pl.products = append(pl.products, product{pr, n.Index})
		if oc := cost.OutputCast(g, n); oc != nil {
			pl.folded[oc.Index] = n.Index
		}
		for _, c := range []cost.Chain{pr.A, pr.B} {
			for _, f := range c.Nodes {
				pl.folded[f.Index] = n.Index
			}
		}
	}
	return pl
}

// point is one assignment of decisions, by product.
type point []plan.Decision

func (pt point) key() string {
	var b strings.Builder
	for _, d := range pt {
		fmt.Fprintf(&b, "%d:%d,%d,%d,%s,%s,%d-%d;", d.Node, d.Split.M, d.Split.N, d.Split.K, d.CastOrder, d.Stationary, d.Tiles[0], d.Tiles[1])
	}
	return b.String()
}

func (pt point) clone() point { return append(point(nil), pt...) }

// castable reports whether a product's cast order is a decision: an
// operand with a cast whose root is a graph input or constant.
func castable(pr *cost.Product) bool {
	for _, c := range []cost.Chain{pr.A, pr.B} {
		if c.HasCast && c.Root.Producer == nil {
			return true
		}
	}
	return false
}

// result is a costed point.
type result struct {
	total, exchange int64
	transfers       int
	ests            map[int]*cost.Estimate // by product node
	dists           map[*graph.Value]cost.Dist
	other           map[int]nodeCost // non-product nodes
	mem             error
}

type nodeCost struct {
	cycles int64
	dist   cost.Dist
}

// eval costs a point: products in node order, the other nodes on their
// input's layout.
func (pl *planner) eval(pt point) (*result, error) {
	r := &result{ests: map[int]*cost.Estimate{}, dists: map[*graph.Value]cost.Dist{}, other: map[int]nodeCost{}}
	dec := map[int]plan.Decision{}
	for _, d := range pt {
		dec[d.Node] = d
	}
	for _, n := range pl.g.Nodes {
		if _, ok := pl.folded[n.Index]; ok {
			continue
		}
		d, isProduct := dec[n.Index]
		if isProduct {
			var pr *cost.Product
			for i := range pl.products {
				if pl.products[i].idx == n.Index {
					pr = pl.products[i].Product
				}
			}
			mm := cost.MatMul{M: pr.M, K: pr.K, N: pr.N, Type: pr.Type, FP8: pr.A.FP8, Align: pr.Align}
			if pr.A.Type == codegen.AMPFP16 && pr.B.Type == codegen.AMPFP8 {
				mm.FP8 = pr.B.FP8
			}
			ops := []*cost.Operand{&mm.A, &mm.B}
			for k, c := range []cost.Chain{pr.A, pr.B} {
				o := ops[k]
				o.Cast, o.HasCast = c.Cast, c.HasCast
				o.ResidentBytes = c.Root.DType.ElemSize()
				o.Constant = c.Root.Const != nil
				name := string(rune('a' + k))
				rows, cols := int(c.Root.Shape[0]), int(c.Root.Shape[1])
				if src, ok := r.dists[c.Root]; ok {
					s := src
					if c.Transpose {
						s = transpose(s)
					}
					o.Source = &s
				} else if c.HasCast && d.CastOrder == plan.BeforeExchange && d.Stationary != name {
					s := cost.AlignedRowDist(rows, cols, o.ResidentBytes, d.Tiles[0], d.Tiles[1]-d.Tiles[0], SourceAlign(k == 0, c.Transpose))
					if c.Transpose {
						s = transpose(s)
					}
					o.Source, o.CastBefore = &s, true
				}
			}
			est, err := cost.EvalMatMul(pl.p, mm, cost.Split{GM: d.Split.M, GN: d.Split.N, GK: d.Split.K}, d.Tiles[0], fmt.Sprintf("node %q", n.Name))
			if err != nil {
				var mr *cost.MemoryReport
				var ov *cost.OverflowError
				if errors.As(err, &mr) || errors.As(err, &ov) {
					r.mem = err
					return r, nil
				}
				return nil, err
			}
			r.ests[n.Index] = est
			r.dists[n.Outputs[0]] = est.Out
			if oc := cost.OutputCast(pl.g, n); oc != nil {
				r.dists[oc.Outputs[0]] = est.Out
			}
			r.total += est.Total
			r.exchange += est.Exchange
			r.transfers += est.Transfers
			continue
		}
		nc, err := pl.evalOther(n, r.dists)
		if err != nil {
			return nil, err
		}
		r.other[n.Index] = nc
		for _, v := range n.Outputs {
			if v == nil {
				continue
			}
			// Secondary outputs of another shape (LayerNormalization's
			// Mean and InvStdDev) spread their own rows.
			d := nc.dist
			if rows, cols := matrixOf(v.Shape); rows != d.Rows || cols != d.Cols {
				d = cost.RowDist(rows, cols, 4, 0, pl.tiles)
			}
			r.dists[v] = d
		}
		r.total += nc.cycles
	}
	return r, nil
}

func transpose(d cost.Dist) cost.Dist {
	t := cost.Dist{Rows: d.Cols, Cols: d.Rows, ElemBytes: d.ElemBytes, Pieces: make([]cost.Piece, len(d.Pieces))}
	for i, p := range d.Pieces {
		t.Pieces[i] = cost.Piece{Tile: p.Tile, R0: p.C0, R1: p.C1, C0: p.R0, C1: p.R1}
	}
	return t
}

// evalOther plans a node that is not a product: on its first input's
// layout (rows over the tiles when the input is a graph input or
// constant), one elementwise kernel per piece.
func (pl *planner) evalOther(n *graph.Node, dists map[*graph.Value]cost.Dist) (nodeCost, error) {
	out := n.Outputs[0]
	rows, cols := matrixOf(out.Shape)
	var d cost.Dist
	if len(n.Inputs) > 0 && n.Inputs[0] != nil {
		if src, ok := dists[n.Inputs[0]]; ok && src.Rows == rows && src.Cols == cols {
			d = src
		}
	}
	if d.Pieces == nil {
		d = cost.RowDist(rows, cols, 4, 0, pl.tiles)
	}
	d.ElemBytes = max(1, out.DType.ElemSize())
	var worst int
	for _, pc := range d.Pieces {
		worst = max(worst, (pc.R1-pc.R0)*(pc.C1-pc.C0))
	}
	op := codegen.Exp
	switch n.Op {
	case "Gelu":
		op = codegen.GeluErf
		if a, ok := n.Attrs.(*graph.Gelu); ok && a.Tanh {
			op = codegen.GeluTanh
		}
	case "Relu":
		op = codegen.Relu
	case "Tanh":
		op = codegen.Tanh
	case "Sigmoid":
		op = codegen.Sigmoid
	case "Add", "Sub", "Mul", "Max", "Min":
		c, err := cost.AddCycles(pl.p, worst)
		return nodeCost{c + int64(pl.p.SyncCycles), d}, err
	}
	c, err := (codegen.Unary{Op: op, N: max(worst, 1), X: pl.p.Interleaved.Lo, Y: pl.p.Interleaved.Lo, Workers: codegen.Slots}).Cost()
	if err != nil {
		return nodeCost{}, fmt.Errorf("node %q: %w", n.Name, err)
	}
	return nodeCost{c.Cycles() + int64(pl.p.SyncCycles), d}, nil
}

// matrixOf views a shape as rows x cols (the last axis is the columns).
func matrixOf(s []int64) (int, int) {
	if len(s) == 0 {
		return 1, 1
	}
	cols := int(s[len(s)-1])
	rows := 1
	for _, d := range s[:len(s)-1] {
		rows *= int(d)
	}
	return max(rows, 1), max(cols, 1)
}

// sortDecisions keeps a point in node order.
func sortDecisions(pt point) {
	sort.Slice(pt, func(i, j int) bool { return pt[i].Node < pt[j].Node })
}

// SourceAlign is the row alignment of the row distribution a product
// operand's root gets when it is cast before the exchange: the root's
// rows are the operand's group axis (A rows, or B columns of a
// transposed root) or its k axis.
func SourceAlign(a, transpose bool) int {
	switch {
	case a && !transpose:
		return cost.RowAlign
	case !a && transpose:
		return cost.ColAlign
	}
	return 1
}
