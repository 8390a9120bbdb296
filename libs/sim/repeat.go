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
// Registers that only one instruction of the body uses (privatePairs)
// stay out of the register file until runBody returns: the lanes of the
// f16v4 fma at body[fi] as FP64 in z0..z3 (h4fmaFastY returns them), the
// value of the max or min at body[mi] in mv. When one of that fma's
// operands is a pair the body does not write, its lanes' values are
// looked up once (y0..y3; vr the other operand).
func (x *exec) runBody(k int, c *context, body []inst, t, per, iters int64, saveAcc bool) (int64, int) {
	half := x.prog.half
	fi, mi := privatePairs(body)
	if s, ok := streamOf(body, fi, mi); ok {
		return x.runStream(c, &s, iters, len(body))
	}
	var z0, z1, z2, z3 float64
	var y0, y1, y2, y3 float32
	vr := uint8(0xFF)
	if fi >= 0 {
		d := getPair(&c.a, body[fi].d)
		z0, z1 = float64(half[uint16(d)]), float64(half[uint16(d>>16)])
		z2, z3 = float64(half[uint16(d>>32)]), float64(half[uint16(d>>48)])
		if r, other, ok := invariantOperand(body, fi); ok {
			b := getPair(&c.a, other)
			y0, y1, y2, y3 = half[uint16(b)], half[uint16(b>>16)], half[uint16(b>>32)], half[uint16(b>>48)]
			vr = r
		}
	}
	var mv uint64
	if mi >= 0 {
		mv = getPair(&c.a, body[mi].d)
	}
	done, stop, z0, z1, z2, z3, mv := x.runIters(k, c, body, t, per, iters, saveAcc, fi, mi, vr,
		z0, z1, z2, z3, y0, y1, y2, y3, mv)
	if fi >= 0 && (done > 0 || stop > fi) { // the fma ran (else d may hold a NaN that round4 would make canonical)
		setPair(&c.a, body[fi].d, round4(z0, z1, z2, z3))
	}
	if mi >= 0 {
		setPair(&c.a, body[mi].d, mv)
	}
	return done, stop
}

// runIters is runBody's loop. An fma other than the private one keeps its
// result's lanes as FP64 too (acc0..acc3, its bits accBits), used when an
// fma's addend has those bits (they start as all +0, which they are).
func (x *exec) runIters(k int, c *context, body []inst, t, per, iters int64, saveAcc bool, fi, mi int, vr uint8,
	z0, z1, z2, z3 float64, y0, y1, y2, y3 float32, mv uint64) (int64, int, float64, float64, float64, float64, uint64) {
	half := x.prog.half
	var accBits uint64
	var acc0, acc1, acc2, acc3 float64
	for j := int64(0); j < iters; j++ {
		for i := range body {
			in := &body[i]
			a := &c.a
			// The commonest vector-loop instructions here, the rest in step.
			switch in.op {
			case isa.LD64P:
				addr := c.m[in.a&15]
				off := addr - x.lo
				if off > x.size-8 || addr&7 != 0 {
					return j, i, z0, z1, z2, z3, mv
				}
				putPair(a, in.d, binary.LittleEndian.Uint64(x.mem[off:]))
				c.m[in.a&15] = addr + uint32(in.imm)
			case isa.H4FMA:
				if i != fi {
					accBits, acc0, acc1, acc2, acc3 = cachedFMA(a, in, accBits, acc0, acc1, acc2, acc3, half)
					break
				}
				p, w0, w1, w2, w3 := pairOf(a, vr), y0, y1, y2, y3
				if vr > 15 {
					p = pairOf(a, in.a)
					q := pairOf(a, in.b)
					w0, w1, w2, w3 = half[uint16(q)], half[uint16(q>>16)], half[uint16(q>>32)], half[uint16(q>>48)]
				}
				if r0, r1, r2, r3, ok := h4fmaFastY(p, w0, w1, w2, w3, z0, z1, z2, z3, half); ok {
					z0, z1, z2, z3 = math.Float64frombits(r0), math.Float64frombits(r1), math.Float64frombits(r2), math.Float64frombits(r3)
				} else {
					_, z0, z1, z2, z3 = h4fmaSlow(pairOf(a, in.a), pairOf(a, in.b), z0, z1, z2, z3, half)
				}
			case isa.H4MAX, isa.H4MIN: // h4maxmin, the common case inline
				p, q := pairOf(a, in.a), pairOf(a, in.b)
				if i == mi {
					p, q = pick(p, mv, in.a == in.d), pick(q, mv, in.b == in.d)
				}
				var v uint64
				if h4nan(p, q) {
					v = h4maxminNaN(p, q, in.op == isa.H4MAX)
				} else if sel := h4gt(p, q); in.op == isa.H4MAX {
					v = p&sel | q&^sel
				} else {
					v = q&sel | p&^sel
				}
				if i == mi {
					mv = v
					break
				}
				putPair(a, in.d, v)
			case isa.H4ADD, isa.H4SUB, isa.H4MUL:
				putPair(a, in.d, h4arith(in.op, pairOf(a, in.a), pairOf(a, in.b), 0, half))
			default:
				if _, _, _, ok := x.step(k, c, in, 0, t+j*per, saveAcc); !ok {
					return j, i, z0, z1, z2, z3, mv
				}
			}
			c.m[15], c.a[15] = 0, 0
		}
		if c.loopRem <= 1 {
			c.loopOn = false
			return j + 1, len(body), z0, z1, z2, z3, mv
		}
		c.loopRem--
	}
	return iters, len(body), z0, z1, z2, z3, mv
}

