package sim

import (
	"encoding/binary"
	"math"

	"ipu.local/libs/isa"
)

// A stream body is the commonest vector repeat body: ld64p's, then an
// f16v4 fma and/or a max or min, each of which owns its destination pair
// (privatePairs). Its iterations need no dispatch: runStream runs the
// loads, then the fma's four lanes (rounded in place, h4fmaFastY's
// arithmetic written out) and the max or min, with the fma's lanes and
// the max/min's value in locals and the other pairs in an array of
// pairs. runIters runs every other body.

// maxStreamLoads bounds the ld64p's of a stream body.
const maxStreamLoads = 4

// streamLoad is one ld64p: destination pair d (index of the pair), base
// register base, increment imm.
type streamLoad struct {
	d, base uint8
	imm     uint32
}

// streamShape is a stream body's description: its loads, the fma's and
// the max/min's operand pairs (indexes) and destination pairs, and
// whether each is present.
type streamShape struct {
	ld       [maxStreamLoads]streamLoad
	nld      int
	fma, mm  bool
	fa, fb   uint8 // fma operands; fb may be invariant
	fbInv    bool  // no instruction of the body writes fb
	ma, mb   uint8 // max/min operands
	maSelf   bool  // ma is the max/min's own pair
	mbSelf   bool
	mmIsMax  bool
	md, fd   uint8
	mmIdx    int // body indexes of the fma and the max/min
	fmaIdx   int
	loadsEnd int // body index after the last load
}

// streamOf returns body's shape when body is a stream body whose fma (if
// any) is body[fi] and max/min (if any) body[mi], as privatePairs found
// them: ld64p's (into pairs other than $a14:15, based on a register other
// than $m15, so that no write is dropped) first, then only body[fi] and
// body[mi].
func streamOf(body []inst, fi, mi int) (s streamShape, ok bool) {
	i := 0
	for ; i < len(body) && body[i].op == isa.LD64P; i++ {
		in := &body[i]
		if i == maxStreamLoads || in.d&15 >= 14 || in.a&15 == 15 {
			return s, false
		}
		s.ld[i] = streamLoad{d: in.d & 14 >> 1, base: in.a & 15, imm: uint32(in.imm)}
	}
	s.nld, s.loadsEnd = i, i
	if i == 0 {
		return s, false
	}
	for ; i < len(body); i++ {
		switch {
		case i == fi && body[i].op == isa.H4FMA:
			s.fma, s.fmaIdx = true, i
		case i == mi && (body[i].op == isa.H4MAX || body[i].op == isa.H4MIN):
			s.mm, s.mmIdx = true, i
		default:
			return s, false
		}
	}
	if s.fma {
		in := &body[fi]
		r, other, inv := invariantOperand(body, fi)
		if !inv {
			r, other = in.a, in.b
		}
		s.fa, s.fb, s.fbInv, s.fd = r&14>>1, other&14>>1, inv, in.d&14>>1
	}
	if s.mm {
		in := &body[mi]
		s.ma, s.mb, s.md = in.a&14>>1, in.b&14>>1, in.d&14>>1
		s.maSelf, s.mbSelf, s.mmIsMax = in.a == in.d, in.b == in.d, in.op == isa.H4MAX
	}
	return s, true
}

// streamState is what runStream keeps out of the register file: the $a
// pairs (regs, by index), the fma's lanes, the max/min's value.
type streamState struct {
	regs           [8]uint64
	z0, z1, z2, z3 float64
	mv             uint64
}

// runStream runs up to iters iterations of the stream body s, counting
// the loop down and ending it after its last iteration, as runIters does.
// It returns the whole iterations run and the body index of the load that
// would fault in the next (nothing done for it), else bodyLen. The
// iterations whose fma or max/min the fast path does not take
// (streamFast) finish in streamSlow.
func (x *exec) runStream(c *context, s *streamShape, st *streamState, iters int64, bodyLen int) (int64, int) {
	stop := bodyLen
	var j int64
	for j < iters {
		var l int
		if j, l = x.streamFast(c, s, st, j, iters); l < s.nld {
			stop = l
			break
		}
		if j < iters {
			x.streamSlow(s, st)
			j++
		}
	}
	switch {
	case j == 0:
	case int64(c.loopRem) <= j:
		c.loopRem, c.loopOn = 1, false
	default:
		c.loopRem -= uint32(j)
	}
	return j, stop
}

