// Package cost is the compiler's cycle and memory model, read from an
// architecture preset: per-tile compute cycles from codegen's exact
// kernel formulas, exchange cycles from sched's lower bound plus the
// preset's fixed cost per exchange phase, a sync per superstep, and tile
// memory by category checked against the preset's usable memory.
//
// A matrix product [M,K]x[K,N] split (GM, GN, GK) over the tile range
// [Lo, Lo+GM*GN*GK) puts block (i, j, l) on tile
//
//	Lo + (i*GK + l)*GN + j
//
// so the GN tiles sharing an A block are contiguous (one multicast). The
// A block is rows i, k-block l; the B block k-block l, columns j; for
// GK > 1 the partial products are reduce-scattered: tile (i, j, l) ends
// with row part l of block (i, j), summed.
package cost

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	"ipu.local/libs/arch"
	"ipu.local/libs/codegen"
	"ipu.local/libs/numfmt"
)

// StackBytesPerContext is the stack the model reserves for each of a
// tile's contexts (workers and supervisor): model choice.
const StackBytesPerContext = 256

// ExchangeInstrsPerTransfer is the exchange code a tile spends on one
// transfer it sends or receives (operand loads, send or recv), model
// choice within PopLibs' 4 bytes per exchange instruction.
const ExchangeInstrsPerTransfer = 3

// SupervisorInstrsPerKernel is the supervisor code around one kernel
// launch: li, one run per worker, join.
const SupervisorInstrsPerKernel = 2 + codegen.Slots

// Split is the block counts of a matrix product. Align is the row
// alignment of its M blocks: 0 means RowAlign; a product whose result is
// packed as a transposed B operand needs ColAlign (see ResultAlign).
type Split struct{ GM, GN, GK, Align int }

func (s Split) rowAlign() int { return max(RowAlign, s.Align) }

// Tiles is the tile count the split uses.
func (s Split) Tiles() int { return s.GM * s.GN * s.GK }

func (s Split) String() string { return fmt.Sprintf("m=%d n=%d k=%d", s.GM, s.GN, s.GK) }

// Units returns the row units of M under s's alignment.
func (s Split) MUnits(m int) int { return Units(m, s.rowAlign()) }

// Block is the part [lo, hi) of an axis of n elements in block b of g:
// the first n mod g blocks one longer.
func Block(n, g, b int) (lo, hi int) {
	q, r := n/g, n%g
	lo = b*q + min(b, r)
	hi = lo + q
	if b < r {
		hi++
	}
	return lo, hi
}

// Alignment of product blocks: the kernel's row groups (A panels hold
// 4 rows) and column panels (B panels hold 16 columns). Blocks of M and
// N start at multiples of these, so that a block is whole groups or
// panels of any panel layout holding it, and the exchange moves whole
// group or panel runs (see libs/link).
const (
	RowAlign = 4
	ColAlign = 16
)

// Units is the number of align-sized units of an axis of n elements.
func Units(n, align int) int { return (n + align - 1) / align }

// AlignedBlock is Block over the align-sized units of an axis of n
// elements, clipped to n: block b of g starts at a multiple of align.
// Blocks past the last unit are empty.
func AlignedBlock(n, g, b, align int) (lo, hi int) {
	u0, u1 := Block(Units(n, align), g, b)
	return min(n, u0*align), min(n, u1*align)
}

// MBlock and NBlock are the row and column blocks of a product's split.
func (s Split) MBlock(m, i int) (lo, hi int) { return AlignedBlock(m, s.GM, i, s.rowAlign()) }

// NBlock is the column block j of a product of N columns.
func (s Split) NBlock(n, j int) (lo, hi int) { return AlignedBlock(n, s.GN, j, ColAlign) }

// KBlock is the k block l of a product with K terms.
func (s Split) KBlock(k, l int) (lo, hi int) { return Block(k, s.GK, l) }

