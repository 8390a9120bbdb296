package codegen

import (
	"errors"
	"fmt"
	"slices"
)

// AMPType is the input type of a matrix product on the AMP.
type AMPType uint8

// AMP input types.
const (
	AMPFP16 AMPType = iota // amph: 64 MACs per instruction
	AMPFP8                 // ampq: 128 MACs per instruction (two k)
	AMPFP32                // ampf: 64 MACs per instruction, over 4 cycles
)

// stepIssues is the issue cycles of one AMP step of the type: ampf
// takes 4, amph and ampq 1.
func (t AMPType) stepIssues() int64 {
	if t == AMPFP32 {
		return 4
	}
	return 1
}

// ampStep emits one AMP step of the type with operands at $m a and $m c.
func (t AMPType) ampStep(b *Builder, a, c MReg) {
	switch t {
	case AMPFP8:
		b.Ampq(a, c)
	case AMPFP32:
		b.Ampf(a, c)
	default:
		b.Amph(a, c)
	}
}

func (t AMPType) String() string {
	switch t {
	case AMPFP8:
		return "fp8"
	case AMPFP32:
		return "fp32"
	}
	return "fp16"
}

// Size is the bytes of one element of the type: 1 (FP8), 2 (FP16) or 4
// (FP32).
func (t AMPType) Size() int {
	switch t {
	case AMPFP8:
		return 1
	case AMPFP32:
		return 4
	}
	return 2
}

func (t AMPType) size() int64 { return int64(t.Size()) }

// MatMul is C[M][N] (FP32) = A[M][K] x B[K][N] on the AMP, or
// C += A x B with Accumulate.
//
// # Layouts
//
// The caller pads M to a multiple of 4 and N to a multiple of 16 (with
// zeros, or with anything when the padded rows and columns of C are never
// read); the kernel computes the padded product. Element sizes e are 4
// bytes (FP32), 2 bytes (FP16) or 1 byte (FP8: format and scale from FP8).
//
// A-panel layout: rows in groups of 4; group g holds, for each k in
// order, the 4 elements A[4g+0..3][k]. Element (i, k) is at byte
//
//	A + e*((i/4)*4*K + 4*k + i%4)
//
// so one group is a 4K-element k-major panel, and an amph reads one k
// (8 bytes), an ampq two k (8 bytes), an ampf one k (16 bytes). A is
// 8-byte aligned, anywhere in tile memory.
//
// B-panel layout: columns in panels of 16; panel p holds, for each k in
// order, the 16 elements B[k][16p+0..15]. Element (k, j) is at byte
//
//	B + e*((j/16)*16*K + 16*k + j%16)
//
// B is 32-byte aligned in interleaved memory (amph and ampq read 32
// bytes there, ampf 64).
//
// C is row-major FP32 with a row stride of CStride elements (a multiple
// of 4, at least N): C[i][j] at C + 4*(i*CStride + j). With CPanel set,
// C's 16-column panels lie CPanel elements apart instead of 16: C[i][j]
// at C + 4*(i*CStride + (j/16)*CPanel + j%16), CStride at least 16 and
// CPanel at least M*CStride (each panel an M x 16 block of its own, e.g.
// the column parts of a k split's reduce-scatter), 4*CPanel bytes
// within an imm16, CPanel at most 2^20.
//
// With CParts > 0 instead, C's N/16 panels come in CParts column parts,
// one after the other, as even as possible (layout.Block: the first
// (N/16) mod CParts parts one panel wider): part h, w_h panels wide, is
// a row-major M x 16w_h block (row stride 16w_h) at element 16*M*(w_0 +
// ... + w_{h-1}), so that each part is contiguous (a k split's
// reduce-scatter sends and sums each part on its own tile). CStride and
// CPanel are then 0, CParts at most N/16 and M*N at most 2^20. The items
// are taken part by part (matmulparts.go), so that the workers share all
// of the parts' items in one launch.
//
// C is 16-byte aligned in interleaved memory (ampst and ampld). A and B must not share
// a 16 KiB memory element (amph would take an extra cycle): put A in
// non-interleaved memory, or in another 32 KiB interleaved pair than B.
// C must not overlap A or B.
//
// # Arithmetic
//
// For each element, acc starts at +0 (at C[i][j] with Accumulate) and for
// k = 0, 1, ..., K-1 in order
//
//	acc = RN32(acc + p),  p = A[i][k] * B[k][j]
//
// one FP32 rounding per k (RN32: round to nearest even). For FP16, p is
// exact. For FP32, p is exact too: ampf fuses the product into the add
// (f32v2fma's rounding, subnormals kept; a NaN is 0x7fc00000), so C holds
// the bits of the k-ordered f32v2fma chain (EmulateMatMulF32). For FP8,
// p = RN32(a*b * 2^(ScaleA+ScaleB)) where a and b are the unscaled FP8
// values: exact unless it leaves the FP32 normal range. C[i][j] = acc.
//
// # Work split
//
// The work items are the (row group g, column panel p) pairs, numbered
// g*(N/16) + p; worker w takes a contiguous range of them, the first
// items mod workers ranges one longer. min(Workers, items) workers run.
// When items is no multiple of Workers, the kernel may instead split the
// items' steps over the workers (matmulsplit.go): an item's first steps
// on one worker, the rest continued on the next through C, with the same
// FP32 roundings in the same k order; it does so only when that lowers
// the busiest worker's cycles, and Cost prices the variant it emits.
type MatMul struct {
	Type       AMPType
	M, K, N    int
	A, B, C    uint32
	CStride    int // elements between rows of C
	CPanel     int // elements between C's 16-column panels (0: 16, row-major)
	CParts     int // C's column parts (0: none; matmulparts.go)
	Accumulate bool
	FP8        FP8Config // formats and scales of A and B (FP8 only)
	Workers    int       // 1..6
}

