package codegen

import (
	"errors"
	"fmt"

	"ipu.local/libs/isa"
)

// SumParts adds Parts partial sums into an accumulator, the compute half
// of a reduce-scatter: for i < N,
//
//	Y[i] = (...((Y[i] + X[i]) + X[Stride+i]) + ...) + X[(Parts-1)*Stride+i]
//
// in FP32, each addition rounded, in that order: bit for bit the chain of
// Parts Binary adds it replaces, with Y read and written once instead of
// Parts times and one launch instead of Parts.
//
// Y and X are 8-byte aligned arrays of FP32 elements; Stride (elements)
// is even, at least N, and (Parts-1)*4*Stride fits a load's 16-bit
// offset. The parts may not overlap Y. Work is split over the workers as
// Binary's: per pair of elements 1 + Parts loads, Parts f32v2add and one
// store (2 + 2*Parts issues), a lone last element the same with scalar
// loads and adds.
type SumParts struct {
	N       int
	Y       uint32
	X       uint32
	Parts   int
	Stride  int // elements from one part to the next
	Workers int
}

func (p SumParts) stream() (*stream, error) {
	if p.Parts < 1 {
		return nil, fmt.Errorf("part count %d: want at least 1", p.Parts)
	}
	if p.Parts > 1 && (p.Stride < p.N || p.Stride%2 != 0) {
		return nil, fmt.Errorf("part stride %d: want an even stride of at least N = %d", p.Stride, p.N)
	}
	last := int64(p.Parts-1) * 4 * int64(p.Stride)
	if !fitsImm16(last) {
		return nil, fmt.Errorf("part %d at byte offset %d: beyond a load's 16-bit offset", p.Parts-1, last)
	}
	s := &stream{n: p.N, unit: 2, workers: p.Workers, output: array{"Y", p.Y, 4, 0},
		inputs: []array{{"Y", p.Y, 4, 0}, {"X", p.X, 4, 0}}}
	s.setup = func(*Builder) {}
	op := func(b *Builder, single bool) {
		l := lanes{b, single}
		l.load(bL, sIn0)
		for k := 0; k < p.Parts; k++ {
			off := int32(4 * k * p.Stride)
			switch {
			case single:
				b.Ld32(bR, sIn1, off)
			case k == 0:
				b.Ld64P(bR, sIn1, 8)
			default:
				b.Ld64(bR, sIn1, off-8) // sIn1 has moved past part 0's pair
			}
			src := bL
			if k > 0 {
				src = A0
			}
			l.v(isa.V2ADD, A0, src, bR)
		}
		l.store(A0, sOut)
	}
	s.body = func(b *Builder) { op(b, false) }
	s.tail = func(b *Builder, _ int) { op(b, true) }
	return s, nil
}

// Cost returns the kernel's cost (counted from its code, as Binary's).
func (p SumParts) Cost() (Cost, error) {
	s, err := p.stream()
	if err == nil {
		err = s.check(nil)
	}
	if err != nil {
		return Cost{}, fmt.Errorf("sum of parts: %w", err)
	}
	return s.cost(), nil
}

// EmitSumParts emits the kernel at b's current position.
func EmitSumParts(b *Builder, p SumParts) (Kernel, error) {
	s, err := p.stream()
	if err == nil {
		err = p.check(b)
	}
	if err != nil {
		return Kernel{}, fmt.Errorf("sum of parts: %w", err)
	}
	return s.emit(b)
}

// check checks Y and the whole span of the parts: aligned, in tile
// memory, and apart.
func (p SumParts) check(b *Builder) error {
	if err := checkWorkers(p.Workers); err != nil {
		return err
	}
	if p.N < 1 || p.N > 1<<24 {
		return fmt.Errorf("element count %d out of range [1, 2^24]", p.N)
	}
	a := b.Arch()
	if a == nil {
		return errors.New("builder has no architecture preset")
	}
	y := buffer{"Y", p.Y, 4 * uint64(p.N), true}
	x := buffer{"X", p.X, 4 * (uint64(p.Parts-1)*uint64(p.Stride) + uint64(p.N)), false}
	for _, buf := range []buffer{y, x} {
		if err := checkBuffer(buf, 8, a.Memory, "tile memory"); err != nil {
			return err
		}
	}
	return checkDisjoint([]buffer{y, x}, false)
}
