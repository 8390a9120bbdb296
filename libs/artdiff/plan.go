package artdiff

import (
	"bytes"
	"fmt"
	"strings"

	"ipu.local/formats/plan"
)

var planKind = &Kind{
	Name: "plan",
	Match: func(data []byte) bool {
		head := data[:min(len(data), 256)]
		return bytes.HasPrefix(bytes.TrimLeft(head, " \t\r\n"), []byte("{")) &&
			bytes.Contains(head, []byte(`"ipu-plan/`))
	},
	Decode: func(data []byte) (any, error) { return plan.Read(data) },
	Diff:   func(a, b any) []string { return Plans(a.(*plan.Plan), b.(*plan.Plan)) },
}

// Plans lists the differences between two plans, in this order: header
// fields ("header: ", the superstep order and the packing included), the
// graph ("graph: "), tensors ("tensor "NAME" SOURCE#K: ", see
// diffPlanTensors), steps ("step "NAME": ", see
// diffPlanSteps), the cost ("cost: "), the search ("search: ") and the
// packed exchange schedules ("exchange_schedules: ", by size when their
// bytes differ: they follow from the rest).
//
// Tensors and steps are paired by what they are for, not by their IDs
// or positions, which shift whenever the planner inserts one: a step by
// its name and its rank among the steps of that name; a tensor by its
// value, its source and the step operand that defines it (pairTensors).
// A step's operands differ only when it reads or writes a tensor that is
// not the pair of the one it had, so a renumbering shows no difference.
func Plans(a, b *plan.Plan) []string {
	type header struct {
		Format, Arch      string
		Model             plan.Model
		Tiles             int
		Seed              uint64
		Supersteps, Packs string // how the steps lower: they change the program
	}
	lines := prefixed("header: ", fieldDiffs(
		header{a.Format, a.Arch, a.Model, a.Tiles, a.Seed, a.Supersteps, a.Packs},
		header{b.Format, b.Arch, b.Model, b.Tiles, b.Seed, b.Supersteps, b.Packs}))
	lines = append(lines, prefixed("graph: ", fieldDiffs(a.Graph, b.Graph))...)
	pairs := pairTensors(a, b)
	lines = append(lines, diffPlanTensors(a, b, pairs)...)
	lines = append(lines, diffPlanSteps(a, b, pairs)...)
	lines = append(lines, prefixed("cost: ", fieldDiffs(a.Cost, b.Cost))...)
	lines = append(lines, prefixed("search: ", fieldDiffs(a.Search, b.Search))...)
	if !bytes.Equal(a.Schedules, b.Schedules) {
		lines = append(lines, fmt.Sprintf("exchange_schedules: %d packed bytes -> %d", len(a.Schedules), len(b.Schedules)))
	}
	return lines
}

// role identifies a tensor or step across plans: a name and its rank
// among the elements of that name.
type role struct {
	name string
	nth  int
}

// roles numbers the elements of a list by occurrence of their keys: the
// k-th element whose key is key gets role{key, k}.
func roles(n int, key func(i int) string) []role {
	seen := map[string]int{}
	out := make([]role, n)
	for i := range out {
		k := key(i)
		out[i] = role{k, seen[k]}
		seen[k]++
	}
	return out
}

// pairRoles pairs the indices of two lists with the same role: pairs in
// a's order, then b's unpaired elements in b's order; -1 is the side an
// element lacks.
func pairRoles(a, b []role) [][2]int {
	ib := make(map[role]int, len(b))
	for j, r := range b {
		ib[r] = j
	}
	ia := make(map[role]bool, len(a))
	var pairs [][2]int
	for i, r := range a {
		ia[r] = true
		j, ok := ib[r]
		if !ok {
			j = -1
		}
		pairs = append(pairs, [2]int{i, j})
	}
	for j, r := range b {
		if !ia[r] {
			pairs = append(pairs, [2]int{-1, j})
		}
	}
	return pairs
}

