package graph

// Graph passes after Build, run by Simplify in this order (constant
// folding came first, in Build):
//
//   - RemoveIdentities: the readers of an Identity (or of a Cast to its
//     input's own type) read its input instead; one giving a graph
//     output renames its input to the output's name, unless the input is
//     itself a graph input, a constant or another output (the node then
//     stays);
//   - EliminateDead: nodes none of whose outputs is read (by a node, a
//     branch or the graph's outputs) are removed;
//   - FuseLayerNorm: LayerNorm written out (fuse_layernorm.go) becomes
//     LayerNormalization;
//   - FuseGelu: GELU written with Erf or Tanh (fuse_gelu.go) becomes
//     Gelu.
//
// Each pass works on the graph's nodes and on every If branch's, edits g
// in place (values keep their identity; unread ones are dropped from
// Values and the rest renumbered) and returns it with the Rewrites it
// made, one per node removed or fused. A fusion matches its pattern
// exactly or leaves the nodes alone: the unfused path computes the same
// function.

import (
	"fmt"
	"strings"
)

// Simplify runs the passes in order and returns g with every rewrite.
func Simplify(g *Graph) (*Graph, []Rewrite) {
	var all []Rewrite
	for _, pass := range []func(*Graph) (*Graph, []Rewrite){RemoveIdentities, EliminateDead, FuseLayerNorm, FuseGelu} {
		var rw []Rewrite
		g, rw = pass(g)
		all = append(all, rw...)
	}
	return g, all
}

// useInfo says who reads each value: node inputs (one entry per input
// slot, at any depth), and whether a graph or branch output is the
// value.
type useInfo struct {
	readers map[*Value][]*Node
	pinned  map[*Value]bool
	list    map[*Node]*[]*Node // the node list each node is in
}

func usesOf(g *Graph) *useInfo {
	u := &useInfo{readers: map[*Value][]*Node{}, pinned: map[*Value]bool{}, list: map[*Node]*[]*Node{}}
	for _, v := range g.Outputs {
		u.pinned[v] = true
	}
	var walk func(nodes *[]*Node)
	walk = func(nodes *[]*Node) {
		for _, n := range *nodes {
			u.list[n] = nodes
			for _, v := range n.Inputs {
				if v != nil {
					u.readers[v] = append(u.readers[v], n)
				}
			}
			if a, ok := n.Attrs.(*If); ok {
				for _, br := range []*Branch{a.Then, a.Else} {
					for _, v := range br.Outputs {
						u.pinned[v] = true
					}
					walk(&br.Nodes)
				}
			}
		}
	}
	walk(&g.Nodes)
	return u
}

// sole returns the one node reading v, when exactly one input slot reads
// it and no output is v.
func (u *useInfo) sole(v *Value) *Node {
	if r := u.readers[v]; len(r) == 1 && !u.pinned[v] {
		return r[0]
	}
	return nil
}

// lists returns the graph's node list and every branch's.
func nodeLists(g *Graph) []*[]*Node {
	lists := []*[]*Node{&g.Nodes}
	for i := 0; i < len(lists); i++ {
		for _, n := range *lists[i] {
			if a, ok := n.Attrs.(*If); ok {
				lists = append(lists, &a.Then.Nodes, &a.Else.Nodes)
			}
		}
	}
	return lists
}

// finishPass numbers the nodes of every list and drops unread values.
func (g *Graph) finishPass() {
	for _, l := range nodeLists(g) {
		for i, n := range *l {
			n.Index = i
		}
	}
	g.compact()
}

// replaceUses makes every reader of old (node inputs, branch outputs)
// read v instead.
func replaceUses(g *Graph, old, v *Value) {
	walkNodes(g.Nodes, func(n *Node) {
		for i, in := range n.Inputs {
			if in == old {
				n.Inputs[i] = v
			}
		}
		if a, ok := n.Attrs.(*If); ok {
			for _, br := range []*Branch{a.Then, a.Else} {
				for i, out := range br.Outputs {
					if out == old {
						br.Outputs[i] = v
					}
				}
			}
		}
	})
}

// isIdentity reports whether n gives its input unchanged: an Identity,
// or a Cast to the input's own type.
func isIdentity(n *Node) bool {
	if len(n.Inputs) != 1 || len(n.Outputs) != 1 || n.Inputs[0] == nil || n.Outputs[0] == nil {
		return false
	}
	switch n.Op {
	case "Identity":
		return true
	case "Cast":
		a, ok := n.Attrs.(*Cast)
		return ok && a.To == n.Inputs[0].DType
	}
	return false
}

