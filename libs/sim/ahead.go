package sim

import "ipu.local/libs/isa"

// Running ahead. An instruction that touches only its context's own state
// (registers, pc, repeat loop, fp8, accumulator) gives the same result
// whenever the other contexts issue theirs, so a context runs a stretch
// of them in one call (ahead) at the issue cycles it would have had,
// without the issue loop's per-cycle work. Loads may run ahead too, up to
// the read bound: the first cycle at which another context might write
// memory or start a worker (readBound). Stores and everything that acts
// on the tile (run, exit, sync, exchange, host) stop the stretch and go
// through the issue loop in cycle order.
//
// A context that ran ahead may be past the cycle at which the tile stops
// (another context's fault, halt). Its state before the second
// instruction of its latest stretch is kept (ckpt), and rewind replays the
// stretch up to the stop cycle. No memory write happened meanwhile: the
// stretch stayed below the read bound as soon as it read memory.

// ckpt is a context's state before the second instruction of its latest
// stretch.
type ckpt struct {
	valid, accSaved bool
	t               int64 // issue cycle of the instruction after the checkpoint
	lastT           int64 // issue cycle of the stretch's last instruction
	n               int64 // instructions the stretch ran after the checkpoint
	pc, fp8         uint32
	m, a            [16]uint32
	loopOn          bool
	loopStart       uint32
	loopEnd         uint32
	loopRem         uint32
	acc             [64]float32
}

func (ck *ckpt) save(c *context, t int64) {
	ck.valid, ck.accSaved, ck.t = true, false, t
	ck.pc, ck.fp8, ck.m, ck.a = c.pc, c.fp8, c.m, c.a
	ck.loopOn, ck.loopStart, ck.loopEnd, ck.loopRem = c.loopOn, c.loopStart, c.loopEnd, c.loopRem
}

func (ck *ckpt) restore(c *context) {
	c.pc, c.fp8, c.m, c.a = ck.pc, ck.fp8, ck.m, ck.a
	c.loopOn, c.loopStart, c.loopEnd, c.loopRem = ck.loopOn, ck.loopStart, ck.loopEnd, ck.loopRem
	if ck.accSaved {
		c.acc = ck.acc
	}
	c.forbid &^= fNoLoop
	if c.loopOn {
		c.forbid |= fNoLoop
	}
}

// rewind puts every context that ran past cycle end back to its state at
// end; it returns the change in the instruction count.
func (x *exec) rewind(end int64) int64 {
	var delta int64
	for k := range x.ck {
		ck := &x.ck[k]
		if !ck.valid || ck.lastT < end {
			continue
		}
		c := &x.t.ctx[k]
		ck.restore(c)
		delta -= ck.n
		_, n := x.ahead(k, c, ck.t, end, true)
		delta += n
		ck.valid = false
	}
	return delta
}

// readBound returns the first cycle at which a context other than k might
// write memory or start a worker, as seen from cycle now: a running worker
// j issues at wnext[j] and then at least every 6 cycles, a supervisor
// waiting for workers not before the last of them exits.
func (x *exec) readBound(k int, now int64) int64 {
	p := x.prog
	b := never
	for j := 0; j < numWorkers; j++ {
		if j != k && x.running&(1<<j) != 0 {
			b = min(b, x.wnext[j]+numWorkers*x.dist(p.distW, &x.t.ctx[j]))
		}
	}
	if k == supCtx {
		return b
	}
	switch {
	case x.sblock == 0:
		start := max(x.snext, now)
		if x.running == 1<<numWorkers-1 {
			// Every slot is taken: the supervisor issues only after an
			// exit, and k does not exit in its stretch.
			exit := never
			for j := 0; j < numWorkers; j++ {
				if j != k {
					exit = min(exit, x.wnext[j]+numWorkers*x.dist(p.distE, &x.t.ctx[j]))
				}
			}
			start = max(start, exit+1)
		}
		if start < never-1 {
			b = min(b, start+numWorkers*x.dist(p.distW, &x.t.ctx[supCtx]))
		}
	case x.sblock&(1<<k) == 0:
		// k itself does not wake the supervisor: the last exit of the
		// others does.
		wake := int64(0)
		for j := 0; j < numWorkers; j++ {
			if x.sblock&(1<<j) != 0 {
				wake = max(wake, x.wnext[j]+numWorkers*x.dist(p.distE, &x.t.ctx[j]))
			}
		}
		b = min(b, wake+1)
	}
	return b
}

