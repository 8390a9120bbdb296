package asm

import (
	"math"
	"strconv"
	"strings"
)

// expr is a parsed expression over 64-bit signed integers.
type expr interface{ pos() int }

type numExpr struct {
	v   int64
	col int
}

type symExpr struct {
	name string
	col  int
}

type dotExpr struct{ col int }

type unaryExpr struct {
	op  string // - + ~
	x   expr
	col int
}

type binExpr struct {
	op   string // + - * / % << >>
	x, y expr
	col  int
}

func (e *numExpr) pos() int   { return e.col }
func (e *symExpr) pos() int   { return e.col }
func (e *dotExpr) pos() int   { return e.col }
func (e *unaryExpr) pos() int { return e.col }
func (e *binExpr) pos() int   { return e.col }

// env resolves the names an expression uses.
type env interface {
	// sym returns the value of a label or constant.
	sym(name string, col int) (int64, *posError)
	// dot returns the current address.
	dot(col int) (int64, *posError)
}

// parseNumber reads a decimal, 0x hexadecimal or 0b binary literal.
func parseNumber(t token) (int64, *posError) {
	s := strings.ToLower(t.text)
	base := 10
	switch {
	case strings.HasPrefix(s, "0x"):
		base, s = 16, s[2:]
	case strings.HasPrefix(s, "0b"):
		base, s = 2, s[2:]
	}
	if s == "" || strings.Contains(s, "_") {
		return 0, errAt(t.col, "bad number %s", t.text)
	}
	v, err := strconv.ParseUint(s, base, 64)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			return 0, errAt(t.col, "number %s is too large", t.text)
		}
		return 0, errAt(t.col, "bad number %s", t.text)
	}
	if v > math.MaxInt64 {
		return 0, errAt(t.col, "number %s is too large", t.text)
	}
	return int64(v), nil
}

// exprParser is a recursive-descent parser over one operand's tokens.
type exprParser struct {
	toks []token
	i    int
	end  int // column after the operand, for "missing" errors
}

func (p *exprParser) peek() (token, bool) {
	if p.i < len(p.toks) {
		return p.toks[p.i], true
	}
	return token{}, false
}

// parseExpr parses all of toks as one expression.
func parseExpr(toks []token, end int) (expr, *posError) {
	if len(toks) == 0 {
		return nil, errAt(end, "missing expression")
	}
	p := &exprParser{toks: toks, end: end}
	e, err := p.sum()
	if err != nil {
		return nil, err
	}
	if t, ok := p.peek(); ok {
		return nil, errAt(t.col, "unexpected %s in expression", describe(t))
	}
	return e, nil
}

// Precedence (loosest first): + -, then * / % << >>, then unary - + ~.
func (p *exprParser) sum() (expr, *posError) {
	x, err := p.product()
	if err != nil {
		return nil, err
	}
	for {
		t, ok := p.peek()
		if !ok || !(isPunct(t, "+") || isPunct(t, "-")) {
			return x, nil
		}
		p.i++
		y, err := p.product()
		if err != nil {
			return nil, err
		}
		x = &binExpr{op: t.text, x: x, y: y, col: t.col}
	}
}

func (p *exprParser) product() (expr, *posError) {
	x, err := p.unary()
	if err != nil {
		return nil, err
	}
	for {
		t, ok := p.peek()
		if !ok || t.kind != tPunct {
			return x, nil
		}
		switch t.text {
		case "*", "/", "%", "<<", ">>":
		default:
			return x, nil
		}
		p.i++
		y, err := p.unary()
		if err != nil {
			return nil, err
		}
		x = &binExpr{op: t.text, x: x, y: y, col: t.col}
	}
}

func (p *exprParser) unary() (expr, *posError) {
	t, ok := p.peek()
	if ok && (isPunct(t, "-") || isPunct(t, "+") || isPunct(t, "~")) {
		p.i++
		x, err := p.unary()
		if err != nil {
			return nil, err
		}
		return &unaryExpr{op: t.text, x: x, col: t.col}, nil
	}
	return p.primary()
}

func (p *exprParser) primary() (expr, *posError) {
	t, ok := p.peek()
	if !ok {
		return nil, errAt(p.end, "missing operand in expression")
	}
	p.i++
	switch t.kind {
	case tNumber:
		v, err := parseNumber(t)
		if err != nil {
			return nil, err
		}
		return &numExpr{v: v, col: t.col}, nil
	case tIdent:
		return &symExpr{name: t.text, col: t.col}, nil
	case tDot:
		return &dotExpr{col: t.col}, nil
	case tPunct:
		if t.text == "(" {
			x, err := p.sum()
			if err != nil {
				return nil, err
			}
			c, ok := p.peek()
			if !ok || !isPunct(c, ")") {
				col := p.end
				if ok {
					col = c.col
				}
				return nil, errAt(col, "missing ) in expression")
			}
			p.i++
			return x, nil
		}
	case tReg:
		return nil, errAt(t.col, "unexpected register %s in expression", t.text)
	}
	return nil, errAt(t.col, "unexpected %s in expression", describe(t))
}

// eval computes e; arithmetic wraps modulo 2^64.
func eval(e expr, en env) (int64, *posError) {
	switch e := e.(type) {
	case *numExpr:
		return e.v, nil
	case *symExpr:
		return en.sym(e.name, e.col)
	case *dotExpr:
		return en.dot(e.col)
	case *unaryExpr:
		x, err := eval(e.x, en)
		if err != nil {
			return 0, err
		}
		switch e.op {
		case "-":
			return -x, nil
		case "~":
			return ^x, nil
		}
		return x, nil
	case *binExpr:
		x, err := eval(e.x, en)
		if err != nil {
			return 0, err
		}
		y, err := eval(e.y, en)
		if err != nil {
			return 0, err
		}
		switch e.op {
		case "+":
			return x + y, nil
		case "-":
			return x - y, nil
		case "*":
			return x * y, nil
		case "/", "%":
			if y == 0 {
				return 0, errAt(e.col, "division by zero")
			}
			if x == math.MinInt64 && y == -1 {
				if e.op == "/" {
					return x, nil
				}
				return 0, nil
			}
			if e.op == "/" {
				return x / y, nil
			}
			return x % y, nil
		case "<<", ">>":
			if y < 0 || y > 63 {
				return 0, errAt(e.col, "shift count %d out of range 0..63", y)
			}
			if e.op == "<<" {
				return x << uint(y), nil
			}
			return x >> uint(y), nil
		}
	}
	return 0, errAt(e.pos(), "bad expression")
}

// usesDot reports whether e refers to the current address.
func usesDot(e expr) (int, bool) {
	switch e := e.(type) {
	case *dotExpr:
		return e.col, true
	case *unaryExpr:
		return usesDot(e.x)
	case *binExpr:
		if c, ok := usesDot(e.x); ok {
			return c, true
		}
		return usesDot(e.y)
	}
	return 0, false
}
