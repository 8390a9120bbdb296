package lower

import (
	"ipu.local/formats/plan"
	"ipu.local/libs/prog"
)

// Buffer asks. A kernel's lowering binds the buffers it reads to what
// the kernel needs of them: the AMP's B operand in interleaved memory,
// 32-byte aligned, its A operand in the other memory (unless something
// else asked for interleaved), the two apart. Those are asks of the
// program being lowered, made on buffers a step cache shares between
// programs (a fragment's outputs are the next program's inputs): a
// fragment records the asks its step made of its inputs' buffers and a
// replay makes them again of the replaying program's buffers, and a
// replay restores its own buffers to what its step left them, so that
// no ask of another program stays on them (cache.go).

// bufferAsk is what a step asks of a buffer: a region (prog.AnyRegion:
// none; weak: only when no region was asked before), an alignment (0:
// none) and a buffer to keep apart from (nil: none).
type bufferAsk struct {
	buf    *prog.Buffer
	region prog.Region
	weak   bool
	align  uint32
	apart  *prog.Buffer
}

// apply binds the buffer as asked.
func (a bufferAsk) apply() {
	b := a.buf
	if a.region != prog.AnyRegion && (!a.weak || b.Region == prog.AnyRegion) {
		b.Region = a.region
	}
	b.Align = max(b.Align, a.align)
	if a.apart != nil && a.apart != b {
		b.Apart = appendOnce(b.Apart, a.apart)
	}
}

// ask applies a and, when lowering with a step cache, records it for
// the fragment of the step being lowered.
func (l *lowerer) ask(a bufferAsk) {
	a.apply()
	if l.opt.Cache != nil {
		l.asks = append(l.asks, a)
	}
}

// bufferNeed is an ask of a fragment's step of the buffer of its input
// In's ref Ref (and to keep apart from input ApartIn's ref ApartRef;
// ApartIn -1: none).
type bufferNeed struct {
	In, Ref           int
	Region            prog.Region
	Weak              bool
	Align             uint32
	ApartIn, ApartRef int
}

// needsOf returns the asks of asks made of the inputs' buffers (ins,
// by input and ref; the first ref naming a buffer stands for it). An
// ask of a buffer the step made itself is in that buffer's state
// (ownStates).
func needsOf(asks []bufferAsk, ins [][]prog.Ref) []bufferNeed {
	find := func(b *prog.Buffer) (int, int) {
		for k, refs := range ins {
			for j, r := range refs {
				if r.Buf == b {
					return k, j
				}
			}
		}
		return -1, -1
	}
	var out []bufferNeed
	for _, a := range asks {
		in, ref := find(a.buf)
		if in < 0 {
			continue
		}
		n := bufferNeed{In: in, Ref: ref, Region: a.region, Weak: a.weak, Align: a.align, ApartIn: -1}
		if a.apart != nil {
			n.ApartIn, n.ApartRef = find(a.apart)
		}
		out = append(out, n)
	}
	return out
}

// ownState is what a fragment's step left one of its own buffers: what
// a replay restores.
type ownState struct {
	region prog.Region
	align  uint32
	apart  []*prog.Buffer
}

// ownStates records bufs' states.
func ownStates(bufs []*prog.Buffer) []ownState {
	out := make([]ownState, len(bufs))
	for i, b := range bufs {
		out[i] = ownState{region: b.Region, align: b.Align, apart: b.Apart[:len(b.Apart):len(b.Apart)]}
	}
	return out
}

// restore puts bufs back in states (ownStates): no ask or promotion of
// another program stays on them.
func restore(bufs []*prog.Buffer, states []ownState) {
	for i, b := range bufs {
		s := states[i]
		b.Region, b.Align, b.Apart, b.Promoted = s.region, s.align, s.apart, false
	}
}

// applyNeeds asks of the replaying program's input buffers what the
// fragment's step asked of its own: a constant or host input is a
// buffer of this program, and a producer's output one its fragment
// restored (the search's memory checks count the AMP's B operands
// against the interleaved region).
func (l *lowerer) applyNeeds(st *plan.Step, needs []bufferNeed) {
	buf := func(in, ref int) *prog.Buffer {
		if in < 0 || in >= len(st.Inputs) {
			return nil
		}
		id := st.Inputs[in]
		if id < 0 || ref >= len(l.refs[id]) {
			return nil
		}
		return l.refs[id][ref].Buf
	}
	for _, n := range needs {
		b := buf(n.In, n.Ref)
		if b == nil {
			continue
		}
		bufferAsk{buf: b, region: n.Region, weak: n.Weak, align: n.Align, apart: buf(n.ApartIn, n.ApartRef)}.apply()
	}
}
