package sim

import (
	"encoding/binary"

	"ipu.local/libs/isa"
)

// repeatBody runs whole iterations of a worker's repeat body (body, at pc,
// the loop's start) from issue cycle t while an iteration's last
// instruction issues before horizon, without the stretch loop's checks:
// every instruction is repeatable, so none is global, branches or has
// cycles that vary. It stops inside an iteration before an instruction
// that would fault. It returns the next issue cycle, the instructions run,
// the last one's issue cycle and the pc to go on at.
func (x *exec) repeatBody(k int, c *context, body []inst, pc uint32, t, horizon int64, saveAcc bool) (int64, int64, int64, uint32) {
	var cycles int64
	for i := range body {
		cycles += int64(body[i].cycles)
	}
	lastStart := numWorkers * (cycles - int64(body[len(body)-1].cycles))
	var n int64
	lastT := t
	for t+lastStart < horizon {
		if i := x.runBody(k, c, body, t, saveAcc); i < len(body) {
			// Stopped before body[i]: the issue cycles of the ones run.
			var pre int64
			for j := range body[:i] {
				pre += int64(body[j].cycles)
			}
			if i > 0 {
				lastT = t + numWorkers*(pre-int64(body[i-1].cycles))
			}
			return t + numWorkers*pre, n + int64(i), lastT, pc + 4*uint32(i)
		}
		n += int64(len(body))
		lastT = t + lastStart
		t += numWorkers * cycles
		if c.loopRem <= 1 {
			c.loopOn = false
			return t, n, lastT, c.loopEnd
		}
		c.loopRem--
	}
	return t, n, lastT, pc
}

// runBody runs one iteration of a repeatable body; it returns the index of
// the instruction that would fault (nothing done for it), else len(body).
// t is the iteration's first issue cycle (repeatable instructions do not
// read the cycle counter).
func (x *exec) runBody(k int, c *context, body []inst, t int64, saveAcc bool) int {
	for i := range body {
		in := &body[i]
		// The commonest vector-loop instructions here, the rest in step.
		switch in.op {
		case isa.LD64P:
			addr := c.m[in.a&15]
			off := addr - x.lo
			if off > x.size-8 || addr&7 != 0 {
				return i
			}
			setPair(&c.a, in.d, binary.LittleEndian.Uint64(x.mem[off:]))
			c.m[in.a&15] = addr + uint32(in.imm)
		case isa.H4FMA:
			a := &c.a
			setPair(a, in.d, h4fma(getPair(a, in.a), getPair(a, in.b), getPair(a, in.d), x.prog.half))
		case isa.H4MAX, isa.H4MIN: // h4maxmin, the common case inline
			a := &c.a
			p, q := getPair(a, in.a), getPair(a, in.b)
			if h4nan(p, q) {
				setPair(a, in.d, h4maxminNaN(p, q, in.op == isa.H4MAX))
				break
			}
			sel := h4gt(p, q)
			if in.op == isa.H4MIN {
				sel = ^sel
			}
			setPair(a, in.d, p&sel|q&^sel)
		case isa.H4ADD, isa.H4SUB, isa.H4MUL:
			a := &c.a
			setPair(a, in.d, h4arith(in.op, getPair(a, in.a), getPair(a, in.b), 0, x.prog.half))
		default:
			if _, _, _, ok := x.step(k, c, in, 0, t, saveAcc); !ok {
				return i
			}
		}
		c.m[15], c.a[15] = 0, 0
	}
	return len(body)
}

// reads reports whether an instruction of body reads memory.
func reads(body []inst) bool {
	for i := range body {
		if body[i].flags&fRead != 0 {
			return true
		}
	}
	return false
}
