package sim

import (
	"encoding/binary"

	"ipu.local/libs/isa"
)

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
		if in.flags&fRead != 0 && bound < 0 {
			bound = x.readBound(k, t0)
			if t != t0 && t >= bound {
				break
			}
			horizon = min(horizon, bound)
		}
		var cyc, wait int64
		npc := pc + 4
		if c.loopOn && pc == c.loopStart && c.loopRem > 1 && k < numWorkers && p.rep[idx] >= (c.loopEnd-pc)/4 {
			if bound < 0 && reads(insts[idx:idx+(c.loopEnd-pc)/4]) {
				bound = x.readBound(k, t0)
				if t != t0 && t >= bound {
					break
				}
				horizon = min(horizon, bound)
			}
			next, cnt, last, stopPC := x.repeatBody(k, c, insts[idx:idx+(c.loopEnd-pc)/4], pc, t, horizon, ck.valid && !replay)
			if cnt > 0 {
				n += cnt
				t, lastT, pc = next, last, stopPC
				if !c.loopOn {
					forbid &^= fNoLoop
				}
				continue
			}
		}
		if cnt := int64(p.simple[idx]); cnt > 0 {
			// A block of one-cycle register instructions: each issues 6
			// cycles after the previous (the supervisor's too: no worker
			// runs, or the horizon allows one).
			if horizon-t < numWorkers*cnt {
				cnt = (horizon - t + numWorkers - 1) / numWorkers
			}
			if c.loopOn && c.loopEnd > pc {
				cnt = min(cnt, int64(c.loopEnd-pc)/4)
			}
			runSimple(c, insts[idx:int64(idx)+cnt])
			npc = pc + 4*uint32(cnt)
			n += cnt - 1
			t += numWorkers * (cnt - 1)
			cyc = 1
			// A branch closing the block runs with it (branches fault in
			// a repeat body: the issue loop reports that).
			if j := int64(idx) + cnt; j < int64(ninst) && !c.loopOn && t+numWorkers < horizon {
				if br := &insts[j]; br.flags&forbid == 0 {
					if target, ok := branchTo(c, br, npc); ok {
						npc = target
						n++
						t += numWorkers
						if npc == pc {
							t, n, npc = loopBlock(c, insts[idx:j+1], pc, t, n, horizon)
						}
					}
				}
			}
		} else if in.op == isa.AMPH && c.loopOn && c.loopStart == pc && c.loopEnd == pc+4 {
			if ck.valid && !replay && !ck.accSaved {
				ck.acc, ck.accSaved = c.acc, true
			}
			next, cnt, last := x.ampRepeat(c, in, t, horizon)
			if cnt > 0 {
				n += cnt
				t, lastT = next, last
				if !c.loopOn {
					pc = c.loopEnd
					forbid &^= fNoLoop
				}
				continue
			}
			var ok bool
			npc, cyc, wait, ok = x.step(k, c, in, pc, t, ck.valid && !replay)
			if !ok {
				break
			}
			c.m[15], c.a[15] = 0, 0
		} else {
			var ok bool
			npc, cyc, wait, ok = x.step(k, c, in, pc, t, ck.valid && !replay)
			if !ok {
				break
			}
			c.m[15], c.a[15] = 0, 0
		}
		if c.loopOn {
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
		}
		pc = npc
		n++
		lastT = t
		if k < numWorkers {
			t += numWorkers * cyc
			if wait != 0 {
				t = slotAt(t+wait, k)
			}
		} else {
			t += numWorkers*cyc + wait
		}
	}
	c.pc = pc
	c.forbid = forbid &^ fGlobal
	if !replay && ck.valid {
		ck.n, ck.lastT = n, lastT
	}
	return t, n
}

