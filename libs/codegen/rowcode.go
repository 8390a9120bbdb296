package codegen

import (
	"math"

	"ipu.local/libs/isa"
)

// This file holds the worker code of Rows: its registers, the passes over
// a row, the prologue and table, the walk over a worker's rows and each
// op's lane arithmetic (FP32 and FP16 rows).

// Row kernel registers.
const (
	rwX     = M2  // row of X
	rwY     = M3  // row of Y, or the reduction output (post-incremented)
	rwRows  = M4  // rows left (FP16 reductions: pairs of rows)
	rwXp    = M5  // running pointers
	rwYp    = M6  //
	rwG     = M7  // scale
	rwB     = M8  // bias
	rwMean  = M9  // mean output
	rwInv   = M10 // inverse standard deviation output
	rwCount = M11 // pairs per row, when not an rpti count
	rwXS    = M12 // X row stride in bytes, when not an imm16
	rwYS    = M13 // Y row stride in bytes, when not an imm16
	rwQuads = M14 // quads per row, when not an rpti count
	rwTail  = M9  // FP16 reductions: 1 when this worker does the odd last row
)

// Arithmetic registers: $a0:1 the row's m or mu (both lanes), $a2:3 the
// lane accumulators, $a4:5 and $a8:9, $a10:11 temporaries, $a6:7 the
// row's z, l or r (both lanes); constants $a12 = RN32(1/C), $a13 =
// Epsilon, $a10:11 = -Inf (softmax), $a14 = 0. FP16 quads load into (and
// store from) $a8:9, or $a2:3 in LayerNorm's last pass.
const (
	rwM    = A0
	rwS    = A2
	rwT    = A4
	rwZ    = A6
	rwT2   = A8
	rwT3   = A10
	rwNInf = A10
	rwInvC = A12
	rwEps  = A13
	rwZero = A14
)

func (p Rows) pairs() int { return p.C / 2 }

// rowPass is one pass over a row: where it loads each element pair
// (fromX; fromY: the FP32 values an earlier pass wrote at Y, in place;
// fromStash: the FP32 values an earlier pass wrote to the stash, at the
// X pointer) and whether it stores at Y (stash: FP32 values at the Y
// pointer, which then points into the stash).
type rowPass struct {
	src   rowSrc
	out   bool
	stash bool
}

type rowSrc uint8

const (
	fromX rowSrc = iota
	fromY
	fromStash
)

// quads reports whether a pass walks the row in quads of elements (it
// touches an FP16 array: ld64 or st64 of four values), else in pairs.
func (p Rows) quads(ps rowPass) bool {
	return ps.src == fromX && p.InF16 || ps.out && p.OutF16 && !ps.stash
}

// passes lists the passes of the row code.
func (p Rows) passes() []rowPass {
	switch p.Op {
	case Softmax:
		if p.stashes() {
			return []rowPass{{fromX, false, false}, {fromX, true, true}, {fromStash, true, false}}
		}
		last := rowPass{fromY, true, false}
		if p.OutF16 {
			last = rowPass{fromX, true, false}
		}
		return []rowPass{{fromX, false, false}, {fromX, !p.OutF16, false}, last}
	case LogSoftmax, LayerNorm:
		return []rowPass{{fromX, false, false}, {fromX, false, false}, {fromX, true, false}}
	}
	return []rowPass{{fromX, false, false}}
}

// loopCounts reports which loop counts need a register: pairs and quads
// per row beyond an rpti count, when a pass walks them.
func (p Rows) loopCounts() (pairs, quads bool) {
	for _, ps := range p.passes() {
		if p.quads(ps) {
			quads = quads || p.C/4 > MaxRptiCount
		} else {
			pairs = pairs || p.pairs() > MaxRptiCount
		}
	}
	return pairs, quads
}

