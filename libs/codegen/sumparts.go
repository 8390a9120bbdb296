package codegen

import (
	"errors"
	"fmt"
	"math"

	"ipu.local/libs/isa"
	"ipu.local/libs/numfmt"
)

// SumParts adds Parts partial sums into an accumulator, the compute half
// of a reduce-scatter: for i < N,
//
//	Y[i] = (...((Y[i] + X[i]) + X[Stride+i]) + ...) + X[(Parts-1)*Stride+i]
//
// in FP32, each addition rounded, in that order: bit for bit the chain of
// Parts Binary adds it replaces, with Y read and written once instead of
// Parts times and one launch instead of Parts.
//
// Y and X are 8-byte aligned arrays of FP32 elements; Stride (elements)
// is even, at least N, and (Parts-1)*4*Stride fits a load's 16-bit
// offset. The parts may not overlap Y. Work is split over the workers as
// Binary's: per pair of elements 1 + Parts loads, Parts f32v2add and one
// store (2 + 2*Parts issues), a lone last element the same with scalar
// loads and adds.
//
// Interleaved declares Y, X and Out 16-byte aligned in interleaved
// memory and Stride a multiple of 4: the kernel then walks units of four
// elements with 128-bit loads and stores, per unit 1 + Parts loads,
// 2*Parts f32v2add and one store (2 + 3*Parts issues where pairs take
// 4 + 4*Parts), the last N mod 4 elements as above.
//
// Out, when not 0, receives the sums rounded to FP16 (f32v2tof16, round
// to nearest even: the Cast F32ToF16 that would follow) instead of Y,
// which is then only read: the cast fused into the sum, per pair one
// conversion and a 32-bit store in place of the 64-bit store (Interleaved:
// per unit two and a 64-bit store in place of the 128-bit one). N must
// be even then, Out 4-byte aligned (8 when Interleaved) anywhere in tile
// memory.
//
// Bias, when not 0 (with Out and Interleaved, N a multiple of 4), is an
// array of N FP16 elements added to the FP16 sums: Out[i] =
// RN16(RN16(sum) + Bias[i]) (f16v4add), the Add of a bias that would
// follow the cast, bit for bit; per unit a 64-bit load and the add on
// top. Bias is 8-byte aligned anywhere in tile memory.
//
// Act, when On (with Out), applies a unary operation to the FP16 results
// after the bias: Out[i] = op(RN16(RN16(sum) + Bias[i])), as a Unary of
// Type F16 on Out would, bit for bit (the activation that follows a
// linear layer, fused: no load and store of the values between and no
// launch of its own). Its constants live in the registers Unary's keep
// them in, set once per worker; per pair the FP16 values are widened,
// computed and narrowed as Unary's FP16 body does, Relu and Clip on the
// FP16 lanes. Per unit (Interleaved) the sums convert into $a4:5 and the
// bias loads into $a2:3 instead, and GeluTanh reloads its fourth
// constant, which shares $a6:7 with the parts' loads.
type SumParts struct {
	N           int
	Y           uint32
	X           uint32
	Out         uint32
	Bias        uint32
	Parts       int
	Stride      int // elements from one part to the next
	Workers     int
	Interleaved bool
	Act         Activation
}

// Activation is a unary operation a kernel applies to its FP16 results
// (SumParts.Act): a Unary's operation and constants, On when there is
// one.
type Activation struct {
	On                                     bool
	Op                                     UnaryOp
	Exponent, Min, Max, Alpha, Beta, Gamma float32
}

// ActivationOf returns u's operation and constants as an activation.
func ActivationOf(u Unary) Activation {
	return Activation{On: true, Op: u.Op, Exponent: u.Exponent, Min: u.Min, Max: u.Max, Alpha: u.Alpha, Beta: u.Beta, Gamma: u.Gamma}
}

// Unary returns the FP16 Unary of a's operation and constants (no
// operands).
func (a Activation) Unary() Unary {
	return Unary{Op: a.Op, Type: F16, Exponent: a.Exponent, Min: a.Min, Max: a.Max, Alpha: a.Alpha, Beta: a.Beta, Gamma: a.Gamma}
}

