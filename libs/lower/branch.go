package lower

// Branching on an If's condition. graph.PredicateIfs splices an If's
// branches into the node list and tags their nodes (then side, else
// side) and the Wheres that take the If's outputs (its selects). The
// planner plans them as any other nodes; here the steps of one If
// become two regions of supersteps that the device runs one of:
//
//	steps of the span that only read values from before the If (hoisted)
//	exchange "branch:IF"  the condition multicast to every tile
//	then side             the then nodes' steps, then each select as a
//	                      copy of its then input into the output
//	else side             the else nodes' steps, then each select as a
//	                      copy of its else input into the same storage
//	steps of the span that read the If's outputs
//
// Each side starts and ends with a compute superstep of its own (the
// supervisor's test and jump go there, prog.Branch), so no kernels merge
// across a side's boundary. A plan without tags lowers every Where as a
// node (predication).

import (
	"fmt"
	"sort"

	"ipu.local/formats/obj"
	"ipu.local/formats/plan"
	"ipu.local/libs/graph"
	"ipu.local/libs/layout"
	"ipu.local/libs/prog"
)

// mark is a control marker in the lowered sequence.
type mark uint8

const (
	noMark mark = iota
	markBegin
	markElse
	markEnd
)

// item is one thing LowerWith does in order: lower a step (a select with
// the side it copies from), or a marker of branch br.
type item struct {
	st   *plan.Step
	side graph.Side // for a select: Then or Else
	mark mark
	br   *branchPlan
}

// branchPlan is one If's steps.
type branchPlan struct {
	name    string
	sel     *plan.Step // the first select (its input 0 is the condition)
	prog    *prog.Branch
	xchg    *prog.Superstep // the condition's multicast
	markers [3]*prog.Superstep
}

// stepTag is the If and side a step belongs to: its node's tag, or for
// an inserted step (re-layout, pack) its value's producer's side.
func (l *lowerer) stepTag(st *plan.Step) (string, graph.Side) {
	if n := l.node(st); n != nil {
		return n.If, n.Side
	}
	for _, id := range st.Outputs {
		if id < 0 || id >= len(l.tensors) {
			continue
		}
		v := l.g.Values[l.tensors[id].Value]
		if p := v.Producer; p != nil && (p.Side == graph.Then || p.Side == graph.Else) {
			return p.If, p.Side
		}
	}
	return "", graph.Outer
}

// schedule orders the plan's steps into items: every tagged If's span
// becomes hoisted steps, the then side, the else side and the steps
// that follow it.
func (l *lowerer) schedule() ([]item, error) {
	steps := l.pl.Steps
	type tag struct {
		name string
		side graph.Side
	}
	tags := make([]tag, len(steps))
	last := map[string]int{}
	for i := range steps {
		name, side := l.stepTag(&steps[i])
		tags[i] = tag{name, side}
		if name != "" {
			last[name] = i
		}
	}
	var out []item
	for i := 0; i < len(steps); i++ {
		if tags[i].name == "" {
			out = append(out, item{st: &steps[i]})
			continue
		}
		name, end := tags[i].name, last[tags[i].name]
		br := &branchPlan{name: name}
		var hoist, then, els, sels, after []*plan.Step
		post := map[int]bool{} // values that exist only after the If
		for j := i; j <= end; j++ {
			if tags[j].side == graph.Select && tags[j].name == name {
				for _, id := range steps[j].Outputs {
					if id >= 0 && id < len(l.tensors) {
						post[l.tensors[id].Value] = true
					}
				}
			}
		}
		for j := i; j <= end; j++ {
			st := &steps[j]
			switch tg := tags[j]; {
			case tg.name == "":
				reads := false
				for _, id := range st.Inputs {
					if id >= 0 && id < len(l.tensors) && post[l.tensors[id].Value] {
						reads = true
					}
				}
				if !reads {
					hoist = append(hoist, st)
					continue
				}
				for _, id := range st.Outputs {
					if id >= 0 && id < len(l.tensors) {
						post[l.tensors[id].Value] = true
					}
				}
				after = append(after, st)
			case tg.name != name:
				return nil, &NotLoweredError{Node: st.Name, Op: "If", Why: fmt.Sprintf("its step is planned inside the steps of If %q", name)}
			case tg.side == graph.Then:
				then = append(then, st)
			case tg.side == graph.Else:
				els = append(els, st)
			case tg.side == graph.Select:
				sels = append(sels, st)
			}
		}
		i = end
		for _, st := range hoist {
			out = append(out, item{st: st})
		}
		if len(sels) == 0 {
			// Nothing selects an output: both sides run, as predication.
			for _, st := range append(then, els...) {
				out = append(out, item{st: st})
			}
		} else {
			br.sel = sels[0]
			out = append(out, item{mark: markBegin, br: br})
			for _, st := range then {
				out = append(out, item{st: st})
			}
			for _, st := range sels {
				out = append(out, item{st: st, side: graph.Then})
			}
			out = append(out, item{mark: markElse, br: br})
			for _, st := range els {
				out = append(out, item{st: st})
			}
			for _, st := range sels {
				out = append(out, item{st: st, side: graph.Else})
			}
			out = append(out, item{mark: markEnd, br: br})
		}
		for _, st := range after {
			out = append(out, item{st: st})
		}
	}
	return out, nil
}

