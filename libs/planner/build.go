package planner

import (
	"fmt"
	"sort"
	"strings"

	"ipu.local/formats/plan"
	"ipu.local/libs/codegen"
	"ipu.local/libs/cost"
	"ipu.local/libs/graph"
)

// EncodeGraph serializes g for a plan: values by index, constants' raw
// bytes, nodes with their parsed attributes.
func EncodeGraph(g *graph.Graph) plan.Graph {
	pg := plan.Graph{Name: g.Name, Opset: g.Opset, Inputs: []int{}, Outputs: []int{}}
	for _, v := range g.Inputs {
		pg.Inputs = append(pg.Inputs, v.Index)
	}
	for _, v := range g.Outputs {
		pg.Outputs = append(pg.Outputs, v.Index)
	}
	for _, v := range g.Values {
		pv := plan.Value{Name: v.Name, DType: v.DType.String(), Shape: append([]int64{}, v.Shape...)}
		if v.Const != nil {
			pv.Const = append([]byte{}, v.Const.Raw...)
		}
		pg.Values = append(pg.Values, pv)
	}
	idx := func(vs []*graph.Value) []int {
		out := make([]int, len(vs))
		for i, v := range vs {
			out[i] = -1
			if v != nil {
				out[i] = v.Index
			}
		}
		return out
	}
	for _, n := range g.Nodes {
		pg.Nodes = append(pg.Nodes, plan.Node{Name: n.Name, Op: n.Op, Inputs: idx(n.Inputs), Outputs: idx(n.Outputs), Attrs: encodeAttrs(n.Attrs)})
	}
	return pg
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func ints(v []int) []int64 {
	out := make([]int64, len(v))
	for i, x := range v {
		out[i] = int64(x)
	}
	return out
}

func encodeAttrs(a any) []plan.Attr {
	i := func(name string, v ...int64) plan.Attr { return plan.Attr{Name: name, Ints: append([]int64{}, v...)} }
	f := func(name string, v ...float64) plan.Attr { return plan.Attr{Name: name, Floats: v} }
	var out []plan.Attr
	switch a := a.(type) {
	case *graph.Gemm:
		out = []plan.Attr{f("alpha", float64(a.Alpha)), f("beta", float64(a.Beta)), i("trans_a", b2i(a.TransA)), i("trans_b", b2i(a.TransB))}
	case *graph.Transpose:
		out = []plan.Attr{i("perm", ints(a.Perm)...)}
	case *graph.Cast:
		out = []plan.Attr{i("saturate", b2i(a.Saturate)), i("to", int64(a.To))}
	case *graph.Clip:
		out = []plan.Attr{f("max", a.Max), f("min", a.Min)}
	case *graph.Softmax:
		out = []plan.Attr{i("axis", int64(a.Axis)), i("coerce_2d", b2i(a.Coerce2D))}
	case *graph.LayerNorm:
		out = []plan.Attr{i("axis", int64(a.Axis)), f("epsilon", float64(a.Epsilon))}
	case *graph.Gelu:
		out = []plan.Attr{i("tanh", b2i(a.Tanh))}
	case *graph.Reduce:
		out = []plan.Attr{i("axes", ints(a.Axes)...), i("keepdims", b2i(a.KeepDims))}
	case *graph.Flatten:
		out = []plan.Attr{i("axis", int64(a.Axis))}
	case *graph.Reshape:
		out = []plan.Attr{i("shape", a.Shape...)}
	}
	sort.Slice(out, func(x, y int) bool { return out[x].Name < out[y].Name })
	return out
}

// tensorOf records a layout for v.
func tensorOf(v *graph.Value, layout string, d cost.Dist) plan.Tensor {
	t := plan.Tensor{Value: v.Index, Name: v.Name, DType: v.DType.String(), Shape: append([]int64{}, v.Shape...), Layout: layout}
	rank := len(v.Shape)
	for _, pc := range d.Pieces {
		if pc.R0 >= pc.R1 || pc.C0 >= pc.C1 {
			continue
		}
		reg := make([][2]int64, rank)
		switch rank {
		case 0:
		case 1:
			reg[0] = [2]int64{int64(pc.C0), int64(pc.C1)}
		default:
			// Rows span the leading axes: record whole leading axes
			// when the matrix view folds several.
			for k := 0; k < rank-1; k++ {
				reg[k] = [2]int64{0, v.Shape[k]}
			}
			if rank == 2 {
				reg[0] = [2]int64{int64(pc.R0), int64(pc.R1)}
			}
			reg[rank-1] = [2]int64{int64(pc.C0), int64(pc.C1)}
		}
		t.Pieces = append(t.Pieces, plan.Piece{Tile: pc.Tile, Region: reg})
	}
	sort.Slice(t.Pieces, func(i, j int) bool { return plan.PieceLess(t.Pieces[i], t.Pieces[j]) })
	// Drop exact duplicates (a folded matrix view repeats regions).
	out := t.Pieces[:0]
	for i, pc := range t.Pieces {
		if i > 0 && !plan.PieceLess(t.Pieces[i-1], pc) {
			continue
		}
		out = append(out, pc)
	}
	t.Pieces = out
	return t
}

// blocks is the block layout of a product operand over a split.
func blocks(rows, cols int, s plan.Split, align, lo int, a, transpose bool) cost.Dist {
	sp := cost.Split{GM: s.M, GN: s.N, GK: s.K, Align: align}
	d := cost.Dist{Rows: rows, Cols: cols}
	M, N, K := rows, cols, cols
	if !a {
		K, N = rows, cols
	}
	if transpose {
		d.Rows, d.Cols = cols, rows
	}
	for i := 0; i < s.M; i++ {
		for l := 0; l < s.K; l++ {
			for j := 0; j < s.N; j++ {
				t := sp.Tile(lo, i, j, l)
				var r0, r1, c0, c1 int
				if a {
					r0, r1 = sp.MBlock(M, i)
					c0, c1 = sp.KBlock(K, l)
				} else {
					r0, r1 = sp.KBlock(K, l)
					c0, c1 = sp.NBlock(N, j)
				}
				if transpose {
					r0, r1, c0, c1 = c0, c1, r0, r1
				}
				d.Pieces = append(d.Pieces, cost.Piece{Tile: t, R0: r0, R1: r1, C0: c0, C1: c1})
			}
		}
	}
	return d
}

func (pl *planner) build(pt point, r *result, opt Options, tiles int, s *plan.State) (*plan.Plan, error) {
	out := &plan.Plan{
		Format: plan.Format,
		Model:  plan.Model{Path: opt.ModelPath, Fingerprint: opt.ModelFingerprint},
		Arch:   pl.p.Name, Tiles: tiles, Seed: opt.Seed,
		Graph: EncodeGraph(pl.g),
		Cost: plan.Cost{FinalCycles: r.total, FinalExchange: r.exchange,
			ComputeBound: cost.ComputeBound(pl.g, pl.p, tiles), Estimated: true},
		Search: plan.Search{Attempts: s.Attempts, IncumbentCycles: r.total},
	}
	tensors := map[int]plan.Tensor{}
	for v, d := range r.dists {
		tensors[v.Index] = tensorOf(v, plan.RowMajor, d)
	}
	dec := map[int]plan.Decision{}
	for _, d := range pt {
		dec[d.Node] = d
	}
	for i, pr := range pl.products {
		d := pt[i]
		for k, c := range []cost.Chain{pr.A, pr.B} {
			if _, ok := tensors[c.Root.Index]; ok {
				continue
			}
			layout := plan.APanel
			if k == 1 {
				layout = plan.BPanel
			}
			rows, cols := int(c.Root.Shape[0]), int(c.Root.Shape[1])
			if c.Transpose {
				rows, cols = cols, rows
			}
			dist := blocks(rows, cols, d.Split, pr.Align, d.Tiles[0], k == 0, c.Transpose)
			name := string(rune('a' + k))
			if c.HasCast && d.CastOrder == plan.BeforeExchange && d.Stationary != name {
				layout = plan.RowMajor
				dist = cost.AlignedRowDist(int(c.Root.Shape[0]), int(c.Root.Shape[1]), 4, d.Tiles[0], d.Tiles[1]-d.Tiles[0], SourceAlign(k == 0, c.Transpose))
			}
			tensors[c.Root.Index] = tensorOf(c.Root, layout, dist)
		}
	}
	for _, t := range tensors {
		out.Tensors = append(out.Tensors, t)
	}
	sort.Slice(out.Tensors, func(i, j int) bool { return out.Tensors[i].Value < out.Tensors[j].Value })
	for _, n := range pl.g.Nodes {
		st := plan.Step{Node: n.Index, Name: n.Name}
		if d, ok := dec[n.Index]; ok {
			var pr *cost.Product
			for i := range pl.products {
				if pl.products[i].idx == n.Index {
					pr = pl.products[i].Product
				}
			}
			st.Kernel = KernelName(pr.Type)
			st.CastOrder, st.Stationary = d.CastOrder, d.Stationary
			st.Split, st.Tiles = d.Split, d.Tiles
		} else if p, ok := pl.folded[n.Index]; ok {
			// Folded into a product: runs where the product's operand
			// is prepared.
			d := dec[p]
			st.Kernel = "folded:" + strings.ToLower(n.Op)
			st.Split, st.Tiles = plan.Split{M: 1, N: 1, K: 1}, d.Tiles
		} else {
			nc := r.other[n.Index]
			st.Kernel = strings.ToLower(n.Op)
			lo, hi := tiles, 0
			for _, pc := range nc.dist.Pieces {
				lo, hi = min(lo, pc.Tile), max(hi, pc.Tile+1)
			}
			if lo >= hi {
				lo, hi = 0, 1
			}
			st.Split, st.Tiles = plan.Split{M: min(len(nc.dist.Pieces), hi-lo), N: 1, K: 1}, [2]int{lo, hi}
			st.Split.M = max(st.Split.M, 1)
		}
		out.Steps = append(out.Steps, st)
	}
	if err := out.Validate(); err != nil {
		return nil, fmt.Errorf("internal error: planned %w", err)
	}
	return out, nil
}

// stats fills the log figures from the incumbent.
func (pl *planner) stats(pt point, r *result, st *Stats) {
	st.Transfers = r.transfers
	for i, pr := range pl.products {
		est := r.ests[pr.idx]
		for _, m := range est.Memory {
			st.EstimatedRowBytes = max(st.EstimatedRowBytes, m.ExchangeCode)
		}
		// Exchange code is 4 bytes x (ExchangeInstrsPerTransfer per
		// transfer + a sync per phase): recover the transfers.
		st.GeometryFragmentsPerTile = max(st.GeometryFragmentsPerTile, int(st.EstimatedRowBytes/4)/cost.ExchangeInstrsPerTransfer)
		d := pt[i]
		for k, c := range []cost.Chain{pr.A, pr.B} {
			if !c.HasCast || c.Type.String() != "fp8" {
				continue
			}
			// Padding past M (A rows) or N (B columns) is never read
			// into a kept result, so its clear can go.
			for b := 0; b < []int{d.Split.M, d.Split.N}[k]; b++ {
				lo, hi := cost.AlignedBlock([]int{pr.M, pr.N}[k], []int{d.Split.M, d.Split.N}[k], b, []int{max(cost.RowAlign, pr.Align), cost.ColAlign}[k])
				if (hi-lo)%[]int{4, 16}[k] != 0 {
					st.PaddingClearsRemoved += []int{d.Split.N, d.Split.M}[k] * d.Split.K
				}
			}
		}
	}
	st.HeuristicRowBytes = 4 * 5 * int64(max(st.GeometryFragmentsPerTile, 0))
	if st.EstimatedRowBytes > 0 {
		st.HeuristicRowBytes = max(st.HeuristicRowBytes, st.EstimatedRowBytes*5/cost.ExchangeInstrsPerTransfer)
	}
}

// KernelName is a product step's kernel: "amp-fp16", "amp-fp8" on the
// AMP, "vec-fp32" on the vector unit.
func KernelName(t codegen.AMPType) string {
	if t == codegen.VecFP32 {
		return "vec-fp32"
	}
	return "amp-" + t.String()
}
