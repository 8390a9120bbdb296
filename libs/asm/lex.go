package asm

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

type tokKind uint8

const (
	tIdent     tokKind = iota + 1 // name, mnemonic
	tDirective                    // .word, .text: a dot followed by a name
	tDot                          // . alone: the current address
	tNumber                       // 12, 0x1f, 0b101 (and the digits of a float)
	tString                       // "quoted", with Go escapes
	tReg                          // $m0, $mzero, $a2:3
	tPunct                        // , : [ ] ( ) + - * / % << >> += -= ~
)

type token struct {
	kind tokKind
	text string // for tString, the unquoted value
	col  int    // 1-based byte column of the first character
	end  int    // 1-based byte column just after the token
}

func isLetter(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_'
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isNameChar(c byte) bool { return isLetter(c) || isDigit(c) || c == '.' }

// lexLine splits one source line (without its newline) into tokens,
// dropping the comment.
func lexLine(line string) ([]token, *posError) {
	var toks []token
	i := 0
	for i < len(line) {
		c := line[i]
		start := i
		switch {
		case c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v':
			i++
			continue
		case c == '#' || c == '/' && i+1 < len(line) && line[i+1] == '/':
			return toks, nil
		case isLetter(c):
			for i < len(line) && isNameChar(line[i]) {
				i++
			}
			toks = append(toks, token{tIdent, line[start:i], start + 1, i + 1})
		case c == '.':
			i++
			if i < len(line) && isLetter(line[i]) {
				for i < len(line) && isNameChar(line[i]) {
					i++
				}
				toks = append(toks, token{tDirective, line[start:i], start + 1, i + 1})
			} else {
				toks = append(toks, token{tDot, ".", start + 1, i + 1})
			}
		case isDigit(c):
			for i < len(line) && (isLetter(line[i]) || isDigit(line[i])) {
				i++
			}
			toks = append(toks, token{tNumber, line[start:i], start + 1, i + 1})
		case c == '$':
			i++
			for i < len(line) && (isLetter(line[i]) || isDigit(line[i]) || line[i] == ':') {
				i++
			}
			toks = append(toks, token{tReg, line[start:i], start + 1, i + 1})
		case c == '"':
			i++
			for i < len(line) && line[i] != '"' {
				if line[i] == '\\' {
					i++
				}
				i++
			}
			if i >= len(line) {
				return nil, errAt(start+1, "unterminated string")
			}
			i++
			s, err := strconv.Unquote(line[start:i])
			if err != nil {
				return nil, errAt(start+1, "bad string %s", line[start:i])
			}
			toks = append(toks, token{tString, s, start + 1, i + 1})
		default:
			if i+1 < len(line) {
				two := line[i : i+2]
				switch two {
				case "<<", ">>", "+=", "-=":
					i += 2
					toks = append(toks, token{tPunct, two, start + 1, i + 1})
					continue
				}
			}
			if !strings.ContainsRune(",:[]()+-*/%~", rune(c)) {
				r, _ := utf8.DecodeRuneInString(line[i:])
				return nil, errAt(start+1, "unexpected character %q", r)
			}
			i++
			toks = append(toks, token{tPunct, string(c), start + 1, i + 1})
		}
	}
	return toks, nil
}

func isPunct(t token, p string) bool { return t.kind == tPunct && t.text == p }

// describe names a token in an error message.
func describe(t token) string {
	if t.kind == tString {
		return strconv.Quote(t.text)
	}
	return t.text
}
