package asm

import (
	"fmt"
	"strconv"
	"strings"

	"ipu.local/libs/isa"
)

// regOp is a register or register group operand.
type regOp struct {
	file byte  // 'm' or 'a'
	num  uint8 // first register
	n    int   // registers in the group: 1, 2 or 4
}

func parseRegNum(s string) (uint8, bool) {
	v, err := strconv.Atoi(s)
	if err != nil || v < 0 || v > 15 || strconv.Itoa(v) != s {
		return 0, false
	}
	return uint8(v), true
}

// parseReg reads $m0..$m15, $mzero, $a0..$a15, $azero, $aN:M.
func parseReg(t token) (regOp, *posError) {
	s := t.text
	bad := errAt(t.col, "unknown register %s", s)
	if len(s) < 3 || s[0] != '$' {
		return regOp{}, bad
	}
	file := s[1]
	if file != 'm' && file != 'a' {
		return regOp{}, bad
	}
	body := s[2:]
	if body == "zero" {
		return regOp{file: file, num: 15, n: 1}, nil
	}
	lo, hi, group := strings.Cut(body, ":")
	first, ok := parseRegNum(lo)
	if !ok {
		return regOp{}, bad
	}
	if !group {
		return regOp{file: file, num: first, n: 1}, nil
	}
	if file == 'm' {
		return regOp{}, errAt(t.col, "%s: $m registers do not form groups", s)
	}
	last, ok := parseRegNum(hi)
	if !ok {
		return regOp{}, bad
	}
	n := int(last) - int(first) + 1
	switch n {
	case 2:
		if first%2 != 0 {
			return regOp{}, errAt(t.col, "register pair %s must start at an even register", s)
		}
	case 4:
		if first%4 != 0 {
			return regOp{}, errAt(t.col, "register quad %s must start at a multiple of 4", s)
		}
	default:
		return regOp{}, errAt(t.col, "register group %s must span 2 or 4 registers", s)
	}
	return regOp{file: file, num: first, n: n}, nil
}

type operandKind uint8

const (
	opReg operandKind = iota + 1
	opMem
	opExpr
)

// operand is one parsed instruction operand.
type operand struct {
	a    arg
	text string
	kind operandKind
	reg  regOp // opReg, and the base of opMem
	inc  bool  // opMem: [$m+=inc] rather than [$m+off]
	neg  bool  // opMem: written -=
	x    expr  // opExpr, and the offset of opMem (nil: 0)
	name string
}

func parseOperand(s *stmt, a arg) (operand, *posError) {
	o := operand{a: a, text: s.source(a)}
	t := a.toks[0]
	switch {
	case t.kind == tReg:
		if len(a.toks) > 1 {
			n := a.toks[1]
			return o, errAt(n.col, "unexpected %s after register %s", describe(n), t.text)
		}
		r, err := parseReg(t)
		if err != nil {
			return o, err
		}
		o.kind, o.reg = opReg, r
		return o, nil
	case isPunct(t, "["):
		last := a.toks[len(a.toks)-1]
		if len(a.toks) < 2 || !isPunct(last, "]") {
			return o, errAt(a.end, "missing ] in memory operand %s", o.text)
		}
		in := a.toks[1 : len(a.toks)-1]
		if len(in) == 0 || in[0].kind != tReg {
			col := last.col
			if len(in) > 0 {
				col = in[0].col
			}
			return o, errAt(col, "memory operand %s: want an $m base register", o.text)
		}
		r, err := parseReg(in[0])
		if err != nil {
			return o, err
		}
		if r.file != 'm' || r.n != 1 {
			return o, errAt(in[0].col, "memory operand %s: base must be an $m register, got %s", o.text, in[0].text)
		}
		o.kind, o.reg = opMem, r
		rest := in[1:]
		if len(rest) == 0 {
			return o, nil
		}
		switch {
		case isPunct(rest[0], "+=") || isPunct(rest[0], "-="):
			o.inc = true
			o.neg = rest[0].text == "-="
			x, err := parseExpr(rest[1:], last.col)
			if err != nil {
				return o, err
			}
			o.x = x
		case isPunct(rest[0], "+") || isPunct(rest[0], "-"):
			x, err := parseExpr(rest, last.col)
			if err != nil {
				return o, err
			}
			o.x = x
		default:
			return o, errAt(rest[0].col, "memory operand %s: want +, -, += or -= after the base register, got %s", o.text, describe(rest[0]))
		}
		return o, nil
	}
	x, err := parseExpr(a.toks, a.end)
	if err != nil {
		return o, err
	}
	o.kind, o.x = opExpr, x
	if len(a.toks) == 1 && t.kind == tIdent {
		o.name = t.text
	}
	return o, nil
}