// marker appends a control marker: a superstep that holds no work and
// is dropped when the program is finished, so that no kernel of a
// compute superstep before it merges with one after it.
func (l *lowerer) marker(br *branchPlan, m mark) {
	s := l.add(obj.Compute, "")
	br.markers[m-1] = s
	l.marks[s] = br
	l.cur = nil
}

// side opens a side's first compute superstep (kept even when empty).
func (l *lowerer) openSide(name string) {
	l.cur = l.add(obj.Compute, name)
	l.keep[l.cur] = true
}

// closeSide makes sure a side ends with a compute superstep.
func (l *lowerer) closeSide(name string) {
	if l.cur == nil || l.out.Steps[len(l.out.Steps)-1] != l.cur {
		l.openSide(name)
	}
	l.keep[l.cur] = true
}

// branchMark lowers a control marker.
func (l *lowerer) branchMark(it item) error {
	br := it.br
	switch it.mark {
	case markBegin:
		st := br.sel
		l.step = st
		n := l.node(st)
		if len(st.Inputs) != 3 {
			return l.stepErr("a select has 3 input tensors, not %d", len(st.Inputs))
		}
		c, err := l.tensor(st.Inputs[0], n.Inputs[0], "input 0 (condition)")
		if err != nil {
			return err
		}
		if n.Inputs[0].NumElements() != 1 || len(c.Pieces) == 0 {
			return l.notLowered(n, "condition %q has %d elements, not one", n.Inputs[0].Name, n.Inputs[0].NumElements())
		}
		refs, err := l.read(c)
		if err != nil {
			return err
		}
		if refs[0].Off%4 != 0 {
			return l.stepErr("condition %q at offset %d of its buffer is not word aligned", c.Name, refs[0].Off)
		}
		// The condition's storage and its copies stay for the whole
		// program: the branch reads them, and ipu-check reads which side ran.
		refs[0].Buf.Permanent = true
		cond := l.out.NewBuffer("cond."+br.name, nil, 4, 8, prog.AnyRegion)
		cond.Permanent = true
		br.prog = &prog.Branch{If: br.name, CondTile: c.Pieces[0].Tile, CondAt: refs[0], Cond: prog.Ref{Buf: cond}, CondBytes: c.Size}
		br.xchg = l.add(obj.Exchange, "branch:"+br.name)
		l.cur = nil
		l.marker(br, markBegin)
		l.openSide("then:" + br.name)
	case markElse:
		l.closeSide("then-end:" + br.name)
		l.marker(br, markElse)
		l.openSide("else:" + br.name)
	case markEnd:
		l.closeSide("else-end:" + br.name)
		l.marker(br, markEnd)
		l.branches = append(l.branches, br)
	}
	return nil
}