// streamFast runs iterations j.. of s (up to iters) while the fma's lanes
// take the fast path and the max/min's have no NaN. It returns the
// iteration it stopped at and s.nld, its loads done when it is below
// iters, or the index of the load that would fault (the earlier ones
// done).
func (x *exec) streamFast(c *context, s *streamShape, st *streamState, j, iters int64) (int64, int) {
	half := x.prog.half
	z0, z1, z2, z3, mv := st.z0, st.z1, st.z2, st.z3, st.mv
	var y0, y1, y2, y3 float32
	if s.fbInv {
		b := st.regs[s.fb&7]
		y0, y1, y2, y3 = half[uint16(b)], half[uint16(b>>16)], half[uint16(b>>32)], half[uint16(b>>48)]
	}
	flip := uint64(0) // h4gt's lanes for max, their complement for min
	if !s.mmIsMax {
		flip = math.MaxUint64
	}
	mem, lo, size, regs, nld := x.mem, x.lo, x.size, &st.regs, s.nld
	ld0 := s.ld[0]
	stop := nld
	for ; j < iters; j++ {
		if nld == 1 {
			addr := c.m[ld0.base&15]
			off := addr - lo
			if off > size-8 || addr&7 != 0 {
				stop = 0
				break
			}
			regs[ld0.d&7] = binary.LittleEndian.Uint64(mem[off:])
			c.m[ld0.base&15] = addr + ld0.imm
		} else if stop = loadStream(c, s, regs, mem, lo, size); stop < nld {
			break
		}
		n0, n1, n2, n3 := z0, z1, z2, z3
		if s.fma {
			p := regs[s.fa&7]
			if !s.fbInv {
				q := regs[s.fb&7]
				y0, y1, y2, y3 = half[uint16(q)], half[uint16(q>>16)], half[uint16(q>>32)], half[uint16(q>>48)]
			}
			mn, mx := uint64(math.MaxUint64), uint64(0)
			n0, mn, mx = fmaLane(half[uint16(p)], y0, z0, mn, mx)
			n1, mn, mx = fmaLane(half[uint16(p>>16)], y1, z1, mn, mx)
			n2, mn, mx = fmaLane(half[uint16(p>>32)], y2, z2, mn, mx)
			n3, mn, mx = fmaLane(half[uint16(p>>48)], y3, z3, mn, mx)
			if mn < f64MinNormal16-1 || mx >= f64Two16 {
				break
			}
		}
		if s.mm {
			p, q := pick(regs[s.ma&7], mv, s.maSelf), pick(regs[s.mb&7], mv, s.mbSelf)
			if h4nan(p, q) {
				break
			}
			sel := h4gt(p, q) ^ flip
			mv = p&sel | q&^sel
		}
		z0, z1, z2, z3 = n0, n1, n2, n3
	}
	st.z0, st.z1, st.z2, st.z3, st.mv = z0, z1, z2, z3, mv
	return j, stop
}

// streamSlow runs the fma and the max/min of an iteration of s whose
// loads are done, by the generic paths.
func (x *exec) streamSlow(s *streamShape, st *streamState) {
	regs := &st.regs
	if s.fma {
		_, st.z0, st.z1, st.z2, st.z3 = h4fmaZ(regs[s.fa&7], regs[s.fb&7], st.z0, st.z1, st.z2, st.z3, x.prog.half)
	}
	if s.mm {
		p, q := pick(regs[s.ma&7], st.mv, s.maSelf), pick(regs[s.mb&7], st.mv, s.mbSelf)
		st.mv = h4maxmin(p, q, s.mmIsMax)
	}
}

// loadStream runs s's loads of one iteration into regs; it returns the
// index of the one that would fault (the earlier ones done), else s.nld.
func loadStream(c *context, s *streamShape, regs *[8]uint64, mem []byte, lo, size uint32) int {
	for l := 0; l < s.nld; l++ {
		ld := &s.ld[l]
		addr := c.m[ld.base]
		off := addr - lo
		if off > size-8 || addr&7 != 0 {
			return l
		}
		regs[ld.d] = binary.LittleEndian.Uint64(mem[off:])
		c.m[ld.base] = addr + ld.imm
	}
	return s.nld
}

// streamBody is runBody for a stream body: the pairs, the fma's lanes and
// the max/min's value out of the register file while runStream runs, then
// back.
func (x *exec) streamBody(c *context, body []inst, s *streamShape, iters int64) (int64, int) {
	half := x.prog.half
	var st streamState
	for i := range st.regs {
		st.regs[i] = pairOf(&c.a, uint8(2*i))
	}
	if s.fma {
		d := st.regs[s.fd]
		st.z0, st.z1 = float64(half[uint16(d)]), float64(half[uint16(d>>16)])
		st.z2, st.z3 = float64(half[uint16(d>>32)]), float64(half[uint16(d>>48)])
	}
	if s.mm {
		st.mv = st.regs[s.md]
	}
	done, stop := x.runStream(c, s, &st, iters, len(body))
	for l := 0; l < s.nld; l++ {
		putPair(&c.a, 2*s.ld[l].d, st.regs[s.ld[l].d])
	}
	if s.fma && done > 0 { // the fma ran (else d may hold a NaN that round4 would make canonical)
		putPair(&c.a, 2*s.fd, round4(st.z0, st.z1, st.z2, st.z3))
	}
	if s.mm {
		putPair(&c.a, 2*s.md, st.mv)
	}
	return done, stop
}

// fmaLane is one lane of h4fmaFastY: the sum of the product x*y (exact in
// FP32) and z, rounded in place to 10 mantissa bits, and mn and mx folded
// with its rounded magnitude q (mn with q-1, which wraps for a zero), for
// the one range check of the four lanes.
func fmaLane(x, y float32, z float64, mn, mx uint64) (float64, uint64, uint64) {
	const tie, sign = 1 << 41, 1 << 63
	b := math.Float64bits(float64(x*y) + z)
	r := (b + (tie - 1) + (b>>42)&1) >> 42 << 42
	q := r ^ b&sign
	return math.Float64frombits(r), min(mn, q-1), max(mx, q)
}