// matches reports whether operand o has the syntax kind k wants.
func matches(k isa.Kind, o *operand) bool {
	switch k {
	case isa.MD, isa.MA, isa.MB, isa.MC:
		return o.kind == opReg && o.reg.file == 'm' && o.reg.n == 1
	case isa.AD, isa.AA, isa.AB, isa.AC:
		return o.kind == opReg && o.reg.file == 'a' && o.reg.n == 1
	case isa.AD2, isa.AA2, isa.AB2, isa.AC2:
		return o.kind == opReg && o.reg.file == 'a' && o.reg.n == 2
	case isa.AD4:
		return o.kind == opReg && o.reg.file == 'a' && o.reg.n == 4
	case isa.MemOff:
		return o.kind == opMem && !o.inc
	case isa.MemInc:
		return o.kind == opMem && o.inc
	default:
		return o.kind == opExpr
	}
}

// want describes what kind k accepts, for error messages.
func want(k isa.Kind) string {
	switch k {
	case isa.MD, isa.MA, isa.MB, isa.MC:
		return "$m register"
	case isa.AD, isa.AA, isa.AB, isa.AC:
		return "$a register"
	case isa.AD2, isa.AA2, isa.AB2, isa.AC2:
		return "register pair $aN:N+1"
	case isa.AD4:
		return "register quad $aN:N+3"
	case isa.MemOff:
		return "memory operand [$mN+off]"
	case isa.MemInc:
		return "memory operand [$mN+=inc]"
	case isa.Rel16, isa.Rel20:
		return "branch target"
	case isa.CSRImm:
		return "control register"
	}
	return "immediate"
}

// sourceOperands is the number of operands an instruction takes in the
// source: rpti takes count and length separately.
func sourceOperands(in *isa.Info) int {
	if in.Op == isa.RPTI {
		return 2
	}
	return len(in.Operands)
}

// sourceKinds is the operand kinds as written in the source.
func sourceKinds(in *isa.Info) []isa.Kind {
	if in.Op == isa.RPTI {
		return []isa.Kind{isa.Imm20, isa.Imm20}
	}
	return in.Operands
}

