package asm

import (
	"encoding/binary"
	"math"
	"sort"
	"strconv"

	"ipu.local/formats/obj"
	"ipu.local/libs/numfmt"
)

// ctx assembles the blocks of one set of tiles: the tiles that every
// .tile directive lists together get the same program.
type ctx struct {
	a        *assembler
	tiles    []int
	stmts    []*stmt
	declared map[string]*stmt // labels this context defines, by name
	labels   map[string]*label
	secs     []*section
	cur      int      // current section index, -1 none
	place    []int    // per statement: section index, -1 none, -2 failed
	offs     []uint64 // per statement: offset in its section
	dotVal   int64
	dotOK    bool
	consts   constCache
	attrs    tileAttrs // .entry and .xfer of the context's blocks
	segs     []obj.Segment
	syms     []obj.Symbol
	xfers    []obj.Transfer
}

type label struct {
	name string
	sec  int
	off  uint64
}

type section struct {
	name string
	kind obj.SegKind
	addr uint64
	size uint64
	data []byte
	s    *stmt
	ok   bool // placed inside memory; holds data when Code or Data
	// bogus marks a section whose .section line is wrong: its lines are
	// laid out (so labels keep their places) but not checked or emitted,
	// to spare the user errors that follow from the first one.
	bogus bool
}

func newCtx(a *assembler, blocks []int) *ctx {
	c := &ctx{a: a, declared: map[string]*stmt{}, labels: map[string]*label{}, cur: -1}
	for _, bi := range blocks {
		c.stmts = append(c.stmts, a.blocks[bi].stmts...)
	}
	for _, s := range c.stmts {
		for _, l := range s.labels {
			if _, ok := c.declared[l.text]; !ok {
				c.declared[l.text] = s
			}
		}
	}
	c.place = make([]int, len(c.stmts))
	c.offs = make([]uint64, len(c.stmts))
	return c
}

func (c *ctx) sym(name string, col int) (int64, *posError) {
	if l, ok := c.labels[name]; ok {
		return int64(c.secs[l.sec].addr + l.off), nil
	}
	if s, ok := c.a.equs[name]; ok {
		return c.consts.eval(c.a, s, col, c)
	}
	if s, ok := c.declared[name]; ok {
		return 0, errAt(col, "label %s (line %d) is used before it is defined: section addresses and sizes must be known when their line is reached", name, s.line)
	}
	if _, ok := c.a.labels[name]; ok {
		return 0, errAt(col, "undefined symbol %s on %s (it is a label of other tiles)", name, c.tileNames())
	}
	return 0, errAt(col, "undefined symbol %s", name)
}

func (c *ctx) dot(col int) (int64, *posError) {
	if !c.dotOK {
		return 0, errAt(col, ". outside a section")
	}
	return c.dotVal, nil
}

func (c *ctx) tileNames() string {
	if len(c.tiles) == 1 {
		return "tile " + formatTiles(c.tiles)
	}
	return "tiles " + formatTiles(c.tiles)
}

func (c *ctx) assemble() {
	c.layout()
	if c.a.full {
		return
	}
	c.check()
	c.emit()
	c.finish()
}

// fail reports err for statement i and keeps pass 2 away from it.
func (c *ctx) fail(i int, err *posError) {
	c.a.errorAt(c.stmts[i], err)
	c.place[i] = -2
}

func (c *ctx) grow(n uint64) {
	s := c.secs[c.cur]
	s.size += n
	if s.size > 1<<40 {
		s.size = 1 << 40 // far beyond any memory; keeps sums from wrapping
	}
}

