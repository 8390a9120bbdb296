package codegen

import (
	"errors"
	"fmt"
	"math"

	"ipu.local/libs/isa"
)

// RowOp is an operation along each row of a matrix.
type RowOp uint8

// Row operations. In the arithmetic below, a row has C elements x_0..;
// the lane sums of a sequence v_0..v_{C-1} are
//
//	S0 = +0, then S0 = RN32(S0 + v_j) for even j in increasing order
//	S1 = +0, then S1 = RN32(S1 + v_j) for odd j in increasing order
//	sum = RN32(S0 + S1)
//
// (the two lanes of an f32v2 accumulator; C odd: v_{C-1} goes to S0
// last). Every named function is its FP32 instruction; NaN results are
// canonical.
//
//	Softmax     m = max_j x_j (f32max: NaN if any is NaN); e_j = exp(RN32(x_j - m));
//	            s = lane sum of e; z = rcp(s) = RN32(1/s); y_j = RN32(e_j * z)
//	LogSoftmax  m, e, s as Softmax; l = log(s); y_j = RN32(RN32(x_j - m) - l)
//	ReduceSum   y = lane sum of x (one value per row)
//	ReduceMean  y = RN32(sum * c), c = RN32(1/C)
//	LayerNorm   mu = RN32(sum(x) * c); with d_j = RN32(x_j - mu), the lane
//	            accumulation Q0, Q1 = RN32(Q + d_j*d_j) (f32fma, one rounding)
//	            gives q = RN32(Q0 + Q1); v = RN32(q * c);
//	            r = rsqrt(RN32(v + Epsilon)) (RN32 of the float64 1/sqrt);
//	            z_j = RN32(d_j * r); y_j = RN32(b_j + z_j*g_j) (f32fma) with
//	            scale g and bias b, RN32(z_j * g_j) with scale only,
//	            RN32(z_j + b_j) with bias only, z_j with neither.
//	            Mean and InvStdDev (when given) receive mu and r.
const (
	Softmax RowOp = iota
	LogSoftmax
	ReduceSum
	ReduceMean
	LayerNorm
	numRowOps
)

var rowNames = [numRowOps]string{"softmax", "logsoftmax", "reducesum", "reducemean", "layernorm"}

func (op RowOp) String() string {
	if op < numRowOps {
		return rowNames[op]
	}
	return fmt.Sprintf("rowop(%d)", uint8(op))
}

func (op RowOp) reduces() bool { return op == ReduceSum || op == ReduceMean }

// Rows applies Op to each of the R rows of the FP32 matrix X (C
// elements per row, row i at X + 4*i*XStride). Softmax, LogSoftmax and
// LayerNorm write an R x C matrix at Y (stride YStride; Y may be X, in
// place); ReduceSum and ReduceMean write R consecutive values at Y. Row
// starts are 8-byte aligned: X, Y 8-aligned and strides even (pad odd
// rows). Scale and Bias (LayerNorm, optional: 0) are C-element vectors,
// 8-aligned; Mean and InvStdDev (optional) receive R values each.
//
// Worker w takes a contiguous range of rows, the first R mod workers
// ranges one longer; min(Workers, R) workers run.
type Rows struct {
	Op               RowOp
	R, C             int
	X, Y             uint32
	XStride, YStride int // elements
	Epsilon          float32
	Scale, Bias      uint32
	Mean, InvStdDev  uint32
	Workers          int
}

// Row kernel registers.
const (
	rwX     = M2  // row of X
	rwY     = M3  // row of Y, or the reduction output (post-incremented)
	rwRows  = M4  // rows left
	rwXp    = M5  // running pointers
	rwYp    = M6  //
	rwG     = M7  // scale
	rwB     = M8  // bias
	rwMean  = M9  // mean output
	rwInv   = M10 // inverse standard deviation output
	rwCount = M11 // pairs per row, when not an rpti count
	rwXS    = M12 // X row stride in bytes, when not an imm16
	rwYS    = M13 // Y row stride in bytes, when not an imm16
)

