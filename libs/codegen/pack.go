package codegen

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"

	"ipu.local/libs/isa"
	"ipu.local/libs/numfmt"
)

// PanelKind is the panel layout a Pack writes.
type PanelKind uint8

// Panel layouts (MatMul's A and B operand layouts).
const (
	APanel PanelKind = iota // groups of 4 rows, k-major
	BPanel                  // panels of 16 columns, k-major
)

func (k PanelKind) String() string {
	switch k {
	case APanel:
		return "a-panel"
	case BPanel:
		return "b-panel"
	}
	return fmt.Sprintf("panel(%d)", uint8(k))
}

// Pack converts an R x C row-major FP32 matrix X (row stride XStride
// elements) into a panel layout at Y with element type Out (e bytes):
//
//   - APanel: groups of 4 rows of the operand, k-major: (i, k) at
//     Y + e*((i/4)*4*KP + 4*k + i%4), k along the operand's columns;
//   - BPanel: panels of 16 columns of the operand, k-major: (k, j) at
//     Y + e*((j/16)*16*KP + 16*k + j%16), k along the operand's rows;
//
// where the operand is X, or X^T with Transpose. Padding (group lanes
// past the operand, k from its extent up to KP) is written 0. Out is
// AMPFP16 (f32v2tof16), AMPFP8 (f32v2tof8: format FP8.FormatA, scale
// FP8.ScaleA, NaN on overflow when FP8.NaNOnOverflow, else saturating) or
// VecFP32 (a copy). Each element converts as in the Cast kernel (the same
// instructions, one rounding).
//
// Alignment: Y 8-byte aligned, X 8-byte aligned (4 when the lanes of a
// group run along X's rows: ld32 loads only), Y not overlapping X. When the lanes
// of a group are contiguous in X (APanel with Transpose, BPanel without),
// XStride is even. Any stride otherwise.
//
// Work: the groups (panels), numbered along the operand; worker w takes a
// contiguous range of them, the first groups mod workers ranges one
// longer; min(Workers, groups) workers run. The last group may be partial
// (fewer lanes, the rest written 0): the last worker packs it. When a
// finer split costs fewer cycles (fewer groups than workers, long k
// extents), Pack runs the split kernel instead: see the split kernel
// below. Either way every byte of the panel is written once, with the
// same value.
//
// Loops per k, issues per 4 elements (FP32 / FP16 / FP8 outputs): lanes
// along X's rows (one ld32 per element, 4 lanes at a time) 6 / 7 / 11;
// lanes along X's columns (ld64 pairs) 4 / 5 / 9 for APanel, 4.25 / 5.25 /
// 9.25 for BPanel. Cost counts the emitted code exactly.
//
// FP16 input (InF16): X is an R x C row-major FP16 matrix, (r, c) at
// X + 2*(r*XStride + c). Out AMPFP16 copies each element's bits (NaN
// payloads included), VecFP32 widens it exactly (f16v2tof32, as Cast),
// AMPFP8 converts it with f16v4tof8 (FP8 as above). Alignment: lanes
// along X's columns read four values with one ld64: X 8-byte aligned and
// XStride a multiple of 4; lanes along X's rows read two k of a lane with
// one 32-bit load: X 4-byte aligned, XStride even. A partial group reads
// the word holding its last lane, and an odd k extent the word holding
// its last k (2 bytes past X's row): the words must lie in tile memory.
// Issues per 4 elements: lanes along X's columns 2 / 5 / 3 (FP16 / FP32 /
// FP8 outputs: ld64, then st64, or two f16v2tof32 and two st64, or
// f16v4tof8 and st32; the pointer moves with the last load); lanes along
// X's rows 10 / 8 / 11: pairs of lanes walk two k at a time, a 32-bit
// load per lane holding both k; FP16 outputs interleave the halves in $m
// registers (ldm, andi, shli, or, shri, and with 0xffff0000, or, two
// stm), FP32 outputs convert each word (ld32, f16v2tof32) and store each
// value (st32); FP8 outputs take four lanes, convert to f32v2, swap lanes
// between pairs (6 amov) and convert back to f16v4 for f16v4tof8 (the
// round trip is exact but for a signalling NaN's quiet bit, and any NaN
// gives NaN).
//
// Split kernel. The panel's k positions [0, KP) of every group, data and
// padding alike, are taken in the operand's order (group 0's k, then
// group 1's, ...) and cut into at most Workers contiguous ranges, one per
// worker; a range is a list of segments, a segment being one group's k
// range [k0, k1). Cuts inside a group fall on multiples of the granule: 2
// k for FP8 outputs and for FP16 lanes along X's rows (whose 32-bit loads
// hold two k), else 1; so a segment starts in X as aligned as its group
// (at a whole word for FP16 lanes along X's rows) and 8-byte aligned in Y
// (a k of a group is w*e bytes, a multiple of 8 but for FP8 A panels: 4,
// hence even cuts), and its stores are aligned as the group's. A segment
// runs its group's code (the same loops and issues per 4 elements as
// above, rpt on counts from a register) on its data k, [k0, min(k1,
// extent)), then writes its padding k, [max(k0, extent), k1), as zeros.
// Its table entry holds its X and Y pointers, the k loop's count, the
// odd last k's count (FP16 lanes along X's rows, odd extent), the
// pointer change between blocks of lanes (lanes along X's rows, more
// than one quad or pair), the padding count and a flag: whether another
// full-group segment follows. A worker packs its partial-group segment
// first when it has one, then its full-group segments in a loop.
//
// The cuts: for each worker count n in 2..Workers, the smallest bound on
// a worker's exact issue count with which the workers, each filling its
// range as far as the bound allows (by granules), cover the panel with n
// ranges. The split with the fewest cycles (Cost.Cycles, phase 0) runs
// when it saves more than 1/32 of the whole-group kernel's cycles and the
// panel has at most 32 groups (the table grows with the groups); else the
// whole-group kernel runs, as it always did. Choices are cached by shape.
type Pack struct {
	Kind      PanelKind
	Transpose bool
	R, C      int    // X as stored
	X         uint32 // X[r][c] at X + 4*(r*XStride + c)
	XStride   int    // elements, at least C
	Y         uint32
	KP        int // padded k extent: at least the operand's k extent; FP8: even
	Out       AMPType
	FP8       FP8Config // AMPFP8: FormatA, ScaleA and NaNOnOverflow
	Workers   int
	// InF16: X is FP16 (the zero value: FP32).
	InF16 bool
	// LanePadUnread: the partial group's lanes past the operand are
	// never read (an A panel's padded rows only make a product's padded
	// rows, which no reader reads), so the kernel does not clear them:
	// it stores whatever their registers hold (garbage, NaN included)
	// and saves the clearing issues. Lanes along X's rows (FP32 or FP16
	// input) and along X's columns from FP32; elsewhere the lanes are
	// cleared as before. The caller proves the condition (libs/lower's
	// padding-clear pass).
	LanePadUnread bool
}