// branchTo returns the next pc of the branch br at pc (ok false when br is
// not br, brz or brnz).
func branchTo(c *context, br *inst, pc uint32) (uint32, bool) {
	taken := pc + 4 + 4*uint32(br.imm)
	switch br.op {
	case isa.BR:
		return taken, true
	case isa.BRZ:
		if c.m[br.a&15] == 0 {
			return taken, true
		}
	case isa.BRNZ:
		if c.m[br.a&15] != 0 {
			return taken, true
		}
	default:
		return 0, false
	}
	return pc + 4, true
}

// loopBlock iterates a loop made of one block and the branch closing it
// (block, its last instruction), from pc, after an iteration whose branch
// issued at t, while the next iteration's branch issues before horizon.
// It returns that last branch's issue cycle, the instruction count and the
// next pc.
func loopBlock(c *context, block []inst, pc uint32, t, n, horizon int64) (int64, int64, uint32) {
	last := len(block) - 1
	br, end := &block[last], pc+4*uint32(last)
	per := numWorkers * int64(len(block))
	for t+per < horizon {
		runSimple(c, block[:last])
		target, _ := branchTo(c, br, end)
		n += int64(len(block))
		t += per
		if target != pc {
			return t, n, target
		}
	}
	return t, n, pc
}

// runSimple executes a block of simple instructions (isSimple).
func runSimple(c *context, block []inst) {
	m, a := &c.m, &c.a
	for i := range block {
		in := &block[i]
		switch in.op {
		case isa.ADD:
			m[in.d&15] = m[in.a&15] + m[in.b&15]
		case isa.SUB:
			m[in.d&15] = m[in.a&15] - m[in.b&15]
		case isa.MUL:
			m[in.d&15] = m[in.a&15] * m[in.b&15]
		case isa.AND:
			m[in.d&15] = m[in.a&15] & m[in.b&15]
		case isa.OR:
			m[in.d&15] = m[in.a&15] | m[in.b&15]
		case isa.XOR:
			m[in.d&15] = m[in.a&15] ^ m[in.b&15]
		case isa.SHL:
			m[in.d&15] = m[in.a&15] << (m[in.b&15] & 31)
		case isa.SHR:
			m[in.d&15] = m[in.a&15] >> (m[in.b&15] & 31)
		case isa.SAR:
			m[in.d&15] = uint32(int32(m[in.a&15]) >> (m[in.b&15] & 31))
		case isa.CMPEQ:
			m[in.d&15] = b2u(m[in.a&15] == m[in.b&15])
		case isa.CMPLT:
			m[in.d&15] = b2u(int32(m[in.a&15]) < int32(m[in.b&15]))
		case isa.CMPULT:
			m[in.d&15] = b2u(m[in.a&15] < m[in.b&15])
		case isa.MIN:
			m[in.d&15] = uint32(min(int32(m[in.a&15]), int32(m[in.b&15])))
		case isa.MAX:
			m[in.d&15] = uint32(max(int32(m[in.a&15]), int32(m[in.b&15])))
		case isa.ADDI:
			m[in.d&15] = m[in.a&15] + uint32(in.imm)
		case isa.ANDI:
			m[in.d&15] = m[in.a&15] & uint32(in.imm)
		case isa.ORI:
			m[in.d&15] = m[in.a&15] | uint32(in.imm)
		case isa.XORI:
			m[in.d&15] = m[in.a&15] ^ uint32(in.imm)
		case isa.SHLI:
			m[in.d&15] = m[in.a&15] << (uint32(in.imm) & 31)
		case isa.SHRI:
			m[in.d&15] = m[in.a&15] >> (uint32(in.imm) & 31)
		case isa.SARI:
			m[in.d&15] = uint32(int32(m[in.a&15]) >> (uint32(in.imm) & 31))
		case isa.MULI:
			m[in.d&15] = m[in.a&15] * uint32(in.imm)
		case isa.CMPEQI:
			m[in.d&15] = b2u(m[in.a&15] == uint32(in.imm))
		case isa.CMPLTI:
			m[in.d&15] = b2u(int32(m[in.a&15]) < in.imm)
		case isa.LI:
			m[in.d&15] = uint32(in.imm)
		case isa.LIH:
			m[in.d&15] = m[in.d&15]&0xFFFF | uint32(in.imm)<<16

		case isa.MTA:
			a[in.d&15] = m[in.a&15]
		case isa.MFA:
			m[in.d&15] = a[in.a&15]
		case isa.AMOV:
			a[in.d&15] = a[in.a&15]
		case isa.ALI:
			a[in.d&15] = uint32(in.imm)
		case isa.ALIH:
			a[in.d&15] = a[in.d&15]&0xFFFF | uint32(in.imm)<<16

		}
		m[15], a[15] = 0, 0
	}
}