// PartBlock is the row part l of a block of rows rows that tile (i, j,
// l) owns after the reduce-scatter of a k split: whole row groups.
func (s Split) PartBlock(rows, l int) (lo, hi int) { return AlignedBlock(rows, s.GK, l, s.rowAlign()) }

// Fits reports whether s has at most one block per unit of a product
// [m,k]x[k,n], so that no block is empty.
func (s Split) Fits(m, k, n int) bool {
	return s.GM >= 1 && s.GN >= 1 && s.GK >= 1 && s.GM <= Units(m, s.rowAlign()) && s.GN <= Units(n, ColAlign) && s.GK <= k
}

// Tile returns the tile of block (i, j, l) of s over a range starting at lo.
func (s Split) Tile(lo, i, j, l int) int { return lo + (i*s.GK+l)*s.GN + j }

// Piece is a rectangle [R0,R1)x[C0,C1) of a matrix held by one tile.
type Piece struct {
	Tile           int
	R0, R1, C0, C1 int
}

// Dist is where the elements of a matrix live; pieces may repeat a
// region on several tiles (replication).
type Dist struct {
	Rows, Cols int
	ElemBytes  int
	Pieces     []Piece
	// Panel is the layout of every piece: 0 row-major; RowAlign: A
	// panels (groups of 4 rows, k along the columns); ColAlign: B panels
	// (panels of 16 columns, k along the rows). The exchange moves a
	// panel region as one run when source and destination hold the same
	// k extent, else as one run per group.
	Panel int
}

// RowDist spreads rows of a rows x cols matrix over tiles [lo, lo+n),
// each element once.
func RowDist(rows, cols, elemBytes, lo, n int) Dist {
	return AlignedRowDist(rows, cols, elemBytes, lo, n, 1)
}

// AlignedRowDist is RowDist with pieces starting at multiples of align
// rows: at most one piece per align rows.
func AlignedRowDist(rows, cols, elemBytes, lo, n, align int) Dist {
	n = max(1, min(n, Units(rows, align)))
	d := Dist{Rows: rows, Cols: cols, ElemBytes: elemBytes}
	for b := 0; b < n; b++ {
		r0, r1 := AlignedBlock(rows, n, b, align)
		d.Pieces = append(d.Pieces, Piece{lo + b, r0, r1, 0, cols})
	}
	return d
}

// Operand describes a matrix product input as the split sees it.
type Operand struct {
	// Cast is the conversion from the resident element type to the
	// AMP's; HasCast false means the resident data feeds the AMP.
	Cast    codegen.CastKind
	HasCast bool
	// ResidentBytes is the element size of the data before any cast.
	ResidentBytes int
	// Constant operands count as constants in the memory report.
	Constant bool
	// Source, when set, is where the operand comes from: it is brought
	// to its blocks by an exchange (a previous node's output, or a graph
	// input cast on its home tiles before the exchange). Nil: resident
	// in block layout already.
	Source *Dist
	// CastBefore (with Source and HasCast): the cast runs on the source
	// tiles before the exchange, which then moves AMP-type bytes.
	CastBefore bool
}

// MatMul is one matrix product to cost.
type MatMul struct {
	M, K, N int
	Type    codegen.AMPType
	A, B    Operand
	FP8     numfmt.Format
	Align   int // row alignment of the M blocks (Split.Align)
}

// Phase is one superstep: a compute phase or an exchange phase.
type Phase struct {
	Name      string
	Exchange  bool
	Cycles    int64 // including the sync (and the exchange's fixed cost)
	Transfers int
}

// Estimate is the cost of one node under one split.
type Estimate struct {
	Phases    []Phase
	Total     int64 // sum of the phases
	Exchange  int64 // the exchange phases' part of Total
	Transfers int
	Memory    []TileMemory // per tile of the range, in tile order
	// Out is where the product's result ends (row-major FP32).
	Out Dist
}