// Pack registers (worker). Lanes along X's rows: the lanes of one quad
// (4 lanes) load through their own pointers P0..P3, each advancing by one
// element per k, and the quad's outputs go to W, advancing one k of the
// panel at a time. Lanes along X's columns: one pointer to the group's
// current k, the lanes at small offsets; output at Y.
const (
	pkW      = M0  // quad output (rows, 16 lanes)
	pkEntry  = M1  // table row (prologue only)
	pkX      = M2  // P0 (rows) or the group's current k (columns)
	pkY      = M3  // output: the group's start, then its padding
	pkN      = M4  // full groups left
	pkPart   = M5  // 1: this worker packs the partial group
	pkP1     = M6  // lane pointers (rows)
	pkP2     = M7  //
	pkP3     = M8  //
	pkT0     = M9  // FP8 word assembly
	pkT1     = M10 //
	pkCnt    = M11 // k extent, when not an rpti count
	pkPad    = M12 // k padding, when not an rpti count
	pkAdv    = M13 // pointer change between quads or groups, when not an imm16
	pkStride = M14 // X's row stride in bytes, when not an imm16

	// FP16 lanes along X's rows, in pairs: the two lanes' words, the
	// words of the two k, and 0xFFFF0000.
	pkWA   = M7
	pkWB   = M8
	pkWK   = M9
	pkTmp  = M10
	pkMask = M1
)

// packShape is a Pack's geometry.
type packShape struct {
	f16        bool  // X is FP16
	ex         int64 // X's element bytes
	rows       bool  // the lanes run along X's rows (else along its columns)
	w          int   // lanes per group: 4 (A) or 16 (B)
	g, kx      int   // extents of the group and k axes
	full, part int   // full groups, lanes of the partial group (0: none)
	groups     int   // full and partial
	e          int   // output element bytes
	sb         int64 // X's row stride in bytes

	// split marks the split kernel's code: its loops count from the
	// registers a segment's table entry loads; cnt, tail and pad are the
	// counts its cost is taken for (see loop, kLoop and pairLoop).
	split          bool
	cnt, tail, pad int
}