// Matrix kernel register use (worker).
const (
	mmEntry = M1  // this worker's table row
	mmAg    = M2  // A panel of the current row group
	mmB     = M3  // B, running
	mmC     = M4  // C of the current item
	mmA     = M5  // A, running
	mmRem   = M6  // panels left in the row group
	mmCnt   = M7  // items left
	mmRow   = M8  // C of rows 1..3
	mmRS    = M9  // row stride in bytes, when it is not an imm16
	mmJump  = M10 // C adjustment at a group change, when not an imm16
	mmSteps = M11 // AMP steps per item, when not an rpti count
	mmTmp   = M12
	mmBPart = M13 // the part's first B panel (CParts)
)

func (p MatMul) check() error {
	if err := checkWorkers(p.Workers); err != nil {
		return err
	}
	if p.Type != AMPFP16 && p.Type != AMPFP8 && p.Type != AMPFP32 {
		return fmt.Errorf("unknown AMP type %d", p.Type)
	}
	if p.M <= 0 || p.M%4 != 0 {
		return fmt.Errorf("M %d: want a positive multiple of 4 (pad the rows)", p.M)
	}
	if p.N <= 0 || p.N%16 != 0 {
		return fmt.Errorf("N %d: want a positive multiple of 16 (pad the columns)", p.N)
	}
	if p.K <= 0 || p.Type == AMPFP8 && p.K%2 != 0 {
		return fmt.Errorf("K %d: want a positive (FP8: even) count", p.K)
	}
	if p.CParts > 0 {
		if err := p.checkParts(); err != nil {
			return err
		}
	} else if p.CPanel == 0 && (p.CStride < p.N || p.CStride%4 != 0) {
		return fmt.Errorf("C row stride %d: want a multiple of 4 of at least N=%d", p.CStride, p.N)
	}
	if p.CPanel != 0 && (p.CStride < 16 || p.CStride%4 != 0 || p.CPanel%4 != 0 || int64(p.CPanel) < int64(p.M)*int64(p.CStride) || !fitsImm16(4*int64(p.CPanel)) || p.CPanel > 1<<20) {
		return fmt.Errorf("C panel stride %d (row stride %d): want a multiple of 4 of at least M*CStride=%d and at most 2^20, 4*CPanel within an imm16, and a row stride of a multiple of 4 of at least 16", p.CPanel, p.CStride, int64(p.M)*int64(p.CStride))
	}
	// Sizes bounded so that every byte offset fits 32 bits.
	if int64(p.M)*int64(p.K) > 1<<20 || int64(p.N)*int64(p.K) > 1<<20 || int64(p.M)*int64(p.CStride) > 1<<20 {
		return fmt.Errorf("matrix of %dx%dx%d (C stride %d) does not fit a tile", p.M, p.K, p.N, p.CStride)
	}
	if p.Type == AMPFP8 {
		if err := p.FP8.check(); err != nil {
			return err
		}
	}
	return nil
}

