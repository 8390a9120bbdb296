package asm

import (
	"math"
	"math/big"
	"strconv"
	"strings"

	"ipu.local/formats/obj"
	"ipu.local/libs/numfmt"
)

// Directive scopes: global directives describe the whole object and may
// appear anywhere; the others belong to the current .tile block.
var globalDirectives = map[string]bool{
	".arch": true, ".page": true, ".input": true, ".output": true,
	".phase": true, ".config": true, ".equ": true,
}

var tileDirectives = map[string]bool{
	".section": true, ".entry": true, ".align": true, ".word": true,
	".half": true, ".byte": true, ".float": true, ".f16": true,
	".zero": true, ".space": true, ".xfer": true,
}

// Device configuration registers by name. The numbers are the simulator's
// (sim.RegEntry, sim.RegFP8, sim.RegWatchdog); asm does not import sim so
// that sim may use the assembler.
var configRegs = []struct {
	name string
	reg  uint32
}{
	{"entry", 0x0001},
	{"fp8", 0x0002},
	{"watchdog", 0x0100},
}

func configRegByName(name string) (uint32, bool) {
	for _, r := range configRegs {
		if r.name == name {
			return r.reg, true
		}
	}
	return 0, false
}

func configRegName(reg uint32) (string, bool) {
	for _, r := range configRegs {
		if r.reg == reg {
			return r.name, true
		}
	}
	return "", false
}

var phaseKinds = map[string]obj.PhaseKind{
	"compute": obj.Compute, "exchange": obj.Exchange, "host": obj.HostExchange,
}

var segKinds = map[string]obj.SegKind{
	"code": obj.Code, "data": obj.Data, "bss": obj.BSS,
}

// dtypeBits is the element size of the ONNX tensor types by name (0: not
// fixed, as for strings).
var dtypeBits = map[string]int{
	"float": 32, "uint8": 8, "int8": 8, "uint16": 16, "int16": 16,
	"int32": 32, "int64": 64, "string": 0, "bool": 8, "float16": 16,
	"double": 64, "uint32": 32, "uint64": 64, "complex64": 64,
	"complex128": 128, "bfloat16": 16, "float8e4m3fn": 8,
	"float8e4m3fnuz": 8, "float8e5m2": 8, "float8e5m2fnuz": 8,
	"uint4": 4, "int4": 4, "float4e2m1": 4,
}

// tileItem is one entry of a .tile list: a tile or a range lo-hi.
type tileItem struct {
	lo, hi expr // hi nil for a single tile
	col    int
}

// dirArgs holds a directive's parsed operands.
type dirArgs struct {
	names  []string // names and strings, by operand position (or "")
	xs     []expr   // expressions, by operand position (or nil)
	floats []uint32 // .float/.f16 literal bits, by operand (used when xs[i] is nil)
	dims   []expr   // .input/.output shape
	tiles  []tileItem
}

func (a *assembler) countArgs(s *stmt, min, max int) bool {
	n := len(s.args)
	if n >= min && n <= max {
		return true
	}
	var want string
	switch {
	case min == max:
		want = plural(min, "operand")
	case max == math.MaxInt:
		want = "at least " + plural(min, "operand")
	default:
		want = strconv.Itoa(min) + " or " + plural(max, "operand")
	}
	col := s.opTok.col
	if n > max {
		col = s.args[max].col
	}
	a.errorf(s, col, "%s takes %s, got %d", s.op, want, n)
	return false
}

// nameArg reads an operand that is a bare name or a quoted string.
func nameArg(s *stmt, a arg, what string) (string, *posError) {
	if len(a.toks) == 1 {
		t := a.toks[0]
		switch t.kind {
		case tIdent, tDirective, tString:
			return t.text, nil
		}
	}
	return "", errAt(a.col, "%s: want %s (a name or a quoted string), got %s", s.op, what, s.source(a))
}

