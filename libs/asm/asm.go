package asm

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"ipu.local/formats/obj"
	"ipu.local/libs/arch"
	"ipu.local/libs/toolrun"
)

// DefaultArch is the architecture of a source without .arch when
// Options.Arch is empty.
const DefaultArch = "ipu21"

// Options tune Assemble.
type Options struct {
	// Arch is the architecture preset of a source that has no .arch
	// directive (DefaultArch when empty). A .arch in the source wins.
	Arch string
	// Compiler is recorded as the object's Compiler (toolrun.Version when
	// empty).
	Compiler string
}

// maxOutputBytes bounds the code and data bytes Assemble builds over all
// tiles with distinct programs, so that a small source cannot make it
// allocate without limit (a variable so that tests can lower it).
var maxOutputBytes int64 = 256 << 20

// Assemble turns assembly source into an object. name is the file name
// used in error messages. Errors are an ErrorList with one
// "name:line:col: message" per problem.
//
// Tiles assembled from the same blocks share their Segments (and the
// segments' Data) and Symbols slices: treat the object as read-only, or
// copy a tile before changing it.
func Assemble(name string, src []byte, opt Options) (*obj.Object, error) {
	a := &assembler{
		file:   name,
		seen:   map[string]bool{},
		equs:   map[string]*stmt{},
		labels: map[string]*stmt{},
		budget: maxOutputBytes,
	}
	o := a.run(src, opt)
	if len(a.errs) > 0 {
		return nil, a.errList()
	}
	return o, nil
}

type assembler struct {
	file   string
	errs   ErrorList
	seen   map[string]bool
	full   bool
	arch   *arch.Preset
	equs   map[string]*stmt // .equ by name
	labels map[string]*stmt // first definition of every label name, any tile
	blocks []*block
	budget int64
}

// block is the tile-scoped lines from one .tile directive to the next.
type block struct {
	dir   *stmt // the .tile line; nil for the lines before the first one
	tiles []int
	stmts []*stmt
}

func (a *assembler) add(e *Error) {
	if a.full {
		return
	}
	key := e.Error()
	if a.seen[key] {
		return
	}
	a.seen[key] = true
	if len(a.errs) == MaxErrors {
		a.full = true
		return
	}
	a.errs = append(a.errs, e)
}

func (a *assembler) errorf(s *stmt, col int, format string, args ...any) {
	a.add(&Error{File: a.file, Line: s.line, Col: col, Msg: fmt.Sprintf(format, args...)})
}

func (a *assembler) errorAt(s *stmt, err *posError) {
	a.add(&Error{File: a.file, Line: s.line, Col: err.col, Msg: err.msg})
}

func (a *assembler) errList() ErrorList {
	l := append(ErrorList(nil), a.errs...)
	sort.SliceStable(l, func(i, j int) bool {
		if l[i].Line != l[j].Line {
			return l[i].Line < l[j].Line
		}
		return l[i].Col < l[j].Col
	})
	if a.full {
		l = append(l, &Error{File: a.file, Msg: "too many errors"})
	}
	return l
}

func (a *assembler) run(src []byte, opt Options) *obj.Object {
	sum := sha256.Sum256(src)
	o := &obj.Object{Compiler: opt.Compiler, Source: hex.EncodeToString(sum[:])}
	if o.Compiler == "" {
		o.Compiler = toolrun.Version
	}
	stmts := a.parse(src)
	if !a.setArch(stmts, opt.Arch) {
		return nil
	}
	o.Arch = a.arch.Name
	a.defineConstants(stmts)
	a.makeBlocks(stmts)
	a.hostProgram(stmts, o)
	if a.full {
		return nil
	}
	o.Tiles = a.assembleTiles()
	if len(a.errs) > 0 {
		return nil
	}
	if err := obj.Validate(o); err != nil {
		a.add(&Error{File: a.file, Msg: "invalid object: " + err.Error()})
		return nil
	}
	return o
}

