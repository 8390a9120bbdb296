package codegen

import "ipu.local/libs/isa"

// This file holds the code of Pack's groups with FP16 input (InF16):
// lanes along X's columns or rows, to FP16, FP32 or FP8 panels.

// colsGroup16 emits a group whose lanes are contiguous FP16 values in X's
// rows: per k, each chunk of 4 lanes is one ld64 (chunk 0 last, moving
// the pointer to the next row when the stride fits), then each chunk is
// converted and stored. A chunk with fewer valid lanes is built with its
// invalid lanes zero (32-bit loads, the half-valid word masked in $m);
// chunks with none store zeros.
func (p Pack) colsGroup16(b *Builder, s packShape, lanes int) {
	chunks := s.w / 4
	full, part := lanes/4, lanes%4
	post := full > 0 && fitsImm16(s.sb)
	s.kLoop(b, func() {
		for c := 1; c < full; c++ {
			b.Ld64(AReg(2*c), pkX, int32(8*c))
		}
		if part > 0 {
			p.partChunk16(b, AReg(2*full), int32(8*full), part)
		}
		switch {
		case post:
			b.Ld64P(A0, pkX, int32(s.sb))
		case full > 0:
			b.Ld64(A0, pkX, 0)
		}
		if !post {
			addConst(b, pkX, pkX, s.sb, pkStride)
		}
		for c := 0; c < chunks; c++ {
			if c < full || c == full && part > 0 {
				p.store16(b, AReg(2*c))
			} else {
				p.zeroChunk(b)
			}
		}
	})
	s.nextGroup(b)
}

// partChunk16 loads the u (1..3) valid FP16 lanes at pkX+off into the pair
// d, the other lanes zero.
func (p Pack) partChunk16(b *Builder, d AReg, off int32, u int) {
	if u == 1 {
		b.Ldm(pkT0, pkX, off)
		b.Andi(pkT0, pkT0, 0xFFFF)
		b.Mta(d, pkT0)
		b.Amov(d+1, AZero)
		return
	}
	b.Ld32(d, pkX, off)
	if u == 2 {
		b.Amov(d+1, AZero)
		return
	}
	b.Ldm(pkT0, pkX, off+4)
	b.Andi(pkT0, pkT0, 0xFFFF)
	b.Mta(d+1, pkT0)
}

// store16 converts the four FP16 lanes of the pair r and stores them at
// Y.
func (p Pack) store16(b *Builder, r AReg) {
	switch p.Out {
	case AMPFP16:
		b.St64P(r, pkY, 8)
	case AMPFP32:
		b.F1(isa.CVTHF, A8, r)
		b.F1(isa.CVTHF, A10, r+1)
		b.St64P(A8, pkY, 8)
		b.St64P(A10, pkY, 8)
	case AMPFP8:
		b.F1(isa.CVTH8, A8, r)
		b.St32P(A8, pkY, 4)
	}
}

// zeroChunk stores four zero lanes at Y.
func (p Pack) zeroChunk(b *Builder) {
	switch p.Out {
	case AMPFP16:
		b.St64P(A14, pkY, 8)
	case AMPFP32:
		b.St64P(A14, pkY, 8)
		b.St64P(A14, pkY, 8)
	case AMPFP8:
		b.StmP(MZero, pkY, 4)
	}
}

// rowsPairs16 emits a group whose lanes are FP16 rows of X, for FP16 and
// FP32 outputs: one pass per pair of lanes, each lane through its own
// pointer (P0, P1, chained from the previous pair's P1), two k per
// 32-bit load, the outputs through W (the pair's place in the group's
// first k).
func (p Pack) rowsPairs16(b *Builder, s packShape, lanes int) {
	pairs := s.w / 2
	for j := 0; j < pairs; j++ {
		va, vb := 2*j < lanes, 2*j+1 < lanes
		b.Addi(pkW, pkY, int32(2*j*s.e))
		if !va {
			s.pairLoop(b, func(two bool) { p.zeroPair16(b, s, two) })
			continue
		}
		s.blockStart(b, j, pkP1)
		if vb {
			addConst(b, pkP1, pkX, s.sb, pkStride)
		}
		s.pairLoop(b, func(two bool) { p.lanePair16(b, s, vb, two) })
	}
	// The padding starts after the first pair's last k.
	b.Addi(pkY, pkW, int32(-2*(pairs-1)*s.e))
}

