package codegen

import (
	"errors"
	"fmt"

	"ipu.local/libs/isa"
)

// MatMulF32 is C[M][N] (FP32) = A[M][K] x B[K][N] with FP32 inputs on the
// vector unit (f32v2fma), or C += A x B with Accumulate: the FP32
// semantics the AMP's FP16 inputs cannot give.
//
// # Layouts
//
// Exactly MatMul's, with 4-byte elements: the caller pads M to a multiple
// of 4 and N to a multiple of 16 and the kernel computes the padded
// product. A is in the A-panel layout, B in the B-panel layout:
//
//	A[i][k] at A + 4*((i/4)*4*K + 4*k + i%4)
//	B[k][j] at B + 4*((j/16)*16*K + 16*k + j%16)
//	C[i][j] at C + 4*(i*CStride + j)
//
// CStride is a multiple of 4 of at least N.
//
// Alignment: A is 4-byte aligned anywhere in tile memory (ld32); B is
// 16-byte aligned in interleaved memory (ld128); C is 16-byte aligned in
// interleaved memory (ld128, st128). MatMul's placement (A 8-aligned, B
// 32-aligned) satisfies this. A and B may share a memory element (no
// instruction reads both). C must not overlap A or B.
//
// # Arithmetic
//
// For each element, acc starts at +0 (at C[i][j] with Accumulate) and for
// k = 0, 1, ..., K-1 in order
//
//	acc = RN32(acc + A[i][k]*B[k][j])
//
// with the exact product and one FP32 rounding per k (f32v2fma, round to
// nearest even, subnormals kept). C[i][j] = acc; a NaN is the canonical
// NaN 0x7fc00000. EmulateMatMulF32 reproduces it.
//
// # Work split and inner loop
//
// The work items are MatMul's: (row group g, column panel p) pairs,
// numbered g*(N/16) + p, in contiguous ranges per worker (the first items
// mod workers ranges one longer); min(Workers, items) workers run. An
// item is 8 register tiles of 1 row x 8 columns (4 rows, 2 halves of the
// panel); one k step of a tile is
//
//	ld32  $a12, [A]            broadcast A[i][k] ...
//	ld32  $a13, [A+=16]        ... into a pair
//	ld128 $a8, [B+=16]         B[k][j..j+3]
//	f32v2fma $a0, $a12, $a8
//	f32v2fma $a2, $a12, $a10
//	ld128 $a8, [B+=48]         B[k][j+4..j+7]
//	f32v2fma $a4, $a12, $a8
//	f32v2fma $a6, $a12, $a10
//
// 8 MACs in 8 issues: 1 MAC per cycle per tile once 6 workers run (an
// instruction per cycle, f32v2fma's 2 MACs being the ceiling).
type MatMulF32 struct {
	M, K, N    int
	A, B, C    uint32
	CStride    int // elements between rows of C
	Accumulate bool
	Workers    int // 1..6
}

// FP32 matrix kernel register use (worker).
const (
	fmEntry = M1  // this worker's table row
	fmAg    = M2  // A panel of the current row group
	fmBp    = M3  // B panel of the current item
	fmC     = M4  // C of the current item
	fmA     = M5  // A, running
	fmRem   = M6  // panels left in the row group
	fmCnt   = M7  // items left
	fmRow   = M8  // C of rows 1..3
	fmRS    = M9  // row stride in bytes, when it is not an imm16
	fmJump  = M10 // C adjustment at a group change, when not an imm16
	fmSteps = M11 // K, when it is not an rpti count
	fmB     = M12 // B, running

	fmAcc  = A0  // accumulators $a0..$a7: C[i][j..j+7]
	fmY    = A8  // B[k][4 columns], $a8..$a11
	fmX    = A12 // A[i][k] broadcast to a pair
	fmZero = A14 // with $azero the pair +0, +0 (workers start with zero registers)
)

// Issues of the FP32 matrix kernel's parts.
const (
	fmBody     = 8     // one k step of a register tile
	fmTileZero = 9     // tile overhead: 4 f32v2add (zero), 2 addi, rpti, 2 st128
	fmTileAcc  = 7     // with Accumulate: 2 ld128 instead of the zeroing
	fmItemRest = 3 + 6 // row addresses; item and group bookkeeping
)

func (p MatMulF32) check() error {
	if err := checkWorkers(p.Workers); err != nil {
		return err
	}
	if p.M <= 0 || p.M%4 != 0 {
		return fmt.Errorf("M %d: want a positive multiple of 4 (pad the rows)", p.M)
	}
	if p.N <= 0 || p.N%16 != 0 {
		return fmt.Errorf("N %d: want a positive multiple of 16 (pad the columns)", p.N)
	}
	if p.K <= 0 {
		return fmt.Errorf("K %d: want a positive count", p.K)
	}
	if p.CStride < p.N || p.CStride%4 != 0 {
		return fmt.Errorf("C row stride %d: want a multiple of 4 of at least N=%d", p.CStride, p.N)
	}
	// Sizes bounded so that every byte offset fits 32 bits.
	if int64(p.M)*int64(p.K) > 1<<20 || int64(p.N)*int64(p.K) > 1<<20 || int64(p.M)*int64(p.CStride) > 1<<20 {
		return fmt.Errorf("matrix of %dx%dx%d (C stride %d) does not fit a tile", p.M, p.K, p.N, p.CStride)
	}
	return nil
}

