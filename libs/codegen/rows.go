package codegen

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"ipu.local/libs/numfmt"
)

// This file holds Rows: the row operations, the kernel's parameters and
// their checks, its cost, EmitRows and EmulateRowBytes. The worker code
// is in rowcode.go, the split form in rowsplit.go.

// RowOp is an operation along each row of a matrix.
type RowOp uint8

// Row operations. In the arithmetic below, a row has C elements x_0..;
// the lane sums of a sequence v_0..v_{C-1} are
//
//	S0 = +0, then S0 = RN32(S0 + v_j) for even j in increasing order
//	S1 = +0, then S1 = RN32(S1 + v_j) for odd j in increasing order
//	sum = RN32(S0 + S1)
//
// (the two lanes of an f32v2 accumulator; C odd: v_{C-1} goes to S0
// last). Every named function is its FP32 instruction; NaN results are
// canonical.
//
//	Softmax     m = max_j x_j (f32max: NaN if any is NaN); e_j = exp(RN32(x_j - m));
//	            s = lane sum of e; z = rcp(s) = RN32(1/s); y_j = RN32(e_j * z)
//	LogSoftmax  m, e, s as Softmax; l = log(s); y_j = RN32(RN32(x_j - m) - l)
//	ReduceSum   y = lane sum of x (one value per row)
//	ReduceMean  y = RN32(sum * c), c = RN32(1/C)
//	LayerNorm   mu = RN32(sum(x) * c); with d_j = RN32(x_j - mu), the lane
//	            accumulation Q0, Q1 = RN32(Q + d_j*d_j) (f32fma, one rounding)
//	            gives q = RN32(Q0 + Q1); v = RN32(q * c);
//	            r = rsqrt(RN32(v + Epsilon)) (RN32 of the float64 1/sqrt);
//	            z_j = RN32(d_j * r); y_j = RN32(b_j + z_j*g_j) (f32fma) with
//	            scale g and bias b, RN32(z_j * g_j) with scale only,
//	            RN32(z_j + b_j) with bias only, z_j with neither.
//	            Mean and InvStdDev (when given) receive mu and r.
const (
	Softmax RowOp = iota
	LogSoftmax
	ReduceSum
	ReduceMean
	LayerNorm
	numRowOps
)

var rowNames = [numRowOps]string{"softmax", "logsoftmax", "reducesum", "reducemean", "layernorm"}

func (op RowOp) String() string {
	if op < numRowOps {
		return rowNames[op]
	}
	return fmt.Sprintf("rowop(%d)", uint8(op))
}

func (op RowOp) reduces() bool { return op == ReduceSum || op == ReduceMean }

