// Package progress draws progress bars on a terminal for the tools' long
// work (--progress=auto|always|never): auto draws only when the writer is
// a terminal, so logs and CI never see a bar or a carriage return.
package progress

import (
	"fmt"
	"io"
	"os"
	"strings"
)

// Modes of --progress.
const (
	Auto   = "auto"
	Always = "always"
	Never  = "never"
)

// Check validates a --progress value.
func Check(mode string) error {
	switch mode {
	case Auto, Always, Never:
		return nil
	}
	return fmt.Errorf("--progress %q: want auto, always or never", mode)
}

// Enabled reports whether mode draws on w: always, or auto on a terminal.
func Enabled(mode string, w io.Writer) bool {
	switch mode {
	case Always:
		return true
	case Auto:
		f, ok := w.(*os.File)
		if !ok {
			return false
		}
		fi, err := f.Stat()
		return err == nil && fi.Mode()&os.ModeCharDevice != 0
	}
	return false
}

// barWidth is the bar's width in characters.
const barWidth = 30

// Bar is a progress bar, or nothing when disabled (every method is then a
// no-op). It redraws its line in place ("\r"), as a terminal shows it.
type Bar struct {
	w     io.Writer
	total int
	n     int
	desc  string
	last  int // the width of the line drawn last, cleared by the next
}

// New returns a bar of total steps with a description on w, drawn at
// once, or a no-op bar when mode does not draw on w.
func New(mode string, w io.Writer, total int, desc string) *Bar {
	if !Enabled(mode, w) {
		return &Bar{}
	}
	b := &Bar{w: w, total: max(total, 0), desc: desc}
	b.draw()
	return b
}

// Set moves the bar to n steps (within [0, total]) with a new description.
func (b *Bar) Set(n int, desc string) {
	if b.w == nil {
		return
	}
	b.n, b.desc = min(max(n, 0), b.total), desc
	b.draw()
}

// draw writes the bar's line over the one before: "desc  45% [====    ] (9/20)".
func (b *Bar) draw() {
	fill, pct := barWidth, 100
	if b.total > 0 {
		fill, pct = b.n*barWidth/b.total, 100*b.n/b.total
	}
	line := fmt.Sprintf("%s %3d%% [%s%s] (%d/%d)", b.desc, pct, strings.Repeat("=", fill), strings.Repeat(" ", barWidth-fill), b.n, b.total)
	pad := strings.Repeat(" ", max(0, b.last-len(line))) // a longer line before
	fmt.Fprintf(b.w, "\r%s%s", line, pad)
	b.last = len(line)
}

// Finish clears the bar's line.
func (b *Bar) Finish() {
	if b.w == nil {
		return
	}
	fmt.Fprintf(b.w, "\r%s\r", strings.Repeat(" ", b.last))
	b.last = 0
}
