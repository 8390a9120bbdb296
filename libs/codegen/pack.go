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

// Pack converts an R x C row-major FP32 matrix X (row stride XStride
// elements) into a panel layout at Y with element type Out:
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
// VecFP32 (a copy). Each element converts as the Cast kernel's (the same
// instructions).
//
// Alignment: X and Y 8-byte aligned; when the group axis runs along X's
// rows, 3 x 4 x XStride must fit a signed 16-bit offset; when it runs
// along X's columns, XStride is even and 4 x XStride fits one. Y must not
// overlap X.
//
// Work: the groups (panels), split over the workers like MatMul's items;
// the last group may be partial (fewer lanes, padded with zeros).
type Pack struct {
	Kind      PanelKind
	Transpose bool
	R, C      int
	X         uint32
	XStride   int
	Y         uint32
	KP        int
	Out       AMPType
	FP8       FP8Config
	Workers   int
}

// Pack registers (worker).
const (
	pkEntry = M1
	pkX     = M2 // the current group's base (lane 0, k)
	pkY     = M3 // output, running
	pkN     = M4 // full groups left
	pkPart  = M5 // 1: this worker packs the partial group
	pkB1    = M6 // lane bases 4, 8, 12 (B groups along X's rows)
	pkB2    = M7
	pkB3    = M8
	pkT0    = M9  // FP8 word assembly
	pkT1    = M10 // FP8 word assembly
	pkCnt   = M11 // k count for rpt, when not an rpti count
	pkPad   = M12 // pad count for rpt, when not an rpti count
	pkAdv   = M13 // the base's advance from one group to the next
	pkTmp   = M14
)

// packShape is a Pack's geometry.
type packShape struct {
	groupRows  bool  // the group axis runs along X's rows
	w          int   // lanes per group: 4 (A) or 16 (B)
	g, kx      int   // extents of the group and k axes
	full, part int   // full groups, lanes of the partial group (0: none)
	e          int   // output element bytes
	sb         int64 // X's row stride in bytes
	workers    int
	start, n   []int // per worker: first group and group count (partial included)
}

func (p Pack) shape() packShape {
	s := packShape{groupRows: (p.Kind == APanel) != p.Transpose, w: 4, sb: 4 * int64(p.XStride)}
	if p.Kind == BPanel {
		s.w = 16
	}
	s.g, s.kx = p.C, p.R
	if s.groupRows {
		s.g, s.kx = p.R, p.C
	}
	s.full, s.part = s.g/s.w, s.g%s.w
	groups := s.full
	if s.part > 0 {
		groups++
	}
	s.e = int(p.Out.size())
	if p.Out == VecFP32 {
		s.e = 4
	}
	s.workers = min(p.Workers, max(groups, 1))
	s.start, s.n = split(groups, s.workers)
	return s
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
	if int64(p.R)*int64(p.XStride) > 1<<20 || int64(p.KP)*int64(max(p.R, p.C)) > 1<<20 {
		return fmt.Errorf("matrix %dx%d (stride %d, k %d) does not fit a tile", p.R, p.C, p.XStride, p.KP)
	}
	s := p.shape()
	if p.KP < s.kx || p.Out == AMPFP8 && p.KP%2 != 0 {
		return fmt.Errorf("k extent %d: want at least %d (FP8: even)", p.KP, s.kx)
	}
	if p.X%8 != 0 || p.Y%8 != 0 {
		return fmt.Errorf("X %#x and Y %#x: want 8-byte alignment", p.X, p.Y)
	}
	if s.groupRows && !fitsImm16(3*s.sb) {
		return fmt.Errorf("row stride %d: 3 rows must fit a 16-bit offset", p.XStride)
	}
	if !s.groupRows && (p.XStride%2 != 0 || !fitsImm16(s.sb)) {
		return fmt.Errorf("row stride %d: want an even stride whose bytes fit a 16-bit offset", p.XStride)
	}
	if p.Out == AMPFP8 {
		if err := p.FP8.check(); err != nil {
			return err
		}
	}
	return nil
}

// Bytes is the size of the panel Pack writes at Y.
func (p Pack) Bytes() int {
	s := p.shape()
	groups := (s.g + s.w - 1) / s.w
	return groups * s.w * p.KP * s.e
}

// Cost is the kernel's exact cost.
func (p Pack) Cost() (Cost, error) {
	if err := p.check(); err != nil {
		return Cost{}, fmt.Errorf("pack: %w", err)
	}
	s := p.shape()
	pro := issues(func(b *Builder) { p.prologue(b, s, b.Label()) })
	group := issues(func(b *Builder) { p.group(b, s, s.w) }) + 2 // + addi, brnz
	c := Cost{Workers: s.workers, Work: make([]int64, s.workers)}
	for w := range c.Work {
		n, part := s.n[w], 0
		if s.part > 0 && w == s.workers-1 {
			n, part = n-1, 1
		}
		iss := pro + 1 + int64(n)*group + 1 // brz, the loop, brz (Work stops before exit)
		if part > 0 {
			iss += issues(func(b *Builder) { p.group(b, s, s.part) })
		}
		c.Work[w] = Slots * iss
	}
	return c, nil
}

