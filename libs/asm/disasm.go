package asm

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"ipu.local/formats/obj"
	"ipu.local/libs/isa"
)

// FormatInst writes instruction i, located at pc, in assembler syntax.
// Branch targets are absolute addresses.
func FormatInst(pc uint32, i isa.Inst) string {
	in := i.Info()
	if in == nil {
		return fmt.Sprintf(".word %#08x", uint32(i.Op)<<24)
	}
	if in.Op == isa.RPTI {
		return fmt.Sprintf("rpti %d, %d", i.Imm>>8, i.Imm&0xff)
	}
	var b strings.Builder
	b.WriteString(in.Name)
	for n, k := range in.Operands {
		if n == 0 {
			b.WriteByte(' ')
		} else {
			b.WriteString(", ")
		}
		b.WriteString(formatOperand(pc, i, k))
	}
	return b.String()
}

func regName(file byte, r uint8) string {
	if r == 15 {
		return "$" + string(file) + "zero"
	}
	return "$" + string(file) + strconv.Itoa(int(r))
}

func groupName(r uint8, n uint8) string {
	return fmt.Sprintf("$a%d:%d", r, r+n-1)
}

func formatUnsigned(v int32) string {
	if v < 4096 {
		return strconv.Itoa(int(v))
	}
	return fmt.Sprintf("%#x", v)
}

func formatOperand(pc uint32, i isa.Inst, k isa.Kind) string {
	switch k {
	case isa.MD:
		return regName('m', i.D)
	case isa.MA:
		return regName('m', i.A)
	case isa.MB:
		return regName('m', i.B)
	case isa.MC:
		return regName('m', i.C)
	case isa.AD:
		return regName('a', i.D)
	case isa.AA:
		return regName('a', i.A)
	case isa.AB:
		return regName('a', i.B)
	case isa.AC:
		return regName('a', i.C)
	case isa.AD2:
		return groupName(i.D, 2)
	case isa.AA2:
		return groupName(i.A, 2)
	case isa.AB2:
		return groupName(i.B, 2)
	case isa.AC2:
		return groupName(i.C, 2)
	case isa.AD4:
		return groupName(i.D, 4)
	case isa.Imm8, isa.Imm16:
		return strconv.Itoa(int(i.Imm))
	case isa.Imm16U, isa.Imm20:
		return formatUnsigned(i.Imm)
	case isa.Rel16, isa.Rel20:
		return hexInt(int64(pc) + 4 + 4*int64(i.Imm))
	case isa.MemOff:
		switch {
		case i.Imm > 0:
			return fmt.Sprintf("[%s+%d]", regName('m', i.A), i.Imm)
		case i.Imm < 0:
			return fmt.Sprintf("[%s-%d]", regName('m', i.A), -int64(i.Imm))
		}
		return fmt.Sprintf("[%s]", regName('m', i.A))
	case isa.MemInc:
		if i.Imm < 0 {
			return fmt.Sprintf("[%s-=%d]", regName('m', i.A), -int64(i.Imm))
		}
		return fmt.Sprintf("[%s+=%d]", regName('m', i.A), i.Imm)
	case isa.CSRImm:
		if i.Imm >= 0 && i.Imm < isa.NumCSR {
			return csrNames[i.Imm]
		}
		return strconv.Itoa(int(i.Imm))
	}
	return "?"
}

// formatWord disassembles one word: the instruction, or a .word with the
// reason it is not one.
func formatWord(pc, w uint32) (text, invalid string) {
	i, err := isa.Decode(w)
	if err != nil {
		var de *isa.DecodeError
		msg := err.Error()
		if errors.As(err, &de) {
			msg = de.Msg
		}
		return fmt.Sprintf(".word %#08x", w), msg
	}
	return FormatInst(pc, i), ""
}

// Disassemble writes code, loaded at addr, one word per line: address,
// word, instruction. Words that are not instructions appear as .word with
// the reason as a comment; a tail shorter than a word as .byte.
func Disassemble(w io.Writer, addr uint32, code []byte) error {
	bw := bufio.NewWriter(w)
	n := len(code) &^ 3
	for off := 0; off < n; off += 4 {
		pc := addr + uint32(off)
		word := binary.LittleEndian.Uint32(code[off:])
		text, invalid := formatWord(pc, word)
		if invalid != "" {
			fmt.Fprintf(bw, "%08x  %08x  %s  // invalid: %s\n", pc, word, text, invalid)
		} else {
			fmt.Fprintf(bw, "%08x  %08x  %s\n", pc, word, text)
		}
	}
	if n < len(code) {
		fmt.Fprintf(bw, "%08x  %-8s  %s\n", addr+uint32(n), "", byteList(code[n:]))
	}
	return bw.Flush()
}

