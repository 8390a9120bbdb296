package sim

import (
	"encoding/binary"
	"fmt"
	"math"

	"ipu.local/libs/isa"
	"ipu.local/libs/numfmt"
)

// Barrier kinds a tile's superstep ends at.
const (
	barNone = iota
	barSync
	barHsync
	barHalt
	barFault
)

// tileRun is what one tile did in the current superstep.
type tileRun struct {
	cycles    int64 // barrier or fault issue cycle + 1
	barrier   uint8
	barrierPC uint32
	hsyncReg  uint8
	fault     *Fault
	instrs    int64
	exchBytes int64
	hostBytes int64

	sends     []sendRec
	sendWords []uint32
	recvs     []recvRec
	houts     []houtRec
	houtData  []byte
	samples   []Sample
}

func (r *tileRun) reset() {
	*r = tileRun{
		sends:     r.sends[:0],
		sendWords: r.sendWords[:0],
		recvs:     r.recvs[:0],
		houts:     r.houts[:0],
		houtData:  r.houtData[:0],
	}
}

// sendRec is one send or send2.
type sendRec struct {
	pc           uint32
	t            int64
	off, n       uint32 // words: sendWords[off : off+n]
	dstLo, dstN  uint32
	pair         bool
	portFreeFrom int64
}

// recvRec is one recv: a listening window from t until words arrived or
// the next recv (or the barrier) cut it.
type recvRec struct {
	pc    uint32
	t     int64
	src   uint32
	addr  uint32
	words uint32
}

// houtRec is one hout, written to the host at the barrier.
type houtRec struct {
	pc       uint32
	t        int64
	hostAddr uint32
	off, n   uint32 // bytes: houtData[off : off+n]
}

// exec runs one tile through one superstep.
type exec struct {
	m     *Machine
	t     *tile
	r     *tileRun
	id    int
	phase int
	mem   []byte
	lo    uint32
	size  uint32
	prog  *program

	portFree int64 // the send port is busy until this cycle
}

var ctxForbid = [numCtx]uint8{forbidWorker, forbidWorker, forbidWorker, forbidWorker, forbidWorker, forbidWorker, forbidSup}

func (m *Machine) runTile(id, phase int) {
	t := &m.tiles[id]
	r := &t.res
	r.reset()
	mem, err := m.tileMem(id)
	if err != nil {
		r.fault = &Fault{Kind: FaultNotRunnable, Tile: id, Context: -1, Phase: phase, Detail: err.Error()}
		r.barrier = barFault
		return
	}
	prog := t.prog
	if prog == nil {
		prog = emptyProgram
	}
	x := exec{m: m, t: t, r: r, id: id, phase: phase, mem: mem, lo: m.p.Memory.Lo, size: m.p.Memory.Size(), prog: prog}
	x.run()
}

// fail records a fault of context k at cycle now and ends the tile's
// superstep.
func (x *exec) fail(kind FaultKind, k int, pc uint32, now int64, detail string) {
	x.r.fault = &Fault{Kind: kind, Tile: x.id, Context: k, PC: pc, Phase: x.phase, Cycle: now, Detail: detail}
	x.r.barrier = barFault
	x.r.cycles = now + 1
}

// xfault is a fault found by a helper: kind "" means none.
type xfault struct {
	kind   FaultKind
	detail string
}

// Access checks.
const (
	chkStore       = 1 << iota // the access writes: code is read-only
	chkInterleaved             // the access must lie in interleaved memory
)

// check validates an access of n bytes at addr: inside tile memory, aligned
// to align, in interleaved memory if asked, off code for a store. It
// returns the offset of addr in tile memory.
func (x *exec) check(what string, addr uint32, n uint64, align uint32, flags int) (uint32, xfault) {
	p := x.m.p
	end := uint64(addr) + n
	if addr < p.Memory.Lo || end > uint64(p.Memory.Hi) {
		return 0, xfault{FaultAccess, fmt.Sprintf("%s of %d bytes at %#x outside tile memory %s", what, n, addr, hexRange(p.Memory))}
	}
	if addr&(align-1) != 0 {
		return 0, xfault{FaultAlign, fmt.Sprintf("%s at %#x not %d-byte aligned", what, addr, align)}
	}
	if flags&chkInterleaved != 0 && (addr < p.Interleaved.Lo || end > uint64(p.Interleaved.Hi)) {
		return 0, xfault{FaultAccess, fmt.Sprintf("%s at %#x: 128-bit access outside interleaved memory", what, addr)}
	}
	if flags&chkStore != 0 && x.prog.overlapsCode(addr, uint32(n)) {
		return 0, xfault{FaultCodeWrite, fmt.Sprintf("%s of %d bytes at %#x overlaps a code segment", what, n, addr)}
	}
	return addr - p.Memory.Lo, xfault{}
}