// shape returns the derived sizes (MatMul's, with 4-byte elements).
func (p MatMulF32) shape() mmShape {
	s := mmShape{groups: p.M / 4, panels: p.N / 16}
	s.items = s.groups * s.panels
	s.steps = int64(p.K)
	s.groupBytes = 16 * int64(p.K)
	s.panelBytes = 64 * int64(p.K)
	s.bStride = s.panelBytes
	s.rowBytes = 4 * int64(p.CStride)
	s.panelC = 64
	s.jump = 4*s.rowBytes - s.panelC*int64(s.panels)
	s.workers = min(p.Workers, s.items)
	s.start, s.count = split(s.items, s.workers)
	return s
}

// prologue returns the issues before the first item: table lookup and
// loads, and the constants that do not fit their immediates.
func (p MatMulF32) prologue(s mmShape) int64 {
	n := int64(tableBaseIssues+5) + loadBigIssues(s.rowBytes) + loadBigIssues(s.jump)
	if s.steps > MaxRptiCount {
		n += int64(ConstLen(uint32(s.steps)))
	}
	return n
}

// item returns the issues of one item, group change excluded.
func (p MatMulF32) item(s mmShape) int64 {
	tile := fmBody*s.steps + fmTileZero
	if p.Accumulate {
		tile = fmBody*s.steps + fmTileAcc
	}
	return 8*tile + fmItemRest
}

// wrap returns the issues of a row group change.
func (p MatMulF32) wrap(s mmShape) int64 {
	return int64(ConstLen(uint32(s.panels))+ConstLen(p.B)) + 2
}

// Cost returns the kernel's cost (checking the shape, not the addresses).
//
// Worker w with items [s, s+c) issues
//
//	4 + 5                      table lookup and loads
//	+ big constants            ConstLen of each of: row stride in bytes,
//	                           group jump, K, that do not fit their
//	                           immediate (imm16, imm16, rpti count 4095)
//	+ c * (64*K + 81)          per item (64*K + 65 with Accumulate)
//	+ g * (ConstLen(N/16) + ConstLen(B) + 2)
//
// cycles' worth of instructions before its exit, g = floor((s+c)/P) -
// floor(s/P) the row group changes (P = N/16), and Work[w] = 6 x that.
func (p MatMulF32) Cost() (Cost, error) {
	if err := p.check(); err != nil {
		return Cost{}, fmt.Errorf("matmulf32: %w", err)
	}
	s := p.shape()
	pro, item, wrap := p.prologue(s), p.item(s), p.wrap(s)
	c := Cost{Workers: s.workers, Work: make([]int64, s.workers)}
	P := s.panels
	for w := range c.Work {
		st, n := s.start[w], s.count[w]
		wraps := int64((st+n)/P - st/P)
		c.Work[w] = Slots * (pro + int64(n)*item + wraps*wrap)
	}
	return c, nil
}

// CodeBytes returns the bytes EmitMatMulF32 emits for p: code and
// per-worker table (checking the shape, not the addresses).
func (p MatMulF32) CodeBytes() (int64, error) {
	if err := p.check(); err != nil {
		return 0, fmt.Errorf("matmulf32: %w", err)
	}
	s := p.shape()
	// Each instruction appears once: the item with one k step, the group
	// change, exit, then 5 table words per worker.
	once := s
	once.steps = 1
	words := p.prologue(s) + p.item(once) + p.wrap(s) + 1 + 5*int64(s.workers)
	return 4 * words, nil
}

