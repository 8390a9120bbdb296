package codegen

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

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
// (fewer lanes, the rest written 0): the last worker packs it.
//
// Loops per k, issues per 4 elements (FP32 / FP16 / FP8 outputs): lanes
// along X's rows (one ld32 per element, 4 lanes at a time) 6 / 7 / 11;
// lanes along X's columns (ld64 pairs) 4 / 5 / 9 for APanel, 4.25 / 5.25 /
// 9.25 for BPanel. Cost counts the emitted code exactly.
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
)

// packShape is a Pack's geometry.
type packShape struct {
	rows       bool  // the lanes run along X's rows (else along its columns)
	w          int   // lanes per group: 4 (A) or 16 (B)
	g, kx      int   // extents of the group and k axes
	full, part int   // full groups, lanes of the partial group (0: none)
	groups     int   // full and partial
	e          int   // output element bytes
	sb         int64 // X's row stride in bytes
}

func (p Pack) shape() packShape {
	s := packShape{rows: (p.Kind == APanel) != p.Transpose, w: 4, sb: 4 * int64(p.XStride)}
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
		return s.sb - 4*int64(s.kx)
	}
	return 4*int64(s.w) - s.sb*int64(s.kx)
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
	if !s.rows && p.XStride%2 != 0 {
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

// Cost is the kernel's exact cost: worker w with n full groups issues the
// prologue, a brz, n times the group's code and its loop's addi and brnz,
// a brz, and the partial group's code when it has it; Work[w] is 6 x
// that.
func (p Pack) Cost() (Cost, error) {
	if err := p.check(); err != nil {
		return Cost{}, fmt.Errorf("pack: %w", err)
	}
	s := p.shape()
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
	return c, nil
}

// prologue loads the table row and the constants.
func (p Pack) prologue(b *Builder, s packShape, table Label) {
	emitTableBase(b, table, 4, pkEntry)
	if s.rows {
		b.Ldm(pkP3, pkEntry, 0)
	} else {
		b.Ldm(pkX, pkEntry, 0)
	}
	b.Ldm(pkY, pkEntry, 4)
	b.Ldm(pkN, pkEntry, 8)
	b.Ldm(pkPart, pkEntry, 12)
	if p.Out == AMPFP8 {
		emitSetFP8(b, p.FP8, pkT0)
	}
	if s.kx > MaxRptiCount {
		b.LoadConst(pkCnt, uint32(s.kx))
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
	if s.rows {
		p.rowsGroup(b, s, lanes)
	} else {
		p.colsGroup(b, s, lanes)
	}
	b.Repeat(p.KP-s.kx, pkPad, func() { p.zeros(b, s) })
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
		addConst(b, pkX, pkP3, s.advance(), pkAdv)
		for i := 1; i < 4; i++ {
			addConst(b, ptr[i], ptr[i-1], s.sb, pkStride)
		}
		if quads > 1 {
			b.Addi(pkW, pkY, int32(4*q*s.e))
		}
		valid := min(max(lanes-4*q, 0), 4)
		for l := valid; l < 4; l++ {
			b.Amov(AReg(l), AZero) // conversions keep zero lanes zero
		}
		b.Repeat(s.kx, pkCnt, func() {
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
	for l := lanes; l < min(8, s.w); l++ {
		b.Amov(AReg(l), AZero)
	}
	b.Repeat(s.kx, pkCnt, func() {
		for ch := 0; ch < chunks; ch++ {
			n := min(8, s.w-8*ch)
			v := min(max(lanes-8*ch, 0), n)
			if ch > 0 {
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
	addConst(b, pkX, pkX, s.advance(), pkAdv)
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
			x += int64(4 * g * s.w)
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
	x := buffer{"X", p.X, 4 * (uint64(p.R-1)*uint64(p.XStride) + uint64(p.C)), false}
	y := buffer{"Y", p.Y, uint64(p.Bytes()), true}
	// Lanes along X's rows load with ld32 only: 4-byte alignment does.
	xAlign := uint32(8)
	if p.shape().rows {
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
// (row-major with stride XStride), or nil when p is invalid or x too
// short.
func EmulatePack(p Pack, x []float32) []byte {
	if p.check() != nil || len(x) < (p.R-1)*p.XStride+p.C {
		return nil
	}
	s := p.shape()
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
			v := math.Float32bits(x[r*p.XStride+c])
			pos := (gi/s.w)*s.w*p.KP + s.w*k + gi%s.w
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