func (p Pack) shape() packShape {
	s := packShape{f16: p.InF16, ex: 4, rows: (p.Kind == APanel) != p.Transpose, w: 4}
	if p.InF16 {
		s.ex = 2
	}
	s.sb = s.ex * int64(p.XStride)
	if p.Kind == BPanel {
		s.w = 16
	}
	s.g, s.kx = p.C, p.R
	if s.rows {
		s.g, s.kx = p.R, p.C
	}
	s.full, s.part = s.g/s.w, s.g%s.w
	s.groups = s.full
	if s.part > 0 {
		s.groups++
	}
	s.e = p.Out.Size()
	return s
}

// advance is the constant of the pointer chain between quads and groups:
// rows: P0 = P3 + advance (from a quad's last row after its k loop to the
// next quad's first row); columns: the group base's change from after its
// k loop to the next group.
func (s packShape) advance() int64 {
	if s.rows {
		return s.sb - s.walk()
	}
	return s.ex*int64(s.w) - s.sb*int64(s.kx)
}

// walk is how far a lane pointer moves along X's row in a group (lanes
// along X's rows): 4 bytes per k, or per two k of FP16.
func (s packShape) walk() int64 {
	if s.f16 {
		return 4 * int64((s.kx+1)/2)
	}
	return 4 * int64(s.kx)
}

// kloop is the count of a group's k loop: k, or pairs of k for FP16 lanes
// along X's rows.
func (s packShape) kloop() int {
	if s.f16 && s.rows {
		return s.kx / 2
	}
	return s.kx
}

// chain is the register the lane pointers of the next group chain from
// (lanes along X's rows): P3, or P1 for FP16 lanes walked in pairs.
func (p Pack) chain(s packShape) MReg {
	if s.f16 && p.Out != AMPFP8 {
		return pkP1
	}
	return pkP3
}

// loop emits body as a zero-overhead loop: n times (Repeat, on the count
// register reg past rpti's counts) in the whole-group kernel; in the split
// kernel, rpt on reg, which the segment's entry loaded, counted split
// times for the cost (0 runs nothing).
func (s packShape) loop(b *Builder, n, split int, reg MReg, body func()) {
	if !s.split {
		b.Repeat(n, reg, body)
		return
	}
	end := b.Label()
	b.Rpt(reg, end)
	mult := b.mult
	b.mult *= int64(split)
	body()
	b.mult = mult
	b.Bind(end)
}

// kLoop emits body once per data k of a group (or segment).
func (s packShape) kLoop(b *Builder, body func()) { s.loop(b, s.kx, s.cnt, pkCnt, body) }

// pairLoop emits body(true) once per pair of data k, then body(false)
// for an odd last k: in the split kernel, a loop on the segment's tail
// count (0 or 1), present when the k extent is odd.
func (s packShape) pairLoop(b *Builder, body func(two bool)) {
	s.loop(b, s.kx/2, s.cnt, pkCnt, func() { body(true) })
	switch {
	case !s.split && s.kx%2 == 1:
		body(false)
	case s.split && s.tails():
		s.loop(b, 0, s.tail, pkTail, func() { body(false) })
	}
}

// tails reports whether a split segment may end with an odd k (FP16 lanes
// along X's rows, walked in pairs of k, with an odd k extent).
func (s packShape) tails() bool { return s.f16 && s.rows && s.kx%2 == 1 }

// blockStart sets P0 for block q of a group's lanes (a quad, or a pair)
// from the previous block's pointer chain: the constant advance in the
// whole-group kernel; in the split kernel, block 0's P0 is the segment's
// X (loaded from its entry) and later blocks add the segment's advance.
func (s packShape) blockStart(b *Builder, q int, chain MReg) {
	switch {
	case !s.split:
		addConst(b, pkX, chain, s.advance(), pkAdv)
	case q > 0:
		b.Add(pkX, chain, pkAdv)
	}
}

// nextGroup moves the pointer of lanes along X's columns to the next
// group (the whole-group kernel; a split segment loads its own).
func (s packShape) nextGroup(b *Builder) {
	if !s.split {
		addConst(b, pkX, pkX, s.advance(), pkAdv)
	}
}

