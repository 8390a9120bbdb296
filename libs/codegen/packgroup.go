package codegen

import "ipu.local/libs/isa"

// This file holds the code of Pack's groups with FP32 input: the
// per-worker prologue, a group of lanes along X's rows or columns and
// its stores and zero padding.

// prologue loads the table row and the constants.
func (p Pack) prologue(b *Builder, s packShape, table Label) {
	emitTableBase(b, table, 4, pkEntry)
	if s.rows {
		b.Ldm(p.chain(s), pkEntry, 0)
	} else {
		b.Ldm(pkX, pkEntry, 0)
	}
	b.Ldm(pkY, pkEntry, 4)
	b.Ldm(pkN, pkEntry, 8)
	b.Ldm(pkPart, pkEntry, 12)
	if p.Out == AMPFP8 {
		emitSetFP8(b, p.FP8, pkT0)
	}
	if s.kloop() > MaxRptiCount {
		b.LoadConst(pkCnt, uint32(s.kloop()))
	}
	if pad := p.KP - s.kx; pad > MaxRptiCount {
		b.LoadConst(pkPad, uint32(pad))
	}
	loadBig(b, s.advance(), pkAdv)
	loadBig(b, s.sb, pkStride)
	b.Amov(A14, AZero) // A14:AZero, a zero pair for the padding
}

// group emits one group with lanes valid lanes (the rest written 0): the
// k loops over its lanes, then its padding.
func (p Pack) group(b *Builder, s packShape, lanes int) {
	switch {
	case s.f16 && s.rows && p.Out == AMPFP8:
		p.rowsQuads8(b, s, lanes)
	case s.f16 && s.rows:
		p.rowsPairs16(b, s, lanes)
	case s.f16:
		p.colsGroup16(b, s, lanes)
	case s.rows:
		p.rowsGroup(b, s, lanes)
	default:
		p.colsGroup(b, s, lanes)
	}
	s.loop(b, p.KP-s.kx, s.pad, pkPad, func() { p.zeros(b, s) })
}

// rowsGroup emits a group whose lanes are rows of X: one pass over k per
// quad of lanes, each lane through its own pointer. The pointers chain
// from the previous quad's P3, so the table's first word is the first
// group's P0 minus the advance.
func (p Pack) rowsGroup(b *Builder, s packShape, lanes int) {
	quads := s.w / 4
	out := pkY
	if quads > 1 {
		out = pkW
	}
	ptr := [4]MReg{pkX, pkP1, pkP2, pkP3}
	for q := 0; q < quads; q++ {
		s.blockStart(b, q, pkP3)
		for i := 1; i < 4; i++ {
			addConst(b, ptr[i], ptr[i-1], s.sb, pkStride)
		}
		if quads > 1 {
			b.Addi(pkW, pkY, int32(4*q*s.e))
		}
		valid := min(max(lanes-4*q, 0), 4)
		for l := valid; l < 4 && !(p.LanePadUnread && valid > 0); l++ {
			b.Amov(AReg(l), AZero) // conversions keep zero lanes zero
		}
		s.kLoop(b, func() {
			for l := 0; l < valid; l++ {
				b.Ld32P(AReg(l), ptr[l], 4)
			}
			p.store(b, 4, out, int32(s.w*s.e))
		})
	}
	if quads > 1 {
		// The padding starts after quad 0's last k.
		b.Addi(pkY, pkW, int32(-4*(quads-1)*s.e))
	}
}

// colsGroup emits a group whose lanes are contiguous in X's rows: per k,
// chunks of up to 8 lanes loaded in pairs (a single last lane when the
// valid lanes are odd: never read past them), converted and stored; the
// pointer moves one row per k, with the last load when there is one chunk
// and the stride fits, else with an add.
func (p Pack) colsGroup(b *Builder, s packShape, lanes int) {
	chunks := (s.w + 7) / 8
	// A register invalid in chunk 0 is invalid in every chunk: zero it
	// once. One valid in chunk 0 but not in a later chunk: per k.
	for l := lanes; l < min(8, s.w) && !p.LanePadUnread; l++ {
		b.Amov(AReg(l), AZero)
	}
	s.kLoop(b, func() {
		for ch := 0; ch < chunks; ch++ {
			n := min(8, s.w-8*ch)
			v := min(max(lanes-8*ch, 0), n)
			if ch > 0 && !p.LanePadUnread {
				for l := v; l < min(n, lanes); l++ {
					b.Amov(AReg(l), AZero)
				}
			}
			post := chunks == 1 && v > 0 && fitsImm16(s.sb)
			for l := 0; l < v; l += 2 {
				if post && l == 0 {
					continue // loaded last, with the pointer's move
				}
				if l+1 < v {
					b.Ld64(AReg(l), pkX, int32(4*(8*ch+l)))
				} else {
					b.Ld32(AReg(l), pkX, int32(4*(8*ch+l)))
				}
			}
			switch {
			case post && v >= 2:
				b.Ld64P(A0, pkX, int32(s.sb))
			case post:
				b.Ld32P(A0, pkX, int32(s.sb))
			case ch == chunks-1:
				addConst(b, pkX, pkX, s.sb, pkStride)
			}
			p.store(b, n, pkY, int32(n*s.e))
		}
	})
	s.nextGroup(b)
}

// store converts n lanes (a multiple of 4) in $a0.. and stores them at
// out, which then advances by step bytes.
func (p Pack) store(b *Builder, n int, out MReg, step int32) {
	bytes := n * p.Out.Size()
	inc := func(last bool, size int) int32 {
		if last {
			return step - int32(bytes-size)
		}
		return int32(size)
	}
	switch p.Out {
	case AMPFP32:
		for l := 0; l < n; l += 2 {
			b.St64P(AReg(l), out, inc(l+2 == n, 8))
		}
	case AMPFP16:
		for l := 0; l < n; l += 4 {
			b.F1(isa.CVTFH, AReg(l), AReg(l))
			b.F1(isa.CVTFH, AReg(l+1), AReg(l+2))
			b.St64P(AReg(l), out, inc(l+4 == n, 8))
		}
	case AMPFP8:
		for l := 0; l < n; l += 4 {
			b.F1(isa.CVTF8, AReg(l), AReg(l))
			b.F1(isa.CVTF8H, AReg(l), AReg(l+2))
			b.St32P(AReg(l), out, inc(l+4 == n, 4))
		}
	}
}

// zeros stores one k of padding at Y.
func (p Pack) zeros(b *Builder, s packShape) {
	bytes := s.w * s.e
	for ; bytes >= 8; bytes -= 8 {
		b.St64P(A14, pkY, 8)
	}
	if bytes == 4 {
		b.StmP(MZero, pkY, 4)
	}
}
