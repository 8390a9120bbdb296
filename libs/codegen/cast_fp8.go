package codegen

import "ipu.local/libs/isa"

// The casts to FP8 from FP32 and FP16, as fast as the instruction set
// allows. The tile issues at most one instruction per cycle (its six
// workers in turn), so elements per cycle is elements per issue of the
// loop body.
//
// FP32 -> FP8: the only conversion that rounds FP32 once to FP8 is
// f32v2tof8, two elements per issue into the low half of one register
// (FP32 -> FP16 -> FP8 through f16v4tof8 rounds twice, which differs
// from one rounding when the FP16 value lands on an FP8 midpoint, and
// f16v4tof8 is the only conversion with four lanes). f32v2tof8 writes
// the low half of its register and f32v2tof8hi the high half, keeping
// the low: per 4 elements, loads (1 ld128, or 2 ld64), the two
// conversions and one st32: 4 issues, 1 element per cycle with
// Interleaved (5, 0.8, without). (Before f32v2tof8hi the word was put
// together in the integer registers, 2 mfa, shli, or, stm: 8 issues, 0.5
// per cycle.) 4 elements per cycle would take at most 1 issue per 4
// elements; the conversions alone take 2.
//
// FP16 -> FP8: f16v4tof8 converts four elements per issue; per 16
// elements, 2 ld128 + 4 f16v4tof8 + 1 st128: 7 issues, 2.29 elements per
// cycle with Interleaved (the conversions alone bound it at 4); per 8
// without, 2 ld64 + 2 f16v4tof8 + 1 st64: 5 issues, 1.6 per cycle.

// f32ToF8 sets the stream's body and tail: unit 4; wide loads 128 bits.
func f32ToF8(s *stream, wide bool) {
	x, y := sIn0, sOut
	s.unit = 4
	s.body = func(b *Builder) {
		if wide {
			b.Ld128P(A0, x, 16)
		} else {
			b.Ld64P(A0, x, 8)
			b.Ld64P(A2, x, 8)
		}
		b.F1(isa.CVTF8, A4, A0)
		b.F1(isa.CVTF8H, A4, A2)
		b.St32P(A4, y, 4)
	}
	s.tail = func(b *Builder, rem int) {
		if rem >= 2 {
			b.Ld64(A0, x, 0)
		} else {
			b.Ld32(A0, x, 0)
		}
		b.F1(isa.CVTF8, A4, A0)
		b.Mfa(M8, A4)
		if rem == 3 {
			b.Ld32(A2, x, 8)
			b.F1(isa.CVTF8, A5, A2)
			b.Mfa(M9, A5)
			b.Shli(M9, M9, 16)
			b.Or(M8, M8, M9)
		}
		emitMerge(b, rem)
	}
}

// f16ToF8 sets the stream's body and tail: unit 16 when wide (128-bit
// loads and stores), else 8.
func f16ToF8(s *stream, wide bool) {
	x, y := sIn0, sOut
	s.unit = 8
	s.body = func(b *Builder) {
		b.Ld64P(A0, x, 8)
		b.Ld64P(A2, x, 8)
		b.F1(isa.CVTH8, A4, A0)
		b.F1(isa.CVTH8, A5, A2)
		b.St64P(A4, y, 8)
	}
	if wide {
		s.unit = 16
		s.body = func(b *Builder) {
			b.Ld128P(A0, x, 16)
			b.Ld128P(A4, x, 16)
			b.F1(isa.CVTH8, A8, A0)
			b.F1(isa.CVTH8, A9, A2)
			b.F1(isa.CVTH8, A10, A4)
			b.F1(isa.CVTH8, A11, A6)
			b.St128P(A8, y, 16)
		}
	}
	s.tail = func(b *Builder, rem int) {
		if rem >= 8 {
			// wide only: 8 elements, 128 bits in, 64 out.
			b.Ld128P(A0, x, 16)
			b.F1(isa.CVTH8, A8, A0)
			b.F1(isa.CVTH8, A9, A2)
			b.St64P(A8, y, 8)
			rem -= 8
		}
		if rem >= 4 {
			b.Ld64P(A0, x, 8)
			b.F1(isa.CVTH8, A2, A0)
			b.St32P(A2, y, 4)
			rem -= 4
		}
		if rem > 0 {
			// The last aligned 64-bit word of the input, never past it;
			// the bytes after Y's last element are kept.
			b.Ld64(A0, x, 0)
			b.F1(isa.CVTH8, A2, A0)
			b.Mfa(M8, A2)
			emitMerge(b, rem)
		}
	}
}
