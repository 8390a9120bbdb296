package plan

import "fmt"

// validateTensors checks every tensor's indices, names and regions.
func (p *Plan) validateTensors() error {
	nv := len(p.Graph.Values)
	for i, t := range p.Tensors {
		path := fmt.Sprintf("tensors[%d]", i)
		if t.ID != i {
			return errAt(path+".id", "%d, want %d (tensors are numbered in order)", t.ID, i)
		}
		if t.Value < 0 || t.Value >= nv {
			return errAt(path+".value", "%d out of range [0, %d)", t.Value, nv)
		}
		v := p.Graph.Values[t.Value]
		if t.Name != v.Name || t.DType != v.DType {
			return errAt(path, "name or dtype differ from graph.values[%d] (%q %s)", t.Value, v.Name, v.DType)
		}
		want := v.Shape
		if t.Transposed {
			if len(want) < 2 {
				return errAt(path+".transposed", "a rank-%d value has no transpose", len(want))
			}
			want = append(append([]int64{}, want[:len(want)-2]...), want[len(want)-1], want[len(want)-2])
		}
		if !equalShape(t.Shape, want) {
			return errAt(path+".shape", "%v, want %v (graph.values[%d]%s)", t.Shape, want, t.Value, map[bool]string{true: " transposed"}[t.Transposed])
		}
		switch t.Layout {
		case RowMajor, APanel, BPanel:
		default:
			return errAt(path+".layout", "unknown layout %q", t.Layout)
		}
		if t.Pad < 0 || t.Pad > 1<<16 {
			return errAt(path+".pad", "%d out of range [0, 65536]", t.Pad)
		}
		switch t.Source {
		case FromStep, FromHost, FromConst:
		default:
			return errAt(path+".source", "unknown source %q", t.Source)
		}
		if len(t.Pieces) == 0 {
			return errAt(path+".pieces", "empty")
		}
		for j, pc := range t.Pieces {
			pp := fmt.Sprintf("%s.pieces[%d]", path, j)
			if pc.Tile < 0 || pc.Tile >= p.Tiles {
				return errAt(pp+".tile", "%d out of range [0, %d)", pc.Tile, p.Tiles)
			}
			if len(pc.Region) != len(t.Shape) {
				return errAt(pp+".region", "%d ranges for a rank-%d tensor", len(pc.Region), len(t.Shape))
			}
			for k, r := range pc.Region {
				if r[0] < 0 || r[0] >= r[1] || r[1] > t.Shape[k] {
					return errAt(fmt.Sprintf("%s.region[%d]", pp, k), "[%d, %d) empty or outside [0, %d)", r[0], r[1], t.Shape[k])
				}
			}
			if j > 0 && !pieceLess(t.Pieces[j-1], pc) {
				return errAt(pp, "not sorted after pieces[%d] (by tile, then region; once each)", j-1)
			}
		}
	}
	return nil
}

// validateSteps checks the steps' indices and the program order: every
// node has one step, every tensor a step writes is written once, before
// any step reads it, and host and const tensors are written by none.
func (p *Plan) validateSteps() error {
	nn, nt := len(p.Graph.Nodes), len(p.Tensors)
	seen := make([]bool, nn)
	written := make([]bool, nt)
	for i, s := range p.Steps {
		path := fmt.Sprintf("steps[%d]", i)
		if s.Node < -1 || s.Node >= nn {
			return errAt(path+".node", "%d out of range [-1, %d)", s.Node, nn)
		}
		if s.Node >= 0 {
			if seen[s.Node] {
				return errAt(path+".node", "node %d has a step already", s.Node)
			}
			seen[s.Node] = true
			if s.Name != p.Graph.Nodes[s.Node].Name {
				return errAt(path+".name", "%q, graph.nodes[%d] is %q", s.Name, s.Node, p.Graph.Nodes[s.Node].Name)
			}
		}
		if s.Kernel == "" {
			return errAt(path+".kernel", "empty")
		}
		switch s.CastOrder {
		case "", BeforeExchange, AfterExchange:
		default:
			return errAt(path+".cast_order", "unknown cast order %q", s.CastOrder)
		}
		switch s.Stationary {
		case "", "a", "b":
		default:
			return errAt(path+".stationary", "unknown operand %q (want a or b)", s.Stationary)
		}
		for k, id := range s.Inputs {
			if id < -1 || id >= nt {
				return errAt(fmt.Sprintf("%s.inputs[%d]", path, k), "tensor %d out of range [-1, %d)", id, nt)
			}
			if id >= 0 && p.Tensors[id].Source == FromStep && !written[id] {
				return errAt(fmt.Sprintf("%s.inputs[%d]", path, k), "tensor %d (%q) is read before a step writes it", id, p.Tensors[id].Name)
			}
		}
		for k, id := range s.Outputs {
			op := fmt.Sprintf("%s.outputs[%d]", path, k)
			if id < -1 || id >= nt {
				return errAt(op, "tensor %d out of range [-1, %d)", id, nt)
			}
			if id < 0 {
				continue
			}
			if p.Tensors[id].Source != FromStep {
				return errAt(op, "tensor %d (%q) has source %s, not step", id, p.Tensors[id].Name, p.Tensors[id].Source)
			}
			if written[id] {
				return errAt(op, "tensor %d (%q) is written twice", id, p.Tensors[id].Name)
			}
			written[id] = true
		}
		if s.Split != nil {
			sp := s.Split
			if err := sp.check(path + ".split"); err != nil {
				return err
			}
			lo, hi := s.Tiles[0], s.Tiles[1]
			if lo < 0 || lo >= hi || hi > p.Tiles {
				return errAt(path+".tiles", "[%d, %d) is not a non-empty range of [0, %d)", lo, hi, p.Tiles)
			}
			if sp.Rest != nil && sp.Blocks() > int64(hi-lo) {
				return errAt(path+".split", "%d x %d x (%d x %d + %d x %d) blocks exceed the %d tiles of the range", max(sp.B, 1), sp.K, sp.M, sp.N, sp.Rest.M, sp.Rest.N, hi-lo)
			}
			if int64(max(sp.B, 1))*int64(sp.M)*int64(sp.N)*int64(sp.K) > int64(hi-lo) {
				return errAt(path+".split", "%d x %d x %d x %d blocks exceed the %d tiles of the range", max(sp.B, 1), sp.M, sp.N, sp.K, hi-lo)
			}
		}
	}
	for i, ok := range seen {
		if !ok {
			return errAt("steps", "node %d (%q) has no step", i, p.Graph.Nodes[i].Name)
		}
	}
	for i, t := range p.Tensors {
		if t.Source == FromStep && !written[i] {
			return errAt(fmt.Sprintf("tensors[%d]", i), "%q has source step but no step writes it", t.Name)
		}
	}
	return nil
}