// diffPlanSteps pairs the steps by name and occurrence (a node's step
// by the node's name; an inserted re-layout or pack by its own name,
// the k-th "relayout:x" of one plan with the k-th of the other) and
// lists, in a's program order, then b's steps a lacks in b's order, per
// step label ("step "mm": ", "step "relayout:x" #1: "):
//
//	kernel matmul -> gemm
//	split m2 n1 k1 -> m4 n1 k1
//	tiles [0,2) -> [0,4)
//	cast order none -> before_exchange
//	stationary a -> b
//	inputs ["x" host#0, "w" const#0] -> ["x" host#1, "w" const#0]
//	outputs ["y" step#0] -> ["y" step#1]
//
// or that the step was removed or added ("step "relayout:y" added:
// relayout ["y" step#0] -> ["y" step#1]"); last, when the steps both
// plans have run in another order, the first that moved ("steps:
// program order changed: step "b" now runs before step "a"").
func diffPlanSteps(a, b *plan.Plan, pairs tensorPairs) []string {
	la, lb := tensorLabels(a.Tensors), tensorLabels(b.Tensors)
	ra := roles(len(a.Steps), func(i int) string { return a.Steps[i].Name })
	rb := roles(len(b.Steps), func(i int) string { return b.Steps[i].Name })
	var lines []string
	var commonA []role
	for _, p := range pairRoles(ra, rb) {
		switch {
		case p[1] < 0:
			lines = append(lines, fmt.Sprintf("%s removed: %s", stepLabel(ra[p[0]]), stepDesc(&a.Steps[p[0]], la)))
		case p[0] < 0:
			lines = append(lines, fmt.Sprintf("%s added: %s", stepLabel(rb[p[1]]), stepDesc(&b.Steps[p[1]], lb)))
		default:
			commonA = append(commonA, ra[p[0]])
			lines = append(lines, prefixed(stepLabel(ra[p[0]])+": ", diffStep(&a.Steps[p[0]], &b.Steps[p[1]], la, lb, pairs))...)
		}
	}
	common := make(map[role]bool, len(commonA))
	for _, r := range commonA {
		common[r] = true
	}
	var commonB []role
	for _, r := range rb {
		if common[r] {
			commonB = append(commonB, r)
		}
	}
	for i := range commonA {
		if commonA[i] != commonB[i] {
			lines = append(lines, fmt.Sprintf("steps: program order changed: %s now runs before %s", stepLabel(commonB[i]), stepLabel(commonA[i])))
			break
		}
	}
	return lines
}

func stepLabel(r role) string {
	if r.nth == 0 {
		return fmt.Sprintf("step %q", r.name)
	}
	return fmt.Sprintf("step %q #%d", r.name, r.nth)
}

// diffStep lists the differences of two paired steps. The node index is
// left out: the graph lines show a renumbering.
func diffStep(x, y *plan.Step, la, lb []string, pairs tensorPairs) []string {
	var out []string
	change := func(what, u, v string) {
		if u != v {
			out = append(out, fmt.Sprintf("%s %s -> %s", what, u, v))
		}
	}
	change("kernel", x.Kernel, y.Kernel)
	change("split", splitDesc(x.Split), splitDesc(y.Split))
	change("tiles", tileRange(x.Tiles), tileRange(y.Tiles))
	change("cast order", orNone(x.CastOrder), orNone(y.CastOrder))
	change("stationary", orNone(x.Stationary), orNone(y.Stationary))
	if !sameOperands(x.Inputs, y.Inputs, pairs) {
		out = append(out, fmt.Sprintf("inputs %s -> %s", tensorRefs(x.Inputs, la), tensorRefs(y.Inputs, lb)))
	}
	if !sameOperands(x.Outputs, y.Outputs, pairs) {
		out = append(out, fmt.Sprintf("outputs %s -> %s", tensorRefs(x.Outputs, la), tensorRefs(y.Outputs, lb)))
	}
	return out
}

// sameOperands reports whether two paired steps' operand lists name
// paired tensors, position by position.
func sameOperands(x, y []int, pairs tensorPairs) bool {
	if len(x) != len(y) {
		return false
	}
	for k, ia := range x {
		ib := y[k]
		if ia >= 0 && ia < len(pairs.ab) && ib >= 0 && ib < len(pairs.ba) {
			if pairs.ab[ia] != ib {
				return false
			}
		} else if ia != ib {
			return false
		}
	}
	return true
}

// stepDesc summarises a step added or removed.
func stepDesc(s *plan.Step, labels []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s -> %s", s.Kernel, tensorRefs(s.Inputs, labels), tensorRefs(s.Outputs, labels))
	if s.Split != nil {
		fmt.Fprintf(&b, ", split %s tiles %s", splitDesc(s.Split), tileRange(s.Tiles))
	}
	if s.CastOrder != "" {
		fmt.Fprintf(&b, ", cast order %s", s.CastOrder)
	}
	if s.Stationary != "" {
		fmt.Fprintf(&b, ", stationary %s", s.Stationary)
	}
	return b.String()
}

func splitDesc(s *plan.Split) string {
	if s == nil {
		return "none"
	}
	d := fmt.Sprintf("m%d n%d k%d", s.M, s.N, s.K)
	if s.B > 0 {
		d = fmt.Sprintf("b%d ", s.B) + d
	}
	if r := s.Rest; r != nil {
		d += fmt.Sprintf(" rest %s>=%d m%d n%d", r.Axis, r.At, r.M, r.N)
	}
	return d
}

func tileRange(r [2]int) string { return fmt.Sprintf("[%d,%d)", r[0], r[1]) }

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// tensorRefs names a step's operands by their tensors' labels; "-" is an
// omitted operand. Read has checked the IDs; a plan built in memory may
// not be, and an unknown ID is shown as such.
func tensorRefs(ids []int, labels []string) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		switch {
		case id == -1:
			parts[i] = "-"
		case id < 0 || id >= len(labels):
			parts[i] = fmt.Sprintf("tensor %d?", id)
		default:
			parts[i] = labels[id]
		}
	}
	return "[" + strings.Join(parts, ", ") + "]"
}