// parse splits the source into statements, checking each line's syntax
// and choosing the table entry of each instruction.
func (a *assembler) parse(src []byte) []*stmt {
	var stmts []*stmt
	lines := bytes.Split(src, []byte("\n"))
	for i, line := range lines {
		if a.full {
			break
		}
		text := string(line)
		s, err := parseLine(i+1, text)
		if err != nil {
			a.add(&Error{File: a.file, Line: i + 1, Col: err.col, Msg: err.msg})
			continue
		}
		if s == nil {
			continue
		}
		for _, l := range s.labels {
			if prev, ok := a.labels[l.text]; !ok || prev == nil {
				a.labels[l.text] = s
			}
		}
		switch {
		case s.op == "":
		case strings.HasPrefix(s.op, "."):
			if !globalDirectives[s.op] && !tileDirectives[s.op] && s.op != ".tile" {
				a.errorf(s, s.opTok.col, "unknown directive %s", s.opTok.text)
				s.bad = true
				break
			}
			if !a.prepare(s) {
				s.bad = true
			}
		default:
			in, ops, err := selectInst(s)
			if err != nil {
				a.errorAt(s, err)
				s.bad = true
			}
			s.inst, s.ops = in, ops
		}
		stmts = append(stmts, s)
	}
	return stmts
}

// setArch picks the architecture: the source's .arch, else opt.
func (a *assembler) setArch(stmts []*stmt, def string) bool {
	var first *stmt
	for _, s := range stmts {
		if s.op != ".arch" || s.bad {
			continue
		}
		if first == nil {
			first = s
			continue
		}
		if s.dir.names[0] != first.dir.names[0] {
			a.errorf(s, s.args[0].col, ".arch %s conflicts with .arch %s at line %d", s.dir.names[0], first.dir.names[0], first.line)
		}
	}
	name := def
	if name == "" {
		name = DefaultArch
	}
	if first != nil {
		name = first.dir.names[0]
	}
	p, err := arch.Lookup(name)
	if err != nil {
		if first != nil {
			a.errorf(first, first.args[0].col, "%v", err)
		} else {
			a.add(&Error{File: a.file, Msg: err.Error()})
		}
		return false
	}
	a.arch = p
	return true
}

func (a *assembler) defineConstants(stmts []*stmt) {
	for _, s := range stmts {
		if s.op != ".equ" || s.bad {
			continue
		}
		name := s.dir.names[0]
		if prev, ok := a.equs[name]; ok {
			a.errorf(s, s.args[0].col, "constant %s already defined at line %d", name, prev.line)
			continue
		}
		if l, ok := a.labels[name]; ok {
			a.errorf(s, s.args[0].col, "constant %s is also a label (line %d)", name, l.line)
			continue
		}
		a.equs[name] = s
	}
}

// globalEnv evaluates expressions outside any tile: only numbers and
// constants that do not depend on labels.
type globalEnv struct {
	a      *assembler
	consts constCache
}

func (g *globalEnv) sym(name string, col int) (int64, *posError) {
	if s, ok := g.a.equs[name]; ok {
		return g.consts.eval(g.a, s, col, g)
	}
	if _, ok := g.a.labels[name]; ok {
		return 0, errAt(col, "label %s cannot be used here: labels belong to tiles", name)
	}
	return 0, errAt(col, "undefined symbol %s", name)
}

func (g *globalEnv) dot(col int) (int64, *posError) {
	return 0, errAt(col, ". cannot be used here")
}

// constCache evaluates .equ constants for one environment, remembering
// the values (a constant's value never changes once it can be computed).
type constCache struct {
	vals     map[string]int64
	visiting map[string]bool
}

// eval evaluates the .equ line s for a use at column col.
func (cc *constCache) eval(a *assembler, s *stmt, col int, en env) (int64, *posError) {
	name := s.dir.names[0]
	if v, ok := cc.vals[name]; ok {
		return v, nil
	}
	if cc.visiting == nil {
		cc.visiting = map[string]bool{}
		cc.vals = map[string]int64{}
	}
	if cc.visiting[name] {
		return 0, errAt(col, "constant %s is defined in terms of itself (line %d)", name, s.line)
	}
	cc.visiting[name] = true
	defer delete(cc.visiting, name)
	v, err := eval(s.dir.xs[1], en)
	if err != nil {
		if strings.HasPrefix(err.msg, "constant ") {
			return 0, errAt(col, "%s", err.msg)
		}
		return 0, errAt(col, "constant %s (line %d): %s", name, s.line, err.msg)
	}
	cc.vals[name] = v
	return v, nil
}

