// Package lower turns a plan into a device program (libs/prog): it reads
// every tensor's mapping and every step from the plan and derives none of
// its own. Each step becomes kernels on the tiles that hold its tensors,
// exchange transfers for the elements that must move, and host
// transfers for the graph's inputs and outputs. A plan whose tensors do
// not fit its steps (a piece a kernel needs that its tile does not hold,
// blocks that are not the product's split, a row that a row operator
// needs whole split over tiles) is refused with an error naming the
// tensor.
//
// # Supersteps
//
// The program starts with the host's fetch superstep and ends with its
// result superstep. In between, a step whose operands are all on the
// tiles that compute it adds its kernels to the current compute
// superstep; a step that moves data between tiles opens an exchange
// superstep (its transfers) followed by a new compute superstep (its
// local copies and kernels). Tiles run their kernels in step order.
//
// # Rounding counts
//
// Each value carries the number of roundings on its longest chain from
// the graph's inputs, in units of FP32's unit roundoff: an FP32 rounding
// counts 1, an FP16 rounding 2^13 (FP16's unit roundoff is 2^13 times
// FP32's), exact operations 0, a sum of L terms L. A graph output's
// Accumulate is that count (0: every element is one correctly rounded
// operation, a cast or a copy, and must match bit for bit); ipu-check
// derives its tolerance from it.
package lower

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"ipu.local/formats/obj"
	"ipu.local/formats/plan"
	"ipu.local/libs/arch"
	"ipu.local/libs/graph"
	"ipu.local/libs/layout"
	"ipu.local/libs/onnx"
	"ipu.local/libs/prog"
)

// NotLoweredError is a step the linker does not generate code for.
type NotLoweredError struct {
	Node, Op string
	Why      string
}

func (e *NotLoweredError) Error() string {
	return fmt.Sprintf("node %q: operator %s is not lowered: %s", e.Node, e.Op, e.Why)
}

// PlanError is a plan whose tensors or steps do not hold together.
type PlanError struct{ Msg string }

func (e *PlanError) Error() string { return "plan: " + e.Msg }

func planErr(format string, args ...any) error {
	return &PlanError{Msg: fmt.Sprintf(format, args...)}
}

// F16Rounding is what one FP16 rounding counts in FP32 units.
const F16Rounding = 1 << 13

// lowerer holds one Lower call.
type lowerer struct {
	opt Options
	p   *arch.Preset
	pl  *plan.Plan
	g   *graph.Graph
	out *prog.Program

	tensors []*layout.Tensor
	// keys are the tensors' layout.Tensor.Key, each made once (the step
	// cache's keys name them; "" until made).
	keys []string
	refs [][]prog.Ref // per tensor, per piece (nil until written)
	// alias: buffers a replayed step reads that are another buffer of
	// this program (cache.go replay).
	alias map[*prog.Buffer]*prog.Buffer
	// parts: where each step after the first that put kernels in a
	// compute superstep started putting them (compact.go moves a step's
	// kernels together).
	parts map[*prog.Superstep][]partMark
	// sums: the accesses of parts whose kernels are a step cache
	// fragment's (cache.go).
	sums    partSums
	byValue map[int][]int
	acc     []int64 // rounding count per value

	fetch, cur *prog.Superstep
	zero       *prog.Buffer // constant zeros (zeros)
	// scratch is the row kernels' partials of scratchStep.
	scratch     *prog.Buffer
	scratchStep *plan.Step
	inIndex     map[*graph.Value]int
	outIndex    map[*graph.Value]int
	inBlock     map[int]uint32 // graph input index -> whole row-major block offset
	// result collects the result superstep's houts.
	result map[int][]prog.HostOp
	// Branching (branch.go): the markers, the compute supersteps kept
	// even when empty, the Ifs lowered as branches.
	marks    map[*prog.Superstep]*branchPlan
	keep     map[*prog.Superstep]bool
	branches []*branchPlan
	step     *plan.Step // the step being lowered
	// asks: what the steps asked of buffers (ask), which a step cache's
	// fragment records for its inputs' buffers (cache.go).
	asks []bufferAsk
	// zeroAsks: the steps' asks of the zeros (zeros), likewise.
	zeroAsks []zeroAsk
}

// Options tune Lower.
type Options struct {
	// NoData leaves constant buffers without their contents: the program
	// is for pricing only (the planner's), not for code.
	NoData bool
	// Cache, with NoData, replays steps lowered before (cache.go).
	Cache *StepCache
	// KeepPadClears skips the padding-clear pass (padclear.go): every
	// FP8 cast clears its padding (a debug switch).
	KeepPadClears bool
}

