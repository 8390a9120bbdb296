package sim

import (
	"encoding/binary"
	"math"

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
	if t+lastStart >= horizon {
		return t, 0, t, pc
	}
	per := numWorkers * cycles
	iters := int64(c.loopRem) // the loop ends after these
	if per > 0 {
		iters = min(iters, (horizon-1-t-lastStart)/per+1)
	}
	done, i := x.runBody(k, c, body, t, per, iters, saveAcc)
	n := done * int64(len(body))
	lastT := t
	if done > 0 {
		lastT = t + (done-1)*per + lastStart
	}
	t += done * per
	if i < len(body) {
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
	if !c.loopOn {
		return t, n, lastT, c.loopEnd
	}
	return t, n, lastT, pc
}

// runBody runs up to iters iterations of a repeatable body, the first from
// issue cycle t, one every per cycles (repeatable instructions do not read
// the cycle counter), counting the loop down; it ends the loop after its
// last iteration. It returns the whole iterations run and the index of the
// instruction that would fault in the next (nothing done for it), else
// len(body).
//
// An f16v4 fma's addend lanes are kept as FP64 from one fma to the next
// (h4fmaFast returns them): those of the fma at body[fi] (privateFMA) in
// z0..z3, its register written only when runBody returns; those of the
// last other fma in acc0..acc3, with its bits accBits, used when the
// addend has those bits (they start as all +0, which they are).
func (x *exec) runBody(k int, c *context, body []inst, t, per, iters int64, saveAcc bool) (int64, int) {
	half := x.prog.half
	fi := privateFMA(body)
	var z0, z1, z2, z3 float64
	if fi >= 0 {
		d := getPair(&c.a, body[fi].d)
		z0, z1 = float64(half[uint16(d)]), float64(half[uint16(d>>16)])
		z2, z3 = float64(half[uint16(d>>32)]), float64(half[uint16(d>>48)])
	}
	done, stop, z0, z1, z2, z3 := x.runIters(k, c, body, t, per, iters, saveAcc, fi, z0, z1, z2, z3)
	if fi >= 0 {
		setPair(&c.a, body[fi].d, round4(z0, z1, z2, z3))
	}
	return done, stop
}

// runIters is runBody's loop, fi and z0..z3 the private fma and its lanes.
func (x *exec) runIters(k int, c *context, body []inst, t, per, iters int64, saveAcc bool,
	fi int, z0, z1, z2, z3 float64) (int64, int, float64, float64, float64, float64) {
	half := x.prog.half
	var accBits uint64
	var acc0, acc1, acc2, acc3 float64
	for j := int64(0); j < iters; j++ {
		for i := range body {
			in := &body[i]
			// The commonest vector-loop instructions here, the rest in step.
			switch in.op {
			case isa.LD64P:
				addr := c.m[in.a&15]
				off := addr - x.lo
				if off > x.size-8 || addr&7 != 0 {
					return j, i, z0, z1, z2, z3
				}
				putPair(&c.a, in.d, binary.LittleEndian.Uint64(x.mem[off:]))
				c.m[in.a&15] = addr + uint32(in.imm)
			case isa.H4FMA:
				a := &c.a
				p, q := pairOf(a, in.a), pairOf(a, in.b)
				if i == fi {
					if r0, r1, r2, r3, ok := h4fmaFast(p, q, z0, z1, z2, z3, half); ok {
						z0, z1, z2, z3 = math.Float64frombits(r0), math.Float64frombits(r1), math.Float64frombits(r2), math.Float64frombits(r3)
					} else {
						_, z0, z1, z2, z3 = h4fmaSlow(p, q, z0, z1, z2, z3, half)
					}
					break
				}
				y0, y1, y2, y3 := acc0, acc1, acc2, acc3
				if d := pairOf(a, in.d); d != accBits {
					y0, y1 = float64(half[uint16(d)]), float64(half[uint16(d>>16)])
					y2, y3 = float64(half[uint16(d>>32)]), float64(half[uint16(d>>48)])
				}
				accBits, acc0, acc1, acc2, acc3 = h4fmaZ(p, q, y0, y1, y2, y3, half)
				putPair(a, in.d, accBits)
			case isa.H4MAX, isa.H4MIN: // h4maxmin, the common case inline
				a := &c.a
				p, q := pairOf(a, in.a), pairOf(a, in.b)
				if h4nan(p, q) {
					putPair(a, in.d, h4maxminNaN(p, q, in.op == isa.H4MAX))
					break
				}
				sel := h4gt(p, q)
				if in.op == isa.H4MIN {
					sel = ^sel
				}
				putPair(a, in.d, p&sel|q&^sel)
			case isa.H4ADD, isa.H4SUB, isa.H4MUL:
				a := &c.a
				putPair(a, in.d, h4arith(in.op, pairOf(a, in.a), pairOf(a, in.b), 0, half))
			default:
				if _, _, _, ok := x.step(k, c, in, 0, t+j*per, saveAcc); !ok {
					return j, i, z0, z1, z2, z3
				}
			}
			c.m[15], c.a[15] = 0, 0
		}
		if c.loopRem <= 1 {
			c.loopOn = false
			return j + 1, len(body), z0, z1, z2, z3
		}
		c.loopRem--
	}
	return iters, len(body), z0, z1, z2, z3
}

// pairOf and putPair are getPair and setPair for an even r (decoding
// checks that every $a pair is), whose pair is a[r&14:r&14+2].
func pairOf(a *[16]uint32, r uint8) uint64 {
	i := r & 14
	return uint64(a[i]) | uint64(a[i+1])<<32
}

func putPair(a *[16]uint32, r uint8, v uint64) {
	i := r & 14
	a[i], a[i+1] = uint32(v), uint32(v>>32)
}

// privateFMA returns the index of an f16v4 fma of body whose destination
// pair (not $a14:15, which the zeroing of $a15 would touch) no other
// instruction of body reads or writes, nor it as a or b, when runBody runs
// every instruction of body inline (so none reads registers but its
// fields); else -1. runBody keeps that pair's lanes as FP64 only.
func privateFMA(body []inst) int {
	fi := -1
	for i := range body {
		switch body[i].op {
		case isa.H4FMA:
			if fi < 0 && body[i].d&15 < 14 && body[i].d&1 == 0 {
				fi = i
			}
		case isa.LD64P, isa.H4MAX, isa.H4MIN, isa.H4ADD, isa.H4SUB, isa.H4MUL:
		default:
			return -1
		}
	}
	if fi < 0 {
		return -1
	}
	d := body[fi].d & 15
	for i := range body {
		in := &body[i]
		hit := in.op != isa.LD64P && (pairsMeet(in.a, d) || pairsMeet(in.b, d))
		if hit || i != fi && pairsMeet(in.d, d) {
			return -1
		}
	}
	return fi
}

// pairsMeet reports whether the $a pairs at r and d (d even) share a
// register.
func pairsMeet(r, d uint8) bool {
	return r&15 == d || (r+1)&15 == d || r&15 == d+1
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