// mmShape holds the derived sizes.
type mmShape struct {
	groups, panels, items int
	steps                 int64 // AMP instructions per item
	stepIssues            int64 // issue cycles of one (AMPType.stepIssues)
	stepA, stepB          int64 // bytes one step moves A and B on
	groupBytes            int64 // one A panel
	panelBytes            int64 // one B panel
	bStride               int64 // B panel stride (bytes)
	rowBytes              int64 // C row stride
	panelC                int64 // C panel stride (bytes)
	jump                  int64 // C change after a group's last panel
	workers               int
	start, count          []int
	split                 []mmWorker // the fractional split (matmulsplit.go), or nil
}

// table is the per-worker table of a product kernel: the worker's first
// item's A group, B panel and C position, the panels left in its row
// group, and its item count.
func (s mmShape) table(a, b, c uint32) [][]uint32 {
	tab := make([][]uint32, s.workers)
	for w := range tab {
		st := s.start[w]
		g, pn := int64(st/s.panels), int64(st%s.panels)
		tab[w] = []uint32{
			a + uint32(g*s.groupBytes),
			b + uint32(pn*s.bStride),
			c + uint32(4*g*s.rowBytes+s.panelOff(pn)),
			uint32(int64(s.panels) - pn),
			uint32(s.count[w]),
		}
	}
	return tab
}

// panelOff is the byte offset of C panel pn in its row group.
func (s mmShape) panelOff(pn int64) int64 { return pn * s.panelC }

func (p MatMul) shape() mmShape {
	e := p.Type.size()
	s := mmShape{groups: p.M / 4, panels: p.N / 16}
	s.items = s.groups * s.panels
	s.steps = int64(p.K)
	if p.Type == AMPFP8 {
		s.steps /= 2
	}
	s.stepIssues = p.Type.stepIssues()
	s.groupBytes = 4 * int64(p.K) * e
	s.panelBytes = 16 * int64(p.K) * e
	s.stepA, s.stepB = s.groupBytes/s.steps, s.panelBytes/s.steps
	s.bStride = s.panelBytes
	s.rowBytes = 4 * int64(p.CStride)
	s.panelC = 64
	if p.CPanel != 0 {
		s.panelC = 4 * int64(p.CPanel)
	}
	s.jump = 4*s.rowBytes - s.panelC*int64(s.panels)
	s.workers = min(p.Workers, s.items)
	s.start, s.count = split(s.items, s.workers)
	return s
}

// Cost returns the kernel's cost (checking the shape, not the addresses).
//
// Worker w with items [s, s+c) issues
//
//	4 + 5                      table lookup and loads
//	+ 2                        (FP8) set CSR fp8
//	+ big constants            ConstLen of each of: row stride in bytes,
//	                           group jump, steps, that do not fit their
//	                           immediate (imm16, imm16, rpti count 4095)
//	+ c * (t*steps + 27)       per item (t*steps + 45 with Accumulate)
//	+ 4 * (floor((s+c)/P) - floor(s/P))    row group changes
//
// cycles' worth of instructions before its exit (steps = K for FP16 and
// FP32, K/2 for FP8; t = 4 for FP32, ampf's cycles, else 1; P = N/16),
// and Work[w] = 6 x that. With column parts
// (CParts), partsIssues (matmulparts.go) counts instead. The split
// variant adds 1 (the whole items' guard) and per worker a head and a
// tail section: 2 when absent, else 2 + 3 + 1 + t*steps + 19 plus the
// clear (1, or 19 for the loads with Accumulate) for a head, plus 19
// loads for a tail.
func (p MatMul) Cost() (Cost, error) {
	if err := p.check(); err != nil {
		return Cost{}, fmt.Errorf("matmul: %w", err)
	}
	s, pro, item := p.plan()
	c := Cost{Workers: s.workers, Work: make([]int64, s.workers)}
	if p.CParts > 0 {
		for w, segs := range p.segments(s) {
			c.Work[w] = Slots * partsIssues(pro, item, p.partWidths(), segs)
		}
		return c, nil
	}
	if s.split != nil {
		for w, sh := range s.split {
			c.Work[w] = Slots * s.splitIssues(pro, item, p.Accumulate, sh)
		}
		return c, nil
	}
	for w := range c.Work {
		c.Work[w] = Slots * s.wholeIssues(w, pro, item)
	}
	return c, nil
}