// RemoveIdentities removes the Identity nodes and the Casts to the
// input's own type (see the pass list).
func RemoveIdentities(g *Graph) (*Graph, []Rewrite) {
	var rw []Rewrite
	isInput := map[*Value]bool{}
	for _, v := range g.Inputs {
		isInput[v] = true
	}
	for _, l := range nodeLists(g) {
		kept := (*l)[:0]
		for _, n := range *l {
			if !isIdentity(n) {
				kept = append(kept, n)
				continue
			}
			x, y := n.Inputs[0], n.Outputs[0]
			var xOut, yOut bool
			for _, v := range g.Outputs {
				xOut = xOut || v == x
				yOut = yOut || v == y
			}
			what := fmt.Sprintf("%s removed: readers of %q read %q", n.Op, y.Name, x.Name)
			if yOut {
				if xOut || isInput[x] || x.Const != nil {
					kept = append(kept, n)
					continue
				}
				what = fmt.Sprintf("%s removed: %q renamed %q (a graph output)", n.Op, x.Name, y.Name)
				for i, v := range g.Outputs {
					if v == y {
						g.Outputs[i] = x
					}
				}
				x.Name = y.Name
			}
			replaceUses(g, y, x)
			y.Producer = nil
			rw = append(rw, Rewrite{Node: n.Name, What: what})
		}
		for i := len(kept); i < len(*l); i++ {
			(*l)[i] = nil
		}
		*l = kept
	}
	g.finishPass()
	return g, rw
}

// EliminateDead removes the nodes whose outputs nothing reads, last
// first, so that a chain of dead nodes goes in one sweep; sweeps repeat
// while they remove something (a dead If frees what its branches read).
func EliminateDead(g *Graph) (*Graph, []Rewrite) {
	var all []Rewrite
	for {
		rw := sweepDead(g)
		if len(rw) == 0 {
			break
		}
		all = append(all, rw...)
	}
	g.finishPass()
	return g, all
}

// sweepDead removes, in one sweep from the last node to the first, the
// nodes none of whose outputs is read.
func sweepDead(g *Graph) []Rewrite {
	u := usesOf(g)
	count := map[*Value]int{}
	for v, r := range u.readers {
		count[v] = len(r)
	}
	var rw []Rewrite
	var sweep func(l *[]*Node)
	sweep = func(l *[]*Node) {
		dead := map[*Node]bool{}
		for i := len(*l) - 1; i >= 0; i-- {
			n := (*l)[i]
			live := false
			for _, v := range n.Outputs {
				if v != nil && (count[v] > 0 || u.pinned[v]) {
					live = true
				}
			}
			if !live {
				dead[n] = true
				walkNodes([]*Node{n}, func(m *Node) {
					for _, v := range m.Inputs {
						if v != nil {
							count[v]--
						}
					}
				})
				rw = append(rw, Rewrite{Node: n.Name, What: fmt.Sprintf("%s removed: no output is read", n.Op)})
				continue
			}
			if a, ok := n.Attrs.(*If); ok {
				sweep(&a.Then.Nodes)
				sweep(&a.Else.Nodes)
			}
		}
		kept := (*l)[:0]
		for _, n := range *l {
			if !dead[n] {
				kept = append(kept, n)
			}
		}
		for i := len(kept); i < len(*l); i++ {
			(*l)[i] = nil
		}
		*l = kept
	}
	sweep(&g.Nodes)
	// The sweep went last first; report in node order.
	for i, j := 0, len(rw)-1; i < j; i, j = i+1, j-1 {
		rw[i], rw[j] = rw[j], rw[i]
	}
	return rw
}

// fusion replaces the nodes of a matched pattern, all in one list, by one
// node at the pattern's root (its last node, whose output the new node
// gives).
func fuse(l *[]*Node, pattern []*Node, root *Node, fused *Node) string {
	in := map[*Node]bool{}
	names := make([]string, 0, len(pattern))
	for _, n := range pattern {
		in[n] = true
		names = append(names, n.Op+" "+fmt.Sprintf("%q", n.Name))
	}
	kept := (*l)[:0]
	for _, n := range *l {
		switch {
		case n == root:
			kept = append(kept, fused)
		case !in[n]:
			kept = append(kept, n)
		}
	}
	for i := len(kept); i < len(*l); i++ {
		(*l)[i] = nil
	}
	*l = kept
	for _, v := range fused.Outputs {
		if v != nil {
			v.Producer = fused
		}
	}
	return strings.Join(names, ", ")
}