// Lower builds the program of plan pl, whose graph is g (decoded from
// pl.Graph), for preset p.
func Lower(pl *plan.Plan, g *graph.Graph, p *arch.Preset) (*prog.Program, error) {
	return LowerWith(pl, g, p, Options{})
}

// LowerWith is Lower with options.
func LowerWith(pl *plan.Plan, g *graph.Graph, p *arch.Preset, opt Options) (*prog.Program, error) {
	if pl.Tiles < 1 || pl.Tiles > p.Tiles {
		return nil, planErr("tiles: %d outside [1, %d] of %s", pl.Tiles, p.Tiles, p.Name)
	}
	l := &lowerer{p: p, pl: pl, g: g, opt: opt, out: &prog.Program{Arch: p}, byValue: map[int][]int{},
		acc: make([]int64, len(g.Values)), inIndex: map[*graph.Value]int{}, outIndex: map[*graph.Value]int{},
		inBlock: map[int]uint32{}, result: map[int][]prog.HostOp{}, marks: map[*prog.Superstep]*branchPlan{}, keep: map[*prog.Superstep]bool{}}
	if err := l.readTensors(); err != nil {
		return nil, err
	}
	if err := l.hostTensors(); err != nil {
		return nil, err
	}
	l.fetch = l.add(obj.HostExchange, "fetch")
	if opt.Cache != nil && opt.NoData {
		opt.Cache.begin()
		defer opt.Cache.evict()
	}
	items, err := l.schedule()
	if err != nil {
		return nil, err
	}
	for _, it := range items {
		if it.mark != noMark {
			if err := l.branchMark(it); err != nil {
				return nil, err
			}
			continue
		}
		st := it.st
		l.step = st
		lower := l.lowerStep
		if opt.Cache != nil && opt.NoData {
			lower = l.lowerCached
		}
		if it.side != graph.Outer {
			lower = func(st *plan.Step) error { return l.selectStep(st, it.side) }
		}
		l.markPart()
		if err := lower(st); err != nil {
			return nil, err
		}
	}
	l.step = nil
	if err := l.outputs(); err != nil {
		return nil, err
	}
	// An input no step reads still has a page for the host to fill.
	for _, v := range l.g.Inputs {
		if len(l.out.Inputs[l.inIndex[v]].Blocks) == 0 {
			if _, err := l.inputBlock(v); err != nil {
				return nil, err
			}
		}
	}
	// An exchange superstep whose moves all stayed on their tiles is no
	// superstep at all; nor is an empty compute superstep (but for a
	// branch side's edges).
	if err := l.finishBranches(); err != nil {
		return nil, err
	}
	l.finishZeros()
	res := l.add(obj.HostExchange, "result")
	res.Host = l.result
	// Compaction first: the passes below replace the supersteps they
	// change by copies, which l.parts does not know.
	if pl.Supersteps == plan.Compact {
		var cache *StepCache
		if opt.Cache != nil && opt.NoData {
			cache = opt.Cache
		}
		compact(l.out, l.parts, l.sums, cache, l.alias)
	}
	l.out.Alias = l.alias
	// Both passes act on casts to FP8 and packs of FP8 panels only, which
	// a graph without FP8 values does not have: they are skipped, not run
	// over every kernel (4% of pricing the BERT-base FP16 layer).
	if hasFP8(l.g) {
		if !opt.KeepPadClears {
			l.out.PadClearsRemoved = elidePadClears(l.out)
		}
		wideCasts(l.out, p)
	}
	return l.out, nil
}

// hasFP8 reports whether any value of g is of an FP8 type.
func hasFP8(g *graph.Graph) bool {
	for _, v := range g.Values {
		if isFP8(v.DType) {
			return true
		}
	}
	return false
}

// readTensors converts and validates the plan's tensors.
func (l *lowerer) readTensors() error {
	l.keys = make([]string, len(l.pl.Tensors))
	for i, pt := range l.pl.Tensors {
		t, err := l.readTensor(i, pt)
		if err != nil {
			return err
		}
		l.tensors = append(l.tensors, t)
		l.byValue[pt.Value] = append(l.byValue[pt.Value], i)
	}
	l.refs = make([][]prog.Ref, len(l.tensors))
	return nil
}

