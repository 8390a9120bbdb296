package sim

import (
	"encoding/binary"
	"fmt"

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
	sendBytes []byte // the sent words as memory holds them
	recvs     []recvRec
	houts     []houtRec
	houtData  []byte
	samples   []Sample
}

func (r *tileRun) reset() {
	*r = tileRun{
		sends:     r.sends[:0],
		sendBytes: r.sendBytes[:0],
		recvs:     r.recvs[:0],
		houts:     r.houts[:0],
		houtData:  r.houtData[:0],
	}
}

// sendRec is one send or send2.
type sendRec struct {
	pc           uint32
	t            int64
	off, n       uint32 // words: sendBytes[4*off : 4*(off+n)]
	dstLo, dstN  uint32
	dstStride    uint32 // tiles from one destination to the next (>= 1)
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

	// Issue state: each running worker's next issue cycle, the running
	// workers, the workers the stalled supervisor waits for, the
	// supervisor's earliest issue cycle.
	wnext   [numWorkers]int64
	running uint8
	sblock  uint8
	snext   int64

	ck [numCtx]ckpt // before each context's latest run-ahead stretch
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

	x.running = 0
	for w := 0; w < numWorkers; w++ {
		x.wnext[w] = never
		if t.ctx[w].running {
			x.running |= 1 << w
			x.wnext[w] = int64(w)
		}
	}
	for k := range t.ctx {
		c := &t.ctx[k]
		c.forbid = ctxForbid[k]
		if c.loopOn {
			c.forbid |= fNoLoop
		}
	}
	x.sblock, x.snext = 0, 0
	limit := x.m.watchdog
	period := x.m.opt.SamplePeriod
	step := x.m.opt.Stepwise
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
		if x.running&(1<<s) != 0 {
			if x.wnext[s] == now {
				k = s
			}
		} else if x.sblock == 0 && x.snext <= now {
			k = supCtx
		}
		if k < 0 {
			now = nextEvent(now, x.running, &x.wnext, x.sblock, x.snext)
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
				// cycle limit still x.running.
				x.fail(FaultWatchdog, -1, t.ctx[supCtx].pc, limit, fmt.Sprintf("superstep exceeded %d cycles", limit))
				goto done
			}
			for nextSample <= now {
				spc := t.ctx[supCtx].pc
				for w := 0; w < numWorkers; w++ {
					if x.running&(1<<w) != 0 {
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
		if in.flags&fGlobal == 0 {
			h := horizon
			if k == supCtx && x.running != 0 || step {
				h = now + 1 // workers take slots: one instruction at a time
			}
			next, n := x.ahead(k, c, now, h, false)
			if n == 0 {
				f := x.aheadFault(c, in)
				x.fail(f.kind, k, pc, now, f.detail)
				goto done
			}
			instrs += n
			if k < numWorkers {
				x.wnext[k] = next
			} else {
				x.snext = next
			}
			now++
			s = int(now % numWorkers)
			continue
		}
		cyc := int64(in.cycles)
		wait := int64(0) // extra cycles of delay
		npc := pc + 4

		switch in.op {
		// Loads and stores.
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

		// AMP.
		case isa.AMPST:
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
			if x.running&(1<<w) != 0 {
				x.sblock = 1 << w
				now++
				s = int(now % numWorkers)
				continue
			}
			wc := &t.ctx[w]
			*wc = context{pc: c.m[in.a&15], fp8: c.fp8, running: true, forbid: forbidWorker}
			wc.m[0] = c.m[in.b&15]
			x.running |= 1 << w
			x.wnext[w] = slotAt(now+1, w)
		case isa.EXIT:
			c.running = false
			c.pc = npc
			instrs++
			x.running &^= 1 << k
			x.wnext[k] = never
			if x.sblock&(1<<k) != 0 {
				x.sblock &^= 1 << k
				if x.sblock == 0 && x.snext < now+1 {
					x.snext = now + 1
				}
			}
			now++
			s = int(now % numWorkers)
			continue
		case isa.JOIN:
			if x.running != 0 {
				x.sblock = x.running
				now++
				s = int(now % numWorkers)
				continue
			}
		case isa.SYNC, isa.HSYNC, isa.HALT:
			// sync and hsync join; halt stops the tile, its workers
			// frozen where they are.
			if x.running != 0 && in.op != isa.HALT {
				x.sblock = x.running
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
		case isa.PUT:
			x.fail(FaultInvalid, k, pc, now, fmt.Sprintf("put: control register %d is read-only", in.imm))
			goto done

		// Exchange and host.
		case isa.SEND, isa.SEND2:
			if !x.m.tiles[x.id].inXchg {
				x.fail(FaultNotExchange, k, pc, now, fmt.Sprintf("tile %d is not a member of the exchange (register %s is 0)", x.id, RegName(RegExchange)))
				goto done
			}
			if now < x.portFree {
				if x.snext < x.portFree {
					x.snext = x.portFree
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
			x.wnext[k] = now + numWorkers*cyc
			if wait != 0 {
				x.wnext[k] = slotAt(x.wnext[k]+wait, k)
			}
		} else {
			x.snext = now + numWorkers*cyc + wait
		}
		now++
		s++
		if s == numWorkers {
			s = 0
		}
	}
done:
	r.instrs = instrs + x.rewind(r.cycles-1)
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
