package sched

import (
	"fmt"

	"ipu.local/libs/arch"
	"ipu.local/libs/isa"
)

// Exchange code compressed with repeat loops.
//
// A run of regular events (the same instructions every period, only the
// loaded operand values changing: a gather from consecutive tiles into
// consecutive buffers, a scatter of equal slices) is straight-line code
// of k periods of L instructions. Compress keeps the first period as it
// is and runs the other k-1 as a repeat body (rpti): a load whose value
// steps by a constant stride becomes addi of the stride (the value is
// elided: arithmetic), any other varying load becomes ldm from a patch
// table with post-increment (the value is stored: a patch). Every
// instruction of the body keeps its issue cycle: addi and ldm take one
// issue slot as li does, the loop goes back without overhead, and the
// rpti (and, for the first loop with patches, the li of the table's
// address) take the place of delay cycles at the end of the first
// period, so a run is compressed only where that delay has an issue
// slot to spare (delay 0, or delay n >= 6 per extra instruction). The
// schedule is not changed: Compress replays both codes and keeps the
// compressed one only when every send, recv and sync issues at the same
// cycle with the same operand values.

// maxBody and maxCount are rpti's limits.
const (
	maxBody  = 0xFF
	maxCount = 1<<12 - 1
)

// candidates bounds the periods tried at each delay: the distances to
// its next few identical delays.
const candidates = 3

// CompressStats are one tile's figures.
type CompressStats struct {
	Loops       int // repeat loops
	CodeBytes   int // straight-line code
	PackedBytes int // compressed code, its patch table aside
	PatchBytes  int // the patch table: per-iteration values stored
	ElidedBytes int // per-iteration values computed by addi, not stored
}

// Add accumulates s into c.
func (c *CompressStats) Add(s CompressStats) {
	c.Loops += s.Loops
	c.CodeBytes += s.CodeBytes
	c.PackedBytes += s.PackedBytes
	c.PatchBytes += s.PatchBytes
	c.ElidedBytes += s.ElidedBytes
}

// Compress returns the plan with every tile's code compressed with
// repeat loops where that makes it smaller and keeps its timing, and the
// figures of each tile (in the order of pl.Tiles). The plan's events
// and cycles are unchanged. A tile's patch table is placed at address 0
// (TableAt): the code's user places it (TileCode.Emit).
func Compress(p *arch.Preset, pl *Plan) (*Plan, []CompressStats) {
	out := *pl
	out.Tiles = make([]TileCode, len(pl.Tiles))
	stats := make([]CompressStats, len(pl.Tiles))
	for i, tc := range pl.Tiles {
		out.Tiles[i], stats[i] = compressTile(p, tc, pl.Options.regs())
	}
	return &out, stats
}

// compressTile compresses one tile's code, or returns it as it is when
// no loop pays or the replay of the result differs.
func compressTile(p *arch.Preset, tc TileCode, regs uint16) (TileCode, CompressStats) {
	st := CompressStats{CodeBytes: 4 * len(tc.Code), PackedBytes: 4 * len(tc.Code)}
	if tc.Table != nil {
		return tc, st
	}
	c := compressor{code: tc.Code, ptr: freeReg(tc.Code, regs), load: -1}
	c.scan()
	if c.st.Loops == 0 {
		return tc, st
	}
	out := TileCode{Tile: tc.Tile, Cycles: tc.Cycles, Code: c.out, Table: c.table, TableLoad: c.load}
	if c.load < 0 {
		out.Table = nil
	}
	if err := sameIssue(p, tc, out); err != nil {
		return tc, st // a bug, not a user error: keep the straight-line code
	}
	c.st.CodeBytes, c.st.PackedBytes = st.CodeBytes, 4*len(out.Code)
	return out, c.st
}

// freeReg returns a register of regs no instruction of code names, or -1.
func freeReg(code []isa.Inst, regs uint16) int {
	used := uint16(1 << 15)
	for _, in := range code {
		switch in.Op {
		case isa.LI, isa.LIH:
			used |= 1 << (in.D & 15)
		case isa.SEND, isa.SEND2, isa.RECV:
			used |= 1<<(in.D&15) | 1<<(in.A&15) | 1<<(in.B&15)
		}
	}
	for r := range 15 {
		if regs&^used&(1<<r) != 0 {
			return r
		}
	}
	return -1
}