// readTensor converts and validates plan tensor i, pt, or takes the
// layout that a lowering through the cache read for its equal.
func (l *lowerer) readTensor(i int, pt plan.Tensor) (*layout.Tensor, error) {
	v := l.g.Values[pt.Value]
	size := DeviceSize(v.DType)
	if size < 1 {
		return nil, planErr("tensor %d (%q): element type %s has no size", i, pt.Name, v.DType)
	}
	if t, key := l.opt.Cache.tensor(pt, l.g, l.pl.Tiles); t != nil {
		l.keys[i] = key // checked when it was read
		return t, nil
	}
	t := &layout.Tensor{ID: pt.ID, Value: pt.Value, Name: pt.Name, Size: size, Transposed: pt.Transposed, Pad: pt.Pad}
	k, ok := layout.ParseKind(pt.Layout)
	if !ok {
		return nil, planErr("tensor %d (%q): unknown layout %q", i, pt.Name, pt.Layout)
	}
	t.Kind = k
	src, ok := layout.ParseSource(pt.Source)
	if !ok {
		return nil, planErr("tensor %d (%q): unknown source %q", i, pt.Name, pt.Source)
	}
	t.Source = src
	if len(pt.Shape) > 0 {
		t.Shape = make([]int, len(pt.Shape))
	}
	for d, n := range pt.Shape {
		t.Shape[d] = int(n)
	}
	// The pieces' boxes share one array.
	n := 0
	for _, pc := range pt.Pieces {
		n += len(pc.Region)
	}
	ranges := make([]layout.Range, n)
	if len(pt.Pieces) > 0 {
		t.Pieces = make([]layout.Piece, len(pt.Pieces))
	}
	for k, pc := range pt.Pieces {
		box := layout.Box(ranges[:len(pc.Region):len(pc.Region)])
		ranges = ranges[len(pc.Region):]
		for d, r := range pc.Region {
			box[d] = layout.Range{Lo: int(r[0]), Hi: int(r[1])}
		}
		t.Pieces[k] = layout.Piece{Tile: pc.Tile, Box: box}
	}
	if err := l.validate(i, t); err != nil {
		return nil, &PlanError{Msg: err.Error()}
	}
	switch {
	case src == layout.FromHost && !hostRooted(v):
		return nil, planErr("tensor %d (%q): source host, but the value is not a graph input seen through data movement", i, pt.Name)
	case src == layout.FromConst && !constRooted(v):
		return nil, planErr("tensor %d (%q): source const, but the value is not a constant seen through data movement", i, pt.Name)
	}
	l.opt.Cache.keepTensor(t, l.keys[i], l.g, l.pl.Tiles)
	return t, nil
}

// validate checks a tensor's mapping, once per layout with a step cache
// (the planner's plans repeat most tensors from point to point).
func (l *lowerer) validate(i int, t *layout.Tensor) error {
	c := l.opt.Cache
	if c == nil {
		return t.Validate(l.pl.Tiles)
	}
	l.keys[i] = t.Key()
	key := fmt.Sprint(t.Value, t.Shape, l.pl.Tiles) + l.keys[i]
	if c.valid[key] {
		return nil
	}
	if err := t.Validate(l.pl.Tiles); err != nil {
		return err
	}
	c.valid[key] = true
	return nil
}

// hostTensors sets up the host pages of the graph's inputs and outputs.
func (l *lowerer) hostTensors() error {
	if len(l.g.Inputs)+len(l.g.Outputs) > 256 {
		return planErr("%d graph inputs and outputs exceed the 256 host pages", len(l.g.Inputs)+len(l.g.Outputs))
	}
	for i, v := range l.g.Inputs {
		l.inIndex[v] = i
		l.out.Inputs = append(l.out.Inputs, obj.Tensor{Name: v.Name, DType: v.DType.String(), Shape: append([]int64{}, v.Shape...), Page: uint8(i)})
	}
	for i, v := range l.g.Outputs {
		l.outIndex[v] = i
		l.out.Outputs = append(l.out.Outputs, obj.Tensor{Name: v.Name, DType: v.DType.String(), Shape: append([]int64{}, v.Shape...), Page: uint8(len(l.g.Inputs) + i)})
	}
	return nil
}

func (l *lowerer) add(kind obj.PhaseKind, name string) *prog.Superstep {
	s := prog.NewSuperstep(kind, name)
	l.out.Steps = append(l.out.Steps, s)
	return s
}

// compute returns the compute superstep a step's local work goes to: the
// current one when nothing has happened since, else a new one.
//
// The superstep is named by the steps whose kernels run in it: one that
// holds no kernel yet takes the name of the step asking for it (the
// exchange of a re-layout leaves an empty compute superstep that the
// next step's kernels fill), one that holds some gets "+name" appended
// ("compute:relayout:q8+matmul").
func (l *lowerer) compute(name string) *prog.Superstep {
	if l.cur == nil || l.out.Steps[len(l.out.Steps)-1] != l.cur {
		l.cur = l.add(obj.Compute, "compute:"+name)
		return l.cur
	}
	l.cur.Name = joinStepName(l.cur, "compute:", name)
	return l.cur
}

