package lower

// Reusing the lowering of steps across plans (pricing only). The
// planner prices many plans that differ in a few steps: a step whose
// kernel, tensors (values and layouts) and inputs' rounding counts are
// those of a step lowered before gives the same kernels, transfers and
// buffers, so the second lowering replays the first's (the kernels
// keep their cached costs). Programs built so are for pricing: their
// buffers and kernels are shared with other programs.

import (
	"fmt"
	"slices"
	"strings"

	"ipu.local/formats/obj"
	"ipu.local/formats/plan"
	"ipu.local/libs/graph"
	"ipu.local/libs/layout"
	"ipu.local/libs/prog"
)

// StepCache holds lowered steps by key.
type StepCache struct {
	m map[string]*fragment
	// valid holds the tensor layouts validated already.
	valid map[string]bool
	// bounds: merged exchange supersteps' bound cells, merged the
	// supersteps (compact.go).
	bounds map[string]*int64
	merged map[string]*mergedStep
	// tensors: the layouts read last for the plan's tensors, by ID.
	tensors map[int]cachedTensor
	// Hits and Misses count the lookups, Evicted the fragments dropped.
	Hits, Misses, Evicted int
	// lowerings counts the lowerings through the cache; a fragment no
	// lowering of the last keepLowerings used is dropped (evict).
	lowerings int
}

// keepLowerings is how many lowerings a fragment stays unused before the
// cache drops it. The search prices neighbours of one point: the
// point's own fragments are used by every lowering, a rejected
// neighbour's changed steps by none after it. Unbounded, the caches
// grew through the whole search: with this bound and results without
// builders (planner), the BERT-base FP16 layer's search peaks at about
// 210 MB live instead of 444 MB.
const keepLowerings = 8

// begin starts a lowering through the cache.
func (c *StepCache) begin() { c.lowerings++ }

// evict drops the fragments no lowering of the last keepLowerings used.
// A price does not depend on what the cache holds, only the time it
// takes.
func (c *StepCache) evict() {
	for k, f := range c.m {
		if c.lowerings-f.used >= keepLowerings {
			delete(c.m, k)
			c.Evicted++
		}
	}
	for k, m := range c.merged {
		if c.lowerings-m.used >= keepLowerings {
			delete(c.merged, k)
		}
	}
}

// NewStepCache returns an empty cache.
func NewStepCache() *StepCache {
	return &StepCache{m: map[string]*fragment{}, valid: map[string]bool{}, bounds: map[string]*int64{}, merged: map[string]*mergedStep{}, tensors: map[int]cachedTensor{}}
}

// cachedTensor is a layout that a lowering through the cache read from a
// plan tensor and checked, on tiles tiles of graph g, and its key.
type cachedTensor struct {
	t     *layout.Tensor
	key   string
	g     *graph.Graph
	tiles int
}

// tensor returns the layout read last for a plan tensor with pt's ID
// and its key, when that tensor was pt's equal, on as many tiles of the
// same graph (nil otherwise, and without a cache). The planner's points
// share most of their tensors: reading them again was a tenth of
// pricing one, and most of its allocations.
func (c *StepCache) tensor(pt plan.Tensor, g *graph.Graph, tiles int) (*layout.Tensor, string) {
	if c == nil {
		return nil, ""
	}
	e, ok := c.tensors[pt.ID]
	if !ok || e.g != g || e.tiles != tiles || !ReadsAs(pt, e.t) {
		return nil, ""
	}
	return e.t, e.key
}

// keepTensor keeps t, read and checked, as the layout of its plan
// tensor (see tensor); the lowering does not change it.
func (c *StepCache) keepTensor(t *layout.Tensor, key string, g *graph.Graph, tiles int) {
	if c != nil {
		c.tensors[t.ID] = cachedTensor{t: t, key: key, g: g, tiles: tiles}
	}
}

// ReadsAs reports whether plan tensor pt reads as layout t: the same
// tensor, value, layout and pieces (its element type is its value's).
func ReadsAs(pt plan.Tensor, t *layout.Tensor) bool {
	if pt.ID != t.ID || pt.Value != t.Value || pt.Name != t.Name || pt.Transposed != t.Transposed || pt.Pad != t.Pad ||
		pt.Layout != t.Kind.String() || pt.Source != t.Source.String() || len(pt.Shape) != len(t.Shape) || len(pt.Pieces) != len(t.Pieces) {
		return false
	}
	for d, n := range pt.Shape {
		if n != int64(t.Shape[d]) {
			return false
		}
	}
	for k, pc := range pt.Pieces {
		q := t.Pieces[k]
		if pc.Tile != q.Tile || len(pc.Region) != len(q.Box) {
			return false
		}
		for d, r := range pc.Region {
			if r[0] != int64(q.Box[d].Lo) || r[1] != int64(q.Box[d].Hi) {
				return false
			}
		}
	}
	return true
}

