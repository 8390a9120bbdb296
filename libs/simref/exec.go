package simref

import (
	"fmt"
	"math"

	"ipu.local/libs/isa"
	"ipu.local/libs/sim"
)

// result is what executing one instruction did besides changing state.
type result struct {
	next   uint32 // the new program counter
	extra  int    // cycles added by a memory element conflict
	cycles int64  // when > 0: the instruction's cycles instead of the table's (host transfers)
	stall  bool   // not issued: retry at the next opportunity
	end    ending // sync, hsync or halt
	fault  sim.FaultKind
	detail string
}

func getM(x *context, r uint8) uint32 {
	if r == 15 {
		return 0
	}
	return x.m[r]
}

func setM(x *context, r uint8, v uint32) {
	if r != 15 {
		x.m[r] = v
	}
}

// getA reads $a r; r = 16 (the register after $a15, asked for by single
// sources that pass a+1 along) reads zero too.
func getA(x *context, r uint8) uint32 {
	if r >= 15 {
		return 0
	}
	return x.a[r]
}

func setA(x *context, r uint8, v uint32) {
	if r != 15 {
		x.a[r] = v
	}
}

// exec executes in, fetched at the context's pc, in cycle cyc. It changes
// nothing when it faults or stalls.
func (m *Machine) exec(ti, c int, cyc int64, in isa.Inst, host sim.Host, s *step) result {
	t := &m.tiles[ti]
	x := &t.ctx[c]
	pc := x.pc
	r := result{next: pc + 4}
	d, a, b, cc := in.D, in.A, in.B, in.C
	imm := in.Imm
	ma, mb := getM(x, a), getM(x, b)
	fail := func(kind sim.FaultKind, detail string) result {
		return result{fault: kind, detail: detail}
	}
	branch := func() uint32 { return pc + 4 + 4*uint32(imm) }

	switch in.Op {
	case isa.NOP:

	// Integer arithmetic.
	case isa.ADD:
		setM(x, d, ma+mb)
	case isa.SUB:
		setM(x, d, ma-mb)
	case isa.MUL:
		setM(x, d, ma*mb)
	case isa.AND:
		setM(x, d, ma&mb)
	case isa.OR:
		setM(x, d, ma|mb)
	case isa.XOR:
		setM(x, d, ma^mb)
	case isa.SHL:
		setM(x, d, ma<<(mb&31))
	case isa.SHR:
		setM(x, d, ma>>(mb&31))
	case isa.SAR:
		setM(x, d, uint32(int32(ma)>>(mb&31)))
	case isa.CMPEQ:
		setM(x, d, boolInt(ma == mb))
	case isa.CMPLT:
		setM(x, d, boolInt(int32(ma) < int32(mb)))
	case isa.CMPULT:
		setM(x, d, boolInt(ma < mb))
	case isa.MIN:
		setM(x, d, uint32(min(int32(ma), int32(mb))))
	case isa.MAX:
		setM(x, d, uint32(max(int32(ma), int32(mb))))
	case isa.ADDI:
		setM(x, d, ma+uint32(imm))
	case isa.ANDI:
		setM(x, d, ma&uint32(imm))
	case isa.ORI:
		setM(x, d, ma|uint32(imm))
	case isa.XORI:
		setM(x, d, ma^uint32(imm))
	case isa.SHLI:
		setM(x, d, ma<<(uint32(imm)&31))
	case isa.SHRI:
		setM(x, d, ma>>(uint32(imm)&31))
	case isa.SARI:
		setM(x, d, uint32(int32(ma)>>(uint32(imm)&31)))
	case isa.MULI:
		setM(x, d, ma*uint32(imm))
	case isa.CMPEQI:
		setM(x, d, boolInt(ma == uint32(imm)))
	case isa.CMPLTI:
		setM(x, d, boolInt(int32(ma) < imm))
	case isa.LI:
		setM(x, d, uint32(imm))
	case isa.LIH:
		setM(x, d, getM(x, d)&0xffff|uint32(imm)<<16)
	case isa.SORT16LO:
		setM(x, d, ma&0xffff|mb<<16)
	case isa.SORT16HI:
		setM(x, d, ma>>16|mb&0xffff0000)

	// Control flow.
	case isa.BR:
		r.next = branch()
	case isa.BRZ:
		if ma == 0 {
			r.next = branch()
		}
	case isa.BRNZ:
		if ma != 0 {
			r.next = branch()
		}
	case isa.CALL:
		setM(x, d, pc+4)
		r.next = branch()
	case isa.JR:
		r.next = ma
	case isa.RPT, isa.RPTI:
		count, n := ma, uint32(imm)
		if in.Op == isa.RPTI {
			count, n = uint32(imm)>>8, uint32(imm)&0xff
		}
		if count == 0 || n == 0 {
			r.next = pc + 4 + 4*n
		} else {
			x.loopStart, x.loopEnd, x.loopRemaining = pc+4, pc+4+4*n, count
		}

	// Loads and stores.
	case isa.LDM, isa.LDMP, isa.LD32, isa.LD32P:
		addr := ma
		if in.Op == isa.LDM || in.Op == isa.LD32 {
			addr += uint32(imm)
		}
		if k, msg := m.check(t, addr, 4, 4, false, accRead); k != "" {
			return fail(k, msg)
		}
		// The loaded register first, then the base: with d == a the base
		// wins.
		v := m.load32(ti, addr)
		if in.Op == isa.LDM || in.Op == isa.LDMP {
			setM(x, d, v)
		} else {
			setA(x, d, v)
		}
		if in.Op == isa.LDMP || in.Op == isa.LD32P {
			setM(x, a, ma+uint32(imm))
		}
	case isa.STM, isa.STMP, isa.ST32, isa.ST32P:
		addr := ma
		if in.Op == isa.STM || in.Op == isa.ST32 {
			addr += uint32(imm)
		}
		if k, msg := m.check(t, addr, 4, 4, false, accWrite); k != "" {
			return fail(k, msg)
		}
		v := getA(x, d)
		if in.Op == isa.STM || in.Op == isa.STMP {
			v = getM(x, d)
		}
		m.store32(ti, addr, v)
		if in.Op == isa.STMP || in.Op == isa.ST32P {
			setM(x, a, ma+uint32(imm))
		}
	case isa.LD64, isa.LD64P, isa.LD128, isa.LD128P:
		addr, n := ma, uint32(8)
		if in.Op == isa.LD64 || in.Op == isa.LD128 {
			addr += uint32(imm)
		}
		if in.Op == isa.LD128 || in.Op == isa.LD128P {
			n = 16
		}
		if k, msg := m.check(t, addr, n, n, n == 16, accRead); k != "" {
			return fail(k, msg)
		}
		var v [4]uint32
		for i := uint32(0); i < n/4; i++ {
			v[i] = m.load32(ti, addr+4*i)
		}
		for i := uint32(0); i < n/4; i++ {
			setA(x, d+uint8(i), v[i])
		}
		if in.Op == isa.LD64P || in.Op == isa.LD128P {
			setM(x, a, ma+uint32(imm))
		}
	case isa.ST64, isa.ST64P, isa.ST128, isa.ST128P:
		addr, n := ma, uint32(8)
		if in.Op == isa.ST64 || in.Op == isa.ST128 {
			addr += uint32(imm)
		}
		if in.Op == isa.ST128 || in.Op == isa.ST128P {
			n = 16
		}
		if k, msg := m.check(t, addr, n, n, n == 16, accWrite); k != "" {
			return fail(k, msg)
		}
		for i := uint32(0); i < n/4; i++ {
			m.store32(ti, addr+4*i, getA(x, d+uint8(i)))
		}
		if in.Op == isa.ST64P || in.Op == isa.ST128P {
			setM(x, a, ma+uint32(imm))
		}

	// Register moves.
	case isa.MTA:
		setA(x, d, ma)
	case isa.MFA:
		setM(x, d, getA(x, a))
	case isa.AMOV:
		setA(x, d, getA(x, a))
	case isa.ALI:
		setA(x, d, uint32(imm))
	case isa.ALIH:
		setA(x, d, getA(x, d)&0xffff|uint32(imm)<<16)

	case isa.FADD, isa.FSUB, isa.FMUL, isa.FMA, isa.FMAX, isa.FMIN, isa.FCMPLT, isa.FSEL,
		isa.FEXP, isa.FLOG, isa.FRCP, isa.FRSQRT, isa.FSQRT, isa.FTANH, isa.FERF, isa.FABS, isa.FNEG, isa.FPOW, isa.FSIN, isa.FCOS,
		isa.FSUM2, isa.H4SUMF:
		setA(x, d, scalarFloat(in.Op, getA(x, d), getA(x, a), getA(x, b), getA(x, cc), getA(x, a+1)))
	case isa.V2ADD, isa.V2SUB, isa.V2MUL, isa.V2FMA, isa.V2MAX, isa.V2MIN, isa.V2CMPLT, isa.V2SEL, isa.V2CMPEQ,
		isa.V2EXP, isa.V2RCP, isa.V2ABS, isa.V2NEG:
		for lane := uint8(0); lane < 2; lane++ {
			setA(x, d+lane, vectorFloat(in.Op, getA(x, d+lane), getA(x, a+lane), getA(x, b+lane), getA(x, cc+lane)))
		}
	case isa.H4ADD, isa.H4SUB, isa.H4MUL, isa.H4FMA, isa.H4MAX, isa.H4MIN, isa.H4CMPLT, isa.H4SEL, isa.H4CMPEQ:
		for reg := uint8(0); reg < 2; reg++ {
			var out uint32
			for half := 0; half < 2; half++ {
				sh := uint(16 * half)
				lane := func(r uint8) uint16 { return uint16(getA(x, r+reg) >> sh) }
				out |= uint32(halfFloat(in.Op, lane(d), lane(a), lane(b), lane(cc))) << sh
			}
			setA(x, d+reg, out)
		}

	case isa.CVTF8H:
		lo, _ := convert(isa.CVTF8, x.fp8, getA(x, a), getA(x, a+1))
		setA(x, d, getA(x, d)&0xffff|lo<<16)

	case isa.CVTFH, isa.CVTHF, isa.CVTH8, isa.CVT8H, isa.CVTF8, isa.CVT8F, isa.CVTIF, isa.CVTFI:
		lo, hi := convert(in.Op, x.fp8, getA(x, a), getA(x, a+1))
		setA(x, d, lo)
		if in.Op == isa.CVTHF || in.Op == isa.CVT8H || in.Op == isa.CVT8F {
			setA(x, d+1, hi)
		}

	// AMP.
	case isa.AMPCLR:
		x.acc = [64]float32{}
	case isa.AMPH, isa.AMPQ, isa.AMPF:
		na, nb := uint32(8), uint32(32) // operand bytes: ampf reads 16 and 64
		if in.Op == isa.AMPF {
			na, nb = 16, 64
		}
		if k, msg := m.check(t, ma, na, 8, false, accRead); k != "" {
			return fail(k, msg)
		}
		if k, msg := m.check(t, mb, nb, 32, true, accRead); k != "" {
			return fail(k, msg)
		}
		if m.sameElement(ma, na, mb, nb) {
			r.extra = 1
		}
		switch in.Op {
		case isa.AMPH:
			m.amph(ti, x, ma, mb)
		case isa.AMPQ:
			m.ampq(ti, x, ma, mb)
		default:
			m.ampf(ti, x, ma, mb)
		}
		setM(x, a, ma+na)
		setM(x, b, getM(x, b)+nb)
	case isa.AMPST, isa.AMPLD:
		if imm > 3 {
			return fail(sim.FaultInvalid, fmt.Sprintf("accumulator row %d", imm))
		}
		kind := accRead
		if in.Op == isa.AMPST {
			kind = accWrite
		}
		if k, msg := m.check(t, ma, 64, 16, true, kind); k != "" {
			return fail(k, msg)
		}
		for j := uint32(0); j < 16; j++ {
			p := &x.acc[int(imm)*16+int(j)]
			if in.Op == isa.AMPST {
				m.store32(ti, ma+4*j, arith32(*p))
			} else {
				*p = f32from(m.load32(ti, ma+4*j))
			}
		}

	// Contexts, sync and control registers.
	case isa.RUN:
		w := int(imm)
		if w >= numWorkers {
			return fail(sim.FaultInvalid, fmt.Sprintf("no worker %d", w))
		}
		if t.ctx[w].running {
			return result{stall: true}
		}
		t.ctx[w] = context{pc: ma, fp8: x.fp8, running: true, next: cyc + 1}
		t.ctx[w].m[0] = mb
	case isa.EXIT:
		x.running = false
	case isa.JOIN, isa.SYNC, isa.HSYNC:
		for w := 0; w < numWorkers; w++ {
			if t.ctx[w].running {
				return result{stall: true}
			}
		}
		switch in.Op {
		case isa.SYNC:
			r.end = endSync
		case isa.HSYNC:
			r.end = endHsync
			s.hsyncD = d
		}
	case isa.HALT:
		// halt does not join: running workers stay frozen, still
		// "running" (RATIONALE: a choice).
		r.end = endHalt
	case isa.GET:
		var v uint32
		switch imm {
		case isa.CSRTileID:
			v = uint32(ti)
		case isa.CSRContext:
			v = uint32(c)
		case isa.CSRCycles:
			v = uint32(cyc)
		case isa.CSRFP8:
			v = x.fp8
		case isa.CSRPhase:
			v = uint32(m.mark)
		case isa.CSRTiles:
			v = uint32(m.p.Tiles)
		}
		setM(x, d, v)
	case isa.PUT:
		if imm != isa.CSRFP8 {
			return fail(sim.FaultInvalid, fmt.Sprintf("control register %d is read-only", imm))
		}
		x.fp8 = ma & fp8Defined
	case isa.DELAY:

	// Exchange.
	case isa.SEND, isa.SEND2:
		if cyc < s.portFree {
			return result{stall: true}
		}
		n, stride := isa.SendWords(mb), int(isa.SendStride(mb))
		double := in.Op == isa.SEND2
		if double && n%2 != 0 {
			return fail(sim.FaultInvalid, fmt.Sprintf("send2 of an odd word count %d", n))
		}
		md := getM(x, d)
		dst, ndst := int(md&0xffff), max(int(md>>16), 1)
		if dst+(ndst-1)*stride >= m.p.Tiles {
			return fail(sim.FaultInvalid, fmt.Sprintf("send to %d tiles from %d every %d of %d", ndst, dst, stride, m.p.Tiles))
		}
		// Zero words touch no memory and do not take the port.
		if n == 0 {
			break
		}
		if n > m.p.Memory.Size()/4 {
			return fail(sim.FaultAccess, fmt.Sprintf("send of %d words", n))
		}
		if k, msg := m.check(t, ma, 4*n, 4, false, accRead); k != "" {
			return fail(k, msg)
		}
		snd := sent{issue: cyc, pc: pc, double: double, dst: dst, ndst: ndst, stride: stride}
		for i := uint32(0); i < n; i++ {
			snd.words = append(snd.words, m.load32(ti, ma+4*i))
		}
		busy := int64(n)
		if double {
			busy /= 2
		}
		s.portFree = cyc + busy
		s.sends = append(s.sends, snd)
	case isa.RECV:
		src := getM(x, d)
		if src >= uint32(m.p.Tiles) {
			return fail(sim.FaultInvalid, fmt.Sprintf("recv from tile %d of %d", src, m.p.Tiles))
		}
		if mb > m.p.Memory.Size()/4 {
			return fail(sim.FaultAccess, fmt.Sprintf("recv of %d words", mb))
		}
		if k, msg := m.check(t, ma, 4*mb, 4, false, accWrite); mb > 0 && k != "" {
			return fail(k, msg)
		}
		s.windows = append(s.windows, window{src: int(src), start: cyc, words: mb, addr: ma, pc: pc})

	// Host exchange.
	case isa.HIN, isa.HOUT:
		tileAddr, hostAddr := getM(x, d), ma
		kind := accWrite
		if in.Op == isa.HOUT {
			tileAddr, hostAddr, kind = ma, getM(x, d), accRead
		}
		if tileAddr%4 != 0 || hostAddr%4 != 0 || mb%4 != 0 {
			return fail(sim.FaultAlign, fmt.Sprintf("host transfer of %d bytes between tile %#x and host %#x", mb, tileAddr, hostAddr))
		}
		// The supervisor waits 6 cycles per 16 bytes (RATIONALE: a
		// choice).
		r.cycles = max(1, (int64(mb)+int64(m.p.HostBytesPerIssue)-1)/int64(m.p.HostBytesPerIssue))
		if mb == 0 {
			break
		}
		if k, msg := m.check(t, tileAddr, mb, 4, false, kind); k != "" {
			return fail(k, msg)
		}
		tileMem := m.mem(ti)[tileAddr-m.p.Memory.Lo : tileAddr-m.p.Memory.Lo+mb]
		if in.Op == isa.HIN {
			if host == nil {
				return fail(sim.FaultHost, "no host attached")
			}
			buf := make([]byte, mb)
			if err := host.ReadHost(hostAddr, buf); err != nil {
				return fail(sim.FaultHost, err.Error())
			}
			copy(tileMem, buf)
		} else {
			// Written at the end of the superstep.
			s.houts = append(s.houts, hostWrite{issue: cyc, pc: pc, addr: hostAddr, data: append([]byte(nil), tileMem...)})
		}
		s.hostBytes += int64(mb)

	default:
		return fail(sim.FaultInvalid, "unimplemented "+in.Op.String())
	}
	return r
}

// fp8Defined are the bits of CSR fp8 that mean something; put keeps only
// those.
const fp8Defined = 1<<17 - 1

// sameElement reports whether [a, a+na) and [b, b+nb) touch a common
// memory element.
func (m *Machine) sameElement(a, na, b, nb uint32) bool {
	for i := uint32(0); i < na; i += 8 {
		for j := uint32(0); j < nb; j += 8 {
			if m.p.Element(a+i) == m.p.Element(b+j) {
				return true
			}
		}
	}
	return false
}

func boolInt(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}

func f32bits(f float32) uint32 { return math.Float32bits(f) }
func f32from(b uint32) float32 { return math.Float32frombits(b) }