// wholeIssues is worker w's issues when it takes whole items: the
// prologue, its items and its row group changes.
func (s mmShape) wholeIssues(w int, pro, item int64) int64 {
	st, n := s.start[w], s.count[w]
	P := s.panels
	return pro + int64(n)*item + 4*int64((st+n)/P-st/P)
}

// plan returns the shape with the work split decided (s.split set when
// the fractional split of matmulsplit.go beats whole items), the
// prologue's issues and an item's.
func (p MatMul) plan() (s mmShape, pro, item int64) {
	s = p.shape()
	pro = int64(tableBaseIssues)
	if p.Type == AMPFP8 {
		pro += setFP8Issues
	}
	if s.steps > MaxRptiCount {
		pro += int64(ConstLen(uint32(s.steps)))
	}
	item = s.steps*s.stepIssues + 27
	if p.Accumulate {
		item += 18
	}
	if p.CParts > 0 {
		// Column parts: segments (matmulparts.go), no fractional split.
		return s, pro, item
	}
	pro += 5 + loadBigIssues(s.rowBytes) + loadBigIssues(s.jump)
	most := int64(0)
	for w := range s.workers {
		most = max(most, s.wholeIssues(w, pro, item))
	}
	if ws := s.planSplit(pro, item, p.Accumulate, p.Workers, most); ws != nil {
		s.split, s.workers = ws, len(ws)
	}
	return s, pro, item
}

// EmitMatMul emits the kernel at b's current position.
func EmitMatMul(b *Builder, p MatMul) (Kernel, error) {
	cost, err := p.Cost()
	if err != nil {
		return Kernel{}, err
	}
	if err := p.checkMemory(b); err != nil {
		return Kernel{}, fmt.Errorf("matmul: %w", err)
	}
	s, _, _ := p.plan()
	k := Kernel{Entry: b.Here(), Cost: cost}
	if p.CParts > 0 {
		emitMatMulParts(b, p, s)
		return k, b.Err()
	}
	table := b.Label()
	words := 5
	if s.split != nil {
		words = mmSplitWords
	}
	emitTableBase(b, table, words, mmEntry)
	b.Ldm(mmAg, mmEntry, 0)
	b.Ldm(mmB, mmEntry, 4)
	b.Ldm(mmC, mmEntry, 8)
	b.Ldm(mmRem, mmEntry, 12)
	b.Ldm(mmCnt, mmEntry, 16)
	if p.Type == AMPFP8 {
		emitSetFP8(b, p.FP8, mmTmp)
	}
	loadBig(b, s.rowBytes, mmRS)
	loadBig(b, s.jump, mmJump)
	if s.steps > MaxRptiCount {
		b.LoadConst(mmSteps, uint32(s.steps))
	}
	rowsAt := func(base MReg, op func(MReg, int)) { // 19 issues
		op(base, 0)
		addConst(b, mmRow, base, s.rowBytes, mmRS)
		op(mmRow, 1)
		addConst(b, mmRow, mmRow, s.rowBytes, mmRS)
		op(mmRow, 2)
		addConst(b, mmRow, mmRow, s.rowBytes, mmRS)
		op(mmRow, 3)
	}
	done := b.Label()
	if s.split != nil {
		emitChunk(b, p, 20, p.Accumulate, rowsAt)
		b.Brz(mmCnt, done)
	}
	emitItems(b, p, s, rowsAt, s.panelC, func() {
		b.LoadConst(mmRem, uint32(s.panels))
		b.Mov(mmAg, mmA)
		b.LoadAddr(mmB, p.B)
		addConst(b, mmC, mmC, s.jump, mmJump)
	})
	b.Bind(done)
	if s.split != nil {
		emitChunk(b, p, 36, true, rowsAt)
		b.Exit()
		emitTable(b, table, s.splitTable(p.A, p.B, p.C, s.split))
		return k, b.Err()
	}
	b.Exit()

	emitTable(b, table, s.table(p.A, p.B, p.C))
	return k, b.Err()
}