// setup loads the activation's constants, as Unary's FP16 kernel does.
func (a Activation) setup(b *Builder) {
	u := a.Unary()
	if u.Op == Clip {
		f16Pair(b, ewK0, numfmt.F32ToF16(math.Float32bits(u.Min)))
		f16Pair(b, ewK1, numfmt.F32ToF16(math.Float32bits(u.Max)))
		return
	}
	u.setup(b)
}

// apply emits the activation on the FP16 values of $a d (and $a d+1
// unless half): Relu and Clip on FP16 lanes, the others widened to the
// FP32 pair $a0:1, computed and narrowed back (Unary's FP16 body). It
// uses $a0:3 and the constants.
func (a Activation) apply(b *Builder, d AReg, half bool) {
	u := a.Unary()
	switch u.Op {
	case Relu:
		b.F(isa.H4MAX, d, d, ewZero)
		return
	case Clip:
		b.F(isa.H4MAX, d, d, ewK0)
		b.F(isa.H4MIN, d, d, ewK1)
		return
	}
	regs := []AReg{d, d + 1}
	if half {
		regs = regs[:1]
	}
	for _, r := range regs {
		b.F1(isa.CVTHF, A0, r)
		u.compute(b, false)
		b.F1(isa.CVTFH, r, A0)
	}
}

func (p SumParts) stream() (*stream, error) {
	if p.Parts < 1 {
		return nil, fmt.Errorf("part count %d: want at least 1", p.Parts)
	}
	if p.Parts > 1 && (p.Stride < p.N || p.Stride%2 != 0) {
		return nil, fmt.Errorf("part stride %d: want an even stride of at least N = %d", p.Stride, p.N)
	}
	if p.Interleaved && p.Parts > 1 && p.Stride%4 != 0 {
		return nil, fmt.Errorf("part stride %d: want a multiple of 4 (Interleaved)", p.Stride)
	}
	if p.Out != 0 && p.N%2 != 0 {
		return nil, fmt.Errorf("element count %d: want an even count with an FP16 output", p.N)
	}
	if p.Act.On && p.Out == 0 {
		return nil, errors.New("an activation wants an FP16 output")
	}
	if p.Act.On && p.Act.Op >= numUnary {
		return nil, fmt.Errorf("unknown activation %d", p.Act.Op)
	}
	if p.Bias != 0 && (p.Out == 0 || !p.Interleaved || p.N%4 != 0) {
		return nil, fmt.Errorf("a bias wants an FP16 output, Interleaved and a multiple of 4 elements (N = %d)", p.N)
	}
	last := int64(p.Parts-1) * 4 * int64(p.Stride)
	if !fitsImm16(last) {
		return nil, fmt.Errorf("part %d at byte offset %d: beyond a load's 16-bit offset", p.Parts-1, last)
	}
	out := array{"Y", p.Y, 4, 0}
	if p.Out != 0 {
		out = array{"Out", p.Out, 2, 0}
	}
	s := &stream{n: p.N, unit: 2, workers: p.Workers, output: out,
		inputs: []array{{"Y", p.Y, 4, 0}, {"X", p.X, 4, 0}}}
	if p.Bias != 0 {
		s.inputs = append(s.inputs, array{"Bias", p.Bias, 2, 0})
	}
	s.setup = func(*Builder) {}
	if p.Act.On {
		s.setup = p.Act.setup
	}
	s.body = func(b *Builder) { p.pair(b, false) }
	s.tail = func(b *Builder, rem int) {
		for ; rem >= 2; rem -= 2 {
			p.pair(b, false)
		}
		if rem == 1 {
			p.pair(b, true)
		}
	}
	if p.Interleaved {
		s.unit = 4
		s.body = p.quad
	}
	return s, nil
}

// pair emits the sum of one pair (or, single, one element) at the
// pointers, which it steps past them.
func (p SumParts) pair(b *Builder, single bool) {
	l := lanes{b, single}
	l.load(A0, sIn0)
	for k := 0; k < p.Parts; k++ {
		off := int32(4 * k * p.Stride)
		switch {
		case single:
			b.Ld32(A2, sIn1, off)
		case k == 0:
			b.Ld64P(A2, sIn1, 8)
		default:
			b.Ld64(A2, sIn1, off-8) // sIn1 has moved past part 0's pair
		}
		l.v(isa.V2ADD, A0, A0, A2)
	}
	if p.Out != 0 {
		b.F1(isa.CVTFH, A4, A0)
		if p.Act.On {
			p.Act.apply(b, A4, true)
		}
		b.St32P(A4, sOut, 4)
		return
	}
	l.store(A0, sOut)
}

