package asm

import (
	"fmt"
	"strings"
)

// MaxErrors is the number of errors Assemble collects before it stops.
const MaxErrors = 10

// Error is one problem in the source, at a 1-based line and byte column.
type Error struct {
	File string
	Line int
	Col  int
	Msg  string
}

func (e *Error) Error() string {
	if e.Line == 0 {
		return fmt.Sprintf("%s: %s", e.File, e.Msg)
	}
	return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Col, e.Msg)
}

// ErrorList is what Assemble returns when the source has problems: the
// errors in source order, at most MaxErrors of them (then a "too many
// errors" entry). Its Error text has one error per line.
type ErrorList []*Error

func (l ErrorList) Error() string {
	var b strings.Builder
	for i, e := range l {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.Error())
	}
	return b.String()
}

// posError is an error at a column of the current line; the caller adds
// the file and line.
type posError struct {
	col int
	msg string
}

func (e *posError) Error() string { return e.msg }

func errAt(col int, format string, args ...any) *posError {
	return &posError{col: col, msg: fmt.Sprintf(format, args...)}
}
