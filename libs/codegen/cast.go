package codegen

import (
	"errors"
	"fmt"

	"ipu.local/libs/isa"
	"ipu.local/libs/numfmt"
)

// CastKind is a conversion between FP32, FP16 and FP8 arrays.
type CastKind uint8

// Conversions. Each element converts with one rounding to nearest even
// (numfmt, as the conversion instructions): FP32 -> FP16 (f32v2tof16),
// FP16 -> FP32 (exact), FP32 -> FP8 (f32v2tof8: one rounding of x / 2^Scale
// straight to FP8, not through FP16), FP8 -> FP32 (exact: fp8 x 2^Scale),
// FP16 -> FP8 (f16v4tof8), int32 -> FP32 (i32tof32; exact below 2^24 in
// magnitude). FP8 results saturate to +-max on overflow, or
// give NaN (E5M2: Inf) with Saturate false, as ONNX Cast.
const (
	F32ToF16 CastKind = iota
	F16ToF32
	F32ToF8
	F8ToF32
	F16ToF8
	I32ToF32
	numCasts
)

var castNames = [numCasts]string{"f32-to-f16", "f16-to-f32", "f32-to-f8", "f8-to-f32", "f16-to-f8", "i32-to-f32"}

func (c CastKind) String() string {
	if c < numCasts {
		return castNames[c]
	}
	return fmt.Sprintf("cast(%d)", uint8(c))
}

// sizes returns the input and output element sizes.
func (c CastKind) sizes() (in, out int) {
	switch c {
	case F32ToF16:
		return 4, 2
	case F16ToF32:
		return 2, 4
	case F32ToF8:
		return 4, 1
	case F8ToF32:
		return 1, 4
	case I32ToF32:
		return 4, 4
	}
	return 2, 1
}

func (c CastKind) fp8() bool { return c == F32ToF8 || c == F8ToF32 || c == F16ToF8 }

// Cast converts n elements from X to Y. X and Y are 8-byte aligned and do
// not overlap. The work goes in units of 4 elements (stream kernel); the
// n mod 4 last elements go to the last worker, which reads the rest of
// their last aligned 32-bit (FP16 -> FP8: 64-bit) input word (never past
// it) and writes only their bytes of the last output word (a
// read-modify-write: the bytes after Y are preserved).
//
// R > 1 makes it two-dimensional as Unary: R rows of N elements, row r of
// X at X + ein*r*XStride and of Y at Y + eout*r*YStride (element sizes of
// Kind; XStride 0 reads one row for every row; ein*XStride and
// eout*YStride multiples of 8; YStride >= N). Every row ends as the 1-D
// kernel ends, so the padding after each row of Y is preserved.
type Cast struct {
	Kind     CastKind
	N        int
	X, Y     uint32
	Format   numfmt.Format // FP8 kinds
	Scale    int           // FP8 kinds: value = fp8 x 2^Scale
	Saturate bool          // FP8 results: saturate on overflow (ONNX default)
	Workers  int

	// MulF16, F32ToF16 only, when not 0: the FP16 constant (its bits) that
	// multiplies each FP16 result, rounded again (f16v4mul): Y =
	// RN16(RN16(x) * c), bit for bit the Mul of a constant (Binary, Type
	// F16) that would follow the cast, in the same pass.
	MulF16 uint16

	R                int // rows (0, 1: one)
	XStride, YStride int // elements, R > 1

	// Interleaved declares that X and Y lie in interleaved memory,
	// 16-byte aligned, every row too (ein*XStride and eout*YStride
	// multiples of 16; checked): the casts to FP8 from FP32 and FP16
	// use 128-bit loads (and stores). See cast_fp8.go.
	Interleaved bool
}

func (p Cast) fp8Config() FP8Config {
	return FP8Config{FormatA: p.Format, ScaleA: p.Scale, NaNOnOverflow: !p.Saturate}
}

// f8ViaF16 reports whether FP8 -> FP16 -> FP32 gives exactly FP8 -> FP32
// for every code (true unless the scale pushes values out of FP16's
// range).
func f8ViaF16(f numfmt.Format, scale int) bool {
	for c := 0; c < 256; c++ {
		if numfmt.F16ToF32(numfmt.F8ToF16(uint8(c), f, scale)) != numfmt.F8ToF32(uint8(c), f, scale) {
			return false
		}
	}
	return true
}

