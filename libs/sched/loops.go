package sched

import (
	"fmt"

	"ipu.local/libs/arch"
	"ipu.local/libs/codegen"
	"ipu.local/libs/isa"
)

// The search for repeat loops in one tile's straight-line code (see
// repeat.go).

// xevent is one send, send2 or recv of the straight-line code.
type xevent struct {
	at  int   // index in the code
	t   int64 // issue cycle
	op  isa.Op
	val [3]uint32 // operand values: d, a, b
	// regs are the register values after the event (valid: the
	// registers the code has loaded so far).
	regs  [16]uint32
	valid uint16
}

// compressor holds one tile's compression.
type compressor struct {
	code  []isa.Inst
	regs  uint16 // the registers the code may write
	evs   []xevent
	live  []uint16 // live[i]: registers read after instruction i before written
	out   []isa.Inst
	table []uint32
	loads []int // indices in out of the li of a table address
	done  int   // code[:done] is in out
	st    CompressStats
}

// newCompressor replays the tile's code for its events, their cycles and
// the registers, and computes register liveness.
func newCompressor(p *arch.Preset, tc TileCode, regs uint16) (*compressor, error) {
	at := make([]int64, len(tc.Code))
	if _, _, err := issueCode(&tc, false, func(e issued) error {
		at[e.pc] = e.t
		return nil
	}); err != nil {
		return nil, err
	}
	n := 0
	for _, in := range tc.Code {
		if in.Op == isa.SEND || in.Op == isa.SEND2 || in.Op == isa.RECV {
			n++
		}
	}
	c := &compressor{code: tc.Code, regs: regs &^ (1 << 15), evs: make([]xevent, 0, n)}
	var vals [16]uint32
	var valid uint16
	for i, in := range tc.Code {
		switch in.Op {
		case isa.LI:
			vals[in.D], valid = uint32(in.Imm), valid|1<<in.D
		case isa.LIH:
			vals[in.D] = vals[in.D]&0xFFFF | uint32(in.Imm)<<16
		case isa.SEND, isa.SEND2, isa.RECV:
			vals[15] = 0
			c.evs = append(c.evs, xevent{at: i, t: at[i], op: in.Op, val: [3]uint32{vals[in.D], vals[in.A], vals[in.B]}, regs: vals, valid: valid | 1<<15})
		}
	}
	c.live = make([]uint16, len(tc.Code))
	live := uint16(0)
	for i := len(tc.Code) - 1; i >= 0; i-- {
		c.live[i] = live
		in := tc.Code[i]
		switch in.Op {
		case isa.LI:
			live &^= 1 << in.D
		case isa.LIH:
			live |= 1 << in.D
		case isa.SEND, isa.SEND2, isa.RECV:
			live |= 1<<in.D | 1<<in.A | 1<<in.B
		}
		live &^= 1 << 15
	}
	return c, nil
}

// scan finds runs of regular events in order and compresses those that
// pay.
func (c *compressor) scan() {
	for j := 0; j < len(c.evs); {
		k := c.runAt(j)
		n := 0
		for kk := k; kk >= minRun && kk > k-6 && n == 0; kk-- {
			if lp, ok := c.plan(j, kk); ok {
				c.emit(lp)
				n = kk
			}
		}
		j += max(n, 1)
	}
	c.out = append(c.out, c.code[c.done:]...)
}

// runAt returns the events from j on of one op at one period.
func (c *compressor) runAt(j int) int {
	if j+1 >= len(c.evs) {
		return 1
	}
	g := c.evs[j+1].t - c.evs[j].t
	k := 1
	for j+k < len(c.evs) && k < maxCount && c.evs[j+k].op == c.evs[j].op && c.evs[j+k].t-c.evs[j+k-1].t == g {
		k++
	}
	return k
}

// slot is how the loop gets one operand.
type slot struct {
	kind   posKind
	reg    uint8
	stride int32
	load   uint32 // the value a setup li loads (const, stride)
	setup  bool   // a setup li loads reg
}

type posKind uint8

const (
	fixed  posKind = iota // the same value every event
	stride                // a constant step: addi
	patch                 // other values: ldm from the table
)

// loopPlan is a run compressed: events j..j+k-1 at period g.
type loopPlan struct {
	j, k     int
	from, to int // the code replaced: code[from..to]
	g        int64
	slots    [3]slot
	fix      []slot // registers loaded before the loop for later code
	ptr      int    // the table pointer register (-1: no patch)
	pre      int64  // cycles before the setup: 0, or a delay of pre-6
	rotated  bool   // the loop begins with the event (see fit)
	fill     int64  // cycles of the body's delay: 0, or a delay of fill-6
	setup    int    // setup instructions, rpti included
	body     int
}