// emitItems emits the whole-item loop: mmCnt items from mmAg, mmB and
// mmC, each its AMP steps and its four C rows (rowsAt), then C panelC
// bytes on; when mmRem reaches 0 the row group changes (next: 4
// issues, with A continuing where the item's steps left it).
func emitItems(b *Builder, p MatMul, s mmShape, rowsAt func(MReg, func(MReg, int)), panelC int64, next func()) {
	rows := func(op func(MReg, int)) { rowsAt(mmC, op) }
	item := b.Here()
	if p.Accumulate {
		rows(b.Ampld)
	} else {
		b.Ampclr()
	}
	b.Mov(mmA, mmAg)
	end := b.Label()
	if s.steps > MaxRptiCount {
		b.Rpt(mmSteps, end)
	} else {
		b.Rpti(int(s.steps), end)
	}
	p.Type.ampStep(b, mmA, mmB)
	b.Bind(end)
	rows(b.Ampst)
	b.Addi(mmC, mmC, int32(panelC))
	b.Addi(mmRem, mmRem, -1)
	cont := b.Label()
	b.Brnz(mmRem, cont)
	next()
	b.Bind(cont)
	b.Addi(mmCnt, mmCnt, -1)
	b.Brnz(mmCnt, item)
}

// checkMemory validates the addresses against b's preset.
func (p MatMul) checkMemory(b *Builder) error {
	a := b.Arch()
	if a == nil {
		return errors.New("builder has no architecture preset")
	}
	e := uint64(p.Type.size())
	bufA := buffer{"A", p.A, uint64(p.M) * uint64(p.K) * e, false}
	bufB := buffer{"B", p.B, uint64(p.N) * uint64(p.K) * e, false}
	s := p.shape()
	cBytes := 4*uint64(p.M-1)*uint64(p.CStride) + uint64(s.panelOff(int64(s.panels-1))) + 64
	if p.CParts > 0 {
		cBytes = 4 * uint64(p.M) * uint64(p.N)
	}
	bufC := buffer{"C", p.C, cBytes, true}
	if err := checkBuffer(bufA, 8, a.Memory, "tile memory"); err != nil {
		return err
	}
	if err := checkBuffer(bufB, 32, a.Interleaved, "interleaved memory"); err != nil {
		return err
	}
	if err := checkBuffer(bufC, 16, a.Interleaved, "interleaved memory"); err != nil {
		return err
	}
	if err := checkDisjoint([]buffer{bufA, bufB, bufC}, false); err != nil {
		return err
	}
	eb := elements(a, bufB)
	for _, el := range elements(a, bufA) {
		if slices.Contains(eb, el) {
			return fmt.Errorf("A [%#x, %#x) and B [%#x, %#x) share memory element %d", bufA.addr, uint64(bufA.addr)+bufA.size, bufB.addr, uint64(bufB.addr)+bufB.size, el)
		}
	}
	return nil
}

// APanelIndex returns the element index of A[i][k] in the A-panel layout
// of a K-column A (multiply by the element size for the byte offset).
func APanelIndex(i, k, K int) int { return (i/4)*4*K + 4*k + i%4 }

// BPanelIndex returns the element index of B[k][j] in the B-panel layout
// of a K-row B.
func BPanelIndex(k, j, K int) int { return (j/16)*16*K + 16*k + j%16 }