// compressor holds one tile's compression.
type compressor struct {
	code  []isa.Inst
	out   []isa.Inst
	table []uint32
	ptr   int // the table's pointer register (-1: none free)
	load  int // index in out of the li of the table's address (-1: none yet)
	done  int // code[:done] is in out
	st    CompressStats
}

// run is a candidate loop: k periods of L instructions from s, the
// first period ending with the delay that makes room for the loop.
type run struct {
	s, l, k int
	kinds   []posKind // per position of the period
	strides []int32
	patches int // varying positions stored in the table
}

type posKind uint8

const (
	same   posKind = iota // the same instruction every period
	stride                // li of a value stepping by a constant: addi
	patch                 // li of other values: ldm from the table
)

// sameShape reports whether a and b are the same instruction but for a
// li's value.
func sameShape(a, b isa.Inst) bool {
	if a.Op == isa.LI {
		return b.Op == isa.LI && a.D == b.D
	}
	return a == b
}

// slack reports whether a delay issued in code can give e issue slots to
// other instructions without moving the next instruction.
func slack(in isa.Inst, e int) bool {
	n := int(in.Imm)
	return in.Op == isa.DELAY && (n == 6*(e-1) || n >= 6*e)
}

// scan finds loops greedily in code order and emits the code.
func (c *compressor) scan() {
	for q := 0; q < len(c.code); q++ {
		if !slack(c.code[q], 1) {
			continue
		}
		best, gain := run{}, 0
		seen := 0
		for q2 := q + 1; q2 < len(c.code) && q2-q <= maxBody && seen < candidates; q2++ {
			if c.code[q2] != c.code[q] {
				continue
			}
			seen++
			if r, ok := c.try(q, q2-q); ok && c.gain(r) > gain {
				best, gain = r, c.gain(r)
			}
		}
		if gain > 0 {
			c.emit(best)
			q = best.s + best.k*best.l - 1
		}
	}
	c.out = append(c.out, c.code[c.done:]...)
}

// try measures the run of period l whose first period ends with the
// delay at q.
func (c *compressor) try(q, l int) (run, bool) {
	s := q - l + 1
	if s < c.done {
		return run{}, false
	}
	k := 1
	for ; k <= maxCount && s+(k+1)*l < len(c.code); k++ {
		if !c.samePeriod(s, s+k*l, l) {
			break
		}
	}
	if k < 3 {
		return run{}, false
	}
	r := run{s: s, l: l, k: k, kinds: make([]posKind, l), strides: make([]int32, l)}
	for x := range l {
		in := c.code[s+x]
		if in.Op != isa.LI || !c.varies(r, x) {
			continue
		}
		if !c.owns(r, x) {
			return run{}, false
		}
		if d, ok := c.stride(r, x); ok {
			r.kinds[x], r.strides[x] = stride, d
			continue
		}
		if c.ptr < 0 {
			return run{}, false
		}
		r.kinds[x] = patch
		r.patches++
	}
	if !slack(c.code[q], c.extra(r)) {
		return run{}, false
	}
	return r, true
}

// samePeriod reports whether the l instructions at a and b have one shape.
func (c *compressor) samePeriod(a, b, l int) bool {
	for x := range l {
		if !sameShape(c.code[a+x], c.code[b+x]) {
			return false
		}
	}
	return true
}

// varies reports whether the li at position x loads another value in
// some period.
func (c *compressor) varies(r run, x int) bool {
	v := c.code[r.s+x].Imm
	for j := 1; j < r.k; j++ {
		if c.code[r.s+j*r.l+x].Imm != v {
			return true
		}
	}
	return false
}

// owns reports whether the li at position x is the only writer of its
// register in the period (with the lih right after it): then the
// register holds the previous period's value when x comes round again.
func (c *compressor) owns(r run, x int) bool {
	d := c.code[r.s+x].D
	for y := range r.l {
		in := c.code[r.s+y]
		if y == x || (in.Op != isa.LI && in.Op != isa.LIH) || in.D != d {
			continue
		}
		if !(y == x+1 && in.Op == isa.LIH) {
			return false
		}
	}
	return true
}