// selectStep lowers an If's select on one side: the side's input copied
// (broadcast to the output's shape) into the output's storage, which
// the then side allocates and the else side writes again.
func (l *lowerer) selectStep(st *plan.Step, side graph.Side) error {
	n := l.node(st)
	ins, outs, err := l.ioTensors(st, n)
	if err != nil {
		return err
	}
	k := 1
	if side == graph.Else {
		k = 2
	}
	x, y := ins[k], outs[0]
	if x == nil {
		return l.stepErr("input %d has no tensor", k)
	}
	if x.Kind != layout.RowMajor || x.Transposed || x.Size != y.Size || y.Kind != layout.RowMajor || y.Transposed {
		return l.stepErr("input %d: tensor %d (%q) is %s of %d-byte elements to output tensor %d (%q) %s of %d: want row-major alike", k, x.ID, x.Name, x.Kind, x.Size, y.ID, y.Name, y.Kind, y.Size)
	}
	l.acc[n.Outputs[0].Index] = max(l.acc[n.Inputs[1].Index], l.acc[n.Inputs[2].Index])
	yRefs := l.refs[y.ID]
	if yRefs == nil {
		if yRefs, err = l.write(y); err != nil {
			return err
		}
	}
	xRefs, err := l.read(x)
	if err != nil {
		return err
	}
	xs, ys := shapeInts(n.Inputs[k].Shape), shapeInts(n.Outputs[0].Shape)
	off := len(ys) - len(xs)
	runs, err := layout.MapRuns(x, y, layout.Full(ys), func(out, in []int) {
		for d := range in {
			if xs[d] == 1 {
				in[d] = 0
			} else {
				in[d] = out[d+off]
			}
		}
	})
	if err != nil {
		return l.stepErr("%v", err)
	}
	mv, err := l.runMoves(x, y, xRefs, yRefs, runs)
	if err != nil {
		return err
	}
	l.exchange(n.Name+":"+side.String(), mv)
	return nil
}

// finishBranches multicasts each branch's condition to every tile of
// the program, drops the markers and records each side's superstep
// range, with the supervisor's cycles of the test and the jump. It runs
// on the final superstep list (empty supersteps dropped, markers still
// in).
func (l *lowerer) finishBranches() error {
	all := map[int]bool{}
	for _, s := range l.out.Steps {
		if len(l.branches) == 0 {
			break // no condition to send
		}
		for _, t := range s.Tiles() {
			all[t] = true
		}
	}
	for _, br := range l.branches {
		b := br.prog
		var dst []int
		for t := range all {
			if t != b.CondTile {
				dst = append(dst, t)
			}
		}
		sort.Ints(dst)
		b.Cond.Buf.Tiles = dst
		var xs []prog.Transfer
		for _, t := range dst {
			xs = append(xs, prog.Transfer{Src: b.CondTile, Dst: t, DstN: 1, Words: 1, From: b.CondAt, To: b.Cond})
		}
		br.xchg.Xfers = multicast(xs)
	}
	kept := l.out.Steps[:0]
	for _, s := range l.out.Steps {
		if br, ok := l.marks[s]; ok {
			b := br.prog
			switch s {
			case br.markers[0]:
				b.Then[0] = len(kept)
			case br.markers[1]:
				b.Then[1] = len(kept)
				b.Else[0] = len(kept)
			case br.markers[2]:
				b.Else[1] = len(kept)
			}
			continue
		}
		if !l.keep[s] && (s.Kind == obj.Exchange && len(s.Xfers) == 0 || s.Kind == obj.Compute && len(s.Work) == 0) {
			continue
		}
		kept = append(kept, s)
	}
	l.out.Steps = kept
	for _, br := range l.branches {
		b := br.prog
		if b.Then[1] <= b.Then[0] || b.Else[1] <= b.Else[0] {
			return fmt.Errorf("internal error: If %q: empty side [%d, %d) or [%d, %d)", b.If, b.Then[0], b.Then[1], b.Else[0], b.Else[1])
		}
		for _, i := range []int{b.Then[0], b.Then[1] - 1, b.Else[0], b.Else[1] - 1} {
			if l.out.Steps[i].Kind != obj.Compute {
				return fmt.Errorf("internal error: If %q: superstep %d at a side's edge is not a compute superstep", b.If, i)
			}
		}
		// A superstep a step cache replays may be shared with other
		// programs: the edges get their own copies.
		for _, i := range []int{b.Then[0], b.Then[1] - 1, b.Else[0], b.Else[1] - 1} {
			l.out.Steps[i] = copyStep(l.out.Steps[i])
		}
		l.out.Steps[b.Then[0]].Pre = prog.BranchCycles
		l.out.Steps[b.Else[0]].Pre = prog.BranchCycles
		l.out.Steps[b.Then[1]-1].Post = prog.JumpCycles
		l.out.Branches = append(l.out.Branches, b)
	}
	return nil
}
