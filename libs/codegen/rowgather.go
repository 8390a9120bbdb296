package codegen

import (
	"encoding/binary"
	"errors"
	"fmt"

	"ipu.local/libs/isa"
)

// RowGather copies table rows chosen at run time, the embedding lookup:
// for i < N, with v the int32 at Idx + 4*i (v + Rows when v < 0, as ONNX
// Gather wraps negative indices),
//
//	Y[i] (W words at Y + 4*i*YStride) = row v (W words at X + 4*v*XStride)
//
// Any bit pattern copies exactly. An index outside [-Rows, Rows) is an
// error: the worker that reads it loads from address 0, outside tile
// memory, and the device reports the fault (tile, context, PC); nothing
// of that row is written.
//
// Alignment: Idx, X and Y 4-byte aligned. When X and Y are 8-byte
// aligned and W, XStride and YStride even, a row moves as ld64/st64
// pairs, else as ld32/st32 pairs. YStride >= W when N > 1.
//
// Work: the N indices are split into contiguous ranges of nearly equal
// size over min(Workers, N) workers. Worker code: 4 issues (table
// lookup), 6 ldm of its table row (index and Y pointers, count, X,
// Rows, 4*XStride), then per index 9 issues (load, wrap, range check,
// row address) + 2 per move of the row (W/2 with 64-bit moves, else W)
// + 1 when YStride != W (Y to the next row) + 2 (count, branch), then
// exit: Work[w] = 6 x (10 + n_w*(11 + 2*moves + [YStride != W])) (the
// issues before the exit).
type RowGather struct {
	N, W, Rows       int
	Idx, X, Y        uint32
	XStride, YStride int // words
	Workers          int
}

func (p RowGather) check() error {
	if err := checkWorkers(p.Workers); err != nil {
		return err
	}
	if p.N < 1 || p.W < 1 || p.Rows < 1 || int64(p.N)*int64(p.W) > 1<<24 || p.Rows > 1<<24 {
		return fmt.Errorf("%d indices of rows of %d words from %d rows: want positive sizes of at most 2^24", p.N, p.W, p.Rows)
	}
	if p.XStride < p.W && p.Rows > 1 || p.XStride > 1<<24 || int64(p.XStride)*int64(p.Rows) > 1<<24 {
		return fmt.Errorf("table row stride %d: want W=%d..2^24 words, and the table at most 2^24 words", p.XStride, p.W)
	}
	if p.YStride < p.W && p.N > 1 || p.YStride > 1<<24 {
		return fmt.Errorf("row stride %d of Y: want W=%d..2^24", p.YStride, p.W)
	}
	return nil
}

func (p RowGather) wide() bool {
	return p.X%8 == 0 && p.Y%8 == 0 && p.W%2 == 0 && p.XStride%2 == 0 && p.YStride%2 == 0
}

func (p RowGather) moves() int {
	if p.wide() {
		return p.W / 2
	}
	return p.W
}

func (p RowGather) perIndex() int64 {
	n := int64(11 + 2*p.moves())
	if p.YStride != p.W {
		n++
	}
	return n
}

// Cost returns the kernel's exact cost.
func (p RowGather) Cost() (Cost, error) {
	if err := p.check(); err != nil {
		return Cost{}, fmt.Errorf("row gather: %w", err)
	}
	w := min(p.Workers, p.N)
	_, count := split(p.N, w)
	c := Cost{Workers: w, Work: make([]int64, w)}
	for i, n := range count {
		c.Work[i] = 6 * (10 + int64(n)*p.perIndex())
	}
	return c, nil
}

func (p RowGather) checkMemory(b *Builder) error {
	a := b.Arch()
	if a == nil {
		return errors.New("builder has no architecture preset")
	}
	bufs := []buffer{
		{"Idx", p.Idx, 4 * uint64(p.N), false},
		{"X", p.X, 4 * (uint64(p.Rows-1)*uint64(p.XStride) + uint64(p.W)), false},
		{"Y", p.Y, 4 * (uint64(p.N-1)*uint64(p.YStride) + uint64(p.W)), true},
	}
	for _, v := range bufs {
		if err := checkBuffer(v, 4, a.Memory, "tile memory"); err != nil {
			return err
		}
	}
	for _, r := range []byteRows{
		{"Idx", int64(p.Idx), 0, 4 * int64(p.N), 1},
		{"X", int64(p.X), 0, int64(bufs[1].size), 1},
	} {
		if err := checkRowsDisjoint(r, byteRows{"Y", int64(p.Y), 4 * int64(p.YStride), 4 * int64(p.W), p.N}); err != nil {
			return err
		}
	}
	return nil
}