// prepare parses the operands of a directive; false when the line is bad.
func (a *assembler) prepare(s *stmt) bool {
	d := &dirArgs{}
	s.dir = d
	fail := func(err *posError) bool {
		a.errorAt(s, err)
		return false
	}
	exprs := func(from int) bool {
		for i := from; i < len(s.args); i++ {
			x, err := parseExpr(s.args[i].toks, s.args[i].end)
			if err != nil {
				return fail(err)
			}
			d.xs[i] = x
		}
		return true
	}
	d.xs = make([]expr, len(s.args))
	d.names = make([]string, len(s.args))
	switch s.op {
	case ".arch":
		if !a.countArgs(s, 1, 1) {
			return false
		}
		n, err := nameArg(s, s.args[0], "architecture")
		if err != nil {
			// Preset names have dashes: ipu21-tiny.
			n = s.source(s.args[0])
			if !presetName(n) {
				return fail(err)
			}
		}
		d.names[0] = n
	case ".tile":
		if !a.countArgs(s, 1, math.MaxInt) {
			return false
		}
		for _, ar := range s.args {
			it, err := parseTileItem(ar)
			if err != nil {
				return fail(err)
			}
			d.tiles = append(d.tiles, it)
		}
	case ".section":
		if !a.countArgs(s, 2, 3) {
			return false
		}
		n, err := nameArg(s, s.args[0], "section name")
		if err != nil {
			return fail(err)
		}
		k, err := nameArg(s, s.args[1], "section kind")
		if err != nil {
			return fail(err)
		}
		if _, ok := segKinds[strings.ToLower(k)]; !ok {
			return fail(errAt(s.args[1].col, "unknown section kind %s (want code, data or bss)", s.source(s.args[1])))
		}
		d.names[0], d.names[1] = n, strings.ToLower(k)
		return exprs(2)
	case ".entry", ".align", ".zero", ".space":
		if !a.countArgs(s, 1, 1) {
			return false
		}
		return exprs(0)
	case ".word", ".half", ".byte":
		if !a.countArgs(s, 1, math.MaxInt) {
			return false
		}
		return exprs(0)
	case ".float", ".f16":
		if !a.countArgs(s, 1, math.MaxInt) {
			return false
		}
		d.floats = make([]uint32, len(s.args))
		for i, ar := range s.args {
			text := s.source(ar)
			v, ok, overflow := floatLiteral(text, s.op == ".f16")
			if overflow {
				kind := "FP32"
				if s.op == ".f16" {
					kind = "FP16"
				}
				return fail(errAt(ar.col, "%s: %s overflows %s", s.op, text, kind))
			}
			if ok {
				d.floats[i] = v
				continue
			}
			x, err := parseExpr(ar.toks, ar.end)
			if err != nil {
				return fail(errAt(ar.col, "%s: bad number %s", s.op, text))
			}
			d.xs[i] = x
		}
	case ".equ":
		if !a.countArgs(s, 2, 2) {
			return false
		}
		ar := s.args[0]
		if len(ar.toks) != 1 || ar.toks[0].kind != tIdent {
			return fail(errAt(ar.col, ".equ: want a name, got %s", s.source(ar)))
		}
		d.names[0] = ar.toks[0].text
		if !exprs(1) {
			return false
		}
		if col, ok := usesDot(d.xs[1]); ok {
			return fail(errAt(col, ".equ cannot use . (define a label instead)"))
		}
	case ".page":
		if !a.countArgs(s, 2, 2) {
			return false
		}
		return exprs(0)
	case ".input", ".output":
		if !a.countArgs(s, 5, 6) {
			return false
		}
		n, err := nameArg(s, s.args[0], "tensor name")
		if err != nil {
			return fail(err)
		}
		t, err := nameArg(s, s.args[1], "data type")
		if err != nil {
			return fail(err)
		}
		if _, ok := dtypeBits[t]; !ok {
			return fail(errAt(s.args[1].col, "%s: unknown data type %q", s.op, t))
		}
		d.names[0], d.names[1] = n, t
		dims, err := parseDims(s, s.args[2])
		if err != nil {
			return fail(err)
		}
		d.dims = dims
		return exprs(3)
	case ".phase":
		if !a.countArgs(s, 2, 2) {
			return false
		}
		k, err := nameArg(s, s.args[0], "phase kind")
		if err != nil {
			return fail(err)
		}
		if _, ok := phaseKinds[k]; !ok {
			return fail(errAt(s.args[0].col, "unknown phase kind %s (want compute, exchange or host)", s.source(s.args[0])))
		}
		n, err := nameArg(s, s.args[1], "phase name")
		if err != nil {
			return fail(err)
		}
		d.names[0], d.names[1] = k, n
	case ".config":
		if !a.countArgs(s, 2, 3) {
			return false
		}
		ar := s.args[0]
		if len(ar.toks) == 1 && ar.toks[0].kind == tIdent {
			if _, ok := configRegByName(ar.toks[0].text); ok {
				d.names[0] = ar.toks[0].text
				return exprs(1)
			}
		}
		return exprs(0)
	case ".xfer":
		if !a.countArgs(s, 5, 5) {
			return false
		}
		return exprs(0)
	default:
		return fail(errAt(s.opTok.col, "unknown directive %s", s.opTok.text))
	}
	return true
}