// prologue emits the table loads and constants.
func (p Rows) prologue(b *Builder, table Label) {
	emitTableBase(b, table, p.tableWords(), M1)
	b.Ldm(rwX, M1, 0)
	b.Ldm(rwY, M1, 4)
	b.Ldm(rwRows, M1, 8)
	if p.reduce16() {
		b.Ldm(rwTail, M1, 12)
	}
	if p.Mean != 0 {
		b.Ldm(rwMean, M1, 12)
	}
	if p.InvStdDev != 0 {
		b.Ldm(rwInv, M1, 16)
	}
	pairs, quads := p.loopCounts()
	if pairs {
		b.LoadConst(rwCount, uint32(p.pairs()))
	}
	if quads {
		b.LoadConst(rwQuads, uint32(p.C/4))
	}
	loadBig(b, p.xSize()*int64(p.XStride), rwXS)
	if !p.Op.reduces() {
		loadBig(b, p.ySize()*int64(p.YStride), rwYS)
	}
	b.LoadA(rwZero, 0)
	switch p.Op {
	case Softmax, LogSoftmax:
		p.maxInit(b)
	case ReduceMean:
		b.LoadF32(rwInvC, p.invC())
	case LayerNorm:
		b.LoadF32(rwInvC, p.invC())
		b.LoadF32(rwEps, p.Epsilon)
	}
}

func (p Rows) invC() float32 { return float32(1 / float64(p.C)) }

func (p Rows) tableWords() int {
	switch {
	case p.Op == LayerNorm:
		return 5
	case p.reduce16():
		return 4
	}
	return 3
}

// rowStore stores a result pair (the low lane alone for the odd last
// element) at Y.
type rowStore func(r AReg)

// walk emits a pass: for each element pair (and the odd last element),
// the load of its values into $a4:5, then f, which computes and may call
// st to store a result at Y. FP32 passes walk pairs (ld64 post-increment;
// fromY: ld64 in place; st64 post-increment). A pass touching FP16 walks
// quads: ld64 of four FP16 into raw and two f16v2tof32 (or two FP32
// pairs), f on each pair, f32v2tof16 of each result into raw and one st64
// (or two FP32 stores); then a pair (ld32 of two FP16, st32 of two), then
// the odd element (ld32 of its word; its store merges with the word at Y:
// 8 issues). The caller sets the pointers.
func (p Rows) walk(b *Builder, ps rowPass, raw AReg, f func(l lanes, st rowStore)) {
	if !p.quads(ps) {
		step := func(l lanes) {
			switch {
			case ps.src == fromY && l.single:
				b.Ld32(rwT, rwYp, 0)
			case ps.src == fromY:
				b.Ld64(rwT, rwYp, 0)
			default:
				l.load(rwT, rwXp)
			}
			f(l, func(r AReg) { l.store(r, rwYp) })
		}
		b.Repeat(p.pairs(), rwCount, func() { step(lanes{b, false}) })
		if p.C%2 == 1 {
			step(lanes{b, true})
		}
		return
	}
	x16, y16 := p.InF16 && ps.src == fromX, ps.out && p.OutF16 && !ps.stash
	b.Repeat(p.C/4, rwQuads, func() {
		if x16 {
			b.Ld64P(raw, rwXp, 8)
		}
		for h := AReg(0); h < 2; h++ {
			if x16 {
				b.F1(isa.CVTHF, rwT, raw+h)
			} else {
				b.Ld64P(rwT, rwXp, 8)
			}
			f(lanes{b, false}, func(r AReg) {
				if y16 {
					b.F1(isa.CVTFH, raw+h, r)
				} else {
					b.St64P(r, rwYp, 8)
				}
			})
		}
		if y16 {
			b.St64P(raw, rwYp, 8)
		}
	})
	if p.C%4 >= 2 {
		if x16 {
			b.Ld32P(rwT, rwXp, 4)
			b.F1(isa.CVTHF, rwT, rwT)
		} else {
			b.Ld64P(rwT, rwXp, 8)
		}
		f(lanes{b, false}, func(r AReg) {
			if y16 {
				b.F1(isa.CVTFH, rwT, r)
				b.St32P(rwT, rwYp, 4)
			} else {
				b.St64P(r, rwYp, 8)
			}
		})
	}
	if p.C%2 == 1 {
		b.Ld32(rwT, rwXp, 0)
		if x16 {
			b.F1(isa.CVTHF, rwT, rwT)
		}
		f(lanes{b, true}, func(r AReg) {
			if y16 {
				b.F1(isa.CVTFH, rwT, r)
				storeLow16(b, rwYp, rwT)
			} else {
				b.St32(r, rwYp, 0)
			}
		})
	}
}