func (p Pack) check() error {
	if err := checkWorkers(p.Workers); err != nil {
		return err
	}
	if p.Kind != APanel && p.Kind != BPanel {
		return fmt.Errorf("unknown panel kind %d", p.Kind)
	}
	if p.Out != AMPFP16 && p.Out != AMPFP8 && p.Out != VecFP32 {
		return fmt.Errorf("unknown output type %d", p.Out)
	}
	if p.R <= 0 || p.C <= 0 || p.XStride < p.C {
		return fmt.Errorf("matrix %dx%d with row stride %d: want positive sizes and a stride of at least C", p.R, p.C, p.XStride)
	}
	// Bounded so that every byte offset fits 32 bits.
	s := p.shape()
	if p.R > 1<<20 || p.XStride > 1<<20 || p.R*p.XStride > 1<<20 || p.KP > 1<<20 || int64(s.groups*s.w)*int64(p.KP) > 1<<20 {
		return fmt.Errorf("matrix %dx%d (stride %d, k extent %d) does not fit a tile", p.R, p.C, p.XStride, p.KP)
	}
	if p.KP < s.kx || p.Out == AMPFP8 && p.KP%2 != 0 {
		return fmt.Errorf("k extent %d: want at least %d (FP8: even)", p.KP, s.kx)
	}
	switch {
	case p.InF16 && !s.rows && p.XStride%4 != 0:
		return fmt.Errorf("row stride %d: want a multiple of 4 (FP16 lanes along the rows of X are read four at a time)", p.XStride)
	case p.InF16 && s.rows && p.XStride%2 != 0:
		return fmt.Errorf("row stride %d: want an even stride (FP16 lanes along the columns of X are read two k at a time)", p.XStride)
	case !s.rows && p.XStride%2 != 0:
		return fmt.Errorf("row stride %d: want an even stride (lanes along the rows of X are read in pairs)", p.XStride)
	}
	if p.Out == AMPFP8 {
		if err := p.FP8.check(); err != nil {
			return err
		}
	}
	return nil
}

// workers returns the workers that run and their first groups and group
// counts (the partial group included).
func (p Pack) workers(s packShape) (n int, start, count []int) {
	n = min(p.Workers, s.groups)
	start, count = split(s.groups, n)
	return n, start, count
}

// Bytes is the size of the panel Pack writes at Y (0 for an invalid Pack).
func (p Pack) Bytes() int {
	if p.check() != nil {
		return 0
	}
	s := p.shape()
	return s.groups * s.w * p.KP * s.e
}

// Cost is the kernel's exact cost. The whole-group kernel: worker w with
// n full groups issues the prologue, a brz, n times the group's code and
// its loop's addi and brnz, a brz, and the partial group's code when it
// has it. The split kernel: the prologue, then per segment its entry's
// loads, its code (loops at their counts) and its branch. Work[w] is 6 x
// that.
func (p Pack) Cost() (Cost, error) {
	if err := p.check(); err != nil {
		return Cost{}, fmt.Errorf("pack: %w", err)
	}
	if split := p.splitChoice(); split != nil {
		// A copy: the choice is cached.
		return Cost{Workers: split.cost.Workers, Work: slices.Clone(split.cost.Work)}, nil
	}
	return p.wholeCost(p.shape()), nil
}

// wholeCost is the whole-group kernel's cost (p checked).
func (p Pack) wholeCost(s packShape) Cost {
	pro := issues(func(b *Builder) { p.prologue(b, s, b.Label()) })
	group := issues(func(b *Builder) { p.group(b, s, s.w) }) + 2
	var part int64
	if s.part > 0 {
		part = issues(func(b *Builder) { p.group(b, s, s.part) })
	}
	workers, _, count := p.workers(s)
	c := Cost{Workers: workers, Work: make([]int64, workers)}
	for w := range c.Work {
		n, iss := count[w], pro+2
		if s.part > 0 && w == workers-1 {
			n--
			iss += part
		}
		c.Work[w] = Slots * (iss + int64(n)*group)
	}
	return c
}

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
	if s.f16 && s.rows && p.Out == AMPFP16 {
		b.LoadConst(pkMask, hiMask)
	}
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
	case VecFP32:
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
			b.F1(isa.CVTF8, AReg(l+1), AReg(l+2))
			b.Mfa(pkT0, AReg(l))
			b.Mfa(pkT1, AReg(l+1))
			b.Shli(pkT1, pkT1, 16)
			b.Or(pkT0, pkT0, pkT1)
			b.StmP(pkT0, out, inc(l+4 == n, 4))
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

