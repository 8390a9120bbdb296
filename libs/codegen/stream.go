package codegen

import (
	"errors"
	"fmt"
)

// This file holds the stream kernel frame of the elementwise kernels and
// casts: the 1-D split over the workers, the table, the cost, the checks
// and the emission. Two-dimensional streams are in streamgrid.go.

// A stream kernel walks arrays of n elements in units of unit elements
// (2 for FP32 work on f32v2 pairs, 4 for FP16 work and casts: one
// 64-bit word). Worker w takes a
// contiguous range of the n/unit units (split as evenly as possible, the
// first ones one longer); the last running worker also takes the tail of
// n mod unit elements. min(Workers, max(1, n/unit)) workers run.
//
// Worker code:
//
//	table lookup (4) and one ldm per table word (array pointers, unit
//	count, tail flag when n mod unit != 0)
//	setup                     constants, CSR fp8
//	rpt count: body           1 + units * body
//	brz tail, skip; tail      when n mod unit != 0: 1, + tail on one worker
//	exit
//
// Registers: table row $m1; array pointers $m2, $m3 (inputs), $m4
// (output); unit count $m5; tail flag $m6; $m7..$m11 scratch.
//
// With rows > 1 the stream is two-dimensional (see "Two-dimensional
// streams" below): rows rows of n elements, row r of an array at addr +
// esize*r*stride.
type stream struct {
	n       int
	unit    int
	inputs  []array
	output  array
	workers int
	setup   func(b *Builder)
	body    func(b *Builder)
	tail    func(b *Builder, rem int) // rem = n mod unit > 0

	// finish, when set (one-dimensional streams only), runs after the
	// tail and is counted; after is emitted after the exit, reached only
	// by finish's branches (a fault), and not counted.
	finish, after func(b *Builder)

	rows int // <= 1: one row, the kernel above
	// col is a column-broadcast operand (one element per row, at addr +
	// esize*r*stride), or nil. perRow, run at the start of every row,
	// loads its element from the pointer gCol and steps gCol to the next
	// row's (stepping gCol by colStep(): post-increment or addi when it
	// fits an imm16, else add of gColStep).
	col    *array
	perRow func(b *Builder)
	// colDown is subtracted from the column pointers of the table (an
	// FP16 element read through its aligned word).
	colDown uint32
}

// array is one array a stream kernel walks.
type array struct {
	name   string
	addr   uint32
	esize  int // bytes per element
	stride int // elements from one row to the next (rows > 1)
}

const (
	sIn0  = M2
	sIn1  = M3
	sOut  = M4
	sCnt  = M5
	sTail = M6
	sIn2  = M7 // a third input: one-dimensional streams only
)

// plan returns the running workers, their first unit and unit counts,
// and the worker doing the tail (-1: none).
func (s *stream) plan() (workers int, start, count []int, tailWorker int) {
	units := s.n / s.unit
	workers = min(s.workers, max(units, 1))
	start, count = split(units, workers)
	tailWorker = -1
	if s.n%s.unit != 0 {
		tailWorker = workers - 1
	}
	return
}

func (s *stream) tableWords() int {
	w := len(s.inputs) + 2
	if s.n%s.unit != 0 {
		w++
	}
	return w
}

// issues returns the issue cycles of the code f emits.
func issues(f func(b *Builder)) int64 {
	b := NewBuilder(nil, 0)
	f(b)
	return b.Issued()
}

func (s *stream) cost() Cost {
	if s.rows > 1 {
		if f := s.flat(); f != nil {
			return f.cost()
		}
		return s.bestGrid().cost
	}
	workers, _, count, tw := s.plan()
	pro := int64(tableBaseIssues+s.tableWords()) + issues(s.setup) + 1
	if s.finish != nil {
		pro += issues(s.finish)
	}
	body := issues(s.body)
	var tail, brz int64
	if rem := s.n % s.unit; rem != 0 {
		brz = 1
		tail = issues(func(b *Builder) { s.tail(b, rem) })
	}
	c := Cost{Workers: workers, Work: make([]int64, workers)}
	for w := range c.Work {
		v := pro + int64(count[w])*body + brz
		if w == tw {
			v += tail
		}
		c.Work[w] = Slots * v
	}
	return c
}

func (s *stream) check(b *Builder) error {
	if s.rows > 1 {
		return s.checkGrid(b)
	}
	if err := checkWorkers(s.workers); err != nil {
		return err
	}
	if s.n < 1 || s.n > 1<<24 {
		return fmt.Errorf("element count %d out of range [1, 2^24]", s.n)
	}
	if b == nil {
		return nil
	}
	a := b.Arch()
	if a == nil {
		return errors.New("builder has no architecture preset")
	}
	var bufs []buffer
	for _, x := range append(append([]array{}, s.inputs...), s.output) {
		buf := buffer{x.name, x.addr, uint64(s.n) * uint64(x.esize), x == s.output}
		if err := checkBuffer(buf, 8, a.Memory, "tile memory"); err != nil {
			return err
		}
		bufs = append(bufs, buf)
	}
	return checkDisjoint(bufs, true)
}

func (s *stream) emit(b *Builder) (Kernel, error) {
	if s.rows > 1 {
		if f := s.flat(); f != nil {
			return f.emit(b)
		}
		return s.emitGrid(b, s.bestGrid())
	}
	k := Kernel{Entry: b.Here(), Cost: s.cost()}
	workers, start, count, tw := s.plan()
	table := b.Label()
	nw := s.tableWords()
	emitTableBase(b, table, nw, M1)
	ptrs := []MReg{sIn0, sIn1, sIn2}[:len(s.inputs)]
	for i, r := range ptrs {
		b.Ldm(r, M1, int32(4*i))
	}
	b.Ldm(sOut, M1, int32(4*len(ptrs)))
	b.Ldm(sCnt, M1, int32(4*len(ptrs)+4))
	rem := s.n % s.unit
	if rem != 0 {
		b.Ldm(sTail, M1, int32(4*len(ptrs)+8))
	}
	s.setup(b)
	end := b.Label()
	b.Rpt(sCnt, end)
	s.body(b)
	b.Bind(end)
	if rem != 0 {
		skip := b.Label()
		b.Brz(sTail, skip)
		s.tail(b, rem)
		b.Bind(skip)
	}
	if s.finish != nil {
		s.finish(b)
	}
	b.Exit()
	if s.after != nil {
		s.after(b)
	}
	rows := make([][]uint32, workers)
	for w := range rows {
		for _, x := range s.inputs {
			rows[w] = append(rows[w], x.addr+uint32(start[w]*s.unit*x.esize))
		}
		rows[w] = append(rows[w], s.output.addr+uint32(start[w]*s.unit*s.output.esize), uint32(count[w]))
		if rem != 0 {
			f := uint32(0)
			if w == tw {
				f = 1
			}
			rows[w] = append(rows[w], f)
		}
	}
	emitTable(b, table, rows)
	return k, b.Err()
}