func byteList(b []byte) string {
	var s strings.Builder
	s.WriteString(".byte ")
	for i, c := range b {
		if i > 0 {
			s.WriteString(", ")
		}
		fmt.Fprintf(&s, "%#02x", c)
	}
	return s.String()
}

// bareName reports whether name can be written without quotes as the
// operand of a directive.
func bareName(name string) bool {
	toks, err := lexLine(name)
	return err == nil && len(toks) == 1 && (toks[0].kind == tIdent || toks[0].kind == tDirective) && toks[0].text == name
}

func quoteName(name string) string {
	if bareName(name) {
		return name
	}
	return strconv.Quote(name)
}

// labelName reports whether a symbol can be written as a label.
func labelName(name string) bool {
	toks, err := lexLine(name)
	return err == nil && len(toks) == 1 && toks[0].kind == tIdent && toks[0].text == name
}

// DisassembleObject writes o as assembly source that Assemble turns back
// into an object with the same architecture, tiles (index, entry,
// segments, exchange transfers), host program and configuration. Symbols
// that are valid names become labels. Tiles with identical programs share
// one .tile block.
func DisassembleObject(o *obj.Object) []byte {
	var b bytes.Buffer
	// The source fingerprint stays out, so that an object and the one
	// assembled from this text disassemble identically.
	fmt.Fprintf(&b, "// Disassembled object (compiler %s).\n", oneLine(o.Compiler))
	if o.Arch != "" {
		name := o.Arch
		if !presetName(name) {
			name = strconv.Quote(name)
		}
		fmt.Fprintf(&b, ".arch %s\n", name)
	}
	h := &o.Host
	if len(h.Pages)+len(h.Inputs)+len(h.Outputs)+len(h.Phases) > 0 {
		b.WriteString("\n// Host program.\n")
	}
	for _, p := range h.Pages {
		fmt.Fprintf(&b, ".page %d, %d\n", p.ID, p.Bytes)
	}
	for _, t := range h.Inputs {
		writeTensor(&b, ".input", t)
	}
	for _, t := range h.Outputs {
		writeTensor(&b, ".output", t)
	}
	for _, p := range h.Phases {
		fmt.Fprintf(&b, ".phase %s, %s\n", p.Kind, strconv.Quote(p.Name))
	}
	if len(o.Config) > 0 {
		b.WriteString("\n// Device configuration.\n")
	}
	for _, w := range o.Config {
		reg := fmt.Sprintf("%#x", w.Reg)
		if n, ok := configRegName(w.Reg); ok {
			reg = n
		}
		if w.Tile == obj.AllTiles {
			fmt.Fprintf(&b, ".config %s, %#x\n", reg, w.Value)
		} else {
			fmt.Fprintf(&b, ".config %s, %#x, %d\n", reg, w.Value, w.Tile)
		}
	}
	// Group the tiles whose programs (segments and symbols) are
	// identical, and within a group the tiles whose entry and transfers
	// are: a program shared by every tile with per-tile transfers is
	// written once, followed by one small block per transfer list.
	type sub struct {
		tiles []int
		t     *obj.Tile
	}
	type group struct {
		tiles []int
		t     *obj.Tile
		subs  map[[32]byte]*sub
		order []*sub
	}
	groups := map[[32]byte]*group{}
	var order []*group
	var keyer tileKeyer
	for i := range o.Tiles {
		t := &o.Tiles[i]
		k := keyer.key(t)
		g, ok := groups[k]
		if !ok {
			g = &group{t: t, subs: map[[32]byte]*sub{}}
			groups[k] = g
			order = append(order, g)
		}
		g.tiles = append(g.tiles, t.Index)
		ak := attrKey(t)
		sg, ok := g.subs[ak]
		if !ok {
			sg = &sub{t: t}
			g.subs[ak] = sg
			g.order = append(g.order, sg)
		}
		sg.tiles = append(sg.tiles, t.Index)
	}
	for _, g := range order {
		sort.Ints(g.tiles)
		fmt.Fprintf(&b, "\n.tile %s\n", formatTiles(g.tiles))
		hasCode := false
		for _, s := range g.t.Segments {
			hasCode = hasCode || s.Kind == obj.Code
		}
		if len(g.order) == 1 {
			writeAttrs(&b, g.t, hasCode)
			writeProgram(&b, g.t)
			continue
		}
		writeProgram(&b, g.t)
		for _, sg := range g.order {
			sort.Ints(sg.tiles)
			fmt.Fprintf(&b, ".tile %s\n", formatTiles(sg.tiles))
			writeAttrs(&b, sg.t, hasCode)
		}
	}
	return b.Bytes()
}