// EmitPack emits the kernel at b's current position.
func EmitPack(b *Builder, p Pack) (Kernel, error) {
	cost, err := p.Cost()
	if err != nil {
		return Kernel{}, err
	}
	if err := p.checkMemory(b); err != nil {
		return Kernel{}, fmt.Errorf("pack: %w", err)
	}
	s := p.shape()
	k := Kernel{Entry: b.Here(), Cost: cost}
	if split := p.splitChoice(); split != nil {
		p.emitSplit(b, s, split)
		return k, b.Err()
	}
	table := b.Label()
	p.prologue(b, s, table)

	skip, loop, done := b.Label(), b.Label(), b.Label()
	b.Brz(pkN, skip)
	b.Bind(loop)
	p.group(b, s, s.w)
	b.Addi(pkN, pkN, -1)
	b.Brnz(pkN, loop)
	b.Bind(skip)
	b.Brz(pkPart, done)
	if s.part > 0 {
		p.group(b, s, s.part)
	}
	b.Bind(done)
	b.Exit()

	workers, start, count := p.workers(s)
	rows := make([][]uint32, workers)
	for w := range rows {
		g, n, part := start[w], count[w], uint32(0)
		if s.part > 0 && w == workers-1 {
			n, part = n-1, 1
		}
		x := int64(p.X)
		if s.rows {
			x += int64(g*s.w)*s.sb - s.advance()
		} else {
			x += s.ex * int64(g*s.w)
		}
		y := int64(p.Y) + int64(g*s.w*p.KP*s.e)
		rows[w] = []uint32{uint32(x), uint32(y), uint32(n), part}
	}
	emitTable(b, table, rows)
	return k, b.Err()
}

func (p Pack) checkMemory(b *Builder) error {
	a := b.Arch()
	if a == nil {
		return errors.New("builder has no architecture preset")
	}
	s := p.shape()
	x := buffer{"X", p.X, uint64(s.ex) * (uint64(p.R-1)*uint64(p.XStride) + uint64(p.C)), false}
	if s.f16 {
		x.size = (x.size + 3) &^ 3 // whole words are read
	}
	y := buffer{"Y", p.Y, uint64(p.Bytes()), true}
	// Lanes along X's rows load with ld32 only: 4-byte alignment does.
	xAlign := uint32(8)
	if s.rows {
		xAlign = 4
	}
	if err := checkBuffer(x, xAlign, a.Memory, "tile memory"); err != nil {
		return err
	}
	if err := checkBuffer(y, 8, a.Memory, "tile memory"); err != nil {
		return err
	}
	return checkDisjoint([]buffer{x, y}, false)
}

// EmulatePack returns the bytes Pack writes at Y for X's elements x
// (row-major with stride XStride), or nil when p is invalid, has FP16
// input (see EmulatePackBytes) or x is too short.
func EmulatePack(p Pack, x []float32) []byte {
	if p.InF16 {
		return nil
	}
	raw := make([]byte, 4*len(x))
	for i, v := range x {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(v))
	}
	return EmulatePackBytes(p, raw)
}

// EmulatePackBytes returns the bytes Pack writes at Y for the bytes x of X
// from its start (FP32, or FP16 with InF16, little-endian), or nil when p
// is invalid or x too short.
func EmulatePackBytes(p Pack, x []byte) []byte {
	s := p.shape()
	if p.check() != nil || int64(len(x)) < s.ex*int64((p.R-1)*p.XStride+p.C) {
		return nil
	}
	out := make([]byte, p.Bytes())
	mode := numfmt.Saturate
	if p.FP8.NaNOnOverflow {
		mode = numfmt.NaNOnOverflow
	}
	for gi := 0; gi < s.g; gi++ {
		for k := 0; k < s.kx; k++ {
			r, c := gi, k
			if !s.rows {
				r, c = k, gi
			}
			i := r*p.XStride + c
			pos := (gi/s.w)*s.w*p.KP + s.w*k + gi%s.w
			if s.f16 {
				h := binary.LittleEndian.Uint16(x[2*i:])
				switch p.Out {
				case VecFP32:
					binary.LittleEndian.PutUint32(out[4*pos:], numfmt.F16ToF32(h))
				case AMPFP16:
					binary.LittleEndian.PutUint16(out[2*pos:], h)
				case AMPFP8:
					out[pos] = numfmt.F16ToF8Dev(h, p.FP8.FormatA, p.FP8.ScaleA, mode)
				}
				continue
			}
			v := binary.LittleEndian.Uint32(x[4*i:])
			switch p.Out {
			case VecFP32:
				binary.LittleEndian.PutUint32(out[4*pos:], v)
			case AMPFP16:
				binary.LittleEndian.PutUint16(out[2*pos:], numfmt.F32ToF16(v))
			case AMPFP8:
				out[pos] = numfmt.F32ToF8Dev(v, p.FP8.FormatA, p.FP8.ScaleA, mode)
			}
		}
	}
	return out
}