// Rows applies Op to each of the R rows of the matrix X (C elements per
// row, row i at X + e*i*XStride with e = 4, or 2 with InF16). Softmax,
// LogSoftmax and LayerNorm write an R x C matrix at Y (stride YStride; Y
// may be X, in place, when both have the same type and stride);
// ReduceSum and ReduceMean write R consecutive values at Y. Scale and
// Bias (LayerNorm, optional: 0) are C-element vectors; Mean and
// InvStdDev (optional) receive R FP32 values each.
//
// FP16: with InF16, X holds FP16 values, each converted exactly to FP32
// as it is loaded (f16v2tof32); with OutF16, Y (and the reductions' R
// values) receive FP16 values, each result rounded once from FP32 as it
// is stored (f32v2tof16); with ScaleF16, Scale and Bias hold FP16
// values, converted exactly on load. The arithmetic in between is the
// FP32 arithmetic above, unchanged: what onnxruntime computes for FP16
// Softmax and LogSoftmax and for FP16 reductions (FP32 accumulation) and
// for LayerNormalization with stash_type 1 (float): the input cast to
// FP32, FP32 statistics and normalisation, one cast of the result to
// FP16. Softmax with OutF16 cannot keep e_j in Y: its third pass
// computes e_j again from x_j (the same instructions, the same value),
// or, split (RowsSplit), reads it from an FP32 stash in scratch.
//
// Alignment: row starts 8-byte aligned: X and Y 8-aligned, strides even
// (FP16: multiples of 4 elements; pad the rows). Scale and Bias
// 8-aligned (FP16: 4-aligned); Mean and InvStdDev 8-aligned; the FP16
// values of a reduction at Y 4-aligned. An odd C with InF16 reads the
// whole word holding a row's last element (2 bytes past the row), and
// with OutF16 writes that element by reading its word, replacing its low
// half and storing it back.
//
// Worker w takes a contiguous range of rows, the first R mod workers
// ranges one longer; min(Workers, R) workers run. A reduction with
// OutF16 splits the ceil(R/2) pairs of rows instead (the last one a
// single row when R is odd), so that no two workers share a word of Y.
type Rows struct {
	Op               RowOp
	R, C             int
	X, Y             uint32
	XStride, YStride int // elements
	Epsilon          float32
	Scale, Bias      uint32
	Mean, InvStdDev  uint32
	Workers          int
	// InF16: X is FP16. OutF16: Y is FP16. ScaleF16: Scale and Bias are
	// FP16 (LayerNorm). The zero values are FP32.
	InF16, OutF16 bool
	ScaleF16      bool
	// A launch of a split sequence (see RowsSplit): Phase 1, 2, ... of
	// the sequence, each row cut into Chunks chunks of ChunkLen elements
	// (the last one 1..ChunkLen), FP32 partials at Scratch. The zero
	// values give the whole-row kernel above.
	Phase, Chunks, ChunkLen int
	Scratch                 uint32
	// ScratchInterleaved declares Scratch 16-byte aligned in interleaved
	// memory (checked): with Chunks a multiple of 4, the launches that
	// combine a row's partials load them four at a time (ld128: 3 issues
	// per four partials instead of 4), in the same order.
	ScratchInterleaved bool
	// A launch of a row spread over tiles (see TileSplit): the tile holds
	// chunks [FirstChunk, FirstChunk+TileChunks) of each row, X, Y,
	// Scale and Bias at its first chunk's first column, the strides its
	// own; the other chunks' partials reach Scratch between launches.
	// TileChunks 0: the tile holds whole rows.
	FirstChunk, TileChunks int
}

// cols returns the columns of each row a launch's tile holds: C, or its
// chunks' (see TileChunks).
func (p Rows) cols() int {
	if p.TileChunks == 0 {
		return p.C
	}
	return min(p.C, (p.FirstChunk+p.TileChunks)*p.ChunkLen) - p.FirstChunk*p.ChunkLen
}

// xSize and ySize are the element bytes of X and Y.
func (p Rows) xSize() int64 { return 2 + 2*b2i64(!p.InF16) }
func (p Rows) ySize() int64 { return 2 + 2*b2i64(!p.OutF16) }

func b2i64(v bool) int64 {
	if v {
		return 1
	}
	return 0
}

// reduce16 reports a reduction with FP16 outputs: rows go in pairs.
func (p Rows) reduce16() bool { return p.Op.reduces() && p.OutF16 }

func (p Rows) check(b *Builder) error {
	if p.Op >= numRowOps {
		return fmt.Errorf("unknown row op %d", p.Op)
	}
	if err := checkWorkers(p.Workers); err != nil {
		return err
	}
	if p.R < 1 || p.C < 1 || int64(p.R)*int64(p.C) > 1<<24 {
		return fmt.Errorf("matrix %dx%d: want positive dimensions of at most 2^24 elements", p.R, p.C)
	}
	// Row starts 8-byte aligned: strides of a multiple of 8 bytes.
	xm, ym := 8/p.xSize(), 8/p.ySize()
	if err := p.checkSplit(); err != nil {
		return err
	}
	cols, what := p.cols(), fmt.Sprintf("C=%d", p.C)
	if p.TileChunks != 0 {
		what = fmt.Sprintf("the tile's %d columns", cols)
	}
	if p.XStride < cols || int64(p.XStride)%xm != 0 || !p.Op.reduces() && (p.YStride < cols || int64(p.YStride)%ym != 0) {
		if p.InF16 || p.OutF16 {
			return fmt.Errorf("row strides %d, %d: want strides of at least %s, multiples of %d (X) and %d (Y)", p.XStride, p.YStride, what, xm, ym)
		}
		return fmt.Errorf("row strides %d, %d: want even strides of at least %s", p.XStride, p.YStride, what)
	}
	if int64(p.R)*int64(max(p.XStride, p.YStride)) > 1<<24 {
		return fmt.Errorf("row strides %d, %d too large for %d rows", p.XStride, p.YStride, p.R)
	}
	if p.Op != LayerNorm && (p.Scale != 0 || p.Bias != 0 || p.Mean != 0 || p.InvStdDev != 0 || p.ScaleF16) {
		return fmt.Errorf("scale, bias, mean and inverse standard deviation are LayerNorm's")
	}
	if b == nil {
		return nil
	}
	return p.checkMemory(b)
}