// TileMemory is one tile's bytes by category.
type TileMemory struct {
	Tile         int
	Code         int64
	Constants    int64
	Variables    int64
	ExchangeCode int64
	Stacks       int64
	// Interleaved is the part of Constants+Variables that must sit in
	// interleaved memory (B panels, C).
	Interleaved int64
}

// Total is the tile's bytes.
func (m TileMemory) Total() int64 {
	return m.Code + m.Constants + m.Variables + m.ExchangeCode + m.Stacks
}

// MemoryReport is a plan that does not fit: the worst tiles, by total.
type MemoryReport struct {
	Arch        string
	Limit       int64 // usable bytes per tile
	Interleaved int64 // interleaved bytes per tile
	Over        int   // tiles over a limit
	Worst       []TileMemory
	What        string // the node or step at fault
}

// MaxReportTiles is how many tiles a MemoryReport lists.
const MaxReportTiles = 4

func (r *MemoryReport) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: out of memory on %d tiles of %s (usable %d bytes per tile, interleaved %d):", r.What, r.Over, r.Arch, r.Limit, r.Interleaved)
	for i, t := range r.Worst {
		if i > 0 {
			b.WriteString(";")
		}
		fmt.Fprintf(&b, " tile %d total %d (code %d, constants %d, variables %d, exchange code %d, stacks %d; interleaved %d)",
			t.Tile, t.Total(), t.Code, t.Constants, t.Variables, t.ExchangeCode, t.Stacks, t.Interleaved)
	}
	return b.String()
}

// CheckMemory returns a *MemoryReport when a tile of mem exceeds p's
// usable memory or interleaved region.
func CheckMemory(p *arch.Preset, what string, mem []TileMemory) error {
	limit := int64(p.UsableMemory().Size())
	il := int64(p.Interleaved.Size())
	var over []TileMemory
	for _, m := range mem {
		if m.Total() > limit || m.Interleaved > il {
			over = append(over, m)
		}
	}
	if len(over) == 0 {
		return nil
	}
	sort.SliceStable(over, func(i, j int) bool { return over[i].Total() > over[j].Total() })
	r := &MemoryReport{Arch: p.Name, Limit: limit, Interleaved: il, Over: len(over), What: what}
	r.Worst = over[:min(len(over), MaxReportTiles)]
	return r
}

func pad(n, m int) int { return (n + m - 1) / m * m }

// codeBytes measures the code of a kernel kind once (the code does not
// grow with the shape beyond its per-worker table, added by the caller).
var codeCache sync.Map

func measure(key string, emit func(b *codegen.Builder) error, p *arch.Preset) int64 {
	if v, ok := codeCache.Load(key); ok {
		return v.(int64)
	}
	b := codegen.NewBuilder(p, p.Executable.Lo)
	n := int64(4096) // fallback estimate
	if err := emit(b); err == nil {
		if code, err := b.Finish(); err == nil {
			n = int64(len(code))
		}
	}
	codeCache.Store(key, n)
	return n
}

func matmulCode(p *arch.Preset, t codegen.AMPType, bigSteps bool) int64 {
	key := fmt.Sprintf("%s/mm/%v/%v", p.Name, t, bigSteps)
	return measure(key, func(b *codegen.Builder) error {
		k := 8
		if bigSteps {
			k = 2 * (codegen.MaxRptiCount + 1)
		}
		if t == codegen.VecFP32 {
			_, err := codegen.EmitMatMulF32(b, codegen.MatMulF32{M: 4, K: k, N: 16, CStride: 16, Workers: 1,
				A: p.NonInterleaved.Lo + 0x8000, B: p.Interleaved.Lo, C: p.Interleaved.Lo + 0x10000})
			return err
		}
		mm := codegen.MatMul{Type: t, M: 4, K: k, N: 16, CStride: 16, Workers: 1,
			A: p.NonInterleaved.Lo + 0x8000, B: p.Interleaved.Lo, C: p.Interleaved.Lo + 0x10000,
			FP8: codegen.FP8Config{FormatA: numfmt.E4M3FNUZ, FormatB: numfmt.E4M3FNUZ}}
		_, err := codegen.EmitMatMul(b, mm)
		return err
	}, p)
}

