package sim

import "ipu.local/libs/isa"

// ampRepeat runs the iterations of a repeat body that is one amph or
// ampf (the inner loop of a matmul: rpti n, 1; amph) from issue cycle t,
// each as the issue loop would: operands checked, the element conflict's
// extra cycle, the loop count. It stops before an iteration that would
// fault or issue at or after horizon, and when the loop ends (c.pc then
// is its end). It returns the next issue cycle, the iterations run and
// the last one's issue cycle.
func (x *exec) ampRepeat(c *context, in *inst, t, horizon int64) (int64, int64, int64) {
	p := x.m.p
	ra, rb := in.a&15, in.b&15
	lo, size, mem := x.lo, x.size, x.mem
	il, ih := p.Interleaved.Lo, uint64(p.Interleaved.Hi)
	pair := 2 * p.ElementBytes
	half := x.prog.half
	acc := &c.acc
	fp32 := in.op == isa.AMPF
	na, nb := ampBytes(in.op)
	var n int64
	lastT := t
	for t < horizon {
		a, b := c.m[ra], c.m[rb]
		offA, offB := a-lo, b-lo
		if offA > size-na || a&7 != 0 || b < il || uint64(b)+uint64(nb) > ih || b&31 != 0 {
			break // faults: the issue loop reports it at its cycle
		}
		cyc := int64(in.cycles)
		if fp32 {
			ampFloat(acc, (*[16]byte)(mem[offA:]), (*[64]byte)(mem[offB:]))
			if x.ampConflict(a, na, b, nb) {
				cyc++
			}
		} else {
			ampHalf(acc, (*[8]byte)(mem[offA:]), (*[32]byte)(mem[offB:]), half)
			// ampConflict for amph, inline: one word of a, b in one pair
			// (the hot loop of every FP16 product).
			if a >= il && (a-il)/pair == (b-il)/pair {
				cyc++
			}
		}
		c.m[ra] += na
		c.m[rb] += nb
		c.m[15] = 0
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