// fetchFault says why context k cannot execute the word at pc.
func (x *exec) fetchFault(k int, c *context, pc uint32) xfault {
	p := x.m.p
	if pc&3 != 0 {
		return xfault{FaultFetch, fmt.Sprintf("pc %#x not 4-byte aligned", pc)}
	}
	if !p.Executable.Contains(pc, 4) {
		return xfault{FaultFetch, fmt.Sprintf("pc %#x outside executable range %s", pc, hexRange(p.Executable))}
	}
	if ex := x.m.tiles[x.id].exec; !ex.Contains(pc, 4) {
		return xfault{FaultFetch, fmt.Sprintf("pc %#x outside the tile's executable range %s set by registers %s and %s", pc, hexRange(ex), RegName(RegExecLo), RegName(RegExecHi))}
	}
	prog := x.prog
	idx := (pc - prog.base) / 4
	if pc < prog.base || idx >= uint32(len(prog.insts)) || prog.insts[idx].flags&fNotCode != 0 {
		return xfault{FaultFetch, fmt.Sprintf("pc %#x not in a code segment", pc)}
	}
	in := &prog.insts[idx]
	if in.flags&fInvalid != 0 {
		w := isa.Word(x.mem[pc-x.lo:])
		_, err := isa.Decode(w)
		msg := fmt.Sprintf("invalid instruction %08x", w)
		if err != nil {
			msg = err.Error()
		}
		return xfault{FaultInvalid, msg}
	}
	if in.flags&fSupOnly != 0 && k != supCtx {
		return xfault{FaultInvalid, fmt.Sprintf("%s is a supervisor instruction", opName(in.op))}
	}
	if in.flags&fWorkerOnly != 0 && k == supCtx {
		return xfault{FaultInvalid, fmt.Sprintf("%s is a worker instruction", opName(in.op))}
	}
	return xfault{FaultInvalid, fmt.Sprintf("%s inside a repeat body [%#x, %#x)", opName(in.op), c.loopStart, c.loopEnd)}
}

// nextEvent returns the first cycle after now at which some context may
// issue, or never.
func nextEvent(now int64, running uint8, wnext *[numWorkers]int64, sblock uint8, snext int64) int64 {
	best := never
	for w := 0; w < numWorkers; w++ {
		if running&(1<<w) != 0 && wnext[w] < best {
			best = wnext[w]
		}
	}
	if sblock == 0 && running != 1<<numWorkers-1 {
		c := snext
		if c <= now {
			c = now + 1
		}
		s := int(c % numWorkers)
		for running&(1<<s) != 0 {
			c++
			s++
			if s == numWorkers {
				s = 0
			}
		}
		if c < best {
			best = c
		}
	}
	return best
}

// slotAt returns the first cycle >= c that belongs to slot w.
func slotAt(c int64, w int) int64 {
	return c + (int64(w)-c%numWorkers+numWorkers)%numWorkers
}

