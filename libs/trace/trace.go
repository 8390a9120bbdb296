// Package trace is span-structured logging on log/slog in the format of the
// seed log:
//
//	2026-09-13T18:44:35.206605Z  INFO build{tile_count=64}:phase{phase="plan_kernels"}: package build phase finished phase="plan_kernels" elapsed_ms=0 success=true
//
// A text line is the UTC time with exactly six fractional digits, the level
// right-aligned to five characters, the span path (each open span as
// name{k=v ...}, joined by ":" and followed by ": "), the message, and the
// record's fields as key=value. String values are quoted with Go syntax;
// Bare marks a string printed as is (paths, preformatted lists).
//
// Spans carry no context.Context: Span returns a logger whose lines carry
// one more path segment, so a phase hands its logger to the work it times.
// The JSON format emits the same information with a stable key order:
// time, level, spans (each {"name":...,"fields":{...}}), msg, then fields.
//
// Result writes the timestamp-free key=value verdict lines tools print on
// stdout.
package trace

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"time"
)

// Formats accepted by Options.Format.
const (
	FormatText = "text"
	FormatJSON = "json"
)

// Options configures a logger built by New.
type Options struct {
	// Format is FormatText (also when empty) or FormatJSON. Any other value
	// falls back to text; callers validate user input with CheckFormat.
	Format string
	// Level is the minimum level logged; the zero value is slog.LevelInfo.
	Level slog.Level
	// Now, when set, replaces the record time and the clock of phase
	// timers (tests feed fixed times through it).
	Now func() time.Time
}

// New returns a logger writing to w in the format of opts.
func New(w io.Writer, opts Options) *slog.Logger {
	return slog.New(NewHandler(w, opts))
}

// NewHandler returns the slog handler behind New. Lines are written with
// one Write call each, serialized by a mutex shared by all handlers
// derived from it.
func NewHandler(w io.Writer, opts Options) *Handler {
	return &Handler{
		out:  &output{w: w},
		json: opts.Format == FormatJSON,
		opts: opts,
	}
}

// CheckFormat reports whether format names a supported output format.
func CheckFormat(format string) bool {
	return format == FormatText || format == FormatJSON
}

type output struct {
	mu sync.Mutex
	w  io.Writer
}

// span is one open segment of the span path.
type span struct {
	name   string
	fields []slog.Attr
}

// boundAttrs are attributes added with WithAttrs while depth groups were
// open.
type boundAttrs struct {
	depth int
	attrs []slog.Attr
}

// Handler is the slog.Handler of this package. Its zero value is not
// usable; build it with NewHandler.
type Handler struct {
	out    *output
	json   bool
	opts   Options
	spans  []span
	groups []string
	bound  []boundAttrs
}

// Enabled reports whether level is at or above the configured level.
func (h *Handler) Enabled(_ context.Context, level slog.Level) bool {
	return level >= h.opts.Level
}

// WithAttrs returns a handler whose records carry attrs as fields.
func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	if len(attrs) == 0 {
		return h
	}
	h2 := h.clone()
	h2.bound = append(h2.bound, boundAttrs{depth: len(h.groups), attrs: append([]slog.Attr(nil), attrs...)})
	return h2
}

// WithGroup returns a handler qualifying later fields with name.
func (h *Handler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	h2 := h.clone()
	h2.groups = append(h2.groups, name)
	return h2
}

// WithSpan returns a handler whose lines carry one more span segment.
func (h *Handler) WithSpan(name string, fields ...slog.Attr) *Handler {
	h2 := h.clone()
	h2.spans = append(h2.spans, span{name: name, fields: append([]slog.Attr(nil), fields...)})
	return h2
}

// clone copies h with slices capped so appends never share storage.
func (h *Handler) clone() *Handler {
	h2 := *h
	h2.spans = h.spans[:len(h.spans):len(h.spans)]
	h2.groups = h.groups[:len(h.groups):len(h.groups)]
	h2.bound = h.bound[:len(h.bound):len(h.bound)]
	return &h2
}

// now is the handler's clock.
func (h *Handler) now() time.Time {
	if h.opts.Now != nil {
		return h.opts.Now()
	}
	return time.Now()
}

// Handle formats r as one line and writes it.
func (h *Handler) Handle(_ context.Context, r slog.Record) error {
	t := r.Time
	if h.opts.Now != nil {
		t = h.opts.Now()
	}
	fields := h.fields(r)
	var buf []byte
	if h.json {
		buf = h.appendJSON(buf, t, r.Level, r.Message, fields)
	} else {
		buf = h.appendText(buf, t, r.Level, r.Message, fields)
	}
	h.out.mu.Lock()
	defer h.out.mu.Unlock()
	_, err := h.out.w.Write(buf)
	return err
}

// fields nests the bound attributes and the record's attributes inside
// the groups open when each was added, as slog specifies.
func (h *Handler) fields(r slog.Record) []slog.Attr {
	depth := len(h.groups)
	perDepth := make([][]slog.Attr, depth+1)
	for _, b := range h.bound {
		perDepth[b.depth] = append(perDepth[b.depth], b.attrs...)
	}
	r.Attrs(func(a slog.Attr) bool {
		perDepth[depth] = append(perDepth[depth], a)
		return true
	})
	inner := perDepth[depth]
	for d := depth - 1; d >= 0; d-- {
		level := perDepth[d]
		if len(inner) > 0 {
			level = append(level, slog.Attr{Key: h.groups[d], Value: slog.GroupValue(inner...)})
		}
		inner = level
	}
	return inner
}

// timeLayout is RFC 3339 in UTC with exactly microseconds.
const timeLayout = "2006-01-02T15:04:05.000000Z"

func appendTime(buf []byte, t time.Time) []byte {
	return t.UTC().AppendFormat(buf, timeLayout)
}