// attrKey fingerprints a tile's entry and transfers.
func attrKey(t *obj.Tile) [32]byte {
	h := sha256.New()
	buf := binary.AppendUvarint(nil, uint64(t.Entry))
	for _, x := range t.Exchange {
		for _, v := range []int64{int64(x.Phase), x.Cycle, int64(x.Dst), int64(x.DstCount), int64(x.Words)} {
			buf = binary.AppendVarint(buf, v)
		}
		if len(buf) > 4096 {
			h.Write(buf)
			buf = buf[:0]
		}
	}
	h.Write(buf)
	var sum [32]byte
	h.Sum(sum[:0])
	return sum
}

func writeAttrs(b *bytes.Buffer, t *obj.Tile, hasCode bool) {
	if hasCode || t.Entry != 0 {
		fmt.Fprintf(b, ".entry %#x\n", t.Entry)
	}
	for _, x := range t.Exchange {
		fmt.Fprintf(b, ".xfer %d, %d, %d, %d, %d\n", x.Phase, x.Cycle, x.Dst, x.DstCount, x.Words)
	}
}

func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' {
			return ' '
		}
		return r
	}, s)
}

func writeTensor(b *bytes.Buffer, dir string, t obj.Tensor) {
	dims := make([]string, len(t.Shape))
	for i, d := range t.Shape {
		dims[i] = strconv.FormatInt(d, 10)
	}
	fmt.Fprintf(b, "%s %s, %s, [%s], %d, %d", dir, strconv.Quote(t.Name), quoteName(t.DType), strings.Join(dims, ", "), t.Page, t.Offset)
	if t.Accumulate != 0 {
		fmt.Fprintf(b, ", %d", t.Accumulate)
	}
	b.WriteByte('\n')
}

// tileKeyer fingerprints a tile's program: segments and symbols. Tiles
// that share their slices (as Assemble makes them) are recognised without
// hashing their contents again.
type tileKeyer struct {
	byIdentity map[string][32]byte
}

func (k *tileKeyer) key(t *obj.Tile) [32]byte {
	var id strings.Builder
	fmt.Fprintf(&id, "%p %d %p %d", unsafeFirst(t.Segments), len(t.Segments), unsafeFirst(t.Symbols), len(t.Symbols))
	for _, s := range t.Segments {
		fmt.Fprintf(&id, " %p %d", unsafeFirst(s.Data), len(s.Data))
	}
	if sum, ok := k.byIdentity[id.String()]; ok {
		return sum
	}
	h := sha256.New()
	var buf []byte
	num := func(v uint64) { buf = binary.AppendUvarint(buf, v) }
	str := func(s string) { num(uint64(len(s))); buf = append(buf, s...) }
	flush := func() { h.Write(buf); buf = buf[:0] }
	num(uint64(len(t.Segments)))
	for _, s := range t.Segments {
		str(s.Name)
		num(uint64(s.Kind))
		num(uint64(s.Addr))
		num(uint64(s.Size))
		num(uint64(len(s.Data)))
		flush()
		h.Write(s.Data)
	}
	num(uint64(len(t.Symbols)))
	for _, s := range t.Symbols {
		str(s.Name)
		num(uint64(s.Addr))
		num(uint64(s.Size))
		if s.Code {
			num(1)
		} else {
			num(0)
		}
		if len(buf) > 4096 {
			flush()
		}
	}
	flush()
	var sum [32]byte
	h.Sum(sum[:0])
	if k.byIdentity == nil {
		k.byIdentity = map[string][32]byte{}
	}
	k.byIdentity[id.String()] = sum
	return sum
}