func castCode(p *arch.Preset, k codegen.CastKind) int64 {
	key := fmt.Sprintf("%s/cast/%v", p.Name, k)
	return measure(key, func(b *codegen.Builder) error {
		_, err := codegen.EmitCast(b, castKernel(k, 64, numfmt.E4M3FNUZ, p))
		return err
	}, p)
}

func castKernel(k codegen.CastKind, n int, f numfmt.Format, p *arch.Preset) codegen.Cast {
	return codegen.Cast{Kind: k, N: n, X: p.Interleaved.Lo, Y: p.Interleaved.Lo + 0x20000, Format: f, Saturate: true, Workers: codegen.Slots}
}

func addCode(p *arch.Preset) int64 {
	return measure(p.Name+"/add", func(b *codegen.Builder) error {
		_, err := codegen.EmitBinary(b, addKernel(64, p))
		return err
	}, p)
}

func addKernel(n int, p *arch.Preset) codegen.Binary {
	return codegen.Binary{Op: codegen.Add, N: n, A: codegen.Operand{Addr: p.Interleaved.Lo},
		B: codegen.Operand{Addr: p.Interleaved.Lo + 0x20000}, Y: p.Interleaved.Lo, Workers: codegen.Slots}
}

// kernelCycles memoises codegen costs (the search evaluates the same
// block shapes many times).
var cycleCache sync.Map

func cycles(key string, f func() (codegen.Cost, error)) (int64, error) {
	if v, ok := cycleCache.Load(key); ok {
		return v.(int64), nil
	}
	c, err := f()
	if err != nil {
		return 0, err
	}
	n := c.Cycles()
	cycleCache.Store(key, n)
	return n, nil
}

// CastCycles is the cycles of a cast of n elements on one tile.
func CastCycles(p *arch.Preset, k codegen.CastKind, n int, f numfmt.Format) (int64, error) {
	if n <= 0 {
		return 0, nil
	}
	return cycles(fmt.Sprintf("%s/cast/%v/%d/%v", p.Name, k, n, f), func() (codegen.Cost, error) {
		return castKernel(k, n, f, p).Cost()
	})
}

// AddCycles is the cycles of an FP32 elementwise add of n elements.
func AddCycles(p *arch.Preset, n int) (int64, error) {
	if n <= 0 {
		return 0, nil
	}
	return cycles(fmt.Sprintf("%s/add/%d", p.Name, n), func() (codegen.Cost, error) { return addKernel(n, p).Cost() })
}

// MatMulCycles is the cycles of the AMP kernel on an m x k x n block,
// padded as the kernel needs (m to 4, n to 16, k to even for FP8).
func MatMulCycles(p *arch.Preset, t codegen.AMPType, m, k, n int) (int64, error) {
	if m <= 0 || k <= 0 || n <= 0 {
		return 0, nil
	}
	mp, np, kp := pad(m, 4), pad(n, 16), k
	if t == codegen.AMPFP8 {
		kp = pad(k, 2)
	}
	return cycles(fmt.Sprintf("%s/mm/%v/%d/%d/%d", p.Name, t, mp, kp, np), func() (codegen.Cost, error) {
		if t == codegen.VecFP32 {
			return codegen.MatMulF32{M: mp, K: kp, N: np, CStride: np, Workers: codegen.Slots}.Cost()
		}
		mm := codegen.MatMul{Type: t, M: mp, K: kp, N: np, CStride: np, Workers: codegen.Slots,
			FP8: codegen.FP8Config{FormatA: numfmt.E4M3FNUZ, FormatB: numfmt.E4M3FNUZ}}
		return mm.Cost()
	})
}
