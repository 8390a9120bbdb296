package codegen

import (
	"errors"
	"fmt"

	"ipu.local/libs/isa"
)

// This file holds the two-dimensional streams: the rows x units grid,
// its split over the workers by exact cost, its checks and its emission.

// Two-dimensional streams.
//
// A 2-D stream walks rows rows of n elements; each array has its own row
// stride (0: the same row for every row) and a column broadcast may give
// one element per row. A dense one (every array's stride n, no column
// broadcast) is the 1-D stream of rows*n elements, whose split is finer
// and which has no per-row work. Otherwise the rows x U grid of units
// (U = n/unit) is split into rs row ranges x cs column ranges, rs*cs <=
// workers: worker w = ri*cs + ci takes row range ri and, in each of its
// rows, unit range ci (both split as evenly as possible, the first ranges
// one longer); the workers of the last column range also take the row
// tail (n mod unit elements). Of the splits, the stream takes the one
// with the fewest cycles (Cost.Cycles), then the fewest workers, then the
// most row ranges.
//
// Worker code:
//
//	table lookup (4) and one ldm per table word: array pointers; unit
//	  count (unless every worker has the same); tail flag (when some
//	  but not all workers have the tail); advances (below); row count
//	  (when a worker has more than one row); column pointer
//	li(+lih)                  unit count above rpti's limit, column step beyond an imm16
//	setup
//	row:
//	  perRow                  the column broadcast
//	  rpt(i) count: body      1 + units * body (nothing when n < unit)
//	  brz flag, skip; tail    brz with the tail flag; the tail on the workers that have it
//	  advance                 one add(i) per array whose advance is not 0 for every worker
//	  addi, brnz              when a worker has more than one row: rows - 1, loop
//	exit
//
// An array's advance is its row stride in bytes minus what the row's
// units and tail walked: an addi when every worker has the same and it
// fits an imm16, else a table word in $m12 (input 0), $m13 (input 1) or
// $m14 (output). Worker w thus issues
//
//	4 + words + consts + setup + rows_w * (perRow + [1 + units_w*body] + flag + tail_w + advances + 2*loop)
//
// Registers beyond the 1-D stream's: row count $m0 (gRows), column
// pointer $m11 (gCol), column step $m1 (gColStep, after the table loads).
const (
	gRows    = M0
	gColStep = M1
	gCol     = M11
)

// part is one worker's share of a 2-D stream.
type part struct {
	r0, nr int // rows [r0, r0+nr)
	u0, nu int // units [u0, u0+nu) of each row
	tail   bool
}

type advKind uint8

const (
	advNone advKind = iota // 0 for every worker
	advImm                 // the same imm16 for every worker
	advReg                 // a table word
)

type gridAdv struct {
	kind advKind
	imm  int64
	vals []int64 // per worker
}

// grid is a 2-D stream's split and the code decisions that follow.
type grid struct {
	rs, cs int
	parts  []part
	rem    int // n mod unit
	units  int // per row
	loop   bool
	flag   bool
	count  int // units per row of every worker, or -1 (table word)
	adv    []gridAdv
	words  int
	cost   Cost
}

// gridCosts are the issues and pointer steps of a stream's code pieces.
type gridCosts struct {
	setup, body, tail, perRow int64
	bodyStep, tailStep        []int64 // per walked array
}

// walked returns the arrays a stream walks, inputs then output, and
// their pointer registers.
func (s *stream) walked() ([]array, []MReg) {
	arrays := append(append([]array{}, s.inputs...), s.output)
	regs := append(append([]MReg{}, []MReg{sIn0, sIn1}[:len(s.inputs)]...), sOut)
	return arrays, regs
}

// advRegister is the register of walked array i's advance.
func advRegister(i, n int) MReg {
	if i == n-1 {
		return M14
	}
	return M12 + MReg(i)
}

// ptrStep returns how far the code f emits moves pointer register r
// (post-increments and addi r, r, imm).
func ptrStep(f func(b *Builder), r MReg) int64 {
	b := NewBuilder(nil, 0)
	f(b)
	var d int64
	for i, in := range b.insts {
		if b.data[i] || in.A != uint8(r) {
			continue
		}
		switch in.Op {
		case isa.LDMP, isa.STMP, isa.LD32P, isa.ST32P, isa.LD64P, isa.ST64P, isa.LD128P, isa.ST128P:
			d += int64(in.Imm)
		case isa.ADDI:
			if in.D == uint8(r) {
				d += int64(in.Imm)
			}
		}
	}
	return d
}