// stride returns the constant step of the li at position x, when the
// values step by one that addi encodes.
func (c *compressor) stride(r run, x int) (int32, bool) {
	d := c.code[r.s+r.l+x].Imm - c.code[r.s+x].Imm
	if d < -1<<15 || d >= 1<<15 {
		return 0, false
	}
	for j := 2; j < r.k; j++ {
		if c.code[r.s+j*r.l+x].Imm-c.code[r.s+(j-1)*r.l+x].Imm != d {
			return 0, false
		}
	}
	return d, true
}

// extra is the number of instructions the loop adds before its body.
func (c *compressor) extra(r run) int {
	if r.patches > 0 && c.load < 0 {
		return 2 // li of the table's address, rpti
	}
	return 1
}

// gain is the bytes a loop saves, its patches counted.
func (c *compressor) gain(r run) int {
	return 4 * ((r.k-2)*r.l - c.extra(r) - (r.k-1)*r.patches)
}

// emit appends the code up to the run, its first period with the delay
// that makes room for the loop, the loop, and records its figures.
func (c *compressor) emit(r run) {
	q := r.s + r.l - 1
	c.out = append(c.out, c.code[c.done:q]...)
	e := c.extra(r)
	if n := c.code[q].Imm; n != int32(6*(e-1)) {
		c.out = append(c.out, isa.Inst{Op: isa.DELAY, Imm: n - int32(6*e)})
	}
	if e == 2 {
		c.load = len(c.out)
		c.out = append(c.out, isa.Inst{Op: isa.LI, D: uint8(c.ptr)})
	}
	c.out = append(c.out, isa.Inst{Op: isa.RPTI, Imm: int32((r.k-1)<<8 | r.l)})
	for x := range r.l {
		in := c.code[r.s+r.l+x]
		switch r.kinds[x] {
		case stride:
			in = isa.Inst{Op: isa.ADDI, D: in.D, A: in.D, Imm: r.strides[x]}
			c.st.ElidedBytes += 4 * (r.k - 1)
		case patch:
			in = isa.Inst{Op: isa.LDMP, D: in.D, A: uint8(c.ptr), Imm: 4}
		}
		c.out = append(c.out, in)
	}
	for j := 1; j < r.k; j++ {
		for x := range r.l {
			if r.kinds[x] != patch {
				continue
			}
			v := uint32(c.code[r.s+j*r.l+x].Imm)
			if y := r.s + j*r.l + x + 1; x+1 < r.l && c.code[y].Op == isa.LIH && c.code[y].D == c.code[y-1].D {
				v |= uint32(c.code[y].Imm) << 16
			}
			c.table = append(c.table, v)
		}
	}
	c.st.PatchBytes += 4 * (r.k - 1) * r.patches
	c.st.Loops++
	c.done = r.s + r.k*r.l
}

// sameIssue replays a tile's straight-line and compressed code alone and
// checks that every send, recv and sync issues at the same cycle with the
// same operands.
func sameIssue(p *arch.Preset, a, b TileCode) error {
	ra, rb := newReplayer(p), newReplayer(p)
	ca, err := ra.run(&a)
	if err != nil {
		return err
	}
	cb, err := rb.run(&b)
	if err != nil {
		return err
	}
	if ca != cb || len(ra.sends) != len(rb.sends) || len(ra.recvs[a.Tile]) != len(rb.recvs[b.Tile]) {
		return fmt.Errorf("sched: compress: tile %d: the compressed code issues otherwise", a.Tile)
	}
	for i, s := range ra.sends {
		t := rb.sends[i]
		s.pc, t.pc = 0, 0
		if s != t {
			return fmt.Errorf("sched: compress: tile %d: send %d differs", a.Tile, i)
		}
	}
	for i, s := range ra.recvs[a.Tile] {
		t := rb.recvs[b.Tile][i]
		s.pc, t.pc = 0, 0
		if s != t {
			return fmt.Errorf("sched: compress: tile %d: recv %d differs", a.Tile, i)
		}
	}
	return nil
}
