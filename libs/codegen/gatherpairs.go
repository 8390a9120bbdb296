package codegen

import "ipu.local/libs/isa"

// pairEngine gathers 2-byte elements whose rows come in pairs from the
// two halves of source words, as a transpose's do (RStride 1): the 2x2
// block of output rows 2q, 2q+1 and columns 2j, 2j+1 is two source words,
// each one column's pair of rows, and sort16lo and sort16hi of them are
// its two output words: per block 2 ldm, 2 sorts and 2 stm (1.5 issues
// an element, where halfEngine takes 2). The outputs are numbered block
// by block (4 an index), the blocks row pair by row pair, so that a
// worker's range starts at any block.
type pairEngine struct {
	rows, cols  int   // output; both even
	src, srcCol int64 // bytes; src and srcCol multiples of 4, rows 2 bytes apart
	dst, dstRow int64 // bytes; multiples of 4
}

// pairs returns the gather's pair engine, or nil when its rows do not
// come in word-aligned pairs or its output words are not whole.
func (p Gather) pairs() *pairEngine {
	if p.Size != 2 || blockCount(p.Outer) > 1 || p.R < 2 || p.R%2 != 0 || p.C%2 != 0 || p.RStride != 1 || p.CStride%2 != 0 ||
		p.X%4 != 0 || p.Y%4 != 0 || p.YStride%2 != 0 {
		return nil
	}
	return &pairEngine{rows: p.R, cols: p.C, src: int64(p.X), srcCol: 2 * int64(p.CStride), dst: int64(p.Y), dstRow: 2 * int64(p.YStride)}
}

func (e *pairEngine) elements() int { return e.rows * e.cols }

func (e *pairEngine) boundary(f int) bool { return f%4 == 0 }

// word is the source word of column c of row pair q.
func (e *pairEngine) word(q, c int) int64 { return e.src + 4*int64(q) + int64(c)*e.srcCol }

// out is the output word of row r at column c.
func (e *pairEngine) out(r, c int) int64 { return e.dst + int64(r)*e.dstRow + 2*int64(c) }

// block emits block j of row pair q.
func (e *pairEngine) block(s *genSeq, q, j int) {
	s.access(isa.LDMP, uint8(hW0), gSrc, e.word(q, 2*j))
	s.access(isa.LDMP, uint8(hW1), gSrc, e.word(q, 2*j+1))
	s.alu(isa.SORT16LO, hP, hW0, hW1)
	s.access(isa.STMP, uint8(hP), gDst, e.out(2*q, 2*j))
	s.alu(isa.SORT16HI, hW0, hW0, hW1)
	s.access(isa.STMP, uint8(hW0), gDst, e.out(2*q+1, 2*j))
}

// blocks emits blocks [js, je) of row pair q, in a loop when there are
// two or more.
func (e *pairEngine) blocks(s *genSeq, q, js, je int) {
	if je-js < 2 {
		for j := js; j < je; j++ {
			e.block(s, q, j)
		}
		return
	}
	s.open(je-js, genAt{gSrc, e.word(q, 2*js)}, genAt{gDst, e.out(2*q, 2*js)})
	e.block(s, q, js)
	s.close(genAt{gSrc, 2 * e.srcCol}, genAt{gDst, 4})
}

func (e *pairEngine) code(f0, f1 int) *genSeq {
	s := newGenSeq(M9, M10, M11, M12, M13, M14, M0, M1)
	per := e.cols / 2
	seg := func(q, js, je int) { e.blocks(s, q, js, je) }
	full := func(q, n int) {
		if n < 2 {
			seg(q, 0, per)
			return
		}
		s.open(n, genAt{gSrc, e.word(q, 0)}, genAt{gDst, e.out(2*q, 0)})
		seg(q, 0, per)
		s.close(genAt{gSrc, 4}, genAt{gDst, 2 * e.dstRow})
	}
	genSegments(f0/4, f1/4, per, seg, full)
	return s
}