// lanePair16 emits two k (one when !two) of a pair of lanes (lane b
// invalid, zero, when !vb).
func (p Pack) lanePair16(b *Builder, s packShape, vb, two bool) {
	step := int32(s.w * s.e) // one k of the panel
	inc := step
	if two {
		inc = 2 * step
	}
	if p.Out == AMPFP16 {
		wb := MZero // an invalid lane b's halves: zeros
		b.LdmP(pkWA, pkX, 4)
		if vb {
			b.LdmP(pkWB, pkP1, 4)
			wb = pkWB
		}
		b.Sort16Lo(pkWK, pkWA, wb) // k: the low halves
		if two {
			b.Sort16Hi(pkWA, pkWA, wb) // k+1: the high halves
			b.Stm(pkWA, pkW, step)
		}
		b.StmP(pkWK, pkW, inc)
		return
	}
	// AMPFP32: $a2:3 = lane a at k, k+1; $a4:5 lane b.
	b.Ld32P(A0, pkX, 4)
	lb, lb1 := AZero, AZero
	if vb {
		b.Ld32P(A1, pkP1, 4)
	}
	b.F1(isa.CVTHF, A2, A0)
	if vb {
		b.F1(isa.CVTHF, A4, A1)
		lb, lb1 = A4, A5
	}
	if two {
		b.St32(A3, pkW, step)
		b.St32(lb1, pkW, step+4)
	}
	b.St32(lb, pkW, 4)
	b.St32P(A2, pkW, inc)
}

// zeroPair16 stores two k (one when !two) of a pair of zero lanes.
func (p Pack) zeroPair16(b *Builder, s packShape, two bool) {
	step := int32(s.w * s.e)
	inc := step
	if two {
		inc = 2 * step
	}
	if p.Out == AMPFP16 {
		if two {
			b.Stm(MZero, pkW, step)
		}
		b.StmP(MZero, pkW, inc)
		return
	}
	if two {
		b.St64(A14, pkW, step)
	}
	b.St64P(A14, pkW, inc)
}

// rowsQuads8 emits a group whose lanes are FP16 rows of X, for FP8
// outputs: one pass per quad of lanes as rowsGroup (four pointers), two k
// per 32-bit load; per two k the four words convert to f32v2 pairs of
// (k, k+1), the lanes swap between pairs to make (lane 0, lane 1) and
// (lane 2, lane 3) pairs of one k, which convert back to f16v4 and then
// to FP8.
func (p Pack) rowsQuads8(b *Builder, s packShape, lanes int) {
	quads := s.w / 4
	out := pkY
	if quads > 1 {
		out = pkW
	}
	ptr := [4]MReg{pkX, pkP1, pkP2, pkP3}
	for q := 0; q < quads; q++ {
		if quads > 1 {
			b.Addi(pkW, pkY, int32(4*q*s.e))
		}
		valid := min(max(lanes-4*q, 0), 4)
		if valid > 0 {
			s.blockStart(b, q, pkP3)
			for i := 1; i < 4; i++ {
				addConst(b, ptr[i], ptr[i-1], s.sb, pkStride)
			}
		}
		s.pairLoop(b, func(two bool) { p.quad8(b, s, out, valid, two) })
	}
	if quads > 1 {
		b.Addi(pkY, pkW, int32(-4*(quads-1)*s.e))
	}
}

// quad8 emits two k (one when !two) of a quad of lanes, valid of them
// valid (the others zero).
func (p Pack) quad8(b *Builder, s packShape, out MReg, valid int, two bool) {
	step := int32(s.w) // one k of the panel: w bytes
	inc := step
	if two {
		inc = 2 * step
	}
	if valid == 0 {
		if two {
			b.Stm(MZero, out, step)
		}
		b.StmP(MZero, out, inc)
		return
	}
	ptr := [4]MReg{pkX, pkP1, pkP2, pkP3}
	for l := 0; l < valid; l++ {
		b.Ld32P(AReg(l), ptr[l], 4)
	}
	for l := 0; l < 4; l++ {
		src := AZero
		if l < valid {
			src = AReg(l)
		} else if p.LanePadUnread {
			continue // a padded lane nobody reads: left as it is
		}
		b.F1(isa.CVTHF, AReg(4+2*l), src) // (lane l at k, at k+1)
	}
	if !two {
		b.Amov(A5, A6) // (lane 0, lane 1) at k
		b.Amov(A9, A10)
		b.F1(isa.CVTFH, A0, A4)
		b.F1(isa.CVTFH, A1, A8)
		b.F1(isa.CVTH8, A2, A0)
		b.St32P(A2, out, inc)
		return
	}
	for _, r := range []AReg{A5, A9} { // swap r and r+1
		b.Amov(A12, r)
		b.Amov(r, r+1)
		b.Amov(r+1, A12)
	}
	b.F1(isa.CVTFH, A0, A4)
	b.F1(isa.CVTFH, A1, A8)
	b.F1(isa.CVTH8, A2, A0)
	b.F1(isa.CVTFH, A0, A6)
	b.F1(isa.CVTFH, A1, A10)
	b.F1(isa.CVTH8, A3, A0)
	b.St32(A3, out, step)
	b.St32P(A2, out, inc)
}