// storeLow16 stores the low half of $a v into the low half of the word at
// $m y, keeping its high half (8 issues with the conversion before it;
// $m0 and $m1 are scratch).
func storeLow16(b *Builder, y MReg, v AReg) {
	b.Mfa(M0, v)
	b.Andi(M0, M0, 0xFFFF)
	b.Ldm(M1, y, 0)
	b.Shri(M1, M1, 16)
	b.Shli(M1, M1, 16)
	b.Or(M0, M0, M1)
	b.Stm(M0, y, 0)
}

// vector loads the scale or bias pair (or single value) at $m v into d.
func (p Rows) vector(l lanes, d AReg, v MReg) {
	if !p.ScaleF16 {
		l.load(d, v)
		return
	}
	if l.single {
		l.b.Ld32(d, v, 0)
	} else {
		l.b.Ld32P(d, v, 4)
	}
	l.b.F1(isa.CVTHF, d, d)
}

// laneSum emits S = lane sums of the row at rwX, with each applied to
// each loaded element pair first (nil: none), and leaves the sum in d.
func (p Rows) laneSum(b *Builder, d AReg, ps rowPass, each func(l lanes, st rowStore)) {
	b.Mov(rwXp, rwX)
	b.F(isa.V2ADD, rwS, rwZero, rwZero)
	p.walk(b, ps, rwT2, func(l lanes, st rowStore) {
		if each != nil {
			each(l, st)
		} else {
			l.v(isa.V2ADD, rwS, rwS, rwT)
		}
	})
	b.F1(isa.FSUM2, d, rwS)
}

// row emits the code of one row (without the loop control).
func (p Rows) row(b *Builder) {
	ps := p.passes()
	switch p.Op {
	case Softmax, LogSoftmax:
		// Pass 1: m.
		p.maxPass(b, ps[0])
		b.Amov(rwM+1, rwM)
		// Pass 2: e and s.
		if ps[1].out {
			b.Mov(rwYp, rwY)
		}
		p.laneSum(b, rwZ, ps[1], func(l lanes, st rowStore) {
			l.v(isa.V2SUB, rwT, rwT, rwM)
			l.v1(isa.V2EXP, rwT, rwT)
			if ps[1].out {
				st(rwT)
			}
			l.v(isa.V2ADD, rwS, rwS, rwT)
		})
		p.softmaxOut(b, ps[2])
	case ReduceSum, ReduceMean:
		p.reduce(b, rwT)
		b.St32P(rwT, rwY, 4)
	case LayerNorm:
		p.laneSum(b, rwM, ps[0], nil)
		b.F(isa.FMUL, rwM, rwM, rwInvC)
		b.Amov(rwM+1, rwM)
		p.laneSum(b, rwZ, ps[1], func(l lanes, _ rowStore) {
			l.v(isa.V2SUB, rwT, rwT, rwM)
			l.v(isa.V2FMA, rwS, rwT, rwT)
		})
		b.F(isa.FMUL, rwZ, rwZ, rwInvC)
		b.F(isa.FADD, rwZ, rwZ, rwEps)
		b.F1(isa.FRSQRT, rwZ, rwZ)
		b.Amov(rwZ+1, rwZ)
		if p.Mean != 0 {
			b.St32P(rwM, rwMean, 4)
		}
		if p.InvStdDev != 0 {
			b.St32P(rwZ, rwInv, 4)
		}
		b.Mov(rwXp, rwX)
		b.Mov(rwYp, rwY)
		if p.Scale != 0 {
			b.LoadAddr(rwG, p.Scale)
		}
		if p.Bias != 0 {
			b.LoadAddr(rwB, p.Bias)
		}
		p.layerNormOut(b, ps[2])
	}
}