// colStep returns the column broadcast's step from row to row, in bytes.
func (s *stream) colStep() int64 { return int64(s.col.esize) * int64(s.col.stride) }

func (s *stream) gridCosts() gridCosts {
	rem := s.n % s.unit
	tail := func(b *Builder) {
		if rem != 0 {
			s.tail(b, rem)
		}
	}
	c := gridCosts{setup: issues(s.setup), body: issues(s.body), tail: issues(tail)}
	if s.col != nil {
		c.perRow = issues(s.perRow)
	}
	_, regs := s.walked()
	for _, r := range regs {
		c.bodyStep = append(c.bodyStep, ptrStep(s.body, r))
		c.tailStep = append(c.tailStep, ptrStep(tail, r))
	}
	return c
}

// flat returns the 1-D stream a dense 2-D stream is, or nil.
func (s *stream) flat() *stream {
	if s.col != nil {
		return nil
	}
	arrays, _ := s.walked()
	for _, a := range arrays {
		if a.stride != s.n {
			return nil
		}
	}
	f := *s
	f.n, f.rows = s.n*s.rows, 1
	return &f
}

// layout returns the grid of the split rs x cs.
func (s *stream) layout(rs, cs int, gc gridCosts) *grid {
	units := s.n / s.unit
	g := &grid{rs: rs, cs: cs, rem: s.n % s.unit, units: units, count: -1}
	rStart, rCount := split(s.rows, rs)
	uStart, uCount := split(units, cs)
	for ri := range rs {
		for ci := range cs {
			g.parts = append(g.parts, part{rStart[ri], rCount[ri], uStart[ci], uCount[ci], g.rem != 0 && ci == cs-1})
		}
	}
	g.loop = rCount[0] > 1
	g.flag = g.rem != 0 && cs > 1
	if uCount[cs-1] == uCount[0] {
		g.count = uCount[0]
	}
	arrays, _ := s.walked()
	g.words = len(arrays)
	if g.count < 0 {
		g.words++
	}
	if g.flag {
		g.words++
	}
	g.adv = make([]gridAdv, len(arrays))
	if g.loop {
		for i, a := range arrays {
			ad := &g.adv[i]
			uniform := true
			for _, pt := range g.parts {
				v := int64(a.esize)*int64(a.stride) - int64(pt.nu)*gc.bodyStep[i]
				if pt.tail {
					v -= gc.tailStep[i]
				}
				ad.vals = append(ad.vals, v)
				uniform = uniform && v == ad.vals[0]
			}
			switch {
			case uniform && ad.vals[0] == 0:
				ad.kind = advNone
			case uniform && fitsImm16(ad.vals[0]):
				ad.kind, ad.imm = advImm, ad.vals[0]
			default:
				ad.kind = advReg
				g.words++
			}
		}
		g.words++
	}
	if s.col != nil {
		g.words++
	}
	s.costGrid(g, gc)
	return g
}

// costGrid sets g.cost, the exact work of each of g's workers.
func (s *stream) costGrid(g *grid, gc gridCosts) {
	pro := int64(tableBaseIssues+g.words) + gc.setup
	if g.count > MaxRptiCount {
		pro += int64(ConstLen(uint32(g.count)))
	}
	if s.col != nil {
		pro += loadBigIssues(s.colStep())
	}
	var adv int64
	for _, a := range g.adv {
		if a.kind != advNone {
			adv++
		}
	}
	g.cost = Cost{Workers: len(g.parts), Work: make([]int64, len(g.parts))}
	for w, pt := range g.parts {
		row := gc.perRow
		if g.units > 0 {
			row += 1 + int64(pt.nu)*gc.body
		}
		if g.flag {
			row++
		}
		if pt.tail {
			row += gc.tail
		}
		if g.loop {
			row += adv + 2
		}
		g.cost.Work[w] = Slots * (pro + int64(pt.nr)*row)
	}
}

