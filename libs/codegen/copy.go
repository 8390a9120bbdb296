package codegen

import (
	"errors"
	"fmt"
)

// Copy copies a 2-D region of 32-bit words byte for byte: for r < R and
// c < W, the word at Y + 4*(r*YStride + c) receives the word at
// X + 4*(r*XStride + c). Any bit pattern copies exactly (FP32, FP16
// pairs, FP8 quads, NaN payloads). Nothing else at Y is written.
//
// Alignment: X and Y 4-byte aligned, strides any (in words). XStride may
// be anything from 0 (every row of Y receives the same row of X); when
// R > 1, YStride is at least W. The words read and the words written
// must not overlap (the rows are compared exactly, not their spans).
// With Interleaved set, both regions must lie in interleaved memory and
// the kernel uses 128-bit accesses where both sides allow them.
//
// Work: the R*W words (of every block, Outer) in row-major order, the
// blocks' rows after one another, are split into contiguous ranges
// of nearly equal size, one per worker, each boundary moved to the
// nearest row start or multiple of 4 words within a row; of 1..Workers
// workers, the count with the fewest cycles (Cost.Cycles) runs, the
// fewer on a tie. Rows contiguous on both sides (XStride = YStride = W)
// are one row of R*W words.
//
// Code: each worker runs code generated for its range (workers whose code
// is the same share it). A row segment of n words is a head of h <= 3
// words, nb blocks of B words (2, or 4 with Interleaved) and a tail of
// the rest; h and B are chosen for the fewest issues. Within a segment
// every word goes through $a0..$a3: the loads of a block are the widest
// the source address allows (ld128 at a 16-aligned address and block
// offset 0 mod 4, ld64 at an 8-aligned one and even offset, else ld32),
// and the stores likewise. So a block costs 2 issues per 2 words when X
// and Y agree modulo 8 (2 per 4 words modulo 16 with Interleaved), 3 per
// 2 words when they differ by 4 modulo 8. Blocks loop with rpt unless
// they take at most 8 issues in all (then they are unrolled). Full rows
// of a worker loop p at a time (p in 1, 2, 4: the genPeriod of the rows'
// alignments), with rpt when a row has no inner loop, else with a
// counted branch loop (2 issues per iteration). Pointer moves between
// rows ride on the last access's post-increment when it is outside a
// loop and the sum fits 16 bits, else cost one add (the constant in a
// register loaded once when it does not fit an addi).
//
// Cost: worker w issues 4 (table lookup) + 2 (ldm of its two pointers)
// + 2 when workers run different code (ldm of the entry and jr) + the
// issues of its code before exit; Work[w] is 6 x that. Cost counts the
// generated code exactly.
type Copy struct {
	R, W             int    // rows, 32-bit words per row
	X, Y             uint32 // 4-byte aligned
	XStride, YStride int    // words
	Workers          int
	// Interleaved declares that X and Y lie in interleaved memory (checked):
	// 128-bit loads and stores where both addresses allow. The zero value
	// uses 32- and 64-bit accesses only.
	Interleaved bool
	// Outer repeats the R x W block (N 0 or 1: no repeat): Outer[0]
	// copies N blocks, Outer[1] N of those, each X and Y advanced by the
	// dimension's strides (words, X's from 0). Y's blocks nest: a stride
	// is at least the span of what it repeats, so no word of Y is
	// written twice. With an outer dimension X's words and Y's lie in
	// disjoint spans. The blocks are more rows to the split over workers
	// (the row index counts through the blocks); whole blocks loop with a
	// counted branch loop each.
	Outer [2]BlockDim
}

// BlockDim is an outer dimension of a Copy or a Gather: N repeats of
// what it encloses, XStride and YStride apart (in the kernel's units:
// words, elements).
type BlockDim struct{ N, XStride, YStride int }

// BlockOffsets returns each block's first X and Y offsets (in the
// kernel's units) in the order the blocks are written: the first
// dimension's blocks innermost.
func BlockOffsets(outer [2]BlockDim) [][2]int {
	blocks := [][2]int{{0, 0}}
	for _, d := range outer {
		next := make([][2]int, 0, len(blocks)*max(d.N, 1))
		for i := range max(d.N, 1) {
			for _, b := range blocks {
				next = append(next, [2]int{b[0] + i*d.XStride, b[1] + i*d.YStride})
			}
		}
		blocks = next
	}
	return blocks
}

// genDims returns the outer dimensions that repeat (N > 1), innermost
// first, in bytes (size bytes a unit).
func genDims(outer [2]BlockDim, size int64) []genDim {
	var ds []genDim
	for _, d := range outer {
		if d.N > 1 {
			ds = append(ds, genDim{d.N, size * int64(d.XStride), size * int64(d.YStride)})
		}
	}
	return ds
}

// blockCount is the number of blocks outer repeats.
func blockCount(outer [2]BlockDim) int64 {
	n := int64(1)
	for _, d := range outer {
		n *= int64(max(d.N, 1))
	}
	return n
}

// checkBlocks validates outer dimensions around blocks of elems units
// whose Y spans inner: counts, strides, Y's blocks nested.
func checkBlocks(outer [2]BlockDim, inner, elems int64) error {
	for i, d := range outer {
		if d.N < 0 || d.N > 1<<24 || d.XStride < 0 || d.YStride < 0 || d.XStride > 1<<24 || d.YStride > 1<<24 {
			return fmt.Errorf("outer dimension %d: %d blocks, strides %d, %d: want 0..2^24", i, d.N, d.XStride, d.YStride)
		}
		if d.N < 2 {
			continue
		}
		if int64(d.YStride) < inner {
			return fmt.Errorf("outer dimension %d: Y stride %d: want at least the %d it repeats", i, d.YStride, inner)
		}
		inner += int64(d.N-1) * int64(d.YStride)
		if elems *= int64(d.N); elems > 1<<24 {
			return fmt.Errorf("outer dimension %d: %d in all: want at most 2^24", i, elems)
		}
	}
	return nil
}