// FP16 input.

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
	case VecFP32:
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
	case VecFP32:
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
		b.LdmP(pkWA, pkX, 4)
		if vb {
			b.LdmP(pkWB, pkP1, 4)
		}
		b.Andi(pkWK, pkWA, 0xFFFF) // k: the low halves
		if vb {
			b.Shli(pkTmp, pkWB, 16)
			b.Or(pkWK, pkWK, pkTmp)
		}
		if two {
			b.Shri(pkWA, pkWA, 16) // k+1: the high halves
			if vb {
				b.And(pkWB, pkWB, pkMask)
				b.Or(pkWA, pkWA, pkWB)
			}
			b.Stm(pkWA, pkW, step)
		}
		b.StmP(pkWK, pkW, inc)
		return
	}
	// VecFP32: $a2:3 = lane a at k, k+1; $a4:5 lane b.
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

// Split kernel (see Pack's doc).

// Split kernel registers: the pointer into the worker's segment entries
// and a segment's tail count (0 or 1: an odd last k, FP16 lanes along X's
// rows). Both are free in every group's code.
const (
	pkSeg  = M5
	pkTail = M4
)

// maxPackSplitGroups bounds the groups of a split Pack: its table holds
// an entry per segment, about one per group.
const maxPackSplitGroups = 32

// packSeg is a piece of a split Pack's work: the k range [k0, k1) of
// group g.
type packSeg struct{ g, k0, k1 int }

// packSplit is a split Pack: each worker's segments, in the operand's
// order, and the kernel's cost.
type packSplit struct {
	segs [][]packSeg
	cost Cost
}

// splitChoice returns the split kernel for p (checked), or nil when the
// whole-group kernel runs. Choices are cached by shape.
func (p Pack) splitChoice() *packSplit {
	key := p
	key.X, key.Y = 0, 0
	if c, ok := packChoices.Load(key); ok {
		return c.(*packSplit)
	}
	c, _ := packChoices.LoadOrStore(key, p.chooseSplit())
	return c.(*packSplit)
}

// packChoices caches splitChoice by the Pack without its addresses (the
// costs do not depend on them).
var packChoices sync.Map

// granule returns the k multiple a cut inside a group falls on.
func (p Pack) granule(s packShape) int {
	if p.Out == AMPFP8 || s.f16 && s.rows {
		return 2
	}
	return 1
}

// segAdv reports whether a segment entry holds the pointer change between
// blocks of lanes (lanes along X's rows, more than one block: quads, or
// pairs for FP16 to FP16 or FP32).
func (p Pack) segAdv(s packShape) bool {
	if !s.rows {
		return false
	}
	if s.f16 && p.Out != AMPFP8 {
		return s.w > 2
	}
	return s.w > 4
}

// segCounts returns the register counts of a segment over [k0, k1) (the
// k loop's count: data k, or pairs of them for FP16 lanes along X's
// rows; the odd last k; the padding k) and how far a lane pointer walks
// along X's row over its data (lanes along X's rows).
func (s packShape) segCounts(k0, k1 int) (cnt, tail, pad int, walk int64) {
	nd := max(min(k1, s.kx)-k0, 0)
	pad = max(k1-max(k0, s.kx), 0)
	cnt = nd
	if s.f16 && s.rows {
		cnt, tail = nd/2, nd%2
	}
	return cnt, tail, pad, 4 * int64(cnt+tail)
}

// both reports whether the panel has full groups and a partial one: the
// split kernel then has both kinds of segment code.
func (s packShape) both() bool { return s.full > 0 && s.part > 0 }

// splitPrologue loads the worker's segment pointer (and, with both kinds
// of segment, whether it has a partial-group segment) and the constants.
func (p Pack) splitPrologue(b *Builder, s packShape, table Label) {
	words := 1
	if s.both() {
		words = 2
	}
	emitTableBase(b, table, words, pkEntry)
	b.Ldm(pkSeg, pkEntry, 0)
	if s.both() {
		b.Ldm(pkCnt, pkEntry, 4)
	}
	if p.Out == AMPFP8 {
		emitSetFP8(b, p.FP8, pkT0)
	}
	loadBig(b, s.sb, pkStride)
	if s.f16 && s.rows && p.Out == AMPFP16 {
		b.LoadConst(pkMask, hiMask) // $m1: the table pointer is no longer needed
	}
	b.Amov(A14, AZero)
}

