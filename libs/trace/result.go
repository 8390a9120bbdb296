package trace

import (
	"io"
	"log/slog"
	"time"
)

// Result writes one timestamp-free line of key=value pairs to w, the
// verdict lines tools print on stdout (numericalTest=PASS). fields are
// alternating keys and values or slog.Attr values, as for slog.Logger.Info.
// Strings print bare unless empty or holding spaces, quotes, '=' or
// non-printable characters; numbers as in log lines (pass float32 values
// as float64 or as preformatted strings).
func Result(w io.Writer, fields ...any) error {
	r := slog.NewRecord(time.Time{}, slog.LevelInfo, "", 0)
	r.Add(fields...)
	attrs := make([]slog.Attr, 0, r.NumAttrs())
	r.Attrs(func(a slog.Attr) bool {
		attrs = append(attrs, a)
		return true
	})
	first := true
	buf := appendTextAttrs(nil, "", attrs, &first, false)
	buf = append(buf, '\n')
	_, err := w.Write(buf)
	return err
}