// checkMemory validates the addresses against b's preset: alignment, the
// bytes each array touches in tile memory, and no overlap (X may be Y in
// place: same address, stride and element type, not a reduction).
func (p Rows) checkMemory(b *Builder) error {
	a := b.Arch()
	if a == nil {
		return errors.New("builder has no architecture preset")
	}
	// An FP16 array with an odd last element is read (and, for Y,
	// written back) in whole words.
	words := func(n uint64, f16 bool) uint64 {
		if f16 {
			return (n + 3) &^ 3
		}
		return n
	}
	span := func(stride int, size int64, f16 bool) uint64 {
		return words(uint64(size)*(uint64(p.R-1)*uint64(stride)+uint64(p.cols())), f16)
	}
	type aligned struct {
		buffer
		align uint32
	}
	bufs := []aligned{{buffer{"X", p.X, span(p.XStride, p.xSize(), p.InF16), false}, 8}}
	switch {
	case p.reduce16():
		bufs = append(bufs, aligned{buffer{"Y", p.Y, words(2*uint64(p.R), true), true}, 4})
	case p.Op.reduces():
		bufs = append(bufs, aligned{buffer{"Y", p.Y, 4 * uint64(p.R), true}, 8})
	default:
		bufs = append(bufs, aligned{buffer{"Y", p.Y, span(p.YStride, p.ySize(), p.OutF16), true}, 8})
	}
	vec, vecAlign := 4*uint64(p.cols()), uint32(8)
	if p.ScaleF16 {
		vec, vecAlign = words(2*uint64(p.cols()), true), 4
	}
	for _, v := range []aligned{{buffer{"scale", p.Scale, vec, false}, vecAlign}, {buffer{"bias", p.Bias, vec, false}, vecAlign},
		{buffer{"mean", p.Mean, 4 * uint64(p.R), true}, 8}, {buffer{"inverse standard deviation", p.InvStdDev, 4 * uint64(p.R), true}, 8}} {
		if v.addr != 0 {
			bufs = append(bufs, v)
		}
	}
	if p.Phase > 0 {
		bufs = append(bufs, aligned{buffer{"scratch", p.Scratch, uint64(p.ScratchBytes()), true}, 8})
	}
	var plain []buffer
	for _, v := range bufs {
		if err := checkBuffer(v.buffer, v.align, a.Memory, "tile memory"); err != nil {
			return err
		}
		plain = append(plain, v.buffer)
	}
	if p.Phase > 0 && p.ScratchInterleaved {
		if err := checkBuffer(buffer{"scratch", p.Scratch, uint64(p.ScratchBytes()), true}, 16, a.Interleaved, "interleaved memory"); err != nil {
			return err
		}
	}
	same := p.X == p.Y && p.XStride == p.YStride && p.InF16 == p.OutF16 && !p.Op.reduces()
	if same {
		plain = plain[1:]
	}
	return checkDisjoint(plain, false)
}