// layout is pass 1: open sections, define labels, size every line.
func (c *ctx) layout() {
	for i, s := range c.stmts {
		c.place[i] = c.cur
		var sec *section
		if c.cur >= 0 {
			sec = c.secs[c.cur]
			c.offs[i] = sec.size
			c.dotVal, c.dotOK = int64(sec.addr+sec.size), true
		} else {
			c.dotOK = false
		}
		for _, l := range s.labels {
			switch {
			case sec == nil:
				c.a.errorf(s, l.col, "label %s outside a section (use .section first)", l.text)
			case c.labels[l.text] != nil:
				c.a.errorf(s, l.col, "label %s already defined at line %d", l.text, c.declared[l.text].line)
			default:
				c.labels[l.text] = &label{name: l.text, sec: c.cur, off: sec.size}
			}
		}
		if s.op == "" {
			continue
		}
		if s.op == ".section" {
			if s.bad {
				c.openBogus(s)
			} else {
				c.openSection(i, s)
			}
			continue
		}
		if sec != nil && sec.bogus {
			switch {
			case s.bad && s.op[0] == '.':
			case s.op == ".align" || s.op == ".zero" || s.op == ".space":
				if n, err := eval(s.dir.xs[0], c); err == nil && n > 0 && n <= 1<<32 {
					c.grow(uint64(n))
				}
			case isDataDirective(s.op):
				c.grow(uint64(len(s.args) * dataSize(s.op)))
			case s.op[0] != '.':
				c.grow(4)
			}
			if s.op != ".entry" && s.op != ".xfer" {
				c.place[i] = -2
			}
			continue
		}
		if s.bad && s.inst == nil && !isDataDirective(s.op) {
			if s.op[0] != '.' && sec != nil && sec.kind == obj.Code {
				c.grow(4) // an instruction with a bad operand keeps its place
			}
			c.place[i] = -2
			continue
		}
		switch s.op {
		case ".entry", ".xfer":
			continue
		}
		if sec == nil {
			c.fail(i, errAt(s.opTok.col, "%s outside a section (use .section first)", s.opTok.text))
			continue
		}
		switch s.op {
		case ".align":
			n, err := eval(s.dir.xs[0], c)
			if err != nil {
				c.fail(i, err)
				continue
			}
			if n < 1 || n > 1<<16 || n&(n-1) != 0 {
				c.fail(i, errAt(s.args[0].col, ".align %d: want a power of two from 1 to 65536", n))
				continue
			}
			addr := sec.addr + sec.size
			c.grow((uint64(n) - addr%uint64(n)) % uint64(n))
		case ".zero", ".space":
			n, err := eval(s.dir.xs[0], c)
			if err != nil {
				c.fail(i, err)
				continue
			}
			if n < 0 || n > 1<<32 {
				c.fail(i, errAt(s.args[0].col, "%s %d: want a size from 0 to 2^32", s.op, n))
				continue
			}
			c.grow(uint64(n))
		case ".word", ".half", ".byte", ".float", ".f16":
			if sec.kind == obj.BSS {
				c.fail(i, errAt(s.opTok.col, "%s in bss section %s (bss holds no data: use .space)", s.op, sec.name))
				continue
			}
			c.grow(uint64(len(s.args) * dataSize(s.op)))
			if s.bad {
				c.place[i] = -2
			}
		default: // an instruction
			if sec.kind != obj.Code {
				c.fail(i, errAt(s.opTok.col, "instruction %s in %s section %s", s.op, sec.kind, sec.name))
				continue
			}
			if pc := sec.addr + sec.size; pc%4 != 0 {
				c.fail(i, errAt(s.opTok.col, "instruction at misaligned address %#x", pc))
			}
			c.grow(4)
			if s.bad {
				c.place[i] = -2
			}
		}
	}
}

func isDataDirective(op string) bool {
	return dataSize(op) > 0
}

func dataSize(op string) int {
	switch op {
	case ".word", ".float":
		return 4
	case ".half", ".f16":
		return 2
	case ".byte":
		return 1
	}
	return 0
}

func (c *ctx) openBogus(s *stmt) {
	c.secs = append(c.secs, &section{kind: obj.Code, s: s, bogus: true})
	c.cur = len(c.secs) - 1
}