// step executes one local or read instruction of context k issued at t;
// ok false means it would fault and did nothing. saveAcc asks to keep the
// accumulator in the checkpoint before changing it.
func (x *exec) step(k int, c *context, in *inst, pc uint32, t int64, saveAcc bool) (npc uint32, cyc, wait int64, ok bool) {
	npc = pc + 4
	cyc = int64(in.cycles)
	m := &c.m
	switch in.op {
	case isa.NOP:
	case isa.BR:
		npc = pc + 4 + 4*uint32(in.imm)
	case isa.BRZ:
		if m[in.a&15] == 0 {
			npc = pc + 4 + 4*uint32(in.imm)
		}
	case isa.BRNZ:
		if m[in.a&15] != 0 {
			npc = pc + 4 + 4*uint32(in.imm)
		}
	case isa.CALL:
		m[in.d&15] = pc + 4
		npc = pc + 4 + 4*uint32(in.imm)
	case isa.JR:
		npc = m[in.a&15]
	case isa.RPT, isa.RPTI:
		count, n := m[in.a&15], uint32(in.imm)
		if in.op == isa.RPTI {
			count, n = uint32(in.imm)>>8, uint32(in.imm)&0xFF
		}
		end := pc + 4 + 4*n
		switch {
		case count == 0:
			npc = end
		case n > 0:
			c.loopOn, c.loopStart, c.loopEnd, c.loopRem = true, npc, end, count
			c.forbid |= fNoLoop
		}

	case isa.GET:
		m[in.d&15] = x.csr(k, c, in.imm, t)
	case isa.PUT:
		c.fp8 = m[in.a&15] & fp8Mask
	case isa.DELAY:
		wait = int64(in.imm)

	case isa.AMPCLR, isa.AMPH, isa.AMPQ, isa.AMPLD:
		return x.stepAMP(k, c, in, npc, cyc, saveAcc)
	case isa.LDM, isa.LDMP, isa.LD32, isa.LD32P, isa.LD64, isa.LD64P, isa.LD128, isa.LD128P:
		ok = x.load(c, in)
		return npc, cyc, 0, ok
	case isa.H4FMA:
		a := &c.a
		setPair(a, in.d, h4fma(getPair(a, in.a), getPair(a, in.b), getPair(a, in.d), x.prog.half))
	case isa.H4MAX, isa.H4MIN:
		a := &c.a
		setPair(a, in.d, h4maxmin(getPair(a, in.a), getPair(a, in.b), in.op == isa.H4MAX))
	case isa.H4ADD, isa.H4SUB, isa.H4MUL:
		a := &c.a
		setPair(a, in.d, h4arith(in.op, getPair(a, in.a), getPair(a, in.b), 0))
	default:
		ok = stepFloat(c, in)
		return npc, cyc, 0, ok
	}
	return npc, cyc, wait, true
}

// getPair returns registers r and r+1 (mod 16) as one 64-bit value.
func getPair(a *[16]uint32, r uint8) uint64 {
	return uint64(a[r&15]) | uint64(a[(r+1)&15])<<32
}

func setPair(a *[16]uint32, r uint8, v uint64) {
	a[r&15], a[(r+1)&15] = uint32(v), uint32(v>>32)
}