// Cost returns the kernel's cost. Worker w with r rows issues
// prologue + r*row before its exit. With P = C/2 pairs, t = C mod 2 and
// L = 1 when P > 0 (the loop's rpti or rpt), else 0:
//
//	prologue = 4 + 3 table loads (LayerNorm: +1 each with Mean, InvStdDev)
//	           + ConstLen(P) when P > 4095 (rpt count register)
//	           + ConstLen of each byte row stride beyond an imm16
//	           + 1 ($a14 = 0)
//	           + softmax, logsoftmax: 3 (-Inf pair)
//	             reducemean: F32Len(1/C); layernorm: F32Len(1/C) + F32Len(eps)
//
//	row: softmax     16 + 3L + 13P + 11t
//	     logsoftmax  16 + 3L + 13P + 11t
//	     reducesum   7 + L + 2P + 2t      (reducemean: 8 + L + 2P + 2t)
//	     layernorm   19 + 3L + 5P + 5t + (P + t)*e + outputs + vectors
//
// where for layernorm e = 4 per element pair (load, subtract, multiply,
// store), 6 with a scale or a bias vector, 7 with both; outputs counts
// Mean and InvStdDev, vectors Scale and Bias (one li per row each). The
// code computes these sums from the emitted instructions (Issued).
//
// FP16 forms. Each pass above costs L + P*e + t*s (e, s: its issues
// per pair and for the odd element). A pass that loads X with InF16 or
// stores Y with OutF16 walks quads of elements instead: L becomes L4 = 1
// when Q = C/4 > 0, and the pass costs (Q + q)*(i + o) + t*(i + 7o) more,
// with q = 1 when C mod 4 >= 2, i = 1 with InF16 and o = 1 when the pass
// stores at Y with OutF16 (per quad one ld64 and two f16v2tof32 replace
// two ld64, two f32v2tof16 and one st64 replace two st64; the last pair
// and the odd element convert too, and the odd element's store merges
// with its word: 7 more). Softmax's and LogSoftmax's first pass with
// InF16 then takes the quads' maxima in FP16 (maxPass): per quad an ld64
// and an f16v4max, 3 issues fewer, and 3 more after the quads (the four
// lanes converted and combined): 3 - 3Q in all. ScaleF16 adds one
// f16v2tof32 per vector load.
// Softmax with OutF16 stores nothing in its second pass (-P - t, and
// one pointer reset less) and computes e again in its third (+5P + 3t:
// the subtraction and f32v2exp, 4 issues, or f32exp, 2; and one pointer
// reset more). The prologue loads P when P > 4095 and a pass walks
// pairs, Q when Q > 4095 and a pass walks quads. A reduction with OutF16
// has one more table word (the odd-row flag), and its worker with n
// pairs of rows and o = 1 when it does the odd last row issues
// prologue + 2 + n*(2b + 6) + o*(b + 8), b being the row above without
// its store and its advance (4 issues). Cost sums the emitted code; the
// tests check these rules against it.
func (p Rows) Cost() (Cost, error) {
	if err := p.check(nil); err != nil {
		return Cost{}, fmt.Errorf("%s: %w", p.Op, err)
	}
	if p.Phase > 0 {
		return p.splitCost(), nil
	}
	return p.cost(), nil
}

// split16 returns the workers of a FP16 reduction, their first rows, pairs
// of rows and odd-row flags.
func (p Rows) split16() (workers int, first, pairs []int, odd []bool) {
	units := (p.R + 1) / 2
	workers = min(p.Workers, units)
	start, count := split(units, workers)
	first, pairs, odd = make([]int, workers), make([]int, workers), make([]bool, workers)
	for w := range first {
		first[w], pairs[w] = 2*start[w], count[w]
		if w == workers-1 && p.R%2 == 1 {
			pairs[w]--
			odd[w] = true
		}
	}
	return workers, first, pairs, odd
}

