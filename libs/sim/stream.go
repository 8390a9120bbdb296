package sim

import (
	"encoding/binary"
	"math"

	"ipu.local/libs/isa"
)

// A stream body is the commonest vector repeat body: ld64p's, then an
// f16v4 fma and/or a max or min, each of which owns its destination pair
// (privatePairs). Nothing in it writes memory, and no other context does
// while it runs ahead (the read bound), so each load reads a strided
// sequence of memory, known before the loop: the load l of iteration j
// reads start_l + j*stride_l (stride_l the sum of the increments on its
// base register). And the fma and the max/min read only loaded pairs,
// pairs the body never writes and their own: each is a function of its
// own value and the loads alone. So runStream works out up front the
// first iteration whose load would fault, then runs the fma over its
// strided operands (fmaPass: no dispatch, no register file, the lanes
// rounded in place), the max/min likewise (mmPass), and sets the loaded
// pairs and the base registers as the last iteration left them.
// runIters runs every other body.

// maxStreamLoads bounds the ld64p's of a stream body.
const maxStreamLoads = 4

// streamLoad is one ld64p: destination pair d (index of the pair), base
// register base, increment imm, and the increments of the earlier loads
// on base in the body (pre).
type streamLoad struct {
	d, base  uint8
	imm, pre uint32
}

// streamShape is a stream body's description: its loads, which load
// (or -1: none, the pair is invariant or the max/min's own) last writes
// each operand pair of the fma and the max/min, those pairs' indexes,
// and whether each is present.
type streamShape struct {
	ld             [maxStreamLoads]streamLoad
	nld            int
	fma, mm        bool
	fa, fb, fd     uint8 // pair indexes
	ma, mb, md     uint8
	faL, fbL       int8 // the load of fa, fb, or -1
	maL, mbL       int8
	maSelf, mbSelf bool
	mmIsMax        bool
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
		for j := 0; j < i; j++ {
			if s.ld[j].base == s.ld[i].base {
				s.ld[i].pre += s.ld[j].imm
			}
		}
	}
	s.nld = i
	if i == 0 {
		return s, false
	}
	for ; i < len(body); i++ {
		switch {
		case i == fi && body[i].op == isa.H4FMA:
			s.fma = true
		case i == mi && (body[i].op == isa.H4MAX || body[i].op == isa.H4MIN):
			s.mm = true
		default:
			return s, false
		}
	}
	if s.fma {
		in := &body[fi]
		s.fa, s.fb, s.fd = in.a&14>>1, in.b&14>>1, in.d&14>>1
		s.faL, s.fbL = s.loadOf(s.fa), s.loadOf(s.fb)
	}
	if s.mm {
		in := &body[mi]
		s.ma, s.mb, s.md = in.a&14>>1, in.b&14>>1, in.d&14>>1
		s.maL, s.mbL = s.loadOf(s.ma), s.loadOf(s.mb)
		s.maSelf, s.mbSelf, s.mmIsMax = in.a == in.d, in.b == in.d, in.op == isa.H4MAX
	}
	return s, true
}

// loadOf returns the last load of s into pair p, or -1.
func (s *streamShape) loadOf(p uint8) int8 {
	for l := s.nld - 1; l >= 0; l-- {
		if s.ld[l].d == p {
			return int8(l)
		}
	}
	return -1
}

// strided is an operand of a stream body's fma or max/min: iteration j
// reads mem[off+j*stride:], or v when inv.
type strided struct {
	off, stride uint32
	inv         bool
	v           uint64
}

func (o *strided) at(mem []byte, j int64) uint64 {
	if o.inv {
		return o.v
	}
	return binary.LittleEndian.Uint64(mem[o.off+uint32(j)*o.stride:])
}

// operand is pair p's operand: load l's sequence, or p's value.
func (x *exec) operand(c *context, s *streamShape, p uint8, l int8) strided {
	if l < 0 {
		return strided{inv: true, v: pairOf(&c.a, 2*p)}
	}
	ld := &s.ld[l]
	return strided{off: c.m[ld.base] + ld.pre - x.lo, stride: s.stride(ld.base)}
}

// stride is the increment of base register b per iteration of s.
func (s *streamShape) stride(b uint8) uint32 {
	var v uint32
	for l := range s.ld[:s.nld] {
		if s.ld[l].base == b {
			v += s.ld[l].imm
		}
	}
	return v
}

