package graph

// PredicateIfs flattens every If whose condition is computed, so that the
// planner sees one node list: both branches' nodes go where the If was,
// and each output of the If becomes Where(condition, then output, else
// output). The condition (a one-element bool tensor) is first reshaped to
// a scalar, which Where broadcasts to any output shape. As a graph this
// is predication: a branch is a pure function of the values it reads, so
// the selected value is the one the taken branch gives.
//
// Each spliced node is tagged with its If and side (Node.If, Node.Side),
// and each Where as the If's Select, so that the device branches instead
// (libs/lower branch.go): it runs one side's nodes and takes the outputs
// from it; an untagged plan runs both and selects. An If
// nested in another If's branch is predicated inside that branch: its
// nodes and Wheres carry the enclosing If's tag.

import "fmt"

// PredicateIfs returns g with no If left, and one Rewrite per If.
func PredicateIfs(g *Graph) (*Graph, []Rewrite) {
	var rw []Rewrite
	for {
		var out []*Node
		found := false
		for _, n := range g.Nodes {
			a, ok := n.Attrs.(*If)
			if !ok {
				out = append(out, n)
				continue
			}
			found = true
			out = append(out, predicate(g, n, a)...)
			rw = append(rw, Rewrite{Node: n.Name, What: fmt.Sprintf("If predicated: its then (%d nodes) and else (%d nodes) sides tagged where it was, a Where selecting each of its %d outputs",
				len(a.Then.Nodes), len(a.Else.Nodes), len(n.Outputs))})
		}
		g.Nodes = out
		if !found {
			break
		}
	}
	if len(rw) > 0 {
		g.finishPass()
	}
	return g, rw
}

// predicate returns the nodes replacing If node n: the condition as a
// scalar, both branches' nodes, and a Where per output.
func predicate(g *Graph, n *Node, a *If) []*Node {
	cond := n.Inputs[0]
	var nodes []*Node
	if len(cond.Shape) != 0 {
		scalar := &Value{Name: uniqueValueName(g, n.Name+"_cond"), DType: cond.DType, Shape: []int64{}}
		g.Values = append(g.Values, scalar)
		r := &Node{Name: n.Name + "_cond_Reshape", Op: "Reshape", Inputs: []*Value{cond}, Outputs: []*Value{scalar}, Attrs: &Reshape{Shape: []int64{}}}
		scalar.Producer = r
		nodes = append(nodes, r)
		cond = scalar
	}
	for _, b := range nodes {
		b.If, b.Side = n.If, n.Side
	}
	nested := n.Side != Outer
	for _, side := range []struct {
		nodes []*Node
		side  Side
	}{{a.Then.Nodes, Then}, {a.Else.Nodes, Else}} {
		for _, b := range side.nodes {
			b.If, b.Side = n.Name, side.side
			if nested {
				b.If, b.Side = n.If, n.Side
			}
			nodes = append(nodes, b)
		}
	}
	for k, v := range n.Outputs {
		if v == nil {
			continue
		}
		w := &Node{Name: fmt.Sprintf("%s_Where%d", n.Name, k), Op: "Where", Inputs: []*Value{cond, a.Then.Outputs[k], a.Else.Outputs[k]}, Outputs: []*Value{v},
			If: n.Name, Side: Select}
		if nested {
			w.If, w.Side = n.If, n.Side
		}
		v.Producer = w
		nodes = append(nodes, w)
	}
	return nodes
}

// uniqueValueName returns name, or name with a number appended, so that
// no value of g has it.
func uniqueValueName(g *Graph, name string) string {
	taken := map[string]bool{}
	for _, v := range g.Values {
		if v != nil {
			taken[v.Name] = true
		}
	}
	if !taken[name] {
		return name
	}
	for i := 1; ; i++ {
		if s := fmt.Sprintf("%s_%d", name, i); !taken[s] {
			return s
		}
	}
}