// maxPass emits Softmax's and LogSoftmax's first pass: m, the row's
// maximum from -Inf, in $a0 (FP32; $a1 clobbered), X's pointer set from
// $m2. With InF16 the quads' maxima are taken in FP16, four lanes at a
// time (f16v4max: one ld64 and one max a quad instead of an ld64, two
// f16v2tof32 and two f32v2max), and the four lanes convert to FP32 at
// the end (exactly) for the last pair, the odd element and the lanes'
// maximum. f16v4max and f32max order their operands alike (-0 below
// +0, NaN if any is NaN, made the canonical FP32 NaN by the FP32 maxima
// that follow), so m is bit for bit the FP32 walk's. $m14 is the quads'
// count register (beyond an rpti count); $a10:11 holds -Inf in both
// lanes of the pass's type (maxInit: FP16 with InF16).
func (p Rows) maxPass(b *Builder, ps rowPass) {
	b.Mov(rwXp, rwX)
	if !p.InF16 || ps.src != fromX {
		b.F(isa.V2MAX, rwM, rwNInf, rwNInf)
		p.walk(b, ps, rwT2, func(l lanes, _ rowStore) {
			l.v(isa.V2MAX, rwM, rwM, rwT)
		})
		b.F(isa.FMAX, rwM, rwM, rwM+1)
		return
	}
	b.F(isa.H4MAX, rwM, rwNInf, rwNInf)
	b.Repeat(p.C/4, rwQuads, func() {
		b.Ld64P(rwT2, rwXp, 8)
		b.F(isa.H4MAX, rwM, rwM, rwT2)
	})
	b.F1(isa.CVTHF, rwT, rwM)
	b.F1(isa.CVTHF, rwT2, rwM+1)
	b.F(isa.V2MAX, rwM, rwT, rwT2)
	if p.C%4 >= 2 {
		b.Ld32P(rwT, rwXp, 4)
		b.F1(isa.CVTHF, rwT, rwT)
		b.F(isa.V2MAX, rwM, rwM, rwT)
	}
	if p.C%2 == 1 {
		b.Ld32(rwT, rwXp, 0)
		b.F1(isa.CVTHF, rwT, rwT)
		b.F(isa.FMAX, rwM, rwM, rwT)
	}
	b.F(isa.FMAX, rwM, rwM, rwM+1)
}

// maxInit loads -Inf into both lanes of $a10:11 for maxPass: FP32, or
// FP16 in all four halves with InF16.
func (p Rows) maxInit(b *Builder) {
	if p.InF16 {
		f16Pair(b, rwNInf, 0xFC00)
		return
	}
	pairConst(b, rwNInf, float32(math.Inf(-1)))
}

// softmaxOut emits the third pass of Softmax and LogSoftmax from s in
// $a6 and m in $a0:1: z = rcp(s) (or l = log(s)) in both lanes of $a6:7,
// then y at Y. The caller sets $m2 and $m3 to the row's start in X and Y.
func (p Rows) softmaxOut(b *Builder, ps rowPass) {
	if p.Op == Softmax {
		b.F1(isa.FRCP, rwZ, rwZ)
		b.Amov(rwZ+1, rwZ)
		if ps.src != fromY {
			b.Mov(rwXp, rwX)
		}
		b.Mov(rwYp, rwY)
		p.walk(b, ps, rwT2, func(l lanes, st rowStore) {
			if ps.src == fromX {
				l.v(isa.V2SUB, rwT, rwT, rwM)
				l.v1(isa.V2EXP, rwT, rwT)
			}
			l.v(isa.V2MUL, rwT, rwT, rwZ)
			st(rwT)
		})
		return
	}
	b.F1(isa.FLOG, rwZ, rwZ)
	b.Amov(rwZ+1, rwZ)
	b.Mov(rwXp, rwX)
	b.Mov(rwYp, rwY)
	p.walk(b, ps, rwT2, func(l lanes, st rowStore) {
		l.v(isa.V2SUB, rwT, rwT, rwM)
		l.v(isa.V2SUB, rwT, rwT, rwZ)
		st(rwT)
	})
}