// dist returns a lower bound on the instructions context c issues before a
// boundary of table d (distW or distE): the table's, or, inside a repeat
// body with no boundary, the rest of the repeats and the table's at the
// body's end.
func (x *exec) dist(d []uint32, c *context) int64 {
	p := x.prog
	idx := (c.pc - p.base) >> 2
	if c.pc&3 != 0 || idx >= uint32(len(d)) {
		return 0
	}
	n := int64(d[idx])
	if c.loopOn && c.pc >= c.loopStart && c.pc < c.loopEnd {
		start, end := (c.loopStart-p.base)>>2, (c.loopEnd-p.base)>>2
		if end <= uint32(len(d)) && p.body[start] >= end-start {
			in := int64(end-idx) + int64(c.loopRem-1)*int64(end-start)
			if end < uint32(len(d)) {
				in += int64(d[end])
			} else {
				in++ // the fetch at end faults
			}
			n = max(n, min(in, distCap))
		}
	}
	return n
}

// ahead runs context k from issue cycle t while its instructions are
// neither global nor faulting and issue before horizon (and, once it read
// memory, before the read bound); replay rewinds, with no bound. It
// returns the next issue cycle and the instructions run; 0 when the first
// would fault (the caller reports it).
func (x *exec) ahead(k int, c *context, t, horizon int64, replay bool) (int64, int64) {
	p := x.prog
	insts := p.insts
	ninst := uint32(len(insts))
	forbid := c.forbid | fGlobal
	bound := int64(-1)
	ck := &x.ck[k]
	switch {
	case replay:
		bound = never
	case horizon > t+1: // more than one instruction: keep the state
		ck.save(c, t)
	default:
		ck.valid = false
	}
	saveAcc := ck.valid && !replay
	t0, lastT := t, t
	pc := c.pc
	var n int64
	for {
		idx := (pc - p.base) >> 2
		if pc&3 != 0 || idx >= ninst || t >= horizon {
			break
		}
		in := &insts[idx]
		if in.flags&forbid != 0 {
			break
		}
		body := x.repeatable(k, c, idx, pc)
		if bound < 0 && (in.flags&fRead != 0 || body != nil && reads(body)) {
			bound = x.readBound(k, t0)
			if t != t0 && t >= bound {
				break
			}
			horizon = min(horizon, bound)
		}
		if body != nil || (in.op == isa.AMPH || in.op == isa.AMPF) && c.loopOn && c.loopStart == pc && c.loopEnd == pc+4 {
			if next, cnt, last, at := x.repeat(k, c, body, in, pc, t, horizon, saveAcc); cnt > 0 {
				n += cnt
				t, lastT, pc = next, last, at
				if !c.loopOn {
					forbid &^= fNoLoop
				}
				continue
			}
		}
		var npc uint32
		var cyc, wait int64
		if p.simple[idx] > 0 {
			var more int64
			npc, t, more = x.simpleBlock(c, idx, pc, t, horizon, forbid)
			n += more
			cyc = 1
		} else {
			var ok bool
			if npc, cyc, wait, ok = x.step(k, c, in, pc, t, saveAcc); !ok {
				break
			}
			c.m[15], c.a[15] = 0, 0
		}
		pc, forbid = loopNext(c, npc, forbid)
		n++
		lastT = t
		t = nextIssue(k, t, cyc, wait)
	}
	c.pc = pc
	c.forbid = forbid &^ fGlobal
	if !replay && ck.valid {
		ck.n, ck.lastT = n, lastT
	}
	return t, n
}