// firstFault returns the first iteration whose load l would fault, and
// n if none of the first n does. Its address is aligned in every
// iteration when it is in the first and the stride is a multiple of 8
// (else the second is not); an offset going up leaves memory after
// (size-8-off)/stride more iterations, one going down (a negative
// increment, which wraps) after off/-stride.
func (x *exec) firstFault(c *context, s *streamShape, l int, n int64) int64 {
	ld := &s.ld[l]
	addr := c.m[ld.base] + ld.pre
	off, stride := addr-x.lo, s.stride(ld.base)
	var ok int64 // iterations that do not fault
	switch {
	case off > x.size-8 || addr&7 != 0:
		ok = 0
	case stride&7 != 0:
		ok = 1
	case stride == 0:
		ok = n
	case int32(stride) > 0:
		ok = int64((x.size-8-off)/stride) + 1
	default:
		ok = int64(off/-stride) + 1
	}
	return min(ok, n)
}

// runStream runs up to iters iterations of the stream body s, counting
// the loop down and ending it after its last iteration, as runIters does.
// It returns the whole iterations run and the body index of the load that
// would fault in the next (the earlier loads of that iteration done),
// else bodyLen.
func (x *exec) runStream(c *context, s *streamShape, iters int64, bodyLen int) (int64, int) {
	n, part := iters, 0 // part: the loads of iteration n run before one faults
	for l := range s.ld[:s.nld] {
		if f := x.firstFault(c, s, l, iters); f < n {
			n, part = f, l
		}
	}
	stop := bodyLen
	if n < iters {
		stop = part
	}
	if s.fma && n > 0 {
		x.fmaStream(c, s, n)
	}
	if s.mm && n > 0 {
		x.mmStream(c, s, n)
	}
	// The loads: those of the last of the n iterations, then those
	// before stop in the next.
	for l := range s.ld[:s.nld] {
		if ld := &s.ld[l]; n > 0 {
			o := x.operand(c, s, ld.d, int8(l))
			putPair(&c.a, 2*ld.d, o.at(x.mem, n-1))
		}
	}
	for l := range s.ld[:part] {
		ld := &s.ld[l]
		o := x.operand(c, s, ld.d, int8(l))
		putPair(&c.a, 2*ld.d, o.at(x.mem, n))
	}
	var adv [16]uint32
	for l := range s.ld[:s.nld] {
		ld := &s.ld[l]
		adv[ld.base] += uint32(n) * ld.imm
		if l < part {
			adv[ld.base] += ld.imm
		}
	}
	for b, v := range adv {
		c.m[b] += v
	}
	switch {
	case n == 0:
	case int64(c.loopRem) <= n:
		c.loopRem, c.loopOn = 1, false
	default:
		c.loopRem -= uint32(n)
	}
	return n, stop
}

// fmaStream runs the fma of n iterations of s: fmaPass while its lanes
// take the fast path, h4fmaZ for an iteration whose lanes do not.
func (x *exec) fmaStream(c *context, s *streamShape, n int64) {
	half := x.prog.half
	d := pairOf(&c.a, 2*s.fd)
	z := [4]float64{float64(half[uint16(d)]), float64(half[uint16(d>>16)]), float64(half[uint16(d>>32)]), float64(half[uint16(d>>48)])}
	a, b := x.operand(c, s, s.fa, s.faL), x.operand(c, s, s.fb, s.fbL)
	if a.inv && !b.inv { // the product commutes: b invariant if either is
		a, b = b, a
	}
	for j := int64(0); j < n; {
		if j = fmaPass(x.mem, half, &a, &b, &z, j, n); j < n {
			_, z[0], z[1], z[2], z[3] = h4fmaZ(a.at(x.mem, j), b.at(x.mem, j), z[0], z[1], z[2], z[3], half)
			j++
		}
	}
	putPair(&c.a, 2*s.fd, round4(z[0], z[1], z[2], z[3]))
}

// fmaPass runs the fma of iterations j.. (up to n) into the lanes z while
// they take h4fmaFastY's path; it returns the first iteration that does
// not, or n. One strided operand and one invariant run in assembly where
// there is (fmaPassSSE) when every read is inside mem (the fault checks
// made sure of it), else fmaPassGo.
func fmaPass(mem []byte, half *[1 << 16]float32, a, b *strided, z *[4]float64, j, n int64) int64 {
	if haveFmaPassSSE && !a.inv && b.inv && j < n {
		first := int64(a.off + uint32(j)*a.stride)
		last := first + (n-1-j)*int64(int32(a.stride))
		if lim := int64(len(mem)) - 8; min(first, last) >= 0 && max(first, last) <= lim {
			y := [4]float32{half[uint16(b.v)], half[uint16(b.v>>16)], half[uint16(b.v>>32)], half[uint16(b.v>>48)]}
			return j + fmaPassSSE(&mem[0], half, uint32(first), a.stride, &y, z, n-j)
		}
	}
	return fmaPassGo(mem, half, a, b, z, j, n)
}