func (p Rows) cost() Cost {
	b := NewBuilder(nil, 0)
	p.prologue(b, b.Label())
	pro := b.Issued()
	if p.reduce16() {
		pair := issues(func(b *Builder) { p.reduce16Pair(b) }) + 2
		tail := issues(func(b *Builder) { p.reduce16Tail(b) })
		workers, _, pairs, odd := p.split16()
		c := Cost{Workers: workers, Work: make([]int64, workers)}
		for w := range c.Work {
			v := pro + 2 + int64(pairs[w])*pair
			if odd[w] {
				v += tail
			}
			c.Work[w] = Slots * v
		}
		return c
	}
	row := b.Here()
	p.row(b)
	p.advance(b, row)
	per := b.Issued() - pro
	workers := min(p.Workers, p.R)
	_, count := split(p.R, workers)
	c := Cost{Workers: workers, Work: make([]int64, workers)}
	for w := range c.Work {
		c.Work[w] = Slots * (pro + int64(count[w])*per)
	}
	return c
}

// EmitRows emits the kernel at b's current position.
func EmitRows(b *Builder, p Rows) (Kernel, error) {
	if err := p.check(b); err != nil {
		return Kernel{}, fmt.Errorf("%s: %w", p.Op, err)
	}
	if p.Phase > 0 {
		return p.emitSplit(b)
	}
	k := Kernel{Entry: b.Here(), Cost: p.cost()}
	table := b.Label()
	p.prologue(b, table)
	var rows [][]uint32
	xs, ys := uint32(p.xSize()), uint32(p.ySize())
	if p.reduce16() {
		p.reduce16Body(b)
		b.Exit()
		workers, first, pairs, odd := p.split16()
		for w := 0; w < workers; w++ {
			r := uint32(first[w])
			tail := uint32(0)
			if odd[w] {
				tail = 1
			}
			rows = append(rows, []uint32{p.X + xs*r*uint32(p.XStride), p.Y + 2*r, uint32(pairs[w]), tail})
		}
		emitTable(b, table, rows)
		return k, b.Err()
	}
	loop := b.Here()
	p.row(b)
	p.advance(b, loop)
	b.Exit()
	workers := min(p.Workers, p.R)
	start, count := split(p.R, workers)
	for w := 0; w < workers; w++ {
		r := uint32(start[w])
		y := p.Y + ys*r*uint32(p.YStride)
		if p.Op.reduces() {
			y = p.Y + 4*r
		}
		row := []uint32{p.X + xs*r*uint32(p.XStride), y, uint32(count[w])}
		if p.Op == LayerNorm {
			row = append(row, p.Mean+4*r, p.InvStdDev+4*r)
		}
		rows = append(rows, row)
	}
	emitTable(b, table, rows)
	return k, b.Err()
}

// EmulateRowBytes is EmulateRowSplit on one row's stored bytes: x holds the C
// elements of X (FP16 with InF16, else FP32, little-endian), g and bias
// the C elements of Scale and Bias (FP16 with ScaleF16; nil: none); y
// receives the row's C elements (a reduction: its one value) as stored at
// Y (FP16 with OutF16). mu and r are as EmulateRowSplit's. It returns nil when
// an input is too short.
func EmulateRowBytes(p Rows, x, g, bias []byte) (y []byte, mu, r float32) {
	decode := func(b []byte, f16 bool) []float32 {
		if b == nil {
			return nil
		}
		size := 4
		if f16 {
			size = 2
		}
		if len(b) < size*p.C {
			return nil
		}
		v := make([]float32, p.C)
		for i := range v {
			if f16 {
				v[i] = math.Float32frombits(numfmt.F16ToF32(binary.LittleEndian.Uint16(b[2*i:])))
			} else {
				v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
			}
		}
		return v
	}
	xv, gv, bv := decode(x, p.InF16), decode(g, p.ScaleF16), decode(bias, p.ScaleF16)
	if xv == nil || g != nil && gv == nil || bias != nil && bv == nil {
		return nil, 0, 0
	}
	out, mu, r := EmulateRowSplit(p, xv, gv, bv)
	for _, v := range out {
		if p.OutF16 {
			y = binary.LittleEndian.AppendUint16(y, numfmt.F32ToF16(math.Float32bits(v)))
		} else {
			y = binary.LittleEndian.AppendUint32(y, math.Float32bits(v))
		}
	}
	return y, mu, r
}
