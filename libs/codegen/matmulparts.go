package codegen

import "fmt"

// Column parts of the matrix kernel (MatMul.CParts). A k split's
// reduce-scatter sums each column part of C on its own tile, so each part
// is a row-major block of its own (one contiguous send), of its own width.
// The kernel numbers the items part by part (part h's row groups in order,
// each its w_h panels) and splits them evenly over the workers. A
// worker's items fall in one part or several, each a segment of its
// table row: the item count, the first item's A group, B panel and C
// position, the panels left in its row group, and the part's row stride
// (64 bytes a panel of width) and first B panel. The item loop is the
// whole-item kernel's (emitItems), with those values in registers; at a
// row group change the panels left are the row stride / 64, and C the
// item's last row (mmRow, 3 rows past its first) plus 64 bytes: the next
// row group's first panel. The next segment's count follows, a zero
// count ending the segments.
//
// Worker w issues
//
//	tableBaseIssues (+ setFP8Issues for FP8, + ConstLen(steps) past an rpti count)
//	+ 1                     the first segment's count
//	+ per segment: 8 + c*item + 4*(row group changes among its c items)
//
// before its exit, item as in the whole-item kernel.

const (
	mmSegWords  = 7 // count, Ag, B, C, rem, row stride, B of the part
	mmSegIssues = 8 // 6 ldmp, then the next count's ldmp and brnz
	mmSegStart  = 1 // the first count's ldmp
)

// mmSeg is a worker's run of items inside one column part.
type mmSeg struct {
	part, first, count int // part, its first item within the part, items
}

// partWidths returns the column parts' widths in panels.
func (p MatMul) partWidths() []int {
	_, w := split(p.N/16, p.CParts)
	return w
}

// checkParts checks the column parts.
func (p MatMul) checkParts() error {
	if p.CStride != 0 || p.CPanel != 0 {
		return fmt.Errorf("C column parts with a row stride (%d) or panel stride (%d): want both 0 (each part is its own row-major block)", p.CStride, p.CPanel)
	}
	if int64(p.M)*int64(p.N) > 1<<20 {
		return fmt.Errorf("C of %dx%d does not fit a tile", p.M, p.N)
	}
	if p.CParts > p.N/16 {
		return fmt.Errorf("C in %d column parts: want at most N/16=%d", p.CParts, p.N/16)
	}
	return nil
}

// segments returns each worker's segments: its items of s's even split,
// numbered part by part.
func (p MatMul) segments(s mmShape) [][]mmSeg {
	widths := p.partWidths()
	out := make([][]mmSeg, s.workers)
	for w := range out {
		i, end := s.start[w], s.start[w]+s.count[w]
		base := 0 // the part's first item
		for h, width := range widths {
			n := s.groups * width
			if i < end && i < base+n {
				c := min(end, base+n) - i
				out[w] = append(out[w], mmSeg{part: h, first: i - base, count: c})
				i += c
			}
			base += n
		}
	}
	return out
}

// partsIssues is a worker's issues before its exit.
func partsIssues(pro, item int64, widths []int, segs []mmSeg) int64 {
	n := pro + mmSegStart
	for _, sg := range segs {
		P := widths[sg.part]
		n += mmSegIssues + int64(sg.count)*item + 4*int64((sg.first+sg.count)/P-sg.first/P)
	}
	return n
}

// partsTable is the kernel's table: each worker's segments, then the
// zero count, rows padded to the longest.
func (p MatMul) partsTable(s mmShape, segs [][]mmSeg) [][]uint32 {
	most := 0
	for _, ws := range segs {
		most = max(most, len(ws))
	}
	widths := p.partWidths()
	e := uint32(p.Type.size())
	panelB := uint32(s.panelBytes)
	tab := make([][]uint32, len(segs))
	for w, ws := range segs {
		row := make([]uint32, 0, most*mmSegWords+1)
		for _, sg := range ws {
			before := 0 // panels of the parts before
			for _, width := range widths[:sg.part] {
				before += width
			}
			width := widths[sg.part]
			g, pn := uint32(sg.first/width), uint32(sg.first%width)
			rowBytes := uint32(64 * width)
			bPart := p.B + uint32(before)*panelB
			cPart := p.C + 4*16*uint32(p.M)*uint32(before)
			row = append(row,
				uint32(sg.count),
				p.A+g*4*uint32(p.K)*e,
				bPart+pn*panelB,
				cPart+4*g*rowBytes+64*pn,
				uint32(width)-pn,
				rowBytes,
				bPart,
			)
		}
		row = append(row, 0)
		tab[w] = append(row, make([]uint32, most*mmSegWords+1-len(row))...)
	}
	return tab
}

// emitMatMulParts emits the column parts' kernel (checked, planned as s).
func emitMatMulParts(b *Builder, p MatMul, s mmShape) {
	segs := p.segments(s)
	tab := p.partsTable(s, segs)
	table := b.Label()
	emitTableBase(b, table, len(tab[0]), mmEntry)
	if p.Type == AMPFP8 {
		emitSetFP8(b, p.FP8, mmTmp)
	}
	if s.steps > MaxRptiCount {
		b.LoadConst(mmSteps, uint32(s.steps))
	}
	// Every worker has a segment.
	b.LdmP(mmCnt, mmEntry, 4)
	seg := b.Here()
	for _, r := range []MReg{mmAg, mmB, mmC, mmRem, mmRS, mmBPart} {
		b.LdmP(r, mmEntry, 4)
	}
	rowsAt := func(base MReg, op func(MReg, int)) { // 19 issues
		op(base, 0)
		b.Add(mmRow, base, mmRS)
		op(mmRow, 1)
		b.Add(mmRow, mmRow, mmRS)
		op(mmRow, 2)
		b.Add(mmRow, mmRow, mmRS)
		op(mmRow, 3)
	}
	emitItems(b, p, s, rowsAt, 64, func() {
		b.Shri(mmRem, mmRS, 6)
		b.Mov(mmAg, mmA)
		b.Mov(mmB, mmBPart)
		b.Addi(mmC, mmRow, 64)
	})
	b.LdmP(mmCnt, mmEntry, 4)
	b.Brnz(mmCnt, seg)
	b.Exit()
	emitTable(b, table, tab)
}