// fmaPassGo is fmaPass in Go.
func fmaPassGo(mem []byte, half *[1 << 16]float32, a, b *strided, z *[4]float64, j, n int64) int64 {
	z0, z1, z2, z3 := z[0], z[1], z[2], z[3]
	y0, y1, y2, y3 := half[uint16(b.v)], half[uint16(b.v>>16)], half[uint16(b.v>>32)], half[uint16(b.v>>48)]
	p, aoff, astride, ainv := a.v, a.off+uint32(j)*a.stride, a.stride, a.inv
	boff, bstride, binv := b.off+uint32(j)*b.stride, b.stride, b.inv
	for ; j < n; j++ {
		if !ainv {
			p = binary.LittleEndian.Uint64(mem[aoff:])
			aoff += astride
		}
		if !binv {
			q := binary.LittleEndian.Uint64(mem[boff:])
			boff += bstride
			y0, y1, y2, y3 = half[uint16(q)], half[uint16(q>>16)], half[uint16(q>>32)], half[uint16(q>>48)]
		}
		mn, mx := uint64(math.MaxUint64), uint64(0)
		n0, mn, mx := fmaLane(half[uint16(p)], y0, z0, mn, mx)
		n1, mn, mx := fmaLane(half[uint16(p>>16)], y1, z1, mn, mx)
		n2, mn, mx := fmaLane(half[uint16(p>>32)], y2, z2, mn, mx)
		n3, mn, mx := fmaLane(half[uint16(p>>48)], y3, z3, mn, mx)
		if mn < f64MinNormal16-1 || mx >= f64Two16 {
			break
		}
		z0, z1, z2, z3 = n0, n1, n2, n3
	}
	z[0], z[1], z[2], z[3] = z0, z1, z2, z3
	return j
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

// mmStream runs the max or min of n iterations of s: by mmPass when one
// operand is its own pair (a running max or min), else one iteration
// after another.
func (x *exec) mmStream(c *context, s *streamShape, n int64) {
	mv := pairOf(&c.a, 2*s.md)
	a, b := x.operand(c, s, s.ma, s.maL), x.operand(c, s, s.mb, s.mbL)
	if s.maSelf != s.mbSelf {
		if s.maSelf {
			a = b
		}
		putPair(&c.a, 2*s.md, mmPass(x.mem, &a, mv, n, s.mmIsMax))
		return
	}
	for j := int64(0); j < n; j++ {
		p, q := pick(a.at(x.mem, j), mv, s.maSelf), pick(b.at(x.mem, j), mv, s.mbSelf)
		mv = h4maxmin(p, q, s.mmIsMax)
	}
	putPair(&c.a, 2*s.md, mv)
}

// mmPass is mv's max (or min) with each of n iterations' operand o, for
// n > 0. Lane by lane that is the largest (smallest) of mv and the
// operands in the order of order16 (-0 below +0; equal keys are equal
// bits), or the canonical NaN if any is a NaN: an order-free reduction,
// so the even and the odd iterations go to two values (two dependency
// chains), combined at the end. An invariant operand is one max.
func mmPass(mem []byte, o *strided, mv uint64, n int64, isMax bool) uint64 {
	if o.inv {
		return h4maxmin(mv, o.v, isMax)
	}
	flip := uint64(0) // h4gt's lanes for max, their complement for min
	if !isMax {
		flip = math.MaxUint64
	}
	m0, m1 := mv, mv
	off, stride := o.off, o.stride
	j := int64(0)
	for ; j+1 < n; j += 2 {
		v0 := binary.LittleEndian.Uint64(mem[off:])
		v1 := binary.LittleEndian.Uint64(mem[off+stride:])
		off += 2 * stride
		if h4nan(m0, v0) || h4nan(m1, v1) {
			m0, m1 = h4maxmin(m0, v0, isMax), h4maxmin(m1, v1, isMax)
			continue
		}
		s0, s1 := h4gt(m0, v0)^flip, h4gt(m1, v1)^flip
		m0, m1 = m0&s0|v0&^s0, m1&s1|v1&^s1
	}
	if j < n {
		m0 = h4maxmin(m0, binary.LittleEndian.Uint64(mem[off:]), isMax)
	}
	return h4maxmin(m0, m1, isMax)
}