func (c *ctx) openSection(i int, s *stmt) {
	kind := segKinds[s.dir.names[1]]
	sec := &section{name: s.dir.names[0], kind: kind, s: s}
	if len(s.args) == 3 {
		v, err := eval(s.dir.xs[2], c)
		if err != nil {
			c.fail(i, err)
			c.openBogus(s)
			return
		}
		if v < 0 || v > math.MaxUint32 {
			c.fail(i, errAt(s.args[2].col, "section address %s out of range", hexInt(v)))
			c.openBogus(s)
			return
		}
		sec.addr = uint64(v)
	} else {
		sec.addr = c.nextAddr(kind)
	}
	c.secs = append(c.secs, sec)
	c.cur = len(c.secs) - 1
}

// nextAddr places a section without an address: after the last section of
// the same class (code; data and bss) on the tile, aligned to 8; the first
// code section at the start of the executable range, the first data or bss
// section at the start of interleaved memory.
func (c *ctx) nextAddr(kind obj.SegKind) uint64 {
	code := kind == obj.Code
	for j := len(c.secs) - 1; j >= 0; j-- {
		p := c.secs[j]
		if !p.bogus && (p.kind == obj.Code) == code {
			return (p.addr + p.size + 7) &^ 7
		}
	}
	if code {
		return uint64(c.a.arch.Executable.Lo)
	}
	return uint64(c.a.arch.Interleaved.Lo)
}

// check places every section inside memory, keeps them apart and
// allocates their bytes.
func (c *ctx) check() {
	mem, exe := c.a.arch.Memory, c.a.arch.Executable
	for _, sec := range c.secs {
		if sec.bogus {
			continue
		}
		end := sec.addr + sec.size
		col := sec.s.opTok.col
		switch {
		case sec.addr < uint64(mem.Lo) || end > uint64(mem.Hi):
			c.a.errorf(sec.s, col, "section %s [%#x, %#x) is outside tile memory [%#x, %#x)", sec.name, sec.addr, end, mem.Lo, mem.Hi)
		case sec.kind == obj.Code && sec.size > 0 && (sec.addr < uint64(exe.Lo) || end > uint64(exe.Hi)):
			c.a.errorf(sec.s, col, "code section %s [%#x, %#x) is outside the executable range [%#x, %#x)", sec.name, sec.addr, end, exe.Lo, exe.Hi)
		default:
			sec.ok = true
		}
	}
	order := make([]*section, 0, len(c.secs))
	for _, sec := range c.secs {
		if sec.ok && sec.size > 0 {
			order = append(order, sec)
		}
	}
	sort.SliceStable(order, func(i, j int) bool { return order[i].addr < order[j].addr })
	var last *section // the section reaching furthest so far
	for _, sec := range order {
		if last != nil && sec.addr < last.addr+last.size {
			first, second := last, sec
			if second.s.line < first.s.line {
				first, second = second, first
			}
			c.a.errorf(second.s, second.s.opTok.col, "section %s [%#x, %#x) overlaps section %s [%#x, %#x) on %s",
				second.name, second.addr, second.addr+second.size, first.name, first.addr, first.addr+first.size, c.tileNames())
		}
		if last == nil || sec.addr+sec.size > last.addr+last.size {
			last = sec
		}
	}
	for _, sec := range order {
		if sec.kind == obj.BSS {
			continue
		}
		c.a.budget -= int64(sec.size)
		if c.a.budget < 0 {
			c.a.errorf(sec.s, sec.s.opTok.col, "program too large: more than %d bytes of code and data over all tiles", maxOutputBytes)
			sec.ok = false
			continue
		}
		sec.data = make([]byte, sec.size)
	}
}