// loopNext applies the repeat loop to the pc after an instruction.
func loopNext(c *context, npc uint32, forbid uint8) (uint32, uint8) {
	if !c.loopOn {
		return npc, forbid
	}
	forbid |= fNoLoop
	if npc == c.loopEnd {
		if c.loopRem > 1 {
			npc = c.loopStart
			c.loopRem--
		} else {
			c.loopOn = false
			forbid &^= fNoLoop
		}
	}
	return npc, forbid
}

// nextIssue is context k's next issue cycle after an instruction of cyc
// cycles issued at t and a delay of wait.
func nextIssue(k int, t, cyc, wait int64) int64 {
	if k == supCtx {
		return t + numWorkers*cyc + wait
	}
	t += numWorkers * cyc
	if wait != 0 {
		t = slotAt(t+wait, k)
	}
	return t
}

// simpleBlock runs the block of simple instructions at insts[idx] (pc)
// from issue cycle t, each 6 cycles after the previous (the supervisor's
// too: no worker runs, or the horizon allows one), and the branch closing
// it with it. It returns the next pc, the issue cycle of the last
// instruction run and how many ran beyond one.
func (x *exec) simpleBlock(c *context, idx, pc uint32, t, horizon int64, forbid uint8) (uint32, int64, int64) {
	insts := x.prog.insts
	cnt := int64(x.prog.simple[idx])
	if horizon-t < numWorkers*cnt {
		// At least the instruction at t: ahead takes its first one
		// even when a read bound at or before t cut the horizon (a
		// repeat body that reads, entered with an instruction that
		// does not).
		cnt = max(1, (horizon-t+numWorkers-1)/numWorkers)
	}
	if c.loopOn && c.loopEnd > pc {
		cnt = min(cnt, int64(c.loopEnd-pc)/4)
	}
	runSimple(c, insts[idx:int64(idx)+cnt])
	npc := pc + 4*uint32(cnt)
	more := cnt - 1
	t += numWorkers * (cnt - 1)
	// Branches fault in a repeat body: the issue loop reports that.
	j := int64(idx) + cnt
	if j >= int64(len(insts)) || c.loopOn || t+numWorkers >= horizon || insts[j].flags&forbid != 0 {
		return npc, t, more
	}
	target, ok := branchTo(c, &insts[j], npc)
	if !ok {
		return npc, t, more
	}
	more++
	t += numWorkers
	if target == pc {
		var n int64
		t, n, target = loopBlock(c, insts[idx:j+1], pc, t, 0, horizon)
		more += n
	}
	return target, t, more
}

// repeatable returns the body of the repeat loop of worker k starting at
// insts[idx] (pc) when repeatBody may run it, else nil.
func (x *exec) repeatable(k int, c *context, idx, pc uint32) []inst {
	if !c.loopOn || pc != c.loopStart || c.loopRem <= 1 || k == supCtx {
		return nil
	}
	n := (c.loopEnd - pc) / 4
	if x.prog.rep[idx] < n {
		return nil
	}
	return x.prog.insts[idx : idx+n]
}

// repeat runs iterations of a repeat body at pc: a repeatable one
// (repeatBody) or a single amph or ampf (ampRepeat). It returns what repeatBody
// does.
func (x *exec) repeat(k int, c *context, body []inst, in *inst, pc uint32, t, horizon int64, saveAcc bool) (int64, int64, int64, uint32) {
	if body != nil {
		return x.repeatBody(k, c, body, pc, t, horizon, saveAcc)
	}
	if ck := &x.ck[k]; saveAcc && !ck.accSaved {
		ck.acc, ck.accSaved = c.acc, true
	}
	next, n, last := x.ampRepeat(c, in, t, horizon)
	if c.loopOn {
		return next, n, last, pc
	}
	return next, n, last, c.loopEnd
}