// segment emits a segment of lanes valid lanes: the loads of its entry
// (X, Y, the k loop's count, the tail count, the advance, the padding
// count), the group's code, and with flag the entry's last word, the
// next flag, into $m11.
func (p Pack) segment(b *Builder, s packShape, lanes int, flag bool) {
	b.LdmP(pkX, pkSeg, 4)
	b.LdmP(pkY, pkSeg, 4)
	b.LdmP(pkCnt, pkSeg, 4)
	if s.tails() {
		b.LdmP(pkTail, pkSeg, 4)
	}
	if p.segAdv(s) {
		b.LdmP(pkAdv, pkSeg, 4)
	}
	b.LdmP(pkPad, pkSeg, 4)
	p.group(b, s, lanes)
	if flag {
		b.LdmP(pkCnt, pkSeg, 4)
	}
}

// segEntry returns the words of segment sg's entry, without the flag.
func (p Pack) segEntry(s packShape, sg packSeg) []uint32 {
	cnt, tail, pad, walk := s.segCounts(sg.k0, sg.k1)
	x := int64(p.X) + s.ex*int64(sg.g*s.w) + int64(sg.k0)*s.sb
	if s.rows {
		x = int64(p.X) + int64(sg.g*s.w)*s.sb + s.ex*int64(sg.k0)
	}
	y := int64(p.Y) + int64((sg.g*s.w*p.KP+s.w*sg.k0)*s.e)
	words := []uint32{uint32(x), uint32(y), uint32(cnt)}
	if s.tails() {
		words = append(words, uint32(tail))
	}
	if p.segAdv(s) {
		words = append(words, uint32(s.sb-walk))
	}
	return append(words, uint32(pad))
}

// packSplitter holds the exact costs of a split Pack's code, in issues:
// a segment's cost is linear in its counts.
type packSplitter struct {
	p          Pack
	s          packShape
	q          int   // granule
	pro        int64 // prologue, and the first brz with both kinds
	full, part [4]int64
}

// splitter returns the costs of p's split kernel: for each kind of
// segment, its issues at zero counts with its branch, then the issues
// per count of each loop.
func (p Pack) splitter(s packShape) *packSplitter {
	s.split = true
	coef := func(lanes int, flag bool, branch int64) [4]int64 {
		at := func(cnt, tail, pad int) int64 {
			t := s
			t.cnt, t.tail, t.pad = cnt, tail, pad
			return issues(func(b *Builder) { p.segment(b, t, lanes, flag) })
		}
		c0 := at(0, 0, 0)
		return [4]int64{c0 + branch, at(1, 0, 0) - c0, at(0, 1, 0) - c0, at(0, 0, 1) - c0}
	}
	sp := &packSplitter{p: p, s: s, q: p.granule(s)}
	sp.pro = issues(func(b *Builder) { p.splitPrologue(b, s, b.Label()) })
	if s.both() {
		sp.pro++
	}
	// A full segment closes with brnz, a partial one before full ones
	// with brz.
	sp.full = coef(s.w, true, 1)
	if s.part > 0 {
		var brz int64
		if s.both() {
			brz = 1
		}
		sp.part = coef(s.part, s.both(), brz)
	}
	return sp
}

// seg returns the issues of segment [k0, k1) of group g with its branch.
func (sp *packSplitter) seg(g, k0, k1 int) int64 {
	c := sp.full
	if sp.s.part > 0 && g == sp.s.groups-1 {
		c = sp.part
	}
	cnt, tail, pad, _ := sp.s.segCounts(k0, k1)
	return c[0] + int64(cnt)*c[1] + int64(tail)*c[2] + int64(pad)*c[3]
}