// emitMerge writes the low rem bytes of $m8 into the word at $m4,
// keeping its other bytes: 5 + ConstLen(mask) issues.
func emitMerge(b *Builder, rem int) {
	mask := uint32(1)<<(8*rem) - 1
	b.Ldm(M9, sOut, 0)
	b.Xor(M8, M8, M9)
	b.LoadConst(M10, mask)
	b.And(M8, M8, M10)
	b.Xor(M8, M8, M9)
	b.Stm(M8, sOut, 0)
}

func (p Cast) stream() (*stream, error) {
	if p.Kind >= numCasts {
		return nil, fmt.Errorf("unknown cast %d", p.Kind)
	}
	if p.Kind.fp8() {
		if err := p.fp8Config().check(); err != nil {
			return nil, err
		}
	}
	if p.R < 0 {
		return nil, fmt.Errorf("row count %d is negative", p.R)
	}
	if p.MulF16 != 0 && p.Kind != F32ToF16 {
		return nil, fmt.Errorf("a constant factor (%#04x) with %s: only f32-to-f16 takes one", p.MulF16, p.Kind)
	}
	ein, eout := p.Kind.sizes()
	s := &stream{n: p.N, unit: 4, workers: p.Workers, rows: p.R,
		inputs: []array{{"X", p.X, ein, p.XStride}}, output: array{"Y", p.Y, eout, p.YStride}}
	s.setup = func(b *Builder) {
		if p.Kind.fp8() {
			emitSetFP8(b, p.fp8Config(), M7)
		}
		if p.MulF16 != 0 {
			// The factor in both lanes of both registers of $a6:7.
			b.LoadConst(M8, uint32(p.MulF16)*0x10001)
			b.Mta(A6, M8)
			b.Mta(A7, M8)
		}
	}
	// scale multiplies the FP16 results in $a4:5 by the factor.
	scale := func(b *Builder) {
		if p.MulF16 != 0 {
			b.F(isa.H4MUL, A4, A4, A6)
		}
	}
	x, y := sIn0, sOut
	switch p.Kind {
	case F32ToF16:
		s.body = func(b *Builder) {
			b.Ld64P(A0, x, 8)
			b.Ld64P(A2, x, 8)
			b.F1(isa.CVTFH, A4, A0)
			b.F1(isa.CVTFH, A5, A2)
			scale(b)
			b.St64P(A4, y, 8)
		}
		s.tail = func(b *Builder, rem int) {
			// The factor's lanes past the results multiply whatever $a5
			// holds; only the results are stored.
			if rem >= 2 {
				b.Ld64P(A0, x, 8)
				b.F1(isa.CVTFH, A4, A0)
				scale(b)
				b.St32P(A4, y, 4)
			}
			if rem%2 == 1 {
				b.Ld32(A0, x, 0)
				b.F1(isa.CVTFH, A4, A0)
				scale(b)
				b.Mfa(M8, A4)
				emitMerge(b, 2)
			}
		}
	case F16ToF32:
		s.body = func(b *Builder) {
			b.Ld64P(A0, x, 8)
			b.F1(isa.CVTHF, A2, A0)
			b.F1(isa.CVTHF, A4, A1)
			b.St64P(A2, y, 8)
			b.St64P(A4, y, 8)
		}
		s.tail = func(b *Builder, rem int) {
			if rem >= 2 {
				b.Ld32P(A0, x, 4)
				b.F1(isa.CVTHF, A2, A0)
				b.St64P(A2, y, 8)
			}
			if rem%2 == 1 {
				b.Ld32(A0, x, 0)
				b.F1(isa.CVTHF, A2, A0)
				b.St32(A2, y, 0)
			}
		}
	case F32ToF8:
		f32ToF8(s, p.Interleaved)
	case F8ToF32:
		if f8ViaF16(p.Format, p.Scale) {
			s.body = func(b *Builder) {
				b.Ld32P(A0, x, 4)
				b.F1(isa.CVT8H, A2, A0)
				b.F1(isa.CVTHF, A4, A2)
				b.F1(isa.CVTHF, A6, A3)
				b.St64P(A4, y, 8)
				b.St64P(A6, y, 8)
			}
		} else {
			s.body = func(b *Builder) {
				b.LdmP(M8, x, 4)
				b.Mta(A0, M8)
				b.Shri(M8, M8, 16)
				b.Mta(A1, M8)
				b.F1(isa.CVT8F, A2, A0)
				b.F1(isa.CVT8F, A4, A1)
				b.St64P(A2, y, 8)
				b.St64P(A4, y, 8)
			}
		}
		s.tail = func(b *Builder, rem int) {
			b.Ldm(M8, x, 0)
			b.Mta(A0, M8)
			b.F1(isa.CVT8F, A2, A0)
			if rem >= 2 {
				b.St64(A2, y, 0)
			} else {
				b.St32(A2, y, 0)
			}
			if rem == 3 {
				b.Shri(M8, M8, 16)
				b.Mta(A1, M8)
				b.F1(isa.CVT8F, A4, A1)
				b.St32(A4, y, 8)
			}
		}
	case I32ToF32:
		s.body = func(b *Builder) {
			b.Ld64P(A0, x, 8)
			b.Ld64P(A2, x, 8)
			b.F1(isa.CVTIF, A4, A0)
			b.F1(isa.CVTIF, A5, A1)
			b.F1(isa.CVTIF, A6, A2)
			b.F1(isa.CVTIF, A7, A3)
			b.St64P(A4, y, 8)
			b.St64P(A6, y, 8)
		}
		s.tail = func(b *Builder, rem int) {
			for range rem {
				b.Ld32P(A0, x, 4)
				b.F1(isa.CVTIF, A4, A0)
				b.St32P(A4, y, 4)
			}
		}
	case F16ToF8:
		f16ToF8(s, p.Interleaved)
	}
	return s, nil
}