// joinStepName is the name of superstep s (named prefix+names joined by
// "+") once name's kernels join those in it. A superstep named
// otherwise (a k split's "reduce-add:" step, which the next steps' kernels
// join when no exchange comes between) lists the names joining it after
// its own, so that a profile's phase names every node that runs in it.
func joinStepName(s *prog.Superstep, prefix, name string) string {
	empty := true
	for _, ks := range s.Work {
		if len(ks) > 0 {
			empty = false
			break
		}
	}
	if empty {
		return prefix + name
	}
	names, ok := strings.CutPrefix(s.Name, prefix)
	if !ok {
		names = s.Name
	}
	if slices.Contains(strings.Split(names, "+"), name) {
		return s.Name
	}
	return s.Name + "+" + name
}

// moves is what a step needs before its kernels: transfers between
// tiles and local copies.
type moves struct {
	xfers  []prog.Transfer
	copies map[int][]*prog.Kernel
}

// newMoves returns empty moves whose transfer list is a kept one
// (xferList), of any room.
func newMoves() *moves { return &moves{xfers: xferList(0), copies: map[int][]*prog.Kernel{}} }

// exchange puts m's transfers in an exchange superstep (when there are
// any) and returns the compute superstep that follows, with m's copies.
func (l *lowerer) exchange(name string, m *moves) *prog.Superstep {
	if len(m.xfers) > 0 {
		x := l.add(obj.Exchange, "exchange:"+name)
		x.Xfers = multicast(m.xfers)
		l.cur = nil
	}
	m.recycle()
	s := l.compute(name)
	ts := make([]int, 0, len(m.copies))
	for t := range m.copies {
		ts = append(ts, t)
	}
	sort.Ints(ts)
	for _, t := range ts {
		s.Work[t] = append(s.Work[t], m.copies[t]...)
	}
	return s
}

// tensor returns tensor id, checking that it holds value v.
func (l *lowerer) tensor(id int, v *graph.Value, role string) (*layout.Tensor, error) {
	if id < 0 || id >= len(l.tensors) {
		return nil, l.stepErr("%s: no tensor (id %d)", role, id)
	}
	t := l.tensors[id]
	if v != nil && t.Value != v.Index {
		return nil, l.stepErr("%s: tensor %d holds %q, not %q", role, id, t.Name, v.Name)
	}
	return t, nil
}

// read returns the storage of tensor t, materialising a host or const
// tensor on first use.
func (l *lowerer) read(t *layout.Tensor) ([]prog.Ref, error) {
	if r := l.refs[t.ID]; r != nil {
		return r, nil
	}
	switch t.Source {
	case layout.FromHost:
		return l.fromHost(t)
	case layout.FromConst:
		return l.fromConst(t)
	}
	return nil, planErr("tensor %d (%q) is read before a step writes it", t.ID, t.Name)
}

// alloc gives tensor t fresh storage: one buffer over its tiles, the
// pieces of a tile one after the other.
func (l *lowerer) alloc(t *layout.Tensor, region prog.Region) []prog.Ref {
	offs, per := t.PieceOffsets()
	most := 0
	for _, b := range per {
		most = max(most, b)
	}
	buf := l.out.NewBuffer(fmt.Sprintf("t%d.%s", t.ID, t.Name), t.Tiles(), most, 8, region)
	refs := make([]prog.Ref, len(t.Pieces))
	for i := range refs {
		refs[i] = prog.Ref{Buf: buf, Off: uint32(offs[i])}
	}
	l.refs[t.ID] = refs
	return refs
}

// write returns the storage of a step's output tensor (allocated here).
func (l *lowerer) write(t *layout.Tensor) ([]prog.Ref, error) {
	if l.refs[t.ID] != nil {
		return nil, planErr("tensor %d (%q) is written twice", t.ID, t.Name)
	}
	if t.Source != layout.FromStep {
		return nil, planErr("tensor %d (%q) has source %s, a step cannot write it", t.ID, t.Name, t.Source)
	}
	return l.alloc(t, prog.AnyRegion), nil
}

// node returns the graph node of a step (nil for an inserted step).
func (l *lowerer) node(st *plan.Step) *graph.Node {
	if st.Node < 0 {
		return nil
	}
	return l.g.Nodes[st.Node]
}

func (l *lowerer) stepErr(format string, args ...any) error {
	what := "step"
	if l.step != nil {
		if l.step.Node >= 0 {
			what = fmt.Sprintf("node %q", l.step.Name)
		} else {
			what = fmt.Sprintf("step %s", l.step.Kernel)
		}
	}
	return planErr("%s: %s", what, fmt.Sprintf(format, args...))
}