// fragment is what one step added to a program.
type fragment struct {
	// appended: kernels the step added to the compute superstep that was
	// current when it started, by tile.
	appended map[int][]*prog.Kernel
	name     string
	// steps: the supersteps it added.
	steps []*prog.Superstep
	bufs  []*prog.Buffer
	outs  [][]prog.Ref // the storage of each output tensor (by position)
	// ins: the storage of each input tensor (by position) it read: a
	// replay's kernels read these buffers, which are the ones the
	// replaying program's producers wrote only when those steps were
	// lowered in the same program; replay records the rest as aliases,
	// so that compaction sees the dependency (compact.go).
	ins [][]prog.Ref
	// needs: what the step's lowering asked of its inputs' buffers (the
	// AMP's B operand interleaved, its A operand not), which replay asks
	// of the replaying program's buffers; states: what it left its own
	// buffers (bufs), which replay restores (asks.go).
	needs  []bufferNeed
	states []ownState
	// zeros: the step's asks of the program's zeros, whose buffer was
	// zero (its kernels read it): replay asks them of its program's,
	// which stands for zero (an alias).
	zeros []zeroAsk
	zero  *prog.Buffer
	acc   map[int]int64
	// used is the cache's lowering count when a lowering last used it.
	used int
	// appendedSum and stepSums (by steps, nil but for compute ones): the
	// accesses of the step's parts, for compaction (partSum).
	appendedSum *partSum
	stepSums    []*partSum
}

// kernelCount is the number of kernels in work.
func kernelCount(work map[int][]*prog.Kernel) int {
	n := 0
	for _, ks := range work {
		n += len(ks)
	}
	return n
}

// register records the fragment's parts in l.sums: its appended kernels
// as the next part of superstep cur (markPart marked where it starts),
// and each of steps' compute supersteps (the program's, by position)
// as their first.
func (f *fragment) register(l *lowerer, cur *prog.Superstep, steps []*prog.Superstep) {
	if len(f.appended) > 0 {
		l.sums.set(cur, len(l.parts[cur]), f.appendedSum)
	}
	for i, s := range steps {
		if f.stepSums[i] != nil {
			l.sums.set(s, 0, f.stepSums[i])
		}
	}
}

// stepKey identifies a step by what its lowering depends on.
func (l *lowerer) stepKey(st *plan.Step) string {
	var b strings.Builder
	n := 256 // the step's own fields; then each tensor's layout key (tens of KB on 1472 tiles) and a few numbers
	for _, ids := range [][]int{st.Inputs, st.Outputs} {
		for _, id := range ids {
			if id >= 0 {
				n += len(l.key(id)) + 48
			}
		}
	}
	b.Grow(n)
	fmt.Fprintf(&b, "%d|%s|%s|%+v|%v|%s|%s|", st.Node, st.Name, st.Kernel, st.Split, st.Tiles, st.CastOrder, st.Stationary)
	for _, id := range st.Inputs {
		if id < 0 {
			b.WriteString("-;")
			continue
		}
		t := l.tensors[id]
		fmt.Fprintf(&b, "%d:%d:%s:%s;", t.Value, l.acc[t.Value], t.Source, l.key(id))
	}
	b.WriteString("|")
	for _, id := range st.Outputs {
		if id < 0 {
			b.WriteString("-;")
			continue
		}
		t := l.tensors[id]
		fmt.Fprintf(&b, "%d:%s:%s;", t.Value, t.Source, l.key(id))
	}
	return b.String()
}

// key is tensor id's layout.Tensor.Key, made once.
func (l *lowerer) key(id int) string {
	if l.keys[id] == "" {
		l.keys[id] = l.tensors[id].Key()
	}
	return l.keys[id]
}