// Registers of the row gather's workers.
const (
	rgBase  = M1
	rgIdx   = M2
	rgY     = M3
	rgCount = M4
	rgX     = M5
	rgRows  = M6
	rgXS    = M7
	rgV     = M8
	rgT     = M9
	rgSrc   = M10
)

// EmitRowGather emits the kernel at b's current position.
func EmitRowGather(b *Builder, p RowGather) (Kernel, error) {
	if err := p.check(); err != nil {
		return Kernel{}, fmt.Errorf("row gather: %w", err)
	}
	if err := p.checkMemory(b); err != nil {
		return Kernel{}, fmt.Errorf("row gather: %w", err)
	}
	c, _ := p.Cost()
	start, count := split(p.N, c.Workers)
	table, loop, fault := b.Label(), b.Label(), b.Label()
	entry := b.Here()
	emitTableBase(b, table, 6, rgBase)
	for k, r := range []MReg{rgIdx, rgY, rgCount, rgX, rgRows, rgXS} {
		b.Ldm(r, rgBase, int32(4*k))
	}
	b.Bind(loop)
	b.LdmP(rgV, rgIdx, 4)
	b.r(isa.CMPLT, uint8(rgT), uint8(rgV), uint8(MZero)) // cmplt: v < 0
	b.Mul(rgT, rgT, rgRows)
	b.Add(rgV, rgV, rgT)
	b.r(isa.CMPULT, uint8(rgT), uint8(rgV), uint8(rgRows)) // cmpult: 0 <= v < Rows
	b.Brz(rgT, fault)
	b.Mul(rgSrc, rgV, rgXS)
	b.Add(rgSrc, rgSrc, rgX)
	end := b.Label()
	b.Rpti(p.moves(), end)
	if p.wide() {
		b.Ld64P(A0, rgSrc, 8)
		b.St64P(A0, rgY, 8)
	} else {
		b.Ld32P(A0, rgSrc, 4)
		b.St32P(A0, rgY, 4)
	}
	b.Bind(end)
	if p.YStride != p.W {
		b.Addi(rgY, rgY, int32(4*(p.YStride-p.W)))
	}
	b.Addi(rgCount, rgCount, -1)
	b.Brnz(rgCount, loop)
	b.Exit()
	b.Bind(fault)
	b.Ldm(rgT, MZero, 0) // an index out of range: fault outside tile memory
	b.Exit()
	rows := make([][]uint32, c.Workers)
	for w := range rows {
		rows[w] = []uint32{p.Idx + 4*uint32(start[w]), p.Y + 4*uint32(start[w]*p.YStride), uint32(count[w]), p.X, uint32(p.Rows), uint32(4 * p.XStride)}
	}
	emitTable(b, table, rows)
	if err := b.Err(); err != nil {
		return Kernel{}, fmt.Errorf("row gather: %w", err)
	}
	return Kernel{Entry: entry, Cost: c}, nil
}

// EmulateRowGather returns Y's bytes after the gather: y holds the bytes
// of Y's span before it, x the table from X, idx the N int32 indices.
// It returns an error for an index out of range.
func EmulateRowGather(p RowGather, idx, x, y []byte) ([]byte, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	out := append([]byte(nil), y...)
	for i := 0; i < p.N; i++ {
		v := int64(int32(binary.LittleEndian.Uint32(idx[4*i:])))
		if v < 0 {
			v += int64(p.Rows)
		}
		if v < 0 || v >= int64(p.Rows) {
			return nil, fmt.Errorf("index %d: %d outside [-%d, %d)", i, int32(binary.LittleEndian.Uint32(idx[4*i:])), p.Rows, p.Rows)
		}
		copy(out[4*i*p.YStride:4*(i*p.YStride+p.W)], x[4*int(v)*p.XStride:])
	}
	return out, nil
}
