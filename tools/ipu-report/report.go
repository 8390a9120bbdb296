package main

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"ipu.local/formats/obj"
	"ipu.local/formats/plan"
	"ipu.local/formats/profile"
)

// report is what the files of a report are drawn from.
type report struct {
	in     *inputs
	usable int64 // usable bytes of memory per tile

	phases []phaseRow       // the profile's supersteps, in order
	nodes  []nodeRow        // the plan's steps (or the profile's nodes)
	memory []obj.TileMemory // tiles with a program, by tile
	live   *liveness        // nil without a plan
}

// phaseRow is one superstep of the profile.
type phaseRow struct {
	profile.Phase
	Node  string // the plan node(s) whose kernels run in it ("host" for host supersteps)
	Row   string // the node row it counts for: Node, or the last plan step of those Node names
	Start int64  // cycles since the first superstep began
}

// nodeRow is one plan node (step) with its figures.
type nodeRow struct {
	Name, Op, Kernel string
	Tiles            int   // tiles it runs on or holds its outputs on
	Bytes            int64 // bytes of its outputs on every tile
	Cycles           int64 // its supersteps' cycles, syncs included (profile)
	Supersteps       int
}

// liveness is the bytes of tensors live at each step of the plan.
type liveness struct {
	Steps     []string
	WorstTile int
	Worst     []float64 // bytes on the worst tile, by step
	Average   []float64 // bytes on an average tile holding data, by step
	Peak      int64
}

func build(in *inputs) (*report, error) {
	r := &report{in: in, usable: int64(in.preset.UsableMemory().Size())}
	if in.prof != nil {
		r.buildPhases()
	}
	r.buildNodes()
	if in.obj != nil {
		r.memory = memory(in.obj)
	}
	if in.plan != nil {
		r.live = buildLiveness(in.plan, in.preset.Tiles)
	}
	return r, nil
}

// nodeOf is the plan node a superstep's name belongs to: "compute:X" and
// "exchange:X" belong to X, host supersteps to "host".
func nodeOf(ph profile.Phase) string {
	if ph.Kind == profile.KindHost {
		return "host"
	}
	name := ph.Name
	for _, pre := range []string{"compute:", "exchange:"} {
		if s, ok := strings.CutPrefix(name, pre); ok {
			return s
		}
	}
	if name == "" {
		return fmt.Sprintf("superstep %d", ph.Index)
	}
	return name
}

func (r *report) buildPhases() {
	var at int64
	for _, ph := range r.in.prof.Phases {
		r.phases = append(r.phases, phaseRow{Phase: ph, Node: nodeOf(ph), Start: at})
		at += ph.Cycles + ph.SyncCycles
	}
}

// deviceCycles is the profile's cycles without the host supersteps: what
// the linker's final_cycles predicts.
func (r *report) deviceCycles() int64 {
	var n int64
	for _, ph := range r.phases {
		if ph.Kind != profile.KindHost {
			n += ph.Cycles + ph.SyncCycles
		}
	}
	return n
}

func (r *report) totalCycles() int64 {
	if len(r.phases) == 0 {
		return 0
	}
	last := r.phases[len(r.phases)-1]
	return last.Start + last.Cycles + last.SyncCycles
}

func (r *report) hostBytes() int64 {
	var n int64
	for _, ph := range r.phases {
		n += ph.HostBytes
	}
	return n
}

func pieceBytes(pc plan.Piece, dtype string) int64 {
	n := int64(plan.DeviceDTypeSize(dtype))
	for _, ax := range pc.Region {
		n *= ax[1] - ax[0]
	}
	return n
}