// emit is pass 2: encode instructions and data, record .entry and .xfer.
func (c *ctx) emit() {
	for i, s := range c.stmts {
		if c.a.full {
			return
		}
		si := c.place[i]
		if si == -2 || s.bad || s.op == "" || s.op == ".section" {
			continue
		}
		var sec *section
		c.dotOK = false
		if si >= 0 {
			sec = c.secs[si]
			c.dotVal, c.dotOK = int64(sec.addr+c.offs[i]), true
		}
		switch s.op {
		case ".entry":
			c.setEntry(&c.attrs, s, c.tileNames())
		case ".xfer":
			c.addXfer(&c.attrs, s)
		case ".word", ".half", ".byte":
			size := dataSize(s.op)
			lo, hi := int64(-1)<<(8*size-1), int64(1)<<(8*size)-1
			for j, x := range s.dir.xs {
				v, err := eval(x, c)
				if err != nil {
					c.a.errorAt(s, err)
					continue
				}
				if v < lo || v > hi {
					c.a.errorf(s, s.args[j].col, "%s value %d out of range %d..%d", s.op, v, lo, hi)
					continue
				}
				c.put(sec, c.offs[i]+uint64(j*size), size, uint64(v))
			}
		case ".float", ".f16":
			size := dataSize(s.op)
			for j, x := range s.dir.xs {
				bits := s.dir.floats[j]
				if x != nil {
					v, err := eval(x, c)
					if err != nil {
						c.a.errorAt(s, err)
						continue
					}
					if size == 4 {
						bits = math.Float32bits(float32(v))
					} else {
						h := numfmt.F64ToF16(float64(v))
						if h&0x7fff == 0x7c00 {
							c.a.errorf(s, s.args[j].col, ".f16 value %d overflows FP16", v)
							continue
						}
						bits = uint32(h)
					}
				}
				c.put(sec, c.offs[i]+uint64(j*size), size, uint64(bits))
			}
		case ".align", ".zero", ".space":
			// Zero bytes; in code, zero words are nop.
		default:
			if s.inst == nil || sec == nil {
				continue
			}
			pc := uint32(sec.addr + c.offs[i])
			w, err := encodeInst(s, s.inst, s.ops, pc, c)
			if err != nil {
				c.a.errorAt(s, err)
				continue
			}
			c.put(sec, c.offs[i], 4, uint64(w))
		}
	}
}

func (c *ctx) put(sec *section, off uint64, size int, v uint64) {
	if sec == nil || sec.data == nil || off+uint64(size) > uint64(len(sec.data)) {
		return
	}
	b := sec.data[off:]
	switch size {
	case 1:
		b[0] = byte(v)
	case 2:
		binary.LittleEndian.PutUint16(b, uint16(v))
	case 4:
		binary.LittleEndian.PutUint32(b, uint32(v))
	}
}

// tileAttrs are what .entry and .xfer set for a tile.
type tileAttrs struct {
	entry   uint32
	entryAt *stmt
	xfers   []xferAt
}

type xferAt struct {
	line int
	x    obj.Transfer
}

func (c *ctx) setEntry(at *tileAttrs, s *stmt, tiles string) {
	v, err := eval(s.dir.xs[0], c)
	if err != nil {
		c.a.errorAt(s, err)
		return
	}
	if at.entryAt != nil {
		c.a.errorf(s, s.opTok.col, "entry already set at line %d", at.entryAt.line)
		return
	}
	col := s.args[0].col
	if v%4 != 0 {
		c.a.errorf(s, col, "entry %s is not 4-aligned", hexInt(v))
		return
	}
	for _, sec := range c.secs {
		if sec.kind == obj.Code && v >= int64(sec.addr) && v < int64(sec.addr+sec.size) {
			at.entry, at.entryAt = uint32(v), s
			return
		}
	}
	c.a.errorf(s, col, "entry %s is not inside a code section on %s", hexInt(v), tiles)
}