// fill cuts the panel into at most n ranges, each worker's range as long
// as bound (issues) allows; nil when they do not cover it.
func (sp *packSplitter) fill(n int, bound int64) [][]packSeg {
	s, kp, q := sp.s, sp.p.KP, sp.q
	g, k := 0, 0
	var out [][]packSeg
	for w := 0; w < n && g < s.groups; w++ {
		work := sp.pro
		var segs []packSeg
		for g < s.groups {
			if c := sp.seg(g, k, kp); work+c <= bound {
				work += c
				segs = append(segs, packSeg{g, k, kp})
				g, k = g+1, 0
				continue
			}
			// The longest [k, m*q) that fits, m*q < KP.
			lo, hi := k/q, (kp-1)/q
			for lo < hi {
				m := lo + (hi-lo+1)/2
				if work+sp.seg(g, k, m*q) <= bound {
					lo = m
				} else {
					hi = m - 1
				}
			}
			if lo*q > k {
				segs = append(segs, packSeg{g, k, lo * q})
				k = lo * q
			}
			break
		}
		if len(segs) == 0 {
			return nil
		}
		out = append(out, segs)
	}
	if g < s.groups {
		return nil
	}
	return out
}

// cost returns the split kernel's cost for the worker ranges segs.
func (sp *packSplitter) cost(segs [][]packSeg) Cost {
	c := Cost{Workers: len(segs), Work: make([]int64, len(segs))}
	for w, ws := range segs {
		iss := sp.pro
		for _, sg := range ws {
			iss += sp.seg(sg.g, sg.k0, sg.k1)
		}
		c.Work[w] = Slots * iss
	}
	return c
}

// chooseSplit returns the split kernel with the fewest cycles when it
// beats the whole-group kernel (p checked), else nil.
func (p Pack) chooseSplit() *packSplit {
	s := p.shape()
	if p.Workers < 2 || s.groups > maxPackSplitGroups {
		return nil
	}
	sp := p.splitter(s)
	total := sp.pro
	for g := 0; g < s.groups; g++ {
		total += sp.seg(g, 0, p.KP)
	}
	// A split must save more than 1/32 of the whole-group kernel's
	// cycles: its table and segment loads cost memory, and gains below
	// that come from shifting a few k against the launch's stagger.
	var best *packSplit
	whole := p.wholeCost(s).Cycles()
	bestCycles := whole - whole/32
	for n := 2; n <= p.Workers; n++ {
		// The smallest bound with which n ranges cover the panel.
		lo, hi := int64(0), total
		for lo+1 < hi {
			mid := lo + (hi-lo)/2
			if sp.fill(n, mid) != nil {
				hi = mid
			} else {
				lo = mid
			}
		}
		segs := sp.fill(n, hi)
		cost := sp.cost(segs)
		if c := cost.Cycles(); c < bestCycles {
			best, bestCycles = &packSplit{segs: segs, cost: cost}, c
		}
	}
	return best
}

// emitSplit emits the split kernel: the partial-group segment first when
// the worker has one, then the full-group segments in a loop.
func (p Pack) emitSplit(b *Builder, s packShape, split *packSplit) {
	s.split = true
	table := b.Label()
	p.splitPrologue(b, s, table)
	loop, done := b.Label(), b.Label()
	if s.part > 0 {
		if s.both() {
			b.Brz(pkCnt, loop)
		}
		p.segment(b, s, s.part, s.both())
		if s.both() {
			b.Brz(pkCnt, done)
		}
	}
	if s.full > 0 {
		b.Bind(loop)
		p.segment(b, s, s.w, true)
		b.Brnz(pkCnt, loop)
	}
	b.Bind(done)
	b.Exit()

	// The table: per worker its entries' address (and whether it has a
	// partial-group segment), then each worker's entries.
	b.Bind(table)
	lists := make([][]uint32, len(split.segs))
	listsAt := b.Label() // bound after the per-worker words
	at := uint32(0)      // the worker's list, from listsAt
	for w, segs := range split.segs {
		var part, full []packSeg
		for _, sg := range segs {
			if s.part > 0 && sg.g == s.groups-1 {
				part = append(part, sg)
			} else {
				full = append(full, sg)
			}
		}
		var l []uint32
		for _, sg := range part {
			l = append(l, p.segEntry(s, sg)...)
			if s.both() {
				l = append(l, boolWord(len(full) > 0))
			}
		}
		for i, sg := range full {
			l = append(l, p.segEntry(s, sg)...)
			l = append(l, boolWord(i+1 < len(full)))
		}
		b.WordLabel(listsAt, at)
		if s.both() {
			b.Word(boolWord(len(part) > 0))
		}
		lists[w] = l
		at += uint32(4 * len(l))
	}
	b.Bind(listsAt)
	for _, l := range lists {
		for _, v := range l {
			b.Word(v)
		}
	}
}

// boolWord returns a table flag word.
func boolWord(v bool) uint32 {
	if v {
		return 1
	}
	return 0
}