// unsafeFirst returns the address of a slice's first element (nil when
// empty), to recognise shared slices.
func unsafeFirst[T any](s []T) *T {
	if len(s) == 0 {
		return nil
	}
	return &s[0]
}

// writeProgram writes a tile's sections with its symbols as labels.
func writeProgram(b *bytes.Buffer, t *obj.Tile) {
	// Labels: the symbols that are valid names, once each, in the segment
	// that holds them (or that they end).
	labels := make([]map[uint32][]string, len(t.Segments))
	used := map[string]bool{}
	for _, sym := range t.Symbols {
		if used[sym.Name] || !labelName(sym.Name) {
			continue
		}
		at := -1
		for i, s := range t.Segments {
			if sym.Addr >= s.Addr && uint64(sym.Addr) < uint64(s.Addr)+uint64(s.Size) {
				at = i
				break
			}
		}
		if at < 0 {
			for i, s := range t.Segments {
				if uint64(sym.Addr) == uint64(s.Addr)+uint64(s.Size) {
					at = i
					break
				}
			}
		}
		if at < 0 {
			continue
		}
		s := t.Segments[at]
		off := sym.Addr - s.Addr
		if s.Kind == obj.Code && s.Addr%4 == 0 && off%4 != 0 {
			continue // code is written a word per line
		}
		used[sym.Name] = true
		if labels[at] == nil {
			labels[at] = map[uint32][]string{}
		}
		labels[at][off] = append(labels[at][off], sym.Name)
	}
	for i, s := range t.Segments {
		fmt.Fprintf(b, ".section %s, %s, %#x\n", quoteName(s.Name), s.Kind, s.Addr)
		writeSegment(b, s, labels[i])
	}
}

// writeSegment writes a segment's contents, with its labels before the
// line at their offset.
func writeSegment(b *bytes.Buffer, s obj.Segment, labels map[uint32][]string) {
	// Label offsets in order give the places where a line must break.
	offs := make([]uint32, 0, len(labels))
	for off := range labels {
		offs = append(offs, off)
	}
	sort.Slice(offs, func(i, j int) bool { return offs[i] < offs[j] })
	next := 0
	putLabels := func(off uint32) {
		for next < len(offs) && offs[next] <= off {
			for _, n := range labels[offs[next]] {
				fmt.Fprintf(b, "%s:\n", n)
			}
			next++
		}
	}
	limit := func(off, n uint32) uint32 {
		if next < len(offs) && offs[next] > off && offs[next]-off < n {
			return offs[next] - off
		}
		return n
	}
	size := s.Size
	if s.Kind == obj.BSS {
		for off := uint32(0); off < size; {
			putLabels(off)
			n := limit(off, size-off)
			fmt.Fprintf(b, "\t.space %d\n", n)
			off += n
		}
		putLabels(size)
		return
	}
	data := s.Data
	if uint32(len(data)) < size {
		size = uint32(len(data))
	}
	code := s.Kind == obj.Code && s.Addr%4 == 0
	for off := uint32(0); off < size; {
		putLabels(off)
		rest := size - off
		switch {
		case code && rest >= 4:
			pc := s.Addr + off
			w := binary.LittleEndian.Uint32(data[off:])
			text, invalid := formatWord(pc, w)
			if invalid != "" {
				fmt.Fprintf(b, "\t%-30s // %05x invalid: %s\n", text, pc, invalid)
			} else {
				fmt.Fprintf(b, "\t%-30s // %05x\n", text, pc)
			}
			off += 4
		case (s.Addr+off)%4 == 0 && limit(off, rest) >= 4:
			n := limit(off, rest) / 4
			if n > 4 {
				n = 4
			}
			b.WriteString("\t.word ")
			for j := uint32(0); j < n; j++ {
				if j > 0 {
					b.WriteString(", ")
				}
				fmt.Fprintf(b, "%#08x", binary.LittleEndian.Uint32(data[off+4*j:]))
			}
			b.WriteByte('\n')
			off += 4 * n
		default:
			// Up to the next word boundary (or label): bytes.
			n := (4 - (s.Addr+off)%4) % 4
			if n == 0 || n > rest {
				n = rest
				if n > 16 {
					n = 16
				}
			}
			n = limit(off, n)
			b.WriteString("\t" + byteList(data[off:off+n]) + "\n")
			off += n
		}
	}
	putLabels(size)
}
