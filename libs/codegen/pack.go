package codegen

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

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
// AMPFP32 (a copy). Each element converts as in the Cast kernel (the same
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
// along X's rows (one ld32 per element, 4 lanes at a time) 6 / 7 / 7;
// lanes along X's columns (ld64 pairs) 4 / 5 / 5 for APanel, 4.25 / 5.25 /
// 5.25 for BPanel (FP8: f32v2tof8 and f32v2tof8hi make each word of four,
// one st32 stores it). Cost counts the emitted code exactly.
//
// FP16 input (InF16): X is an R x C row-major FP16 matrix, (r, c) at
// X + 2*(r*XStride + c). Out AMPFP16 copies each element's bits (NaN
// payloads included), AMPFP32 widens it exactly (f16v2tof32, as Cast),
// AMPFP8 converts it with f16v4tof8 (FP8 as above). Alignment: lanes
// along X's columns read four values with one ld64: X 8-byte aligned and
// XStride a multiple of 4; lanes along X's rows read two k of a lane with
// one 32-bit load: X 4-byte aligned, XStride even. A partial group reads
// the word holding its last lane, and an odd k extent the word holding
// its last k (2 bytes past X's row): the words must lie in tile memory.
// Issues per 4 elements: lanes along X's columns 2 / 5 / 3 (FP16 / FP32 /
// FP8 outputs: ld64, then st64, or two f16v2tof32 and two st64, or
// f16v4tof8 and st32; the pointer moves with the last load); lanes along
// X's rows 6 / 8 / 11: pairs of lanes walk two k at a time, a 32-bit
// load per lane holding both k; FP16 outputs interleave the halves in $m
// registers (two ldm, sort16lo for the first k, sort16hi for the second,
// two stm), FP32 outputs convert each word (ld32, f16v2tof32) and store each
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

	// FP16 lanes along X's rows, in pairs: the two lanes' words (lane
	// a's then holds the second k's word), the first k's word.
	pkWA = M7
	pkWB = M8
	pkWK = M9
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
	if p.Out != AMPFP16 && p.Out != AMPFP8 && p.Out != AMPFP32 {
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
				case AMPFP32:
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
			case AMPFP32:
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