func (c *ctx) addXfer(at *tileAttrs, s *stmt) {
	var v [5]int64
	limits := [5]struct {
		what   string
		lo, hi int64
	}{
		{"phase", 0, math.MaxInt32},
		{"cycle", 0, math.MaxInt64},
		{"destination tile", 0, int64(c.a.arch.Tiles - 1)},
		{"destination count", 1, int64(c.a.arch.Tiles)},
		{"words", 0, math.MaxInt32},
	}
	for j := range v {
		x, err := eval(s.dir.xs[j], c)
		if err != nil {
			c.a.errorAt(s, err)
			return
		}
		l := limits[j]
		if x < l.lo || x > l.hi {
			c.a.errorf(s, s.args[j].col, ".xfer %s %d out of range %d..%d", l.what, x, l.lo, l.hi)
			return
		}
		v[j] = x
	}
	if v[2]+v[3] > int64(c.a.arch.Tiles) {
		c.a.errorf(s, s.args[3].col, ".xfer destination tiles %d..%d outside the architecture (%s has tiles 0..%d)",
			v[2], v[2]+v[3]-1, c.a.arch.Name, c.a.arch.Tiles-1)
		return
	}
	at.xfers = append(at.xfers, xferAt{s.line, obj.Transfer{Phase: int(v[0]), Cycle: v[1], Dst: int(v[2]), DstCount: int(v[3]), Words: int(v[4])}})
}

// finish builds the segments and symbols shared by the context's tiles.
func (c *ctx) finish() {
	for _, sec := range c.secs {
		if !sec.ok || sec.size == 0 {
			continue
		}
		c.segs = append(c.segs, obj.Segment{Name: sec.name, Kind: sec.kind, Addr: uint32(sec.addr), Size: uint32(sec.size), Data: sec.data})
	}
	sort.SliceStable(c.segs, func(i, j int) bool { return c.segs[i].Addr < c.segs[j].Addr })
	if c.attrs.entryAt == nil {
		for _, s := range c.segs {
			if s.Kind == obj.Code {
				c.attrs.entry = s.Addr
				break
			}
		}
	}
	for _, x := range c.attrs.xfers {
		c.xfers = append(c.xfers, x.x)
	}
	// A label's size runs to the next higher label of its section, or to
	// the section's end.
	bySec := make([][]*label, len(c.secs))
	seen := map[string]bool{}
	for _, s := range c.stmts {
		for _, l := range s.labels {
			lb := c.labels[l.text]
			if lb == nil || seen[l.text] {
				continue
			}
			seen[l.text] = true
			bySec[lb.sec] = append(bySec[lb.sec], lb)
		}
	}
	for si, ls := range bySec {
		sec := c.secs[si]
		sort.SliceStable(ls, func(i, j int) bool { return ls[i].off < ls[j].off })
		for i, lb := range ls {
			end := sec.size
			for _, o := range ls[i+1:] {
				if o.off > lb.off {
					end = o.off
					break
				}
			}
			c.syms = append(c.syms, obj.Symbol{Name: lb.name, Addr: uint32(sec.addr + lb.off), Size: uint32(end - lb.off), Code: sec.kind == obj.Code})
		}
	}
	sort.SliceStable(c.syms, func(i, j int) bool { return c.syms[i].Addr < c.syms[j].Addr })
}

// tile returns tile t's program, with the .entry and .xfer lines of the
// tile's own blocks that only set those (attrs). Tiles share the segment
// and symbol slices of their context: 1472 copies of a large program's
// symbols would cost gigabytes.
func (c *ctx) tile(t int, attrs []*stmt) obj.Tile {
	tl := obj.Tile{Index: t, Entry: c.attrs.entry, Segments: c.segs, Symbols: c.syms, Exchange: c.xfers}
	if len(attrs) == 0 {
		return tl
	}
	at := c.attrs
	at.xfers = append([]xferAt(nil), c.attrs.xfers...)
	c.dotOK = false
	name := "tile " + strconv.Itoa(t)
	for _, s := range attrs {
		if s.bad {
			continue
		}
		switch s.op {
		case ".entry":
			c.setEntry(&at, s, name)
		case ".xfer":
			c.addXfer(&at, s)
		}
	}
	sort.SliceStable(at.xfers, func(i, j int) bool { return at.xfers[i].line < at.xfers[j].line })
	tl.Entry = at.entry
	tl.Exchange = make([]obj.Transfer, len(at.xfers))
	for i, x := range at.xfers {
		tl.Exchange[i] = x.x
	}
	if len(tl.Exchange) == 0 {
		tl.Exchange = nil
	}
	return tl
}