// Arithmetic registers: $a0:1 the row's m or mu (both lanes), $a2:3 the
// lane accumulators, $a4:5 and $a8:9, $a10:11 temporaries, $a6:7 the
// row's z, l or r (both lanes); constants $a12 = RN32(1/C), $a13 =
// Epsilon, $a10:11 = -Inf (softmax), $a14 = 0.
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

func (p Rows) check(b *Builder) error {
	if p.Op >= numRowOps {
		return fmt.Errorf("unknown row op %d", p.Op)
	}
	if err := checkWorkers(p.Workers); err != nil {
		return err
	}
	if p.R < 1 || p.C < 1 || int64(p.R)*int64(p.C) > 1<<24 {
		return fmt.Errorf("matrix %dx%d: want positive dimensions of at most 2^24 elements", p.R, p.C)
	}
	if p.XStride < p.C || p.XStride%2 != 0 || !p.Op.reduces() && (p.YStride < p.C || p.YStride%2 != 0) {
		return fmt.Errorf("row strides %d, %d: want even strides of at least C=%d", p.XStride, p.YStride, p.C)
	}
	if int64(p.R)*int64(max(p.XStride, p.YStride)) > 1<<24 {
		return fmt.Errorf("row strides %d, %d too large for %d rows", p.XStride, p.YStride, p.R)
	}
	if p.Op != LayerNorm && (p.Scale != 0 || p.Bias != 0 || p.Mean != 0 || p.InvStdDev != 0) {
		return fmt.Errorf("scale, bias, mean and inverse standard deviation are LayerNorm's")
	}
	if b == nil {
		return nil
	}
	a := b.Arch()
	if a == nil {
		return errors.New("builder has no architecture preset")
	}
	span := func(stride int) uint64 { return 4 * (uint64(p.R-1)*uint64(stride) + uint64(p.C)) }
	bufs := []buffer{{"X", p.X, span(p.XStride), false}}
	if p.Op.reduces() {
		bufs = append(bufs, buffer{"Y", p.Y, 4 * uint64(p.R), true})
	} else {
		bufs = append(bufs, buffer{"Y", p.Y, span(p.YStride), true})
	}
	for _, v := range []buffer{{"scale", p.Scale, 4 * uint64(p.C), false}, {"bias", p.Bias, 4 * uint64(p.C), false},
		{"mean", p.Mean, 4 * uint64(p.R), true}, {"inverse standard deviation", p.InvStdDev, 4 * uint64(p.R), true}} {
		if v.addr != 0 {
			bufs = append(bufs, v)
		}
	}
	for _, v := range bufs {
		if err := checkBuffer(v, 8, a.Memory, "tile memory"); err != nil {
			return err
		}
	}
	same := p.X == p.Y && p.XStride == p.YStride && !p.Op.reduces()
	if same {
		bufs = bufs[1:]
	}
	return checkDisjoint(bufs, false)
}

func (p Rows) pairs() int { return p.C / 2 }

// prologue emits the table loads and constants.
func (p Rows) prologue(b *Builder, table Label) {
	emitTableBase(b, table, p.tableWords(), M1)
	b.Ldm(rwX, M1, 0)
	b.Ldm(rwY, M1, 4)
	b.Ldm(rwRows, M1, 8)
	if p.Mean != 0 {
		b.Ldm(rwMean, M1, 12)
	}
	if p.InvStdDev != 0 {
		b.Ldm(rwInv, M1, 16)
	}
	if n := p.pairs(); n > MaxRptiCount {
		b.LoadConst(rwCount, uint32(n))
	}
	loadBig(b, 4*int64(p.XStride), rwXS)
	if !p.Op.reduces() {
		loadBig(b, 4*int64(p.YStride), rwYS)
	}
	b.LoadA(rwZero, 0)
	switch p.Op {
	case Softmax, LogSoftmax:
		pairConst(b, rwNInf, float32(math.Inf(-1)))
	case ReduceMean:
		b.LoadF32(rwInvC, p.invC())
	case LayerNorm:
		b.LoadF32(rwInvC, p.invC())
		b.LoadF32(rwEps, p.Epsilon)
	}
}