func presetName(n string) bool {
	if n == "" {
		return false
	}
	for i := 0; i < len(n); i++ {
		if c := n[i]; !isNameChar(c) && c != '-' {
			return false
		}
	}
	return true
}

// parseTileItem reads N or A-B (each a number, a name or a parenthesized
// expression: a bare A-B is a range, not a subtraction).
func parseTileItem(a arg) (tileItem, *posError) {
	it := tileItem{col: a.col}
	toks := a.toks
	split := -1
	depth := 0
	for i, t := range toks {
		switch {
		case isPunct(t, "("):
			depth++
		case isPunct(t, ")"):
			depth--
		case isPunct(t, "-") && depth == 0 && i > 0:
			if split < 0 {
				split = i
			}
		}
	}
	if split < 0 {
		x, err := parseExpr(toks, a.end)
		if err != nil {
			return it, err
		}
		it.lo = x
		return it, nil
	}
	lo, err := parseExpr(toks[:split], toks[split].col)
	if err != nil {
		return it, err
	}
	hi, err := parseExpr(toks[split+1:], a.end)
	if err != nil {
		return it, err
	}
	it.lo, it.hi = lo, hi
	return it, nil
}

// parseDims reads a shape [d0, d1, ...] (possibly []).
func parseDims(s *stmt, a arg) ([]expr, *posError) {
	toks := a.toks
	if len(toks) < 2 || !isPunct(toks[0], "[") || !isPunct(toks[len(toks)-1], "]") {
		return nil, errAt(a.col, "%s: want a shape [d0, d1, ...], got %s", s.op, s.source(a))
	}
	in := toks[1 : len(toks)-1]
	dims := []expr{}
	start := 0
	for i := 0; i <= len(in); i++ {
		if i < len(in) && !isPunct(in[i], ",") {
			continue
		}
		part := in[start:i]
		if len(part) == 0 {
			if len(in) == 0 {
				break
			}
			col := toks[len(toks)-1].col
			if i < len(in) {
				col = in[i].col
			}
			return nil, errAt(col, "%s: missing dimension in shape", s.op)
		}
		x, err := parseExpr(part, part[len(part)-1].end)
		if err != nil {
			return nil, err
		}
		dims = append(dims, x)
		start = i + 1
	}
	return dims, nil
}

// floatLiteral converts a decimal (or hex, inf, nan) float to FP32 bits,
// or to FP16 bits in the low half when f16 is set, rounding to nearest
// even once from the exact decimal value. ok is false when text is not a
// float literal; overflow is set when a finite value does not fit.
func floatLiteral(text string, f16 bool) (bits uint32, ok, overflow bool) {
	text = strings.TrimSpace(text)
	if text == "" || strings.Contains(text, "_") {
		return 0, false, false
	}
	if !f16 {
		v, err := strconv.ParseFloat(text, 32)
		if err != nil {
			return 0, false, isRangeErr(err)
		}
		return math.Float32bits(float32(v)), true, false
	}
	v, err := strconv.ParseFloat(text, 64)
	if err != nil {
		return 0, false, isRangeErr(err)
	}
	h := numfmt.F64ToF16(nudgeHalfway(text, v))
	if h&0x7fff == 0x7c00 && !math.IsInf(v, 0) {
		return 0, false, true
	}
	return uint32(h), true, false
}

func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

// nudgeHalfway fixes the one case where parsing to FP64 first would round
// twice: when v, the FP64 nearest to the decimal text, falls exactly
// halfway between two FP16 values but the decimal does not, v moves one
// FP64 step toward the decimal so that FP16 rounding goes its way.
func nudgeHalfway(text string, v float64) float64 {
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return v
	}
	up, down := math.Nextafter(v, math.Inf(1)), math.Nextafter(v, math.Inf(-1))
	if numfmt.F64ToF16(up) == numfmt.F64ToF16(down) {
		return v
	}
	exact, ok := new(big.Rat).SetString(text)
	if !ok {
		return v
	}
	switch exact.Cmp(new(big.Rat).SetFloat64(v)) {
	case 1:
		return up
	case -1:
		return down
	}
	return v
}