// selectInst parses the operands of an instruction line and picks the
// table entry whose operand kinds they match.
func selectInst(s *stmt) (*isa.Info, []operand, *posError) {
	cands := isa.ByName(s.op)
	if len(cands) == 0 {
		return nil, nil, errAt(s.opTok.col, "unknown instruction %s", s.opTok.text)
	}
	ops := make([]operand, len(s.args))
	for i, a := range s.args {
		o, err := parseOperand(s, a)
		if err != nil {
			return nil, nil, err
		}
		ops[i] = o
	}
	best, bestAt := -1, -1
	var wants []string
	counted := false
	for _, in := range cands {
		kinds := sourceKinds(in)
		if len(kinds) != len(ops) {
			continue
		}
		counted = true
		at := len(kinds)
		for i, k := range kinds {
			if !matches(k, &ops[i]) {
				at = i
				break
			}
		}
		if at == len(kinds) {
			return in, ops, nil
		}
		switch {
		case at > bestAt:
			best, bestAt = at, at
			wants = []string{want(kinds[at])}
		case at == bestAt:
			w := want(kinds[at])
			if !contains(wants, w) {
				wants = append(wants, w)
			}
		}
	}
	if !counted {
		n := sourceOperands(cands[0])
		col := s.opTok.col
		if len(ops) > n {
			col = ops[n].a.col
		}
		return nil, nil, errAt(col, "%s takes %s, got %d", s.op, plural(n, "operand"), len(ops))
	}
	o := ops[best]
	return nil, nil, errAt(o.a.col, "operand %d of %s: want %s, got %s", best+1, s.op, joinWants(wants), o.text)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func joinWants(w []string) string {
	const mem = "memory operand "
	out := w[0]
	for _, x := range w[1:] {
		if strings.HasPrefix(out, mem) && strings.HasPrefix(x, mem) {
			out += " or " + strings.TrimPrefix(x, mem)
		} else {
			out += " or " + x
		}
	}
	return out
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// csrNames are the control registers by name, indexed by number.
var csrNames = [isa.NumCSR]string{
	isa.CSRTileID:  "tileid",
	isa.CSRContext: "context",
	isa.CSRCycles:  "cycles",
	isa.CSRFP8:     "fp8",
	isa.CSRPhase:   "phase",
	isa.CSRTiles:   "tiles",
}

func csrByName(name string) (int, bool) {
	for i, n := range csrNames {
		if n == name {
			return i, true
		}
	}
	return 0, false
}

// encodeInst evaluates the operands of an instruction at pc and encodes it.
func encodeInst(s *stmt, in *isa.Info, ops []operand, pc uint32, en env) (uint32, *posError) {
	i := isa.Inst{Op: in.Op}
	rangeErr := func(n int, what string, v, lo, hi int64) *posError {
		return errAt(ops[n].a.col, "operand %d of %s: %s %d out of range %d..%d", n+1, s.op, what, v, lo, hi)
	}
	if in.Op == isa.RPTI {
		count, err := eval(ops[0].x, en)
		if err != nil {
			return 0, err
		}
		n, err := eval(ops[1].x, en)
		if err != nil {
			return 0, err
		}
		if count < 0 || count > 0xfff {
			return 0, rangeErr(0, "repeat count", count, 0, 0xfff)
		}
		if n < 0 || n > 0xff {
			return 0, rangeErr(1, "body length", n, 0, 0xff)
		}
		i.Imm = int32(count<<8 | n)
		return encodeChecked(s, i)
	}
	for n, k := range in.Operands {
		o := &ops[n]
		switch k {
		case isa.MD, isa.AD, isa.AD2, isa.AD4:
			i.D = o.reg.num
		case isa.MA, isa.AA, isa.AA2:
			i.A = o.reg.num
		case isa.MB, isa.AB, isa.AB2:
			i.B = o.reg.num
		case isa.MC, isa.AC, isa.AC2:
			i.C = o.reg.num
		case isa.MemOff, isa.MemInc:
			i.A = o.reg.num
			var v int64
			if o.x != nil {
				var err *posError
				if v, err = eval(o.x, en); err != nil {
					return 0, err
				}
			}
			what := "memory offset"
			if o.neg {
				v = -v
			}
			if o.inc {
				what = "increment"
			}
			if v < -0x8000 || v > 0x7fff {
				return 0, rangeErr(n, what, v, -0x8000, 0x7fff)
			}
			i.Imm = int32(v)
		case isa.CSRImm:
			if num, ok := csrByName(o.name); ok {
				i.Imm = int32(num)
				break
			}
			v, err := eval(o.x, en)
			if err != nil {
				if o.name != "" {
					return 0, errAt(o.a.col, "operand %d of %s: unknown control register %s (want %s or 0..%d)",
						n+1, s.op, o.name, strings.Join(csrNames[:], ", "), isa.NumCSR-1)
				}
				return 0, err
			}
			if v < 0 || v >= isa.NumCSR {
				return 0, errAt(o.a.col, "operand %d of %s: no control register %d (want 0..%d)", n+1, s.op, v, isa.NumCSR-1)
			}
			i.Imm = int32(v)
		case isa.Rel16, isa.Rel20:
			t, err := eval(o.x, en)
			if err != nil {
				return 0, err
			}
			diff := t - (int64(pc) + 4)
			if diff%4 != 0 {
				return 0, errAt(o.a.col, "operand %d of %s: branch target %s is not 4-aligned", n+1, s.op, hexInt(t))
			}
			off := diff / 4
			lo, hi := int64(-0x8000), int64(0x7fff)
			if k == isa.Rel20 {
				lo, hi = -(1 << 19), 1<<19-1
			}
			if off < lo || off > hi {
				return 0, errAt(o.a.col, "operand %d of %s: branch target %s out of range (offset %d instructions, want %d..%d)",
					n+1, s.op, hexInt(t), off, lo, hi)
			}
			i.Imm = int32(off)
		default:
			v, err := eval(o.x, en)
			if err != nil {
				return 0, err
			}
			var lo, hi int64
			switch k {
			case isa.Imm8:
				lo, hi = 0, 0xff
			case isa.Imm16:
				lo, hi = -0x8000, 0x7fff
			case isa.Imm16U:
				lo, hi = 0, 0xffff
			case isa.Imm20:
				lo, hi = 0, 1<<20-1
			}
			if v < lo || v > hi {
				return 0, rangeErr(n, "immediate", v, lo, hi)
			}
			i.Imm = int32(v)
		}
	}
	return encodeChecked(s, i)
}

func encodeChecked(s *stmt, i isa.Inst) (uint32, *posError) {
	w, err := isa.Encode(i)
	if err != nil {
		return 0, errAt(s.opTok.col, "%v", err)
	}
	return w, nil
}

// hex writes v as 0x... (-0x... when negative).
func hexInt(v int64) string {
	if v < 0 {
		return fmt.Sprintf("-%#x", uint64(-v))
	}
	return fmt.Sprintf("%#x", v)
}