func (p Rows) invC() float32 { return float32(1 / float64(p.C)) }

func (p Rows) tableWords() int {
	if p.Op == LayerNorm {
		return 5
	}
	return 3
}

// laneSum emits S = lane sums of the row at rwX, with op applied to each
// loaded element pair first (nil: none), and leaves the sum in d.
func (p Rows) laneSum(b *Builder, d AReg, each func(l lanes)) {
	b.Mov(rwXp, rwX)
	b.F(isa.V2ADD, rwS, rwZero, rwZero)
	step := func(l lanes) {
		l.load(rwT, rwXp)
		if each != nil {
			each(l)
		} else {
			l.v(isa.V2ADD, rwS, rwS, rwT)
		}
	}
	b.Repeat(p.pairs(), rwCount, func() { step(lanes{b, false}) })
	if p.C%2 == 1 {
		step(lanes{b, true})
	}
	b.F1(isa.FSUM2, d, rwS)
}

// forEach emits a pass over the row: pointers reset, then f on each pair
// and on the odd last element.
func (p Rows) forEach(b *Builder, f func(l lanes)) {
	b.Repeat(p.pairs(), rwCount, func() { f(lanes{b, false}) })
	if p.C%2 == 1 {
		f(lanes{b, true})
	}
}

// row emits the code of one row (without the loop control).
func (p Rows) row(b *Builder) {
	switch p.Op {
	case Softmax, LogSoftmax:
		// Pass 1: m.
		b.Mov(rwXp, rwX)
		b.F(isa.V2MAX, rwM, rwNInf, rwNInf)
		p.forEach(b, func(l lanes) {
			l.load(rwT, rwXp)
			l.v(isa.V2MAX, rwM, rwM, rwT)
		})
		b.F(isa.FMAX, rwM, rwM, rwM+1)
		b.Amov(rwM+1, rwM)
		// Pass 2: e and s.
		if p.Op == Softmax {
			b.Mov(rwYp, rwY)
		}
		p.laneSum(b, rwZ, func(l lanes) {
			l.v(isa.V2SUB, rwT, rwT, rwM)
			l.v1(isa.V2EXP, rwT, rwT)
			if p.Op == Softmax {
				l.store(rwT, rwYp)
			}
			l.v(isa.V2ADD, rwS, rwS, rwT)
		})
		// Pass 3.
		if p.Op == Softmax {
			b.F1(isa.FRCP, rwZ, rwZ)
			b.Amov(rwZ+1, rwZ)
			b.Mov(rwYp, rwY)
			p.forEach(b, func(l lanes) {
				if l.single {
					b.Ld32(rwT, rwYp, 0)
				} else {
					b.Ld64(rwT, rwYp, 0)
				}
				l.v(isa.V2MUL, rwT, rwT, rwZ)
				l.store(rwT, rwYp)
			})
			break
		}
		b.F1(isa.FLOG, rwZ, rwZ)
		b.Amov(rwZ+1, rwZ)
		b.Mov(rwXp, rwX)
		b.Mov(rwYp, rwY)
		p.forEach(b, func(l lanes) {
			l.load(rwT, rwXp)
			l.v(isa.V2SUB, rwT, rwT, rwM)
			l.v(isa.V2SUB, rwT, rwT, rwZ)
			l.store(rwT, rwYp)
		})
	case ReduceSum, ReduceMean:
		p.laneSum(b, rwT, nil)
		if p.Op == ReduceMean {
			b.F(isa.FMUL, rwT, rwT, rwInvC)
		}
		b.St32P(rwT, rwY, 4)
	case LayerNorm:
		p.laneSum(b, rwM, nil)
		b.F(isa.FMUL, rwM, rwM, rwInvC)
		b.Amov(rwM+1, rwM)
		p.laneSum(b, rwZ, func(l lanes) {
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
		p.forEach(b, func(l lanes) {
			l.load(rwT, rwXp)
			l.v(isa.V2SUB, rwT, rwT, rwM)
			l.v(isa.V2MUL, rwT, rwT, rwZ)
			out := rwT
			switch {
			case p.Scale != 0 && p.Bias != 0:
				l.load(rwT2, rwG)
				l.load(rwT3, rwB)
				l.v(isa.V2FMA, rwT3, rwT, rwT2)
				out = rwT3
			case p.Scale != 0:
				l.load(rwT2, rwG)
				l.v(isa.V2MUL, rwT, rwT, rwT2)
			case p.Bias != 0:
				l.load(rwT3, rwB)
				l.v(isa.V2ADD, rwT, rwT, rwT3)
			}
			l.store(out, rwYp)
		})
	}
}

// advance emits the move to the next row and the loop branch.
func (p Rows) advance(b *Builder, loop Label) {
	addConst(b, rwX, rwX, 4*int64(p.XStride), rwXS)
	if !p.Op.reduces() {
		addConst(b, rwY, rwY, 4*int64(p.YStride), rwYS)
	}
	b.Addi(rwRows, rwRows, -1)
	b.Brnz(rwRows, loop)
}

// Cost returns the kernel's cost. Worker w with r rows issues
// prologue + r*row before its exit. With P = C/2 pairs, t = C mod 2 and
// L = 1 when P > 0 (the loop's rpti or rpt), else 0:
//
//	prologue = 4 + 3 table loads (LayerNorm: +1 each with Mean, InvStdDev)
//	           + ConstLen(P) when P > 4095 (rpt count register)
//	           + ConstLen of each byte row stride beyond an imm16
//	           + 1 ($a14 = 0)
//	           + softmax, logsoftmax: 3 (-Inf pair)
//	             reducemean: F32Len(1/C); layernorm: F32Len(1/C) + F32Len(eps)
//
//	row: softmax     16 + 3L + 13P + 11t
//	     logsoftmax  16 + 3L + 13P + 11t
//	     reducesum   7 + L + 2P + 2t      (reducemean: 8 + L + 2P + 2t)
//	     layernorm   19 + 3L + 5P + 5t + (P + t)*e + outputs + vectors
//
// where for layernorm e = 4 per element pair (load, subtract, multiply,
// store), 6 with a scale or a bias vector, 7 with both; outputs counts
// Mean and InvStdDev, vectors Scale and Bias (one li per row each). The
// code computes these sums from the emitted instructions (Issued).
func (p Rows) Cost() (Cost, error) {
	if err := p.check(nil); err != nil {
		return Cost{}, fmt.Errorf("%s: %w", p.Op, err)
	}
	return p.cost(), nil
}

func (p Rows) cost() Cost {
	b := NewBuilder(nil, 0)
	p.prologue(b, b.Label())
	pro := b.Issued()
	row := b.Here()
	p.row(b)
	p.advance(b, row)
	per := b.Issued() - pro
	workers := min(p.Workers, p.R)
	_, count := split(p.R, workers)
	c := Cost{Workers: workers, Work: make([]int64, workers)}
	for w := range c.Work {
		c.Work[w] = Slots * (pro + int64(count[w])*per)
	}
	return c
}

// EmitRows emits the kernel at b's current position.
func EmitRows(b *Builder, p Rows) (Kernel, error) {
	if err := p.check(b); err != nil {
		return Kernel{}, fmt.Errorf("%s: %w", p.Op, err)
	}
	k := Kernel{Entry: b.Here(), Cost: p.cost()}
	table := b.Label()
	p.prologue(b, table)
	loop := b.Here()
	p.row(b)
	p.advance(b, loop)
	b.Exit()
	workers := min(p.Workers, p.R)
	start, count := split(p.R, workers)
	rows := make([][]uint32, workers)
	for w := range rows {
		r := uint32(start[w])
		y := p.Y + 4*r*uint32(p.YStride)
		if p.Op.reduces() {
			y = p.Y + 4*r
		}
		rows[w] = []uint32{p.X + 4*r*uint32(p.XStride), y, uint32(count[w])}
		if p.Op == LayerNorm {
			rows[w] = append(rows[w], p.Mean+4*r, p.InvStdDev+4*r)
		}
	}
	emitTable(b, table, rows)
	return k, b.Err()
}