// pick returns v if mine, else reg.
func pick(reg, v uint64, mine bool) uint64 {
	if mine {
		return v
	}
	return reg
}

// cachedFMA is an fma in at a that is not private (runIters): its addend's
// lanes are acc0..acc3 when it has their bits (accBits), else through the
// table; it returns its result's bits and lanes.
func cachedFMA(a *[16]uint32, in *inst, accBits uint64, acc0, acc1, acc2, acc3 float64,
	half *[1 << 16]float32) (uint64, float64, float64, float64, float64) {
	if d := pairOf(a, in.d); d != accBits {
		acc0, acc1 = float64(half[uint16(d)]), float64(half[uint16(d>>16)])
		acc2, acc3 = float64(half[uint16(d>>32)]), float64(half[uint16(d>>48)])
	}
	accBits, acc0, acc1, acc2, acc3 = h4fmaZ(pairOf(a, in.a), pairOf(a, in.b), acc0, acc1, acc2, acc3, half)
	putPair(a, in.d, accBits)
	return accBits, acc0, acc1, acc2, acc3
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

// privatePairs returns the indexes of the first f16v4 fma and the first
// max or min of body whose destination pair no other instruction of body
// reads or writes (ownsPair), or -1; both -1 unless runIters runs every
// instruction of body inline (so none reads registers but its fields).
func privatePairs(body []inst) (fi, mi int) {
	fi, mi = -1, -1
	for i := range body {
		switch body[i].op {
		case isa.H4FMA:
			if fi < 0 && ownsPair(body, i, false) {
				fi = i
			}
		case isa.H4MAX, isa.H4MIN:
			if mi < 0 && ownsPair(body, i, true) {
				mi = i
			}
		case isa.LD64P, isa.H4ADD, isa.H4SUB, isa.H4MUL:
		default:
			return -1, -1
		}
	}
	return fi, mi
}

// ownsPair reports whether body[i]'s destination pair, not $a14:15 (the
// zeroing of $a15 touches it), is read or written by no other instruction
// of body, nor read by body[i] itself unless self.
func ownsPair(body []inst, i int, self bool) bool {
	d := body[i].d & 15
	if d >= 14 || d&1 != 0 {
		return false
	}
	for j := range body {
		in := &body[j]
		reads := in.op != isa.LD64P && (pairsMeet(in.a, d) || pairsMeet(in.b, d))
		if j == i {
			if reads && !self {
				return false
			}
		} else if reads || pairsMeet(in.d, d) {
			return false
		}
	}
	return true
}

// invariantOperand returns, for the fma body[fi], an operand (other) whose
// pair no instruction of body writes, not $a14:15, and the other operand
// (r).
func invariantOperand(body []inst, fi int) (r, other uint8, ok bool) {
	written := func(p uint8) bool {
		if p&15 >= 14 {
			return true
		}
		for j := range body {
			if pairsMeet(body[j].d, p&15) {
				return true
			}
		}
		return false
	}
	in := &body[fi]
	switch {
	case !written(in.b):
		return in.a, in.b, true
	case !written(in.a):
		return in.b, in.a, true
	}
	return 0, 0, false
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