// lowerCached lowers st, or replays its earlier lowering.
func (l *lowerer) lowerCached(st *plan.Step) error {
	c := l.opt.Cache
	// Inputs from the host or the tile images are materialised first,
	// so that the step's own lowering is all the fragment holds.
	for _, id := range st.Inputs {
		if id >= 0 && l.refs[id] == nil && l.tensors[id].Source != 0 {
			if _, err := l.read(l.tensors[id]); err != nil {
				return err
			}
		}
	}
	key := l.stepKey(st)
	if f, ok := c.m[key]; ok {
		c.Hits++
		f.used = c.lowerings
		l.replay(st, f)
		return nil
	}
	c.Misses++
	// Capture: the superstep count, the current compute superstep's
	// kernels by tile, the buffer count, the inputs' storage.
	nsteps, nbufs := len(l.out.Steps), len(l.out.Buffers)
	ins := make([][]prog.Ref, len(st.Inputs))
	for k, id := range st.Inputs {
		if id >= 0 {
			ins[k] = l.refs[id]
		}
	}
	cur := l.cur
	if cur != nil && l.out.Steps[len(l.out.Steps)-1] != cur {
		cur = nil
	}
	var before map[int]int
	if cur != nil {
		before = make(map[int]int, len(cur.Work))
		for t, ks := range cur.Work {
			before[t] = len(ks)
		}
	}
	nasks, nzeros := len(l.asks), len(l.zeroAsks)
	if err := l.lowerStep(st); err != nil {
		return err
	}
	f := &fragment{appended: map[int][]*prog.Kernel{}, acc: map[int]int64{}, name: st.Name, ins: ins, used: c.lowerings, needs: needsOf(l.asks[nasks:], ins)}
	l.asks = l.asks[:nasks]
	if len(l.zeroAsks) > nzeros {
		f.zeros, f.zero = slices.Clone(l.zeroAsks[nzeros:]), l.zero
	}
	l.zeroAsks = l.zeroAsks[:nzeros]
	if cur != nil {
		for t, ks := range cur.Work {
			if n := before[t]; len(ks) > n {
				f.appended[t] = append([]*prog.Kernel(nil), ks[n:]...)
			}
		}
	}
	for _, s := range l.out.Steps[nsteps:] {
		if s.Kind == obj.Exchange && s.Bound == nil {
			// One bound for every replay (see prog.Superstep.Bound).
			s.Bound = new(int64)
			*s.Bound = -1
		}
		f.steps = append(f.steps, copyStep(s))
		var sum *partSum
		if s.Kind == obj.Compute {
			sum = &partSum{kernels: kernelCount(s.Work)}
		}
		f.stepSums = append(f.stepSums, sum)
	}
	f.appendedSum = &partSum{kernels: kernelCount(f.appended)}
	f.register(l, cur, l.out.Steps[nsteps:])
	for _, b := range l.out.Buffers[nbufs:] {
		if b != l.zero { // the program's, which the step may have made
			f.bufs = append(f.bufs, b)
		}
	}
	f.states = ownStates(f.bufs)
	for _, id := range st.Outputs {
		if id < 0 {
			f.outs = append(f.outs, nil)
			continue
		}
		f.outs = append(f.outs, l.refs[id])
		f.acc[l.tensors[id].Value] = l.acc[l.tensors[id].Value]
	}
	c.m[key] = f
	return nil
}

// copyStep copies a superstep so that later steps appending kernels to a
// replayed superstep do not change the cached one.
func copyStep(s *prog.Superstep) *prog.Superstep {
	c := *s
	c.Work = make(map[int][]*prog.Kernel, len(s.Work))
	for t, ks := range s.Work {
		c.Work[t] = append([]*prog.Kernel(nil), ks...)
	}
	return &c
}

// replay adds a cached fragment to the program.
func (l *lowerer) replay(st *plan.Step, f *fragment) {
	for k, id := range st.Inputs {
		if id < 0 || len(f.ins[k]) != len(l.refs[id]) {
			continue
		}
		for j, r := range f.ins[k] {
			if cur := l.refs[id][j].Buf; r.Buf != nil && cur != nil && r.Buf != cur {
				if l.alias == nil {
					l.alias = map[*prog.Buffer]*prog.Buffer{}
				}
				l.alias[r.Buf] = cur
			}
		}
	}
	restore(f.bufs, f.states)
	l.applyNeeds(st, f.needs)
	var cur *prog.Superstep
	if len(f.appended) > 0 {
		cur = l.compute(f.name)
		if len(cur.Work) < len(f.appended) {
			// A map sized for every tile at once: grown tile by tile,
			// its rehashing was a twentieth of the search's replays.
			w := make(map[int][]*prog.Kernel, len(cur.Work)+len(f.appended))
			for t, ks := range cur.Work {
				w[t] = ks
			}
			cur.Work = w
		}
		for t, ks := range f.appended {
			cur.Work[t] = append(cur.Work[t], ks...)
		}
	}
	nsteps := len(l.out.Steps)
	for _, s := range f.steps {
		c := copyStep(s)
		l.out.Steps = append(l.out.Steps, c)
		if c.Kind == obj.Compute {
			l.cur = c
		} else {
			l.cur = nil
		}
	}
	f.register(l, cur, l.out.Steps[nsteps:])
	l.out.Buffers = append(l.out.Buffers, f.bufs...)
	for _, z := range f.zeros {
		l.zeroBuffer(z.t, z.n)
	}
	if f.zero != nil && f.zero != l.zero {
		if l.alias == nil {
			l.alias = map[*prog.Buffer]*prog.Buffer{}
		}
		l.alias[f.zero] = l.zero
	}
	for k, id := range st.Outputs {
		if id >= 0 {
			l.refs[id] = f.outs[k]
		}
	}
	for v, a := range f.acc {
		l.acc[v] = a
	}
}
