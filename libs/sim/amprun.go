package sim

import "ipu.local/libs/isa"

// ampRepeat runs the iterations of a repeat body that is one amph or
// ampf (the inner loop of a matmul: rpti n, 1; amph) from issue cycle t,
// each as the issue loop would: operands checked, the element conflict's
// extra cycle, the loop count. It stops before an iteration that would fault or issue
// at or after horizon, and when the loop ends (c.pc then is its end). It
// returns the next issue cycle, the iterations run and the last one's
// issue cycle.
func (x *exec) ampRepeat(c *context, in *inst, t, horizon int64) (int64, int64, int64) {
	if in.op == isa.AMPF {
		return x.ampfRepeat(c, in, t, horizon)
	}
	p := x.m.p
	ra, rb := in.a&15, in.b&15
	lo, size, mem := x.lo, x.size, x.mem
	il, ih := p.Interleaved.Lo, uint64(p.Interleaved.Hi)
	pair := 2 * p.ElementBytes
	half := x.prog.half
	acc := &c.acc
	var n int64
	lastT := t
	for t < horizon {
		a, b := c.m[ra], c.m[rb]
		offA, offB := a-lo, b-lo
		if offA > size-8 || a&7 != 0 || b < il || uint64(b)+32 > ih || b&31 != 0 {
			break // faults: the issue loop reports it at its cycle
		}
		ampHalf(acc, (*[8]byte)(mem[offA:]), (*[32]byte)(mem[offB:]), half)
		c.m[ra] += 8
		c.m[rb] += 32
		c.m[15] = 0
		cyc := int64(in.cycles)
		if a >= il && (a-il)/pair == (b-il)/pair {
			cyc++ // a shares b's pair of memory elements (see amp)
		}
		n++
		lastT = t
		t += numWorkers * cyc
		if c.loopRem <= 1 {
			c.loopOn = false
			c.pc = c.loopEnd
			break
		}
		c.loopRem--
	}
	return t, n, lastT
}

// ampfRepeat is ampRepeat for a body that is one ampf.
func (x *exec) ampfRepeat(c *context, in *inst, t, horizon int64) (int64, int64, int64) {
	p := x.m.p
	ra, rb := in.a&15, in.b&15
	lo, size, mem := x.lo, x.size, x.mem
	il, ih := p.Interleaved.Lo, uint64(p.Interleaved.Hi)
	acc := &c.acc
	var n int64
	lastT := t
	for t < horizon {
		a, b := c.m[ra], c.m[rb]
		offA, offB := a-lo, b-lo
		if offA > size-16 || a&7 != 0 || b < il || uint64(b)+64 > ih || b&31 != 0 {
			break // faults: the issue loop reports it at its cycle
		}
		ampFloat(acc, (*[16]byte)(mem[offA:]), (*[64]byte)(mem[offB:]))
		c.m[ra] += 16
		c.m[rb] += 64
		c.m[15] = 0
		cyc := int64(in.cycles)
		if x.ampfConflict(a, b) {
			cyc++
		}
		n++
		lastT = t
		t += numWorkers * cyc
		if c.loopRem <= 1 {
			c.loopOn = false
			c.pc = c.loopEnd
			break
		}
		c.loopRem--
	}
	return t, n, lastT
}
