package sim

import (
	"encoding/binary"

	"ipu.local/libs/isa"
)

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
		case isa.SORT16LO:
			m[in.d&15] = m[in.a&15]&0xFFFF | m[in.b&15]<<16
		case isa.SORT16HI:
			m[in.d&15] = m[in.a&15]>>16 | m[in.b&15]&0xFFFF0000

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

	case isa.AMPCLR, isa.AMPH, isa.AMPQ, isa.AMPF, isa.AMPLD:
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
		setPair(a, in.d, h4arith(in.op, getPair(a, in.a), getPair(a, in.b), 0, x.prog.half))
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
	case isa.AMPH, isa.AMPQ, isa.AMPF:
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
	case isa.AMPH, isa.AMPQ, isa.AMPF:
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