// layerNormOut emits LayerNorm's third pass with mu in $a0:1 and r in
// $a6:7, the pointers set ($m5 X, $m6 Y, $m7 scale, $m8 bias).
func (p Rows) layerNormOut(b *Builder, ps rowPass) {
	p.walk(b, ps, rwS, func(l lanes, st rowStore) {
		l.v(isa.V2SUB, rwT, rwT, rwM)
		l.v(isa.V2MUL, rwT, rwT, rwZ)
		out := rwT
		switch {
		case p.Scale != 0 && p.Bias != 0:
			p.vector(l, rwT2, rwG)
			p.vector(l, rwT3, rwB)
			l.v(isa.V2FMA, rwT3, rwT, rwT2)
			out = rwT3
		case p.Scale != 0:
			p.vector(l, rwT2, rwG)
			l.v(isa.V2MUL, rwT, rwT, rwT2)
		case p.Bias != 0:
			p.vector(l, rwT3, rwB)
			l.v(isa.V2ADD, rwT, rwT, rwT3)
		}
		st(out)
	})
}

// reduce emits one reduction row's value into d.
func (p Rows) reduce(b *Builder, d AReg) {
	p.laneSum(b, d, p.passes()[0], nil)
	if p.Op == ReduceMean {
		b.F(isa.FMUL, d, d, rwInvC)
	}
}

// advance emits the move to the next row and the loop branch.
func (p Rows) advance(b *Builder, loop Label) {
	addConst(b, rwX, rwX, p.xSize()*int64(p.XStride), rwXS)
	if !p.Op.reduces() {
		addConst(b, rwY, rwY, p.ySize()*int64(p.YStride), rwYS)
	}
	b.Addi(rwRows, rwRows, -1)
	b.Brnz(rwRows, loop)
}

// reduce16Body emits the code of a FP16 reduction after the prologue: a
// loop over pairs of rows, whose two values go to Y as one word, then
// the odd last row, merged into the low half of its word.
//
//	brz pairs, tail
//	loop: row -> $a6; X += stride; row -> $a7; X += stride;
//	      f32v2tof16 $a6, $a6:7; st32 $a6, [Y+=4]; addi; brnz loop
//	tail: brz odd, done; row -> $a6; f32v2tof16; merge (8)
//	done:
func (p Rows) reduce16Body(b *Builder) {
	tail, loop, done := b.Label(), b.Label(), b.Label()
	b.Brz(rwRows, tail)
	b.Bind(loop)
	p.reduce16Pair(b)
	b.Addi(rwRows, rwRows, -1)
	b.Brnz(rwRows, loop)
	b.Bind(tail)
	b.Brz(rwTail, done)
	p.reduce16Tail(b)
	b.Bind(done)
}

func (p Rows) reduce16Pair(b *Builder) {
	for i := AReg(0); i < 2; i++ {
		p.reduce(b, rwZ+i)
		addConst(b, rwX, rwX, p.xSize()*int64(p.XStride), rwXS)
	}
	b.F1(isa.CVTFH, rwZ, rwZ)
	b.St32P(rwZ, rwY, 4)
}

func (p Rows) reduce16Tail(b *Builder) {
	p.reduce(b, rwZ)
	b.F1(isa.CVTFH, rwZ, rwZ)
	storeLow16(b, rwY, rwZ)
}