func (x *exec) csr(k int, c *context, reg int32, t int64) uint32 {
	switch reg {
	case isa.CSRTileID:
		return uint32(x.id)
	case isa.CSRContext:
		return uint32(k)
	case isa.CSRCycles:
		return uint32(t)
	case isa.CSRFP8:
		return c.fp8
	case isa.CSRPhase:
		return uint32(x.phase)
	case isa.CSRTiles:
		return uint32(x.m.p.Tiles)
	}
	return 0
}

// stepAMP executes ampclr, amph, ampq and ampld.
func (x *exec) stepAMP(k int, c *context, in *inst, npc uint32, cyc int64, saveAcc bool) (uint32, int64, int64, bool) {
	if saveAcc {
		ck := &x.ck[k]
		if !ck.accSaved {
			ck.acc, ck.accSaved = c.acc, true
		}
	}
	switch in.op {
	case isa.AMPCLR:
		c.acc = [64]float32{}
	case isa.AMPH, isa.AMPQ:
		extra, f := x.amp(c, in)
		if f.kind != "" {
			return npc, cyc, 0, false
		}
		cyc += extra
	case isa.AMPLD:
		if f := x.ampRow(c, in); f.kind != "" {
			return npc, cyc, 0, false
		}
	}
	return npc, cyc, 0, true
}

// load executes the loads; false means the access faults (nothing done).
func (x *exec) load(c *context, in *inst) bool {
	addr := c.m[in.a&15]
	post := false
	switch in.op {
	case isa.LDMP, isa.LD32P, isa.LD64P, isa.LD128P:
		post = true
	default:
		addr += uint32(in.imm)
	}
	off := addr - x.lo
	mem := x.mem
	switch in.op {
	case isa.LDM, isa.LDMP:
		if off > x.size-4 || addr&3 != 0 {
			return false
		}
		c.m[in.d&15] = binary.LittleEndian.Uint32(mem[off:])
	case isa.LD32, isa.LD32P:
		if off > x.size-4 || addr&3 != 0 {
			return false
		}
		c.a[in.d&15] = binary.LittleEndian.Uint32(mem[off:])
	case isa.LD64, isa.LD64P:
		if off > x.size-8 || addr&7 != 0 {
			return false
		}
		v := binary.LittleEndian.Uint64(mem[off:])
		c.a[in.d&15], c.a[(in.d+1)&15] = uint32(v), uint32(v>>32)
	default:
		off, f := x.check("load", addr, 16, 16, chkInterleaved)
		if f.kind != "" {
			return false
		}
		for i := uint32(0); i < 4; i++ {
			c.a[(in.d+uint8(i))&15] = binary.LittleEndian.Uint32(mem[off+4*i:])
		}
	}
	if post {
		c.m[in.a&15] = addr + uint32(in.imm)
	}
	return true
}

// aheadFault returns the fault of a load or AMP instruction that ahead
// refused to run.
func (x *exec) aheadFault(c *context, in *inst) xfault {
	switch in.op {
	case isa.AMPH, isa.AMPQ:
		_, f := x.amp(c, in)
		return f
	case isa.AMPLD:
		return x.ampRow(c, in)
	case isa.LDM, isa.LDMP, isa.LD32, isa.LD32P, isa.LD64, isa.LD64P, isa.LD128, isa.LD128P:
		addr := c.m[in.a&15]
		switch in.op {
		case isa.LDM, isa.LD32, isa.LD64, isa.LD128:
			addr += uint32(in.imm)
		}
		n, flags := uint64(4), 0
		switch in.op {
		case isa.LD64, isa.LD64P:
			n = 8
		case isa.LD128, isa.LD128P:
			n, flags = 16, chkInterleaved
		}
		if _, f := x.check("load", addr, n, uint32(n), flags); f.kind != "" {
			return f
		}
	}
	return xfault{FaultInvalid, "opcode " + opName(in.op) + " not implemented"}
}