// bestGrid returns the split with the fewest cycles.
func (s *stream) bestGrid() *grid {
	gc := s.gridCosts()
	units := s.n / s.unit
	var best *grid
	var bestCycles int64
	for rs := 1; rs <= min(s.workers, s.rows); rs++ {
		for cs := 1; cs <= min(s.workers/rs, max(units, 1)); cs++ {
			g := s.layout(rs, cs, gc)
			c := g.cost.Cycles()
			if best == nil || c < bestCycles || c == bestCycles &&
				(rs*cs < best.rs*best.cs || rs*cs == best.rs*best.cs && rs > best.rs) {
				best, bestCycles = g, c
			}
		}
	}
	return best
}

// rowSet is the memory a 2-D array covers: rows rows of size bytes,
// step bytes apart.
type rowSet struct {
	name        string
	addr        int64
	step, size  int64
	rows        int64
	write       bool
	mayBeSameAs bool // an identical set is allowed (in place)
}

// overlaps reports whether two row sets share a byte.
func (a rowSet) overlaps(b rowSet) bool {
	if a.size == 0 || b.size == 0 {
		return false
	}
	if a.step == 0 {
		a.rows = 1
	}
	if b.step == 0 {
		b.rows = 1
	}
	if a.rows > b.rows {
		a, b = b, a
	}
	for i := int64(0); i < a.rows; i++ {
		lo := a.addr + i*a.step
		hi := lo + a.size
		if b.rows == 1 {
			if b.addr < hi && lo < b.addr+b.size {
				return true
			}
			continue
		}
		// Rows j of b with b.addr + j*step in (lo - size, hi).
		jlo := floorDiv(lo-b.size-b.addr, b.step) + 1
		jhi := ceilDiv(hi-b.addr, b.step) - 1
		if max(jlo, 0) <= min(jhi, b.rows-1) {
			return true
		}
	}
	return false
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

func ceilDiv(a, b int64) int64 { return -floorDiv(-a, b) }

func (s *stream) checkGrid(b *Builder) error {
	if err := checkWorkers(s.workers); err != nil {
		return err
	}
	if len(s.inputs) > 2 {
		return fmt.Errorf("%d inputs: a two-dimensional stream takes at most 2", len(s.inputs))
	}
	if s.n < 1 || s.n > 1<<24 || s.rows > 1<<24 || int64(s.n)*int64(s.rows) > 1<<24 {
		return fmt.Errorf("%d rows of %d elements: want at least 1 element per row and at most 2^24 elements", s.rows, s.n)
	}
	arrays, _ := s.walked()
	for _, x := range arrays {
		if x.stride < 0 || x.stride > 1<<24 || int64(x.stride)*int64(s.rows) > 1<<24 {
			return fmt.Errorf("%s row stride %d out of range [0, 2^24/%d rows]", x.name, x.stride, s.rows)
		}
		if x.esize*x.stride%8 != 0 {
			return fmt.Errorf("%s row stride %d: %d bytes is not a multiple of 8 (row starts are 8-byte aligned)", x.name, x.stride, x.esize*x.stride)
		}
	}
	if s.output.stride < s.n {
		return fmt.Errorf("%s row stride %d is below the row length %d", s.output.name, s.output.stride, s.n)
	}
	if c := s.col; c != nil && (c.stride < 0 || c.stride > 1<<24 || int64(c.stride)*int64(s.rows) > 1<<24) {
		return fmt.Errorf("%s row stride %d out of range [0, 2^24/%d rows]", c.name, c.stride, s.rows)
	}
	if b == nil {
		return nil
	}
	a := b.Arch()
	if a == nil {
		return errors.New("builder has no architecture preset")
	}
	var sets []rowSet
	add := func(x array, length, align int) error {
		set := rowSet{name: x.name, addr: int64(x.addr), step: int64(x.esize) * int64(x.stride),
			size: int64(x.esize) * int64(length), rows: int64(s.rows), write: x == s.output, mayBeSameAs: true}
		span := uint64(set.step)*uint64(s.rows-1) + uint64(set.size)
		if err := checkBuffer(buffer{x.name, x.addr, span, set.write}, uint32(align), a.Memory, "tile memory"); err != nil {
			return err
		}
		sets = append(sets, set)
		return nil
	}
	for _, x := range arrays {
		if err := add(x, s.n, 8); err != nil {
			return err
		}
	}
	if s.col != nil {
		if err := add(*s.col, 1, s.col.esize); err != nil {
			return err
		}
	}
	for i, x := range sets {
		for _, y := range sets[i+1:] {
			if !x.write && !y.write {
				continue
			}
			if x.mayBeSameAs && y.mayBeSameAs && x.addr == y.addr && x.step == y.step && x.size == y.size {
				continue
			}
			if x.overlaps(y) {
				return fmt.Errorf("%s (%d rows of %d bytes at %#x, step %d) overlaps %s (%d rows of %d bytes at %#x, step %d)",
					x.name, x.rows, x.size, x.addr, x.step, y.name, y.rows, y.size, y.addr, y.step)
			}
		}
	}
	return nil
}

// emitGrid emits the kernel of the split g: prologue, the row loop over
// the units and the tail, and the table.
func (s *stream) emitGrid(b *Builder, g *grid) (Kernel, error) {
	k := Kernel{Entry: b.Here(), Cost: g.cost}
	arrays, regs := s.walked()
	table := b.Label()
	s.gridPrologue(b, g, table)
	loop := b.Here()
	if s.col != nil {
		s.perRow(b)
	}
	if g.units > 0 {
		end := b.Label()
		if g.count >= 0 && g.count <= MaxRptiCount {
			b.Rpti(g.count, end)
		} else {
			b.Rpt(sCnt, end)
		}
		s.body(b)
		b.Bind(end)
	}
	if g.rem != 0 {
		if g.flag {
			skip := b.Label()
			b.Brz(sTail, skip)
			s.tail(b, g.rem)
			b.Bind(skip)
		} else {
			s.tail(b, g.rem)
		}
	}
	if g.loop {
		for i, ad := range g.adv {
			switch ad.kind {
			case advImm:
				b.Addi(regs[i], regs[i], int32(ad.imm))
			case advReg:
				b.Add(regs[i], regs[i], advRegister(i, len(arrays)))
			}
		}
		b.Addi(gRows, gRows, -1)
		b.Brnz(gRows, loop)
	}
	b.Exit()
	emitTable(b, table, s.gridTable(g))
	return k, b.Err()
}

// gridPrologue emits the table loads of a grid worker (see gridTable),
// the repeat count and column step constants, and the stream's setup.
func (s *stream) gridPrologue(b *Builder, g *grid, table Label) {
	arrays, regs := s.walked()
	emitTableBase(b, table, g.words, M1)
	off := int32(0)
	ld := func(r MReg) {
		b.Ldm(r, M1, off)
		off += 4
	}
	for _, r := range regs {
		ld(r)
	}
	if g.count < 0 {
		ld(sCnt)
	}
	if g.flag {
		ld(sTail)
	}
	for i, ad := range g.adv {
		if ad.kind == advReg {
			ld(advRegister(i, len(arrays)))
		}
	}
	if g.loop {
		ld(gRows)
	}
	if s.col != nil {
		ld(gCol)
	}
	if g.count > MaxRptiCount {
		b.LoadConst(sCnt, uint32(g.count))
	}
	if s.col != nil {
		loadBig(b, s.colStep(), gColStep)
	}
	s.setup(b)
}

// gridTable returns the table rows of g's workers: the arrays' starts,
// then (as the prologue loads them) the unit count, the tail flag, the
// register advances, the row count and the column's start.
func (s *stream) gridTable(g *grid) [][]uint32 {
	arrays, _ := s.walked()
	rows := make([][]uint32, len(g.parts))
	for w, pt := range g.parts {
		for _, x := range arrays {
			rows[w] = append(rows[w], x.addr+uint32(x.esize*(pt.r0*x.stride+pt.u0*s.unit)))
		}
		if g.count < 0 {
			rows[w] = append(rows[w], uint32(pt.nu))
		}
		if g.flag {
			f := uint32(0)
			if pt.tail {
				f = 1
			}
			rows[w] = append(rows[w], f)
		}
		for _, ad := range g.adv {
			if ad.kind == advReg {
				rows[w] = append(rows[w], uint32(ad.vals[w]))
			}
		}
		if g.loop {
			rows[w] = append(rows[w], uint32(pt.nr))
		}
		if s.col != nil {
			rows[w] = append(rows[w], s.col.addr-s.colDown+uint32(int64(pt.r0)*s.colStep()))
		}
	}
	return rows
}