// prologue loads the table row and the constants.
func (p Pack) prologue(b *Builder, s packShape, table Label) {
	emitTableBase(b, table, 4, pkEntry)
	b.Ldm(pkX, pkEntry, 0)
	b.Ldm(pkY, pkEntry, 4)
	b.Ldm(pkN, pkEntry, 8)
	b.Ldm(pkPart, pkEntry, 12)
	if p.Out == AMPFP8 {
		emitSetFP8(b, p.FP8, pkTmp)
	}
	if s.kx > MaxRptiCount {
		b.LoadConst(pkCnt, uint32(s.kx))
	}
	if pad := p.KP - s.kx; pad > MaxRptiCount {
		b.LoadConst(pkPad, uint32(pad))
	}
	loadBig(b, p.advance(s), pkAdv)
	b.Amov(A14, AZero) // A14:AZero is a zero pair for the padding
}

// advance is the bytes from a group's base after its k loop to the next
// group's base.
func (p Pack) advance(s packShape) int64 {
	if s.groupRows {
		return int64(s.w)*s.sb - 4*int64(s.kx)
	}
	return 4*int64(s.w) - s.sb*int64(s.kx)
}

// group emits one group of lanes lanes (the rest zero): its k loop, its
// padding loop and the base's advance.
func (p Pack) group(b *Builder, s packShape, lanes int) {
	if s.groupRows {
		for q, r := range []MReg{pkB1, pkB2, pkB3} {
			if 4*(q+1) < lanes {
				addConst(b, r, pkX, 4*int64(q+1)*s.sb, pkTmp)
			}
		}
	}
	b.Repeat(s.kx, pkCnt, func() { p.step(b, s, lanes) })
	b.Repeat(p.KP-s.kx, pkPad, func() { p.zeros(b, s) })
	addConst(b, pkX, pkX, p.advance(s), pkAdv)
}

// step emits one k of a group: load the lanes, convert, store, in
// chunks of 8 lanes; the base advances by one k with the last load.
func (p Pack) step(b *Builder, s packShape, lanes int) {
	chunks := (s.w + 7) / 8
	for ch := 0; ch < chunks; ch++ {
		n := min(8, s.w-8*ch)
		last := ch == chunks-1
		for l := 0; l < n; l++ {
			lane := 8*ch + l
			if lane >= lanes {
				b.Amov(AReg(l), AZero)
			}
		}
		if s.groupRows {
			// Lane i at base[i/4] + (i%4)*sb; lane 4q loads last from
			// its base with the k advance... only base 0 advances; the
			// others are recomputed per group, so they advance too.
			for l := 0; l < n; l++ {
				lane := 8*ch + l
				if lane >= lanes || lane%4 == 0 {
					continue
				}
				b.Ld32(AReg(l), laneBase(lane/4), int32(int64(lane%4)*s.sb))
			}
			for l := 0; l < n; l += 4 {
				lane := 8*ch + l
				if lane >= lanes {
					continue
				}
				b.Ld32P(AReg(l), laneBase(lane/4), 4)
			}
		} else {
			// Lanes contiguous in X's row: pairs (a single last lane
			// when the valid lanes are odd: never read past them), then
			// the k advance: lane 0's load when there is one chunk, else
			// an addi after the last chunk's loads.
			v := min(max(lanes-8*ch, 0), n)
			post := chunks == 1 && v > 0
			for l := 0; l < v; l += 2 {
				if post && l == 0 {
					continue // loaded last, with the advance
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
			case last:
				b.Addi(pkX, pkX, int32(s.sb))
			}
		}
		p.store(b, n)
	}
}

func laneBase(q int) MReg { return [...]MReg{pkX, pkB1, pkB2, pkB3}[q] }

// store converts n lanes in $a0.. and stores them at Y, advancing it.
func (p Pack) store(b *Builder, n int) {
	switch p.Out {
	case VecFP32:
		for l := 0; l < n; l += 2 {
			b.St64P(AReg(l), pkY, 8)
		}
	case AMPFP16:
		for l := 0; l < n; l += 4 {
			b.F1(isa.CVTFH, AReg(l), AReg(l))
			b.F1(isa.CVTFH, AReg(l+1), AReg(l+2))
			b.St64P(AReg(l), pkY, 8)
		}
	case AMPFP8:
		for l := 0; l < n; l += 4 {
			b.F1(isa.CVTF8, AReg(l), AReg(l))
			b.F1(isa.CVTF8, AReg(l+1), AReg(l+2))
			b.Mfa(pkT0, AReg(l))
			b.Mfa(pkT1, AReg(l+1))
			b.Shli(pkT1, pkT1, 16)
			b.Or(pkT0, pkT0, pkT1)
			b.StmP(pkT0, pkY, 4)
		}
	}
}

// zeros stores one k of padding.
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

	rows := make([][]uint32, s.workers)
	for w := range rows {
		g, n, part := s.start[w], s.n[w], uint32(0)
		if s.part > 0 && w == s.workers-1 {
			n, part = n-1, 1
		}
		x := int64(p.X)
		if s.groupRows {
			x += int64(g*s.w) * s.sb
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
	if err := checkBuffer(x, 8, a.Memory, "tile memory"); err != nil {
		return err
	}
	if err := checkBuffer(y, 8, a.Memory, "tile memory"); err != nil {
		return err
	}
	return checkDisjoint([]buffer{x, y}, false)
}

// EmulatePack returns the bytes Pack writes at Y for X's elements x
// (row-major with stride XStride).
func EmulatePack(p Pack, x []float32) []byte {
	s := p.shape()
	out := make([]byte, p.Bytes())
	mode := numfmt.Saturate
	if p.FP8.NaNOnOverflow {
		mode = numfmt.NaNOnOverflow
	}
	for gi := 0; gi < s.g; gi++ {
		for k := 0; k < s.kx; k++ {
			r, c := gi, k
			if !s.groupRows {
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