// quad emits the sum of four elements at the pointers with 128-bit
// loads, stepping the pointers past them.
func (p SumParts) quad(b *Builder) {
	b.Ld128P(A0, sIn0, 16)
	for k := 0; k < p.Parts; k++ {
		if k == 0 {
			b.Ld128P(A4, sIn1, 16)
		} else {
			b.Ld128(A4, sIn1, int32(4*k*p.Stride)-16) // sIn1 has moved past part 0's quad
		}
		b.F(isa.V2ADD, A0, A0, A4)
		b.F(isa.V2ADD, A2, A2, A6)
	}
	if p.Act.On {
		p.quadAct(b)
		return
	}
	if p.Out != 0 {
		b.F1(isa.CVTFH, A8, A0)
		b.F1(isa.CVTFH, A9, A2)
		if p.Bias != 0 {
			b.Ld64P(A10, sIn2, 8)
			b.F(isa.H4ADD, A8, A8, A10)
		}
		b.St64P(A8, sOut, 8)
		return
	}
	b.St128P(A0, sOut, 16)
}

// quadAct ends a unit with an activation: the FP16 sums in $a4:5, the
// bias in $a2:3 (the registers of the constants are not free).
func (p SumParts) quadAct(b *Builder) {
	b.F1(isa.CVTFH, A4, A0)
	b.F1(isa.CVTFH, A5, A2)
	if p.Bias != 0 {
		b.Ld64P(A2, sIn2, 8)
		b.F(isa.H4ADD, A4, A4, A2)
	}
	if p.Act.Op == GeluTanh {
		pairConst(b, ewK3, geluTanh1) // the parts' loads overwrote it
	}
	p.Act.apply(b, A4, false)
	b.St64P(A4, sOut, 8)
}

// Cost returns the kernel's cost (counted from its code, as Binary's).
func (p SumParts) Cost() (Cost, error) {
	s, err := p.stream()
	if err == nil {
		err = s.check(nil)
	}
	if err != nil {
		return Cost{}, fmt.Errorf("sum of parts: %w", err)
	}
	return s.cost(), nil
}

// EmitSumParts emits the kernel at b's current position.
func EmitSumParts(b *Builder, p SumParts) (Kernel, error) {
	s, err := p.stream()
	if err == nil {
		err = p.check(b)
	}
	if err != nil {
		return Kernel{}, fmt.Errorf("sum of parts: %w", err)
	}
	return s.emit(b)
}

// check checks Y, Out and the whole span of the parts: aligned, in
// tile memory (interleaved memory when Interleaved), and apart.
func (p SumParts) check(b *Builder) error {
	if err := checkWorkers(p.Workers); err != nil {
		return err
	}
	if p.N < 1 || p.N > 1<<24 {
		return fmt.Errorf("element count %d out of range [1, 2^24]", p.N)
	}
	a := b.Arch()
	if a == nil {
		return errors.New("builder has no architecture preset")
	}
	y := buffer{"Y", p.Y, 4 * uint64(p.N), p.Out == 0}
	x := buffer{"X", p.X, 4 * (uint64(p.Parts-1)*uint64(p.Stride) + uint64(p.N)), false}
	bufs := []buffer{y, x}
	if p.Out != 0 {
		bufs = append(bufs, buffer{"Out", p.Out, 2 * uint64(p.N), true})
	}
	if p.Bias != 0 {
		bufs = append(bufs, buffer{"Bias", p.Bias, 2 * uint64(p.N), false})
	}
	for _, buf := range bufs {
		align, region, name := uint32(8), a.Memory, "tile memory"
		switch {
		case buf.name == "Bias":
		case buf.name == "Out" && p.Interleaved:
		case buf.name == "Out":
			align = 4
		case p.Interleaved:
			align, region, name = 16, a.Interleaved, "interleaved memory"
		}
		if err := checkBuffer(buf, align, region, name); err != nil {
			return err
		}
	}
	return checkDisjoint(bufs, false)
}