// plan lays out the loop of events j..j+k-1, or says it does not fit
// or does not pay.
func (c *compressor) plan(j, k int) (loopPlan, bool) {
	first, last := &c.evs[j], &c.evs[j+k-1]
	lp := loopPlan{j: j, k: k, to: last.at, g: c.evs[j+1].t - first.t, ptr: -1}
	var start [16]uint32
	var valid uint16
	prev := int64(firstIssue)
	if j > 0 {
		e := &c.evs[j-1]
		lp.from, start, valid, prev = e.at+1, e.regs, e.valid, e.t
	}
	// Registers later code reads before writing them: each must end with
	// what the old code left, kept from the start, or as the last value of
	// an operand, or loaded before the loop.
	out := c.live[lp.to] & c.regs
	kept := uint16(0)
	for r := range 15 {
		if out&(1<<r) == 0 {
			continue
		}
		if last.valid&(1<<r) == 0 {
			return lp, false
		}
		if valid&(1<<r) != 0 && start[r] == last.regs[r] {
			kept |= 1 << r
		}
	}
	for s := range 3 {
		lp.slots[s] = c.slotOf(j, k, s, start, valid&^(out&^kept))
	}
	if !c.assign(&lp, out, out&^kept) {
		return lp, false
	}
	return c.fit(lp, prev)
}

// assign gives the loop's operands that need one a register: a register
// of must (registers later code reads, which must end with the old
// code's values) that ends with the operand's last value, else a free
// one (the code's registers but those of out and the constants' held
// ones); the table pointer too. The registers of must left are loaded
// before the loop (lp.fix). It counts the setup instructions.
func (c *compressor) assign(lp *loopPlan, out, must uint16) bool {
	last := &c.evs[lp.j+lp.k-1]
	free := c.regs &^ out
	for _, sl := range lp.slots {
		if sl.kind == fixed && !sl.setup {
			free &^= 1 << sl.reg
		}
	}
	lp.setup = 1 // rpti
	need := uint16(0)
	for s := range 3 {
		if sl := &lp.slots[s]; sl.kind != fixed || sl.setup {
			need |= 1 << s
			for r := range 15 {
				if must&(1<<r) != 0 && last.regs[r] == last.val[s] {
					sl.reg, must, need = uint8(r), must&^(1<<r), need&^(1<<s)
					break
				}
			}
		}
	}
	for r := range 15 {
		if must&(1<<r) != 0 {
			lp.fix = append(lp.fix, slot{reg: uint8(r), load: last.regs[r], setup: true})
			lp.setup += codegen.ConstLen(last.regs[r])
		}
	}
	take := func() (uint8, bool) {
		for r := range 15 {
			if free&(1<<r) != 0 {
				free &^= 1 << r
				return uint8(r), true
			}
		}
		return 0, false
	}
	for s := range 3 {
		sl := &lp.slots[s]
		if need&(1<<s) != 0 {
			r, ok := take()
			if !ok {
				return false
			}
			sl.reg = r
		}
		if sl.setup {
			lp.setup += codegen.ConstLen(sl.load)
		}
		if sl.kind == patch && lp.ptr < 0 {
			p, ok := take()
			if !ok {
				return false
			}
			lp.ptr = int(p)
			lp.setup++
		}
	}
	return true
}

// slotOf decides how the loop gets operand s of events j..j+k-1, given
// the registers at the run's start (valid: those it may read).
func (c *compressor) slotOf(j, k, s int, start [16]uint32, valid uint16) slot {
	v0 := c.evs[j].val[s]
	constant := true
	for i := 1; i < k && constant; i++ {
		constant = c.evs[j+i].val[s] == v0
	}
	if constant {
		if v0 == 0 {
			return slot{kind: fixed, reg: 15}
		}
		for r := range 15 {
			if valid&(1<<r) != 0 && start[r] == v0 {
				return slot{kind: fixed, reg: uint8(r)}
			}
		}
		return slot{kind: fixed, load: v0, setup: true}
	}
	d := int32(c.evs[j+1].val[s] - v0)
	arith := d >= -1<<15 && d < 1<<15
	for i := 2; i < k && arith; i++ {
		arith = c.evs[j+i].val[s]-c.evs[j+i-1].val[s] == uint32(d)
	}
	if arith {
		return slot{kind: stride, stride: d, load: v0 - uint32(d), setup: true}
	}
	return slot{kind: patch}
}