// EmitMatMulF32 emits the kernel at b's current position.
func EmitMatMulF32(b *Builder, p MatMulF32) (Kernel, error) {
	cost, err := p.Cost()
	if err != nil {
		return Kernel{}, err
	}
	if err := p.checkMemory(b); err != nil {
		return Kernel{}, fmt.Errorf("matmulf32: %w", err)
	}
	s := p.shape()
	k := Kernel{Entry: b.Here(), Cost: cost}
	table := b.Label()
	emitTableBase(b, table, 5, fmEntry)
	b.Ldm(fmAg, fmEntry, 0)
	b.Ldm(fmBp, fmEntry, 4)
	b.Ldm(fmC, fmEntry, 8)
	b.Ldm(fmRem, fmEntry, 12)
	b.Ldm(fmCnt, fmEntry, 16)
	loadBig(b, s.rowBytes, fmRS)
	loadBig(b, s.jump, fmJump)
	if s.steps > MaxRptiCount {
		b.LoadConst(fmSteps, uint32(s.steps))
	}

	item := b.Here()
	for r := 0; r < 4; r++ {
		row := fmC
		if r > 0 {
			prev := fmRow
			if r == 1 {
				prev = fmC
			}
			addConst(b, fmRow, prev, s.rowBytes, fmRS)
			row = fmRow
		}
		for h := int32(0); h < 2; h++ {
			p.emitTile(b, s, row, int32(4*r), 32*h)
		}
	}
	// The last tile (row 3, columns 8..15) left A at the group's A + 12 +
	// 16K (the next group's + 12) and B at the panel's B + 32 + 64K (the
	// next panel's + 32).
	b.Addi(fmC, fmC, 64)
	b.Addi(fmBp, fmB, -32)
	b.Addi(fmRem, fmRem, -1)
	cont := b.Label()
	b.Brnz(fmRem, cont)
	b.LoadConst(fmRem, uint32(s.panels))
	b.Addi(fmAg, fmA, -12)
	b.LoadAddr(fmBp, p.B)
	addConst(b, fmC, fmC, s.jump, fmJump)
	b.Bind(cont)
	b.Addi(fmCnt, fmCnt, -1)
	b.Brnz(fmCnt, item)
	b.Exit()

	emitTable(b, table, s.table(p.A, p.B, p.C))
	return k, b.Err()
}

// emitTile emits one register tile: C row at $m row + col (bytes), A of
// that row at $m Ag + aOff, B columns at $m Bp + col.
func (p MatMulF32) emitTile(b *Builder, s mmShape, row MReg, aOff, col int32) {
	if p.Accumulate {
		b.Emit(isa.Inst{Op: isa.LD128, D: uint8(fmAcc), A: uint8(row), Imm: col})
		b.Emit(isa.Inst{Op: isa.LD128, D: uint8(fmAcc + 4), A: uint8(row), Imm: col + 16})
	} else {
		for r := fmAcc; r < fmAcc+8; r += 2 {
			b.F(isa.V2ADD, r, fmZero, fmZero)
		}
	}
	b.Addi(fmA, fmAg, aOff)
	b.Addi(fmB, fmBp, col)
	end := b.Label()
	if s.steps > MaxRptiCount {
		b.Rpt(fmSteps, end)
	} else {
		b.Rpti(int(s.steps), end)
	}
	b.Ld32(fmX, fmA, 0)
	b.Ld32P(fmX+1, fmA, 16)
	b.Emit(isa.Inst{Op: isa.LD128P, D: uint8(fmY), A: uint8(fmB), Imm: 16})
	b.F(isa.V2FMA, fmAcc, fmX, fmY)
	b.F(isa.V2FMA, fmAcc+2, fmX, fmY+2)
	b.Emit(isa.Inst{Op: isa.LD128P, D: uint8(fmY), A: uint8(fmB), Imm: 48})
	b.F(isa.V2FMA, fmAcc+4, fmX, fmY)
	b.F(isa.V2FMA, fmAcc+6, fmX, fmY+2)
	b.Bind(end)
	b.Emit(isa.Inst{Op: isa.ST128, D: uint8(fmAcc), A: uint8(row), Imm: col})
	b.Emit(isa.Inst{Op: isa.ST128, D: uint8(fmAcc + 4), A: uint8(row), Imm: col + 16})
}

// checkMemory validates the addresses against b's preset.
func (p MatMulF32) checkMemory(b *Builder) error {
	a := b.Arch()
	if a == nil {
		return errors.New("builder has no architecture preset")
	}
	bufA := buffer{"A", p.A, 4 * uint64(p.M) * uint64(p.K), false}
	bufB := buffer{"B", p.B, 4 * uint64(p.N) * uint64(p.K), false}
	bufC := buffer{"C", p.C, 4 * (uint64(p.M-1)*uint64(p.CStride) + uint64(p.N)), true}
	if err := checkBuffer(bufA, 4, a.Memory, "tile memory"); err != nil {
		return err
	}
	if err := checkBuffer(bufB, 16, a.Interleaved, "interleaved memory"); err != nil {
		return err
	}
	if err := checkBuffer(bufC, 16, a.Interleaved, "interleaved memory"); err != nil {
		return err
	}
	return checkDisjoint([]buffer{bufA, bufB, bufC}, false)
}

// EmulateMatMulF32 returns what MatMulF32 computes: C (M x N, dense
// row-major) from row-major A (M x K) and B (K x N) and the initial C
// (nil: zeros), in the kernel's order with f32v2fma's rounding.
func EmulateMatMulF32(m, k, n int, a, b, c []float32) []float32 {
	out := make([]float32, m*n)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var acc float32
			if c != nil {
				acc = c[i*n+j]
			}
			for kk := 0; kk < k; kk++ {
				acc = ifma(acc, a[i*k+kk], b[kk*n+j])
			}
			out[i*n+j] = cf(acc)
		}
	}
	return out
}
