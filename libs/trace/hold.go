package trace

import (
	"bytes"
	"log/slog"
)

// Held is a logger whose lines wait in memory: Flush writes them, in
// order, where the logger Hold was given writes; dropping the Held drops
// them. A tool that tries one way and may fall back to another logs the
// attempt's lines only when the attempt is the one it keeps.
type Held struct {
	log *slog.Logger
	buf bytes.Buffer
	to  *output
}

// Hold returns a Held logger with logger's spans, fields and level. A
// logger of another handler than this package's is not held: its lines
// pass straight through.
func Hold(logger *slog.Logger) *Held {
	hd := &Held{log: logger}
	if h, ok := logger.Handler().(*Handler); ok {
		h2 := h.clone()
		h2.out = &output{w: &hd.buf}
		hd.to, hd.log = h.out, slog.New(h2)
	}
	return hd
}

// Logger is the held logger.
func (hd *Held) Logger() *slog.Logger { return hd.log }

// Flush writes the held lines.
func (hd *Held) Flush() error {
	if hd.to == nil || hd.buf.Len() == 0 {
		return nil
	}
	hd.to.mu.Lock()
	defer hd.to.mu.Unlock()
	_, err := hd.to.w.Write(hd.buf.Bytes())
	hd.buf.Reset()
	return err
}