// fit times the loop, in whichever of two forms takes less code:
//
//   - plain: the setup, rpti, then k iterations of [operand loads,
//     delay, event], the setup issuing right before the first
//     iteration, which begins g-6 cycles before the first event;
//   - rotated: the setup, the first event's operand loads, rpti, k-1
//     iterations of [event, the next event's operand loads, delay],
//     then the last event, the setup issuing right before the first
//     event: the gap before the run needs room for the setup and the
//     loads only, not for a whole period.
//
// The iteration's delay makes it last g cycles; a delay before the setup
// takes what is left of the gap after the previous event at prev.
func (c *compressor) fit(lp loopPlan, prev int64) (loopPlan, bool) {
	v := 0
	for _, sl := range lp.slots {
		if sl.kind != fixed {
			v++
		}
	}
	lp.fill = lp.g - issue*int64(v+1)
	if !delayFits(lp.fill) {
		return lp, false
	}
	lp.body = v + 1
	if lp.fill > 0 {
		lp.body++
	}
	gap := c.evs[lp.j].t - (prev + issue) // cycles before the first event's issue
	best := -1
	for _, rot := range []bool{false, true} {
		pre := gap - (lp.g - issue) - issue*int64(lp.setup)
		n := lp.setup + lp.body
		if rot {
			pre = gap - issue*int64(lp.setup+v)
			n += v + 1
		}
		if !delayFits(pre) {
			continue
		}
		if pre > 0 {
			n++
		}
		if best < 0 || n < best {
			best, lp.pre, lp.rotated = n, pre, rot
		}
	}
	if best < 0 {
		return lp, false
	}
	patches := 0
	for _, sl := range lp.slots {
		if sl.kind == patch {
			patches++
		}
	}
	return lp, best+lp.k*patches < lp.to-lp.from+1
}

// delayFits reports whether g cycles before an instruction are nothing
// or one delay.
func delayFits(g int64) bool { return g == 0 || (g >= issue && g-issue <= maxDelay) }

// emit appends the code before the run and the loop, and records the
// loop's table and figures.
func (c *compressor) emit(lp loopPlan) {
	c.out = append(c.out, c.code[c.done:lp.from]...)
	if lp.pre > 0 {
		c.out = append(c.out, isa.Inst{Op: isa.DELAY, Imm: int32(lp.pre - issue)})
	}
	if lp.ptr >= 0 {
		c.loads = append(c.loads, len(c.out))
		c.out = append(c.out, isa.Inst{Op: isa.LI, D: uint8(lp.ptr), Imm: int32(4 * len(c.table))})
	}
	for _, sl := range append(lp.slots[:], lp.fix...) {
		if !sl.setup {
			continue
		}
		c.out = append(c.out, isa.Inst{Op: isa.LI, D: sl.reg, Imm: int32(sl.load)})
		if sl.load >= 1<<20 {
			c.out[len(c.out)-1].Imm = int32(sl.load & 0xFFFF)
			c.out = append(c.out, isa.Inst{Op: isa.LIH, D: sl.reg, Imm: int32(sl.load >> 16)})
		}
	}
	first := c.code[c.evs[lp.j].at]
	event := isa.Inst{Op: first.Op, D: lp.slots[0].reg, A: lp.slots[1].reg, B: lp.slots[2].reg}
	if !lp.rotated {
		c.out = append(c.out, isa.Inst{Op: isa.RPTI, Imm: int32(lp.k<<8 | lp.body)})
		c.emitLoads(lp, true)
		c.out = append(c.out, event)
	} else {
		c.emitLoads(lp, false)
		c.out = append(c.out, isa.Inst{Op: isa.RPTI, Imm: int32((lp.k-1)<<8 | lp.body)}, event)
		c.emitLoads(lp, true)
		c.out = append(c.out, event)
	}
	for i := range lp.k {
		for s, sl := range lp.slots {
			switch {
			case sl.kind == patch:
				c.table = append(c.table, c.evs[lp.j+i].val[s])
				c.st.PatchBytes += 4
			case sl.kind == stride:
				c.st.ElidedBytes += 4
			}
		}
	}
	c.st.Loops++
	c.done = lp.to + 1
}

// emitLoads appends the operand loads of one iteration, and with delay
// the delay that takes the iteration to its period.
func (c *compressor) emitLoads(lp loopPlan, delay bool) {
	for _, sl := range lp.slots {
		switch sl.kind {
		case stride:
			c.out = append(c.out, isa.Inst{Op: isa.ADDI, D: sl.reg, A: sl.reg, Imm: sl.stride})
		case patch:
			c.out = append(c.out, isa.Inst{Op: isa.LDMP, D: sl.reg, A: uint8(lp.ptr), Imm: 4})
		}
	}
	if delay && lp.fill > 0 {
		c.out = append(c.out, isa.Inst{Op: isa.DELAY, Imm: int32(lp.fill - issue)})
	}
}

func (lp loopPlan) String() string {
	return fmt.Sprintf("events %d..%d every %d cycles, code [%d, %d]", lp.j, lp.j+lp.k-1, lp.g, lp.from, lp.to)
}