func (r *report) buildNodes() {
	index := map[string]int{}
	if pl := r.in.plan; pl != nil {
		tensors := map[int]*plan.Tensor{}
		for i := range pl.Tensors {
			tensors[pl.Tensors[i].ID] = &pl.Tensors[i]
		}
		for _, st := range pl.Steps {
			row := nodeRow{Name: st.Name, Kernel: st.Kernel}
			if st.Node >= 0 && st.Node < len(pl.Graph.Nodes) {
				row.Op = pl.Graph.Nodes[st.Node].Op
			}
			tiles := map[int]bool{}
			for t := st.Tiles[0]; t < st.Tiles[1]; t++ {
				tiles[t] = true
			}
			for _, id := range st.Outputs {
				tn := tensors[id]
				if tn == nil {
					continue
				}
				for _, pc := range tn.Pieces {
					row.Bytes += pieceBytes(pc, tn.DType)
					if st.Tiles[1] <= st.Tiles[0] {
						tiles[pc.Tile] = true
					}
				}
			}
			row.Tiles = len(tiles)
			index[row.Name] = len(r.nodes)
			r.nodes = append(r.nodes, row)
		}
	}
	for k := range r.phases {
		ph := &r.phases[k]
		i, ok := index[ph.Node]
		if !ok {
			// A superstep several steps' kernels share
			// ("relayout:q8+k8_Cast+s_MatMul") counts for the last of
			// them that is a plan step.
			parts := strings.Split(ph.Node, "+")
			for k := len(parts) - 1; k >= 0 && !ok; k-- {
				i, ok = index[parts[k]]
			}
		}
		if !ok {
			i = len(r.nodes)
			index[ph.Node] = i
			r.nodes = append(r.nodes, nodeRow{Name: ph.Node, Kernel: ph.Kind.String()})
		}
		n := &r.nodes[i]
		ph.Row = n.Name
		n.Cycles += ph.Cycles + ph.SyncCycles
		n.Supersteps++
		if r.in.plan == nil || ph.Node == "host" {
			active := 0
			for _, c := range ph.TileCycles {
				if c > 0 {
					active++
				}
			}
			n.Tiles = max(n.Tiles, active)
		}
	}
}

// memory is every tile's bytes by category (obj.Memory).
func memory(o *obj.Object) []obj.TileMemory { return obj.Memory(o) }

// worstMemory is the tiles by bytes used, most first (ties by tile).
func (r *report) worstMemory() []obj.TileMemory {
	w := slices.Clone(r.memory)
	slices.SortStableFunc(w, func(a, b obj.TileMemory) int {
		if c := cmp.Compare(b.Used(), a.Used()); c != 0 {
			return c
		}
		return cmp.Compare(a.Tile, b.Tile)
	})
	return w
}

// buildLiveness computes the bytes each tile holds live at each step: a
// tensor is live from the step writing it (from the start for host and
// constant tensors) to the last step reading it (to the end for a graph
// output).
func buildLiveness(pl *plan.Plan, tiles int) *liveness {
	n := len(pl.Steps)
	if n == 0 {
		return nil
	}
	first, last := map[int]int{}, map[int]int{}
	for s, st := range pl.Steps {
		for _, id := range st.Outputs {
			if _, ok := first[id]; !ok {
				first[id] = s
			}
			last[id] = max(last[id], s)
		}
		for _, id := range st.Inputs {
			if id >= 0 {
				last[id] = max(last[id], s)
			}
		}
	}
	outputs := map[int]bool{}
	for _, v := range pl.Graph.Outputs {
		outputs[v] = true
	}
	live := make([][]int64, tiles)
	for _, tn := range pl.Tensors {
		lo, ok := first[tn.ID]
		if !ok {
			lo = 0
		}
		hi, ok := last[tn.ID]
		if !ok {
			hi = lo
		}
		if outputs[tn.Value] {
			hi = n - 1
		}
		for _, pc := range tn.Pieces {
			if pc.Tile < 0 || pc.Tile >= tiles {
				continue
			}
			if live[pc.Tile] == nil {
				live[pc.Tile] = make([]int64, n)
			}
			b := pieceBytes(pc, tn.DType)
			for s := lo; s <= hi; s++ {
				live[pc.Tile][s] += b
			}
		}
	}
	lv := &liveness{WorstTile: -1, Worst: make([]float64, n), Average: make([]float64, n)}
	for _, st := range pl.Steps {
		lv.Steps = append(lv.Steps, st.Name)
	}
	holding := 0
	for t, row := range live {
		if row == nil {
			continue
		}
		holding++
		for s, b := range row {
			lv.Average[s] += float64(b)
			if b > lv.Peak {
				lv.Peak, lv.WorstTile = b, t
			}
		}
	}
	if holding == 0 {
		return nil
	}
	for s := range lv.Average {
		lv.Average[s] /= float64(holding)
		lv.Worst[s] = float64(live[lv.WorstTile][s])
	}
	// Folded steps (a cast or transpose a product's pack absorbed) run
	// nothing: they are no point of the program.
	k := 0
	for s, st := range pl.Steps {
		if st.Kernel == "folded" {
			continue
		}
		lv.Steps[k], lv.Worst[k], lv.Average[k] = lv.Steps[s], lv.Worst[s], lv.Average[s]
		k++
	}
	if k == 0 {
		return nil
	}
	lv.Steps, lv.Worst, lv.Average = lv.Steps[:k], lv.Worst[:k], lv.Average[:k]
	return lv
}