// makeBlocks splits the tile-scoped lines into .tile blocks and evaluates
// each block's tile list.
func (a *assembler) makeBlocks(stmts []*stmt) {
	cur := &block{}
	a.blocks = []*block{cur}
	g := &globalEnv{a: a}
	for _, s := range stmts {
		switch {
		case s.op == ".tile":
			cur = &block{dir: s}
			a.blocks = append(a.blocks, cur)
			if !s.bad {
				cur.tiles = a.tileList(s, g)
			}
			if len(s.labels) > 0 {
				cur.stmts = append(cur.stmts, &stmt{line: s.line, text: s.text, labels: s.labels})
			}
		case globalDirectives[s.op]:
			if len(s.labels) > 0 {
				cur.stmts = append(cur.stmts, &stmt{line: s.line, text: s.text, labels: s.labels})
			}
		default:
			cur.stmts = append(cur.stmts, s)
		}
	}
	if b := a.blocks[0]; len(b.stmts) > 0 {
		b.tiles = []int{0}
	}
}

func (a *assembler) tileList(s *stmt, g env) []int {
	set := map[int]bool{}
	n := int64(a.arch.Tiles)
	for _, it := range s.dir.tiles {
		lo, err := eval(it.lo, g)
		if err != nil {
			a.errorAt(s, err)
			return nil
		}
		hi := lo
		if it.hi != nil {
			if hi, err = eval(it.hi, g); err != nil {
				a.errorAt(s, err)
				return nil
			}
		}
		for _, v := range []int64{lo, hi} {
			if v < 0 || v >= n {
				a.errorf(s, it.col, "tile %d outside the architecture (%s has tiles 0..%d)", v, a.arch.Name, n-1)
				return nil
			}
		}
		if hi < lo {
			a.errorf(s, it.col, "tile range %d-%d is empty", lo, hi)
			return nil
		}
		for t := lo; t <= hi; t++ {
			set[int(t)] = true
		}
	}
	tiles := make([]int, 0, len(set))
	for t := range set {
		tiles = append(tiles, t)
	}
	sort.Ints(tiles)
	return tiles
}

// hostProgram evaluates the global directives into the host program and
// the device configuration, in source order.
func (a *assembler) hostProgram(stmts []*stmt, o *obj.Object) {
	g := &globalEnv{a: a}
	pages := map[uint8]*stmt{}
	pageBytes := map[uint8]uint32{}
	val := func(s *stmt, i int, lo, hi int64, what string) (int64, bool) {
		v, err := eval(s.dir.xs[i], g)
		if err != nil {
			a.errorAt(s, err)
			return 0, false
		}
		if v < lo || v > hi {
			a.errorf(s, s.args[i].col, "%s: %s %d out of range %d..%d", s.op, what, v, lo, hi)
			return 0, false
		}
		return v, true
	}
	// Pages first, so that tensors may name a page declared later.
	for _, s := range stmts {
		if s.op != ".page" || s.bad {
			continue
		}
		id, ok1 := val(s, 0, 0, 255, "page id")
		size, ok2 := val(s, 1, 1, 1<<24, "page size")
		if !ok1 || !ok2 {
			continue
		}
		if prev, ok := pages[uint8(id)]; ok {
			a.errorf(s, s.args[0].col, "page %d already declared at line %d", id, prev.line)
			continue
		}
		pages[uint8(id)] = s
		pageBytes[uint8(id)] = uint32(size)
		o.Host.Pages = append(o.Host.Pages, obj.Page{ID: uint8(id), Bytes: uint32(size)})
	}
	for _, s := range stmts {
		if s.bad {
			continue
		}
		switch s.op {
		case ".input", ".output":
			t, ok := a.tensor(s, g, pageBytes)
			if !ok {
				continue
			}
			if s.op == ".input" {
				o.Host.Inputs = append(o.Host.Inputs, t)
			} else {
				o.Host.Outputs = append(o.Host.Outputs, t)
			}
		case ".phase":
			o.Host.Phases = append(o.Host.Phases, obj.Phase{Kind: phaseKinds[s.dir.names[0]], Name: s.dir.names[1]})
		case ".config":
			w := obj.RegWrite{Tile: obj.AllTiles}
			if r, ok := configRegByName(s.dir.names[0]); ok {
				w.Reg = r
			} else {
				r, ok := val(s, 0, 0, 1<<32-1, "register")
				if !ok {
					continue
				}
				w.Reg = uint32(r)
			}
			v, ok := val(s, 1, -1<<31, 1<<32-1, "value")
			if !ok {
				continue
			}
			w.Value = uint32(v)
			if len(s.args) == 3 {
				t, ok := val(s, 2, 0, int64(a.arch.Tiles-1), "tile")
				if !ok {
					continue
				}
				w.Tile = uint32(t)
			}
			o.Config = append(o.Config, w)
		}
	}
}

