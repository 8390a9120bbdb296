// Package progress draws progress bars on a terminal for the tools' long
// work (--progress=auto|always|never): auto draws only when the writer is
// a terminal, so logs and CI never see a bar or a carriage return.
package progress

import (
	"fmt"
	"io"
	"os"

	"github.com/schollz/progressbar/v3"
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

// Bar is a progress bar, or nothing when disabled (every method is then a
// no-op).
type Bar struct{ b *progressbar.ProgressBar }

// New returns a bar of total steps with a description on w, or a no-op
// bar when mode does not draw on w.
func New(mode string, w io.Writer, total int, desc string) *Bar {
	if !Enabled(mode, w) {
		return &Bar{}
	}
	return &Bar{progressbar.NewOptions(total,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(desc),
		progressbar.OptionShowCount(),
		progressbar.OptionSetWidth(30),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionThrottle(0),
	)}
}

// Set moves the bar to n steps with a new description.
func (b *Bar) Set(n int, desc string) {
	if b.b == nil {
		return
	}
	b.b.Describe(desc)
	_ = b.b.Set(n)
}

// Finish clears the bar.
func (b *Bar) Finish() {
	if b.b == nil {
		return
	}
	_ = b.b.Finish()
	_ = b.b.Clear()
}