// outerSpan is what outer adds to a span: X's (x true) or Y's.
func outerSpan(outer [2]BlockDim, x bool) int64 {
	var n int64
	for _, d := range outer {
		if d.N > 1 {
			s := d.YStride
			if x {
				s = d.XStride
			}
			n += int64(d.N-1) * int64(s)
		}
	}
	return n
}

// checkSpansDisjoint refuses X and Y spans that share a byte.
func checkSpansDisjoint(x, y buffer) error {
	if uint64(x.addr) < uint64(y.addr)+y.size && uint64(y.addr) < uint64(x.addr)+x.size {
		return fmt.Errorf("X [%#x, %#x) and Y [%#x, %#x) overlap: blocks need disjoint spans", x.addr, uint64(x.addr)+x.size, y.addr, uint64(y.addr)+y.size)
	}
	return nil
}

// span returns the words from the first word of X (x true) or Y to past
// its last.
func (p Copy) span(x bool) int64 {
	stride := p.YStride
	if x {
		stride = p.XStride
	}
	return int64(p.R-1)*int64(stride) + int64(p.W) + outerSpan(p.Outer, x)
}

func (p Copy) check() error {
	if err := checkWorkers(p.Workers); err != nil {
		return err
	}
	if p.R < 1 || p.W < 1 || int64(p.R)*int64(p.W) > 1<<24 {
		return fmt.Errorf("region %dx%d: want positive dimensions of at most 2^24 words", p.R, p.W)
	}
	if p.XStride < 0 || p.YStride < 0 || p.XStride > 1<<24 || p.YStride > 1<<24 {
		return fmt.Errorf("row strides %d, %d: want 0..2^24", p.XStride, p.YStride)
	}
	if p.R > 1 && p.YStride < p.W {
		return fmt.Errorf("row stride %d of Y: want at least W=%d", p.YStride, p.W)
	}
	return p.checkOuter()
}

// checkOuter validates Outer: counts, strides, Y's blocks nested.
func (p Copy) checkOuter() error {
	return checkBlocks(p.Outer, int64(p.R-1)*int64(p.YStride)+int64(p.W), int64(p.R)*int64(p.W))
}

func (p Copy) checkMemory(b *Builder) error {
	a := b.Arch()
	if a == nil {
		return errors.New("builder has no architecture preset")
	}
	xs, ys := 4*uint64(p.span(true)), 4*uint64(p.span(false))
	x := buffer{"X", p.X, xs, false}
	y := buffer{"Y", p.Y, ys, true}
	for _, v := range []buffer{x, y} {
		if err := checkBuffer(v, 4, a.Memory, "tile memory"); err != nil {
			return err
		}
		if p.Interleaved {
			if err := checkBuffer(v, 4, a.Interleaved, "interleaved memory"); err != nil {
				return err
			}
		}
	}
	if blockCount(p.Outer) > 1 {
		return checkSpansDisjoint(x, y)
	}
	return checkRowsDisjoint(
		byteRows{"X", int64(p.X), 4 * int64(p.XStride), 4 * int64(p.W), p.R},
		byteRows{"Y", int64(p.Y), 4 * int64(p.YStride), 4 * int64(p.W), p.R})
}

// byteRows is n byte ranges [at + i*stride, +size), i < n, with stride >= 0.
type byteRows struct {
	name         string
	at           int64
	stride, size int64
	n            int
}

// checkRowsDisjoint reports a byte in both sets: a merge of the two sorted
// lists of ranges (ranges of one set have equal sizes, so their ends are
// sorted too).
func checkRowsDisjoint(a, b byteRows) error {
	i, j := 0, 0
	for i < a.n && j < b.n {
		as, bs := a.at+int64(i)*a.stride, b.at+int64(j)*b.stride
		switch {
		case as+a.size <= bs:
			i++
		case bs+b.size <= as:
			j++
		default:
			return fmt.Errorf("%s row %d [%#x, %#x) overlaps %s row %d [%#x, %#x)", a.name, i, as, as+a.size, b.name, j, bs, bs+b.size)
		}
	}
	return nil
}

func (p Copy) gen() *wordEngine {
	return newWordEngine(p.R, p.W, int64(p.X), 4*int64(p.XStride), 4, int64(p.Y), 4*int64(p.YStride), p.Interleaved, genDims(p.Outer, 4)...)
}

// Cost returns the kernel's exact cost.
func (p Copy) Cost() (Cost, error) {
	if err := p.check(); err != nil {
		return Cost{}, fmt.Errorf("copy: %w", err)
	}
	return genBestSplit(p.gen(), p.Workers).cost(), nil
}

// EmitCopy emits the kernel at b's current position.
func EmitCopy(b *Builder, p Copy) (Kernel, error) {
	if err := p.check(); err != nil {
		return Kernel{}, fmt.Errorf("copy: %w", err)
	}
	if err := p.checkMemory(b); err != nil {
		return Kernel{}, fmt.Errorf("copy: %w", err)
	}
	return genBestSplit(p.gen(), p.Workers).emit(b)
}