// checkInterleaved checks what Interleaved declares: row strides
// always, the arrays' places when b is given.
func (p Cast) checkInterleaved(b *Builder) error {
	if !p.Interleaved {
		return nil
	}
	ein, eout := p.Kind.sizes()
	rows := max(p.R, 1)
	arrays := []struct {
		name   string
		addr   uint32
		esize  int
		stride int // elements
	}{{"X", p.X, ein, p.XStride}, {"Y", p.Y, eout, p.YStride}}
	for _, x := range arrays {
		step := 0 // bytes from row to row
		if rows > 1 {
			step = x.esize * x.stride
		}
		if step%16 != 0 {
			return fmt.Errorf("%s row stride %d: %d bytes is not a multiple of 16 (Interleaved)", x.name, x.stride, step)
		}
		if b == nil {
			continue
		}
		a := b.Arch()
		if a == nil {
			return errors.New("builder has no architecture preset")
		}
		span := uint64(step)*uint64(rows-1) + uint64(x.esize)*uint64(p.N)
		if err := checkBuffer(buffer{x.name, x.addr, span, false}, 16, a.Interleaved, "interleaved memory"); err != nil {
			return err
		}
	}
	return nil
}

// Cost returns the kernel's cost: a stream kernel (2-D: the 2-D
// stream's formula, see stream) with body issues per unit of elements
// f32-to-f16 5 per 4 (6 with MulF16), f16-to-f32 5 per 4, i32-to-f32 8 per 4, f32-to-f8
// 5 per 4 (4 with Interleaved), f8-to-f32 6 per 4 (8 when FP16 cannot
// hold every scaled FP8 value), f16-to-f8 5 per 8 (7 per 16 with
// Interleaved); setup 2 for the FP8 kinds (CSR fp8), 2 +
// ConstLen(factor in both halves) with MulF16, else 0. The tail of
// f32-to-f16 takes one more issue per pair and per odd element with
// MulF16.
func (p Cast) Cost() (Cost, error) {
	s, err := p.stream()
	if err == nil {
		err = s.check(nil)
	}
	if err == nil {
		err = p.checkInterleaved(nil)
	}
	if err != nil {
		return Cost{}, fmt.Errorf("cast %s: %w", p.Kind, err)
	}
	return s.cost(), nil
}

// EmitCast emits the kernel at b's current position.
func EmitCast(b *Builder, p Cast) (Kernel, error) {
	s, err := p.stream()
	if err == nil {
		err = s.check(b)
	}
	if err == nil {
		err = p.checkInterleaved(b)
	}
	if err != nil {
		return Kernel{}, fmt.Errorf("cast %s: %w", p.Kind, err)
	}
	return s.emit(b)
}