func (l *lowerer) notLowered(n *graph.Node, format string, args ...any) error {
	if n == nil && l.step == nil {
		return &NotLoweredError{Node: "(host transfers)", Op: "io", Why: fmt.Sprintf(format, args...)}
	}
	if n == nil {
		return &NotLoweredError{Node: l.step.Name, Op: l.step.Kernel, Why: fmt.Sprintf(format, args...)}
	}
	return &NotLoweredError{Node: n.Name, Op: n.Op, Why: fmt.Sprintf(format, args...)}
}

// lowerStep dispatches one step.
func (l *lowerer) lowerStep(st *plan.Step) error {
	n := l.node(st)
	if st.Kernel == "folded" {
		if n == nil {
			return l.stepErr("an inserted step cannot be folded")
		}
		return nil
	}
	if n == nil {
		switch st.Kernel {
		case "relayout":
			return l.relayout(st)
		case "pack":
			return l.pack(st)
		}
		return l.stepErr("unknown inserted step kernel %q", st.Kernel)
	}
	switch n.Op {
	case "MatMul", "Gemm":
		return l.product(st, n)
	case "Transpose":
		return l.transpose(st, n)
	case "Reshape", "Flatten", "Identity", "Squeeze", "Unsqueeze":
		return l.reshape(st, n)
	case "Cast":
		return l.cast(st, n)
	case "Softmax", "LogSoftmax", "LayerNormalization", "ReduceMean", "ReduceSum":
		return l.rows(st, n)
	}
	if MoveOps[n.Op] {
		return l.dataMove(st, n)
	}
	if _, ok := compareOps[n.Op]; ok {
		return l.compare(st, n)
	}
	if n.Op == "Not" {
		return l.compare(st, n)
	}
	if _, ok := unaryOps[n.Op]; ok {
		return l.unary(st, n)
	}
	if _, ok := binaryOps[n.Op]; ok {
		return l.binary(st, n)
	}
	if n.Op == "Where" {
		return l.where(st, n)
	}
	return l.notLowered(n, "no lowering for this operator")
}

// ioTensors returns a step's input and output tensors (nil for -1),
// checking their count and values against the node.
func (l *lowerer) ioTensors(st *plan.Step, n *graph.Node) (ins, outs []*layout.Tensor, err error) {
	if len(st.Inputs) != len(n.Inputs) || len(st.Outputs) != len(n.Outputs) {
		return nil, nil, l.stepErr("%d input and %d output tensors for a node of %d inputs and %d outputs", len(st.Inputs), len(st.Outputs), len(n.Inputs), len(n.Outputs))
	}
	for k, id := range st.Inputs {
		if id < 0 {
			ins = append(ins, nil)
			continue
		}
		t, err := l.tensor(id, n.Inputs[k], fmt.Sprintf("input %d", k))
		if err != nil {
			return nil, nil, err
		}
		ins = append(ins, t)
	}
	for k, id := range st.Outputs {
		if id < 0 {
			if k == 0 {
				return nil, nil, l.stepErr("no tensor for output 0")
			}
			outs = append(outs, nil)
			continue
		}
		t, err := l.tensor(id, n.Outputs[k], fmt.Sprintf("output %d", k))
		if err != nil {
			return nil, nil, err
		}
		outs = append(outs, t)
	}
	return ins, outs, nil
}

// hostRooted reports whether v is a graph input seen through data
// movement only.
func hostRooted(v *graph.Value) bool {
	r := viewRoot(v)
	return r != nil && r.Producer == nil && r.Const == nil
}

func constRooted(v *graph.Value) bool {
	r := viewRoot(v)
	return r != nil && r.Const != nil
}

// viewRoot follows v back through data-movement nodes to the value they
// start from (nil when another node is in the way).
func viewRoot(v *graph.Value) *graph.Value {
	for v.Producer != nil {
		switch v.Producer.Op {
		case "Reshape", "Flatten", "Identity", "Squeeze", "Unsqueeze", "Transpose":
			v = v.Producer.Inputs[0]
		default:
			return nil
		}
	}
	return v
}

// BoolWords returns raw BOOL bytes as the device's FP32 words.
func BoolWords(raw []byte) []byte {
	out := make([]byte, 4*len(raw))
	for i, b := range raw {
		if b != 0 {
			out[4*i+2], out[4*i+3] = 0x80, 0x3f
		}
	}
	return out
}

// elemType names an element type for messages.
func elemType(d onnx.DataType) string { return strings.ToLower(d.String()) }
