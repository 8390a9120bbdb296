package asm

import (
	"strings"

	"ipu.local/libs/isa"
)

// stmt is one source line: labels, then at most one instruction or
// directive with its comma-separated operands.
type stmt struct {
	line   int
	text   string  // the line, to quote operands in messages
	labels []token // label names, in order
	op     string  // mnemonic or directive, lower case; "" for none
	opTok  token
	args   []arg
	bad    bool // the line has an error already reported

	inst *isa.Info // instruction lines: the chosen table entry
	ops  []operand
	dir  *dirArgs // directive lines: the parsed operands
}

// arg is one operand: its tokens and where it lies on the line.
type arg struct {
	toks []token
	col  int // 1-based column of the first token
	end  int // column just after the last token
}

// source returns the operand's text as written.
func (s *stmt) source(a arg) string {
	if a.col < 1 || a.end-1 > len(s.text) || a.col > a.end {
		return ""
	}
	return s.text[a.col-1 : a.end-1]
}

// parseLine turns one line into a statement (nil for a blank line).
func parseLine(lineNo int, text string) (*stmt, *posError) {
	toks, err := lexLine(text)
	if err != nil {
		return nil, err
	}
	if len(toks) == 0 {
		return nil, nil
	}
	s := &stmt{line: lineNo, text: text}
	i := 0
	for i+1 < len(toks) && toks[i].kind == tIdent && isPunct(toks[i+1], ":") {
		s.labels = append(s.labels, toks[i])
		i += 2
	}
	if i == len(toks) {
		return s, nil
	}
	t := toks[i]
	switch t.kind {
	case tIdent, tDirective:
	default:
		return nil, errAt(t.col, "expected instruction, directive or label, got %s", describe(t))
	}
	s.op = strings.ToLower(t.text)
	s.opTok = t
	rest := toks[i+1:]
	if len(rest) == 0 {
		return s, nil
	}
	depth := 0
	start := 0
	flush := func(j int, comma token) *posError {
		if j == start {
			return errAt(comma.col, "missing operand before %s", describe(comma))
		}
		part := rest[start:j]
		s.args = append(s.args, arg{toks: part, col: part[0].col, end: part[len(part)-1].end})
		return nil
	}
	for j, tk := range rest {
		if tk.kind != tPunct {
			continue
		}
		switch tk.text {
		case "[", "(":
			depth++
		case "]", ")":
			depth--
		case ",":
			if depth == 0 {
				if err := flush(j, tk); err != nil {
					return nil, err
				}
				start = j + 1
			}
		}
	}
	if start == len(rest) {
		last := rest[len(rest)-1]
		return nil, errAt(last.end, "missing operand after %s", describe(last))
	}
	if err := flush(len(rest), token{}); err != nil {
		return nil, err
	}
	return s, nil
}