// run executes the tile until its supervisor reaches a barrier or a
// context faults.
func (x *exec) run() {
	t, r := x.t, x.r
	insts := x.prog.insts
	base := x.prog.base
	ninst := uint32(len(insts))
	mem := x.mem
	lo, size := x.lo, x.size
	codeLo, codeHi := x.prog.codeLo, x.prog.codeHi

	var wnext [numWorkers]int64
	var running uint8
	for w := 0; w < numWorkers; w++ {
		wnext[w] = never
		if t.ctx[w].running {
			running |= 1 << w
			wnext[w] = int64(w)
		}
	}
	for k := range t.ctx {
		c := &t.ctx[k]
		c.forbid = ctxForbid[k]
		if c.loopOn {
			c.forbid |= fNoLoop
		}
	}
	var sblock uint8 // workers the stalled supervisor waits for
	snext := int64(0)
	limit := x.m.watchdog
	period := x.m.opt.SamplePeriod
	nextSample := never
	if period > 0 {
		nextSample = 0
	}
	horizon := min(limit, nextSample)
	var instrs int64
	now := int64(0)
	s := 0 // now's slot

	for {
		k := -1
		if running&(1<<s) != 0 {
			if wnext[s] == now {
				k = s
			}
		} else if sblock == 0 && snext <= now {
			k = supCtx
		}
		if k < 0 {
			now = nextEvent(now, running, &wnext, sblock, snext)
			if now == never {
				x.fail(FaultWatchdog, -1, 0, 0, "no context can ever issue")
				goto done
			}
			s = int(now % numWorkers)
			continue
		}
		c := &t.ctx[k]
		pc := c.pc
		if now >= horizon {
			if now >= limit {
				// No context issued in [limit, now): the tile reached
				// cycle limit still running.
				x.fail(FaultWatchdog, -1, t.ctx[supCtx].pc, limit, fmt.Sprintf("superstep exceeded %d cycles", limit))
				goto done
			}
			for nextSample <= now {
				spc := t.ctx[supCtx].pc
				for w := 0; w < numWorkers; w++ {
					if running&(1<<w) != 0 {
						spc = t.ctx[w].pc
						break
					}
				}
				r.samples = append(r.samples, Sample{Tile: x.id, Phase: x.phase, Cycle: nextSample, PC: spc})
				nextSample += period
			}
			horizon = min(limit, nextSample)
		}
		idx := (pc - base) >> 2
		if pc&3 != 0 || idx >= ninst || insts[idx].flags&c.forbid != 0 {
			f := x.fetchFault(k, c, pc)
			x.fail(f.kind, k, pc, now, f.detail)
			goto done
		}
		in := &insts[idx]
		cyc := int64(in.cycles)
		wait := int64(0) // extra cycles of delay
		npc := pc + 4

		switch in.op {
		case isa.NOP:

		// Integer arithmetic.
		case isa.ADD:
			c.m[in.d&15] = c.m[in.a&15] + c.m[in.b&15]
		case isa.SUB:
			c.m[in.d&15] = c.m[in.a&15] - c.m[in.b&15]
		case isa.MUL:
			c.m[in.d&15] = c.m[in.a&15] * c.m[in.b&15]
		case isa.AND:
			c.m[in.d&15] = c.m[in.a&15] & c.m[in.b&15]
		case isa.OR:
			c.m[in.d&15] = c.m[in.a&15] | c.m[in.b&15]
		case isa.XOR:
			c.m[in.d&15] = c.m[in.a&15] ^ c.m[in.b&15]
		case isa.SHL:
			c.m[in.d&15] = c.m[in.a&15] << (c.m[in.b&15] & 31)
		case isa.SHR:
			c.m[in.d&15] = c.m[in.a&15] >> (c.m[in.b&15] & 31)
		case isa.SAR:
			c.m[in.d&15] = uint32(int32(c.m[in.a&15]) >> (c.m[in.b&15] & 31))
		case isa.CMPEQ:
			c.m[in.d&15] = b2u(c.m[in.a&15] == c.m[in.b&15])
		case isa.CMPLT:
			c.m[in.d&15] = b2u(int32(c.m[in.a&15]) < int32(c.m[in.b&15]))
		case isa.CMPULT:
			c.m[in.d&15] = b2u(c.m[in.a&15] < c.m[in.b&15])
		case isa.MIN:
			c.m[in.d&15] = uint32(min(int32(c.m[in.a&15]), int32(c.m[in.b&15])))
		case isa.MAX:
			c.m[in.d&15] = uint32(max(int32(c.m[in.a&15]), int32(c.m[in.b&15])))
		case isa.ADDI:
			c.m[in.d&15] = c.m[in.a&15] + uint32(in.imm)
		case isa.ANDI:
			c.m[in.d&15] = c.m[in.a&15] & uint32(in.imm)
		case isa.ORI:
			c.m[in.d&15] = c.m[in.a&15] | uint32(in.imm)
		case isa.XORI:
			c.m[in.d&15] = c.m[in.a&15] ^ uint32(in.imm)
		case isa.SHLI:
			c.m[in.d&15] = c.m[in.a&15] << (uint32(in.imm) & 31)
		case isa.SHRI:
			c.m[in.d&15] = c.m[in.a&15] >> (uint32(in.imm) & 31)
		case isa.SARI:
			c.m[in.d&15] = uint32(int32(c.m[in.a&15]) >> (uint32(in.imm) & 31))
		case isa.MULI:
			c.m[in.d&15] = c.m[in.a&15] * uint32(in.imm)
		case isa.CMPEQI:
			c.m[in.d&15] = b2u(c.m[in.a&15] == uint32(in.imm))
		case isa.CMPLTI:
			c.m[in.d&15] = b2u(int32(c.m[in.a&15]) < in.imm)
		case isa.LI:
			c.m[in.d&15] = uint32(in.imm)
		case isa.LIH:
			c.m[in.d&15] = c.m[in.d&15]&0xFFFF | uint32(in.imm)<<16

		// Control flow.
		case isa.BR:
			npc = pc + 4 + 4*uint32(in.imm)
		case isa.BRZ:
			if c.m[in.a&15] == 0 {
				npc = pc + 4 + 4*uint32(in.imm)
			}
		case isa.BRNZ:
			if c.m[in.a&15] != 0 {
				npc = pc + 4 + 4*uint32(in.imm)
			}
		case isa.CALL:
			c.m[in.d&15] = pc + 4
			npc = pc + 4 + 4*uint32(in.imm)
		case isa.JR:
			npc = c.m[in.a&15]
		case isa.RPT, isa.RPTI:
			var count, n uint32
			if in.op == isa.RPT {
				count, n = c.m[in.a&15], uint32(in.imm)
			} else {
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

		// Loads and stores.
		case isa.LDM, isa.LDMP:
			addr := c.m[in.a&15]
			if in.op == isa.LDM {
				addr += uint32(in.imm)
			}
			off := addr - lo
			if off > size-4 || addr&3 != 0 {
				x.memFail("load", k, pc, now, addr, 4, 4, 0)
				goto done
			}
			c.m[in.d&15] = binary.LittleEndian.Uint32(mem[off:])
			if in.op == isa.LDMP {
				c.m[in.a&15] = addr + uint32(in.imm)
			}
		case isa.STM, isa.STMP:
			addr := c.m[in.a&15]
			if in.op == isa.STM {
				addr += uint32(in.imm)
			}
			off := addr - lo
			if off > size-4 || addr&3 != 0 || addr+4 > codeLo && addr < codeHi && x.prog.overlapsCode(addr, 4) {
				x.memFail("store", k, pc, now, addr, 4, 4, chkStore)
				goto done
			}
			binary.LittleEndian.PutUint32(mem[off:], c.m[in.d&15])
			if in.op == isa.STMP {
				c.m[in.a&15] = addr + uint32(in.imm)
			}
		case isa.LD32, isa.LD32P:
			addr := c.m[in.a&15]
			if in.op == isa.LD32 {
				addr += uint32(in.imm)
			}
			off := addr - lo
			if off > size-4 || addr&3 != 0 {
				x.memFail("load", k, pc, now, addr, 4, 4, 0)
				goto done
			}
			c.a[in.d&15] = binary.LittleEndian.Uint32(mem[off:])
			if in.op == isa.LD32P {
				c.m[in.a&15] = addr + uint32(in.imm)
			}
		case isa.ST32, isa.ST32P:
			addr := c.m[in.a&15]
			if in.op == isa.ST32 {
				addr += uint32(in.imm)
			}
			off := addr - lo
			if off > size-4 || addr&3 != 0 || addr+4 > codeLo && addr < codeHi && x.prog.overlapsCode(addr, 4) {
				x.memFail("store", k, pc, now, addr, 4, 4, chkStore)
				goto done
			}
			binary.LittleEndian.PutUint32(mem[off:], c.a[in.d&15])
			if in.op == isa.ST32P {
				c.m[in.a&15] = addr + uint32(in.imm)
			}
		case isa.LD64, isa.LD64P:
			addr := c.m[in.a&15]
			if in.op == isa.LD64 {
				addr += uint32(in.imm)
			}
			off := addr - lo
			if off > size-8 || addr&7 != 0 {
				x.memFail("load", k, pc, now, addr, 8, 8, 0)
				goto done
			}
			c.a[in.d&15] = binary.LittleEndian.Uint32(mem[off:])
			c.a[(in.d+1)&15] = binary.LittleEndian.Uint32(mem[off+4:])
			if in.op == isa.LD64P {
				c.m[in.a&15] = addr + uint32(in.imm)
			}
		case isa.ST64, isa.ST64P:
			addr := c.m[in.a&15]
			if in.op == isa.ST64 {
				addr += uint32(in.imm)
			}
			off := addr - lo
			if off > size-8 || addr&7 != 0 || addr+8 > codeLo && addr < codeHi && x.prog.overlapsCode(addr, 8) {
				x.memFail("store", k, pc, now, addr, 8, 8, chkStore)
				goto done
			}
			binary.LittleEndian.PutUint32(mem[off:], c.a[in.d&15])
			binary.LittleEndian.PutUint32(mem[off+4:], c.a[(in.d+1)&15])
			if in.op == isa.ST64P {
				c.m[in.a&15] = addr + uint32(in.imm)
			}
		case isa.LD128, isa.LD128P:
			addr := c.m[in.a&15]
			if in.op == isa.LD128 {
				addr += uint32(in.imm)
			}
			off, f := x.check("load", addr, 16, 16, chkInterleaved)
			if f.kind != "" {
				x.fail(f.kind, k, pc, now, f.detail)
				goto done
			}
			for i := uint32(0); i < 4; i++ {
				c.a[(in.d+uint8(i))&15] = binary.LittleEndian.Uint32(mem[off+4*i:])
			}
			if in.op == isa.LD128P {
				c.m[in.a&15] = addr + uint32(in.imm)
			}
		case isa.ST128, isa.ST128P:
			addr := c.m[in.a&15]
			if in.op == isa.ST128 {
				addr += uint32(in.imm)
			}
			off, f := x.check("store", addr, 16, 16, chkInterleaved|chkStore)
			if f.kind != "" {
				x.fail(f.kind, k, pc, now, f.detail)
				goto done
			}
			for i := uint32(0); i < 4; i++ {
				binary.LittleEndian.PutUint32(mem[off+4*i:], c.a[(in.d+uint8(i))&15])
			}
			if in.op == isa.ST128P {
				c.m[in.a&15] = addr + uint32(in.imm)
			}

		// Register moves.
		case isa.MTA:
			c.a[in.d&15] = c.m[in.a&15]
		case isa.MFA:
			c.m[in.d&15] = c.a[in.a&15]
		case isa.AMOV:
			c.a[in.d&15] = c.a[in.a&15]
		case isa.ALI:
			c.a[in.d&15] = uint32(in.imm)
		case isa.ALIH:
			c.a[in.d&15] = c.a[in.d&15]&0xFFFF | uint32(in.imm)<<16

		// Scalar FP32.
		case isa.FADD:
			c.a[in.d&15] = bits32(f32(c.a[in.a&15]) + f32(c.a[in.b&15]))
		case isa.FSUB:
			c.a[in.d&15] = bits32(f32(c.a[in.a&15]) - f32(c.a[in.b&15]))
		case isa.FMUL:
			c.a[in.d&15] = bits32(f32(c.a[in.a&15]) * f32(c.a[in.b&15]))
		case isa.FMA:
			c.a[in.d&15] = fma32(c.a[in.a&15], c.a[in.b&15], c.a[in.d&15])
		case isa.FMAX:
			c.a[in.d&15] = fmax32(c.a[in.a&15], c.a[in.b&15])
		case isa.FMIN:
			c.a[in.d&15] = fmin32(c.a[in.a&15], c.a[in.b&15])
		case isa.FCMPLT:
			c.a[in.d&15] = mask32(f32(c.a[in.a&15]) < f32(c.a[in.b&15]))
		case isa.FSEL:
			if c.a[in.a&15] != 0 {
				c.a[in.d&15] = c.a[in.b&15]
			} else {
				c.a[in.d&15] = c.a[in.c&15]
			}

		// f32v2.
		case isa.V2ADD, isa.V2SUB, isa.V2MUL, isa.V2FMA, isa.V2MAX, isa.V2MIN, isa.V2CMPLT, isa.V2CMPEQ:
			d, a, b := in.d&15, in.a&15, in.b&15
			for l := uint8(0); l < 2; l++ {
				p, q := c.a[(a+l)&15], c.a[(b+l)&15]
				var v uint32
				switch in.op {
				case isa.V2ADD:
					v = bits32(f32(p) + f32(q))
				case isa.V2SUB:
					v = bits32(f32(p) - f32(q))
				case isa.V2MUL:
					v = bits32(f32(p) * f32(q))
				case isa.V2FMA:
					v = fma32(p, q, c.a[(d+l)&15])
				case isa.V2MAX:
					v = fmax32(p, q)
				case isa.V2MIN:
					v = fmin32(p, q)
				case isa.V2CMPLT:
					v = mask32(f32(p) < f32(q))
				case isa.V2CMPEQ:
					v = mask32(f32(p) == f32(q))
				}
				c.a[(d+l)&15] = v
			}
		case isa.V2SEL:
			d, a, b, cc := in.d&15, in.a&15, in.b&15, in.c&15
			lo0, lo1 := c.a[b], c.a[(b+1)&15]
			if c.a[a] == 0 {
				lo0 = c.a[cc]
			}
			if c.a[(a+1)&15] == 0 {
				lo1 = c.a[(cc+1)&15]
			}
			c.a[d], c.a[(d+1)&15] = lo0, lo1

		// f16v4.
		case isa.H4ADD, isa.H4SUB, isa.H4MUL, isa.H4FMA, isa.H4MAX, isa.H4MIN, isa.H4CMPLT, isa.H4CMPEQ:
			d, a, b := in.d&15, in.a&15, in.b&15
			v := h4op(in.op, uint64(c.a[a])|uint64(c.a[(a+1)&15])<<32, uint64(c.a[b])|uint64(c.a[(b+1)&15])<<32,
				uint64(c.a[d])|uint64(c.a[(d+1)&15])<<32)
			c.a[d], c.a[(d+1)&15] = uint32(v), uint32(v>>32)
		case isa.H4SEL:
			d, a, b, cc := in.d&15, in.a&15, in.b&15, in.c&15
			c.a[d], c.a[(d+1)&15] = sel16(c.a[a], c.a[b], c.a[cc]), sel16(c.a[(a+1)&15], c.a[(b+1)&15], c.a[(cc+1)&15])

		// FP32 functions.
		case isa.FEXP:
			c.a[in.d&15] = bits32(float32(math.Exp(float64(f32(c.a[in.a&15])))))
		case isa.FLOG:
			c.a[in.d&15] = bits32(float32(math.Log(float64(f32(c.a[in.a&15])))))
		case isa.FRCP:
			c.a[in.d&15] = bits32(1 / f32(c.a[in.a&15]))
		case isa.FRSQRT:
			c.a[in.d&15] = bits32(float32(1 / math.Sqrt(float64(f32(c.a[in.a&15])))))
		case isa.FSQRT:
			c.a[in.d&15] = bits32(float32(math.Sqrt(float64(f32(c.a[in.a&15])))))
		case isa.FTANH:
			c.a[in.d&15] = bits32(float32(math.Tanh(float64(f32(c.a[in.a&15])))))
		case isa.FERF:
			c.a[in.d&15] = bits32(float32(math.Erf(float64(f32(c.a[in.a&15])))))
		case isa.FABS:
			c.a[in.d&15] = c.a[in.a&15] &^ 0x80000000
		case isa.FNEG:
			c.a[in.d&15] = c.a[in.a&15] ^ 0x80000000
		case isa.FPOW:
			c.a[in.d&15] = bits32(float32(math.Pow(float64(f32(c.a[in.a&15])), float64(f32(c.a[in.b&15])))))
		case isa.V2EXP, isa.V2RCP, isa.V2ABS, isa.V2NEG:
			d, a := in.d&15, in.a&15
			for l := uint8(0); l < 2; l++ {
				v := c.a[(a+l)&15]
				switch in.op {
				case isa.V2EXP:
					v = bits32(float32(math.Exp(float64(f32(v)))))
				case isa.V2RCP:
					v = bits32(1 / f32(v))
				case isa.V2ABS:
					v &^= 0x80000000
				case isa.V2NEG:
					v ^= 0x80000000
				}
				c.a[(d+l)&15] = v
			}

		// Conversions.
		case isa.CVTFH:
			a := in.a & 15
			c.a[in.d&15] = uint32(numfmt.F32ToF16(c.a[a])) | uint32(numfmt.F32ToF16(c.a[(a+1)&15]))<<16
		case isa.CVTHF:
			v, d := c.a[in.a&15], in.d&15
			c.a[d], c.a[(d+1)&15] = f16to32(uint16(v)), f16to32(uint16(v>>16))
		case isa.CVTH8:
			cfg := decodeFP8(c.fp8)
			a := in.a & 15
			var v uint32
			hv := uint64(c.a[a]) | uint64(c.a[(a+1)&15])<<32
			for i := 0; i < 4; i++ {
				v |= uint32(numfmt.F16ToF8Dev(uint16(hv>>(16*i)), cfg.fa, cfg.sa, cfg.mode)) << (8 * i)
			}
			c.a[in.d&15] = v
		case isa.CVT8H:
			cfg := decodeFP8(c.fp8)
			v, d := c.a[in.a&15], in.d&15
			var h [4]uint32
			for i := range h {
				h[i] = uint32(numfmt.F8ToF16(uint8(v>>(8*i)), cfg.fa, cfg.sa))
			}
			c.a[d], c.a[(d+1)&15] = h[0]|h[1]<<16, h[2]|h[3]<<16
		case isa.CVTF8:
			cfg := decodeFP8(c.fp8)
			a := in.a & 15
			c.a[in.d&15] = uint32(numfmt.F32ToF8Dev(c.a[a], cfg.fa, cfg.sa, cfg.mode)) |
				uint32(numfmt.F32ToF8Dev(c.a[(a+1)&15], cfg.fa, cfg.sa, cfg.mode))<<8
		case isa.CVT8F:
			cfg := decodeFP8(c.fp8)
			v, d := c.a[in.a&15], in.d&15
			c.a[d], c.a[(d+1)&15] = numfmt.F8ToF32(uint8(v), cfg.fa, cfg.sa), numfmt.F8ToF32(uint8(v>>8), cfg.fa, cfg.sa)
		case isa.CVTIF:
			c.a[in.d&15] = math.Float32bits(float32(int32(c.a[in.a&15])))
		case isa.CVTFI:
			c.a[in.d&15] = f32toi32(c.a[in.a&15])
		case isa.FSUM2:
			a := in.a & 15
			c.a[in.d&15] = bits32(f32(c.a[a]) + f32(c.a[(a+1)&15]))
		case isa.H4SUMF:
			a := in.a & 15
			lo, hi := c.a[a], c.a[(a+1)&15]
			sum := f32(f16to32(uint16(lo))) + f32(f16to32(uint16(lo>>16)))
			sum = float32(sum) + f32(f16to32(uint16(hi)))
			sum = float32(sum) + f32(f16to32(uint16(hi>>16)))
			c.a[in.d&15] = bits32(sum)

		// AMP.
		case isa.AMPCLR:
			c.acc = [64]float32{}
		case isa.AMPH, isa.AMPQ:
			extra, f := x.amp(c, in)
			if f.kind != "" {
				x.fail(f.kind, k, pc, now, f.detail)
				goto done
			}
			cyc += extra
		case isa.AMPST, isa.AMPLD:
			if f := x.ampRow(c, in); f.kind != "" {
				x.fail(f.kind, k, pc, now, f.detail)
				goto done
			}

		// Contexts and sync.
		case isa.RUN:
			w := int(in.imm)
			if w >= numWorkers {
				x.fail(FaultInvalid, k, pc, now, fmt.Sprintf("run: no worker %d", w))
				goto done
			}
			if running&(1<<w) != 0 {
				sblock = 1 << w
				now++
				s = int(now % numWorkers)
				continue
			}
			wc := &t.ctx[w]
			*wc = context{pc: c.m[in.a&15], fp8: c.fp8, running: true, forbid: forbidWorker}
			wc.m[0] = c.m[in.b&15]
			running |= 1 << w
			wnext[w] = slotAt(now+1, w)
		case isa.EXIT:
			c.running = false
			c.pc = npc
			instrs++
			running &^= 1 << k
			wnext[k] = never
			if sblock&(1<<k) != 0 {
				sblock &^= 1 << k
				if sblock == 0 && snext < now+1 {
					snext = now + 1
				}
			}
			now++
			s = int(now % numWorkers)
			continue
		case isa.JOIN:
			if running != 0 {
				sblock = running
				now++
				s = int(now % numWorkers)
				continue
			}
		case isa.SYNC, isa.HSYNC, isa.HALT:
			// sync and hsync join; halt stops the tile, its workers
			// frozen where they are.
			if running != 0 && in.op != isa.HALT {
				sblock = running
				now++
				s = int(now % numWorkers)
				continue
			}
			switch in.op {
			case isa.SYNC:
				r.barrier = barSync
			case isa.HSYNC:
				r.barrier = barHsync
				r.hsyncReg = in.d & 15
			default:
				r.barrier = barHalt
			}
			r.barrierPC = pc
			r.cycles = now + 1
			c.pc = npc
			instrs++
			goto done
		case isa.GET:
			var v uint32
			switch in.imm {
			case isa.CSRTileID:
				v = uint32(x.id)
			case isa.CSRContext:
				v = uint32(k)
			case isa.CSRCycles:
				v = uint32(now)
			case isa.CSRFP8:
				v = c.fp8
			case isa.CSRPhase:
				v = uint32(x.phase)
			case isa.CSRTiles:
				v = uint32(x.m.p.Tiles)
			}
			c.m[in.d&15] = v
		case isa.PUT:
			if in.imm != isa.CSRFP8 {
				x.fail(FaultInvalid, k, pc, now, fmt.Sprintf("put: control register %d is read-only", in.imm))
				goto done
			}
			c.fp8 = c.m[in.a&15] & fp8Mask
		case isa.DELAY:
			wait = int64(in.imm)

		// Exchange and host.
		case isa.SEND, isa.SEND2:
			if !x.m.tiles[x.id].inXchg {
				x.fail(FaultNotExchange, k, pc, now, fmt.Sprintf("tile %d is not a member of the exchange (register %s is 0)", x.id, RegName(RegExchange)))
				goto done
			}
			if now < x.portFree {
				if snext < x.portFree {
					snext = x.portFree
				}
				now++
				s = int(now % numWorkers)
				continue
			}
			if f := x.send(c, in, pc, now); f.kind != "" {
				x.fail(f.kind, k, pc, now, f.detail)
				goto done
			}
		case isa.RECV:
			if !x.m.tiles[x.id].inXchg {
				x.fail(FaultNotExchange, k, pc, now, fmt.Sprintf("tile %d is not a member of the exchange (register %s is 0)", x.id, RegName(RegExchange)))
				goto done
			}
			if f := x.recv(c, in, pc, now); f.kind != "" {
				x.fail(f.kind, k, pc, now, f.detail)
				goto done
			}
		case isa.HIN, isa.HOUT:
			n, f := x.hostXfer(c, in, pc, now)
			if f.kind != "" {
				x.fail(f.kind, k, pc, now, f.detail)
				goto done
			}
			cyc = n

		default:
			x.fail(FaultInvalid, k, pc, now, fmt.Sprintf("opcode %#02x not implemented", uint8(in.op)))
			goto done
		}

		c.m[15], c.a[15] = 0, 0
		if c.loopOn && npc == c.loopEnd {
			if c.loopRem > 1 {
				npc = c.loopStart
				c.loopRem--
			} else {
				c.loopOn = false
				c.forbid &^= fNoLoop
			}
		}
		c.pc = npc
		instrs++
		if k < numWorkers {
			wnext[k] = now + numWorkers*cyc
			if wait != 0 {
				wnext[k] = slotAt(wnext[k]+wait, k)
			}
		} else {
			snext = now + numWorkers*cyc + wait
		}
		now++
		s++
		if s == numWorkers {
			s = 0
		}
	}
done:
	r.instrs = instrs
	if r.barrier == barNone {
		r.barrier = barFault
	}
}

func b2u(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}

// fma32 is d + a*b with FP32 operands, rounded once to FP32: the exact
// product (FP64), summed with round-to-odd, then rounded to FP32.
func fma32(a, b, d uint32) uint32 {
	return bits32(float32(numfmt.SumRTO(float64(float64(f32(a))*float64(f32(b))), float64(f32(d)))))
}

// memFail records the fault of a failed fast-path access.
func (x *exec) memFail(what string, k int, pc uint32, now int64, addr uint32, n uint64, align uint32, flags int) {
	_, f := x.check(what, addr, n, align, flags)
	if f.kind == "" {
		f = xfault{FaultAccess, fmt.Sprintf("%s at %#x", what, addr)}
	}
	x.fail(f.kind, k, pc, now, f.detail)
}
