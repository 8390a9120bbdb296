package graph

// If: on a constant condition the branch taken is inlined; otherwise both
// branches are built, each in a scope of its own, into an *If node (see
// the package doc).

import (
	"fmt"

	"ipu.local/libs/onnx"
)

func inferIf(c *nodeCtx) error {
	if err := c.arity(1, 1); err != nil {
		return err
	}
	cond, err := c.input(0)
	if err != nil {
		return err
	}
	if cond.DType != onnx.Bool {
		return c.inErrf(0, "condition %q has element type %v, want bool", cond.Name, cond.DType)
	}
	if NumElements(cond.Shape) != 1 {
		return c.inErrf(0, "condition %q has shape %s, want one element", cond.Name, ShapeString(cond.Shape))
	}
	var branches [2]*onnx.Graph
	for i, name := range []string{"then_branch", "else_branch"} {
		g, err := c.n.AttrGraph(name)
		if err != nil {
			return c.errf("%v", err)
		}
		if g == nil {
			return c.errf("missing attribute %q", name)
		}
		if len(g.Inputs) > 0 {
			return c.errf("%s has %d inputs, want none", name, len(g.Inputs))
		}
		if len(g.Outputs) != len(c.n.Outputs) {
			return c.errf("%s has %d outputs, the node %d", name, len(g.Outputs), len(c.n.Outputs))
		}
		branches[i] = g
	}
	if cond.Const != nil {
		taken := 1
		if cond.Const.Raw[0] != 0 {
			taken = 0
		}
		return c.inlineBranch(branches[taken], taken == 0)
	}
	var built [2]*Branch
	for i, name := range []string{"then_branch", "else_branch"} {
		br, err := c.buildBranch(branches[i], name)
		if err != nil {
			return err
		}
		built[i] = br
	}
	c.node.Inputs = []*Value{cond}
	c.node.Attrs = &If{Then: built[0], Else: built[1]}
	return c.finish()
}

// branchScope builds the nodes of a branch in a scope of its own, its
// nodes going to the scope's list, and returns the scope and the values
// of its outputs.
func (c *nodeCtx) branchScope(g *onnx.Graph, name string) (*scope, []*Value, error) {
	b := c.b
	sc := newScope(b.sc, g)
	outer := b.sc
	b.sc = sc
	defer func() { b.sc = outer }()
	wrap := func(err error) error { return fmt.Errorf("node %q (If) %s: %w", c.name, name, err) }
	if err := b.collectSources(sc); err != nil {
		return nil, nil, wrap(err)
	}
	if err := b.buildNodes(sc); err != nil {
		return nil, nil, wrap(err)
	}
	var outs []*Value
	for k := range g.Outputs {
		vi := &g.Outputs[k]
		v, err := b.lookup(vi.Name)
		if err != nil {
			return nil, nil, wrap(fmt.Errorf("output %q: %w", vi.Name, err))
		}
		if err := b.checkDeclared("output", vi, v); err != nil {
			return nil, nil, wrap(err)
		}
		outs = append(outs, v)
	}
	if err := b.checkValueInfo(sc); err != nil {
		return nil, nil, wrap(err)
	}
	return sc, outs, nil
}

// buildBranch builds one branch of an If on a computed condition.
func (c *nodeCtx) buildBranch(g *onnx.Graph, name string) (*Branch, error) {
	sc, outs, err := c.branchScope(g, name)
	if err != nil {
		return nil, err
	}
	return &Branch{Nodes: sc.nodes, Outputs: outs}, nil
}

// inlineBranch replaces an If on a constant condition by the nodes of
// the branch it takes. A branch output computed by one of those nodes is
// renamed to the If's output; a constant output is copied under that
// name; an outer value goes through an Identity.
func (c *nodeCtx) inlineBranch(g *onnx.Graph, then bool) error {
	name := "else_branch"
	if then {
		name = "then_branch"
	}
	sc, outs, err := c.branchScope(g, name)
	if err != nil {
		return err
	}
	b := c.b
	inlined := map[*Node]bool{}
	for _, n := range sc.nodes {
		inlined[n] = true
	}
	b.sc.nodes = append(b.sc.nodes, sc.nodes...)
	for k, v := range outs {
		out := c.n.Outputs[k]
		if out == "" {
			continue
		}
		switch {
		case v.Const != nil:
			t := *v.Const
			nv := b.newValue(out, v.DType, copyShape(v.Shape))
			t.Name = nv.Name
			nv.Const = &t
		case v.Producer != nil && inlined[v.Producer] && sc.values[g.Outputs[k].Name] == v:
			delete(b.taken, v.Name)
			v.Name = b.uniqueName(b.sc, out)
			b.sc.values[out] = v
		default:
			nv := b.newValue(out, v.DType, copyShape(v.Shape))
			id := &Node{Name: c.name, Op: "Identity", Inputs: []*Value{v}, Outputs: []*Value{nv}}
			nv.Producer = id
			b.sc.nodes = append(b.sc.nodes, id)
		}
	}
	b.g.Folded = append(b.g.Folded, Rewrite{Node: c.name,
		What: fmt.Sprintf("If on constant condition %v: %s inlined (%d nodes)", then, name, len(sc.nodes))})
	c.done = true
	return nil
}