func (a *assembler) tensor(s *stmt, g env, pages map[uint8]uint32) (obj.Tensor, bool) {
	t := obj.Tensor{Name: s.dir.names[0], DType: s.dir.names[1]}
	elems := int64(1)
	for _, d := range s.dir.dims {
		v, err := eval(d, g)
		if err != nil {
			a.errorAt(s, err)
			return t, false
		}
		if v < 0 {
			a.errorf(s, d.pos(), "%s: dimension %d is negative", s.op, v)
			return t, false
		}
		t.Shape = append(t.Shape, v)
		if elems > 0 && v > 0 && elems > (1<<40)/v {
			elems = 1 << 40
		} else {
			elems *= v
		}
	}
	page, err := eval(s.dir.xs[3], g)
	if err != nil {
		a.errorAt(s, err)
		return t, false
	}
	off, err := eval(s.dir.xs[4], g)
	if err != nil {
		a.errorAt(s, err)
		return t, false
	}
	if page < 0 || page > 255 {
		a.errorf(s, s.args[3].col, "%s: page %d out of range 0..255", s.op, page)
		return t, false
	}
	size, ok := pages[uint8(page)]
	if !ok {
		a.errorf(s, s.args[3].col, "%s: page %d is not declared (use .page)", s.op, page)
		return t, false
	}
	bytes := (elems*int64(dtypeBits[t.DType]) + 7) / 8
	if off < 0 || off+bytes > int64(size) {
		a.errorf(s, s.args[4].col, "%s %q: bytes [%d, %d) do not fit in page %d (%d bytes)", s.op, t.Name, off, off+bytes, page, size)
		return t, false
	}
	t.Page, t.Offset = uint8(page), uint32(off)
	if len(s.args) == 6 {
		acc, err := eval(s.dir.xs[5], g)
		if err != nil {
			a.errorAt(s, err)
			return t, false
		}
		if acc < 0 {
			a.errorf(s, s.args[5].col, "%s: accumulation length %d is negative", s.op, acc)
			return t, false
		}
		t.Accumulate = acc
	}
	return t, true
}

// assembleTiles assembles the tile blocks once for each distinct list of
// blocks a tile belongs to, and gives the result to each such tile. Blocks
// that hold only .entry and .xfer lines do not change the layout: they are
// applied to each of their tiles afterwards, so that a program shared by
// every tile with per-tile transfers is assembled once.
func (a *assembler) assembleTiles() []obj.Tile {
	layout := make([]bool, len(a.blocks))
	for bi, b := range a.blocks {
		for _, s := range b.stmts {
			if len(s.labels) > 0 || (s.op != ".entry" && s.op != ".xfer") {
				layout[bi] = true
				break
			}
		}
	}
	member := map[int][]int{}
	for bi, b := range a.blocks {
		for _, t := range b.tiles {
			member[t] = append(member[t], bi)
		}
	}
	tiles := make([]int, 0, len(member))
	for t := range member {
		tiles = append(tiles, t)
	}
	sort.Ints(tiles)
	groups := map[string]*ctx{}
	var order []*ctx
	tileCtx := make([]*ctx, len(tiles))
	for i, t := range tiles {
		var key strings.Builder
		var blocks []int
		for _, bi := range member[t] {
			if layout[bi] {
				blocks = append(blocks, bi)
				key.WriteString(strconv.Itoa(bi))
				key.WriteByte(',')
			}
		}
		c, ok := groups[key.String()]
		if !ok {
			c = newCtx(a, blocks)
			groups[key.String()] = c
			order = append(order, c)
		}
		c.tiles = append(c.tiles, t)
		tileCtx[i] = c
	}
	for _, c := range order {
		if a.full {
			return nil
		}
		c.assemble()
	}
	out := make([]obj.Tile, 0, len(tiles))
	for i, t := range tiles {
		if a.full {
			return nil
		}
		var attrs []*stmt
		for _, bi := range member[t] {
			if !layout[bi] {
				attrs = append(attrs, a.blocks[bi].stmts...)
			}
		}
		out = append(out, tileCtx[i].tile(t, attrs))
	}
	return out
}

// formatTiles writes a sorted tile list compactly: 0-3,5,7-9.
func formatTiles(tiles []int) string {
	var b strings.Builder
	for i := 0; i < len(tiles); {
		j := i
		for j+1 < len(tiles) && tiles[j+1] == tiles[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(tiles[i]))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(tiles[j]))
		}
		i = j + 1
	}
	return b.String()
}
