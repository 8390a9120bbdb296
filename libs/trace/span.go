package trace

import (
	"context"
	"log/slog"
	"time"
)

// Span names shared by the tools, as in the seed log.
const (
	// BuildSpan encloses a whole package build (fields tile_count,
	// operations).
	BuildSpan = "ipu_codegen.package.build"
	// PhaseSpan encloses one timed phase (field phase).
	PhaseSpan = "ipu_codegen.package.phase"
	// PhaseFinished is the message logged when a phase ends.
	PhaseFinished = "package build phase finished"
)

// Span returns a logger whose lines carry one more span segment,
// name{attrs}, after the spans of logger. If logger does not use this
// package's handler, the span becomes a group attribute instead.
func Span(logger *slog.Logger, name string, attrs ...slog.Attr) *slog.Logger {
	if h, ok := logger.Handler().(*Handler); ok {
		return slog.New(h.WithSpan(name, attrs...))
	}
	args := make([]any, len(attrs))
	for i, a := range attrs {
		args[i] = a
	}
	return logger.With(slog.Group(name, args...))
}

// clock returns the time source of logger: Options.Now when logger was
// built by New with one, else time.Now.
func clock(logger *slog.Logger) func() time.Time {
	if h, ok := logger.Handler().(*Handler); ok && h.opts.Now != nil {
		return h.opts.Now
	}
	return time.Now
}

// PhaseTimer times one phase; its logger carries the phase span.
type PhaseTimer struct {
	name  string
	log   *slog.Logger
	now   func() time.Time
	start time.Time
}

// Phase opens the span ipu_codegen.package.phase{phase="name"} under the
// spans of logger and starts its clock. Log the phase's work through
// Logger and close it with End.
func Phase(logger *slog.Logger, name string) *PhaseTimer {
	now := clock(logger)
	return &PhaseTimer{
		name:  name,
		log:   Span(logger, PhaseSpan, slog.String("phase", name)),
		now:   now,
		start: now(),
	}
}

// Logger returns the logger of the phase: its lines carry the phase span.
func (p *PhaseTimer) Logger() *slog.Logger { return p.log }

// End logs "package build phase finished phase="name" elapsed_ms=N
// success=true|false" inside the phase span and returns err unchanged, so
// that a phase can end with `return p.End(err)`. A failed phase is logged
// at error level with the error as a field.
func (p *PhaseTimer) End(err error) error {
	if err != nil {
		return p.failed(slog.LevelError, err)
	}
	p.log.Info(PhaseFinished, slog.String("phase", p.name), ElapsedMS(p.now().Sub(p.start)), slog.Bool("success", true))
	return nil
}

// EndRecovered is End for a failed phase its caller recovers from (it
// goes on another way and says so): the line is logged at warn level,
// still with success=false and the error, so that a run that succeeds
// shows no error line.
func (p *PhaseTimer) EndRecovered(err error) error { return p.failed(slog.LevelWarn, err) }

// failed logs the failed phase's line at level and returns err.
func (p *PhaseTimer) failed(level slog.Level, err error) error {
	p.log.Log(context.Background(), level, PhaseFinished, slog.String("phase", p.name), ElapsedMS(p.now().Sub(p.start)),
		slog.Bool("success", false), slog.String("error", err.Error()))
	return err
}

// RunPhase runs fn as the phase name: fn gets the phase's logger, and its
// error ends the phase and is returned.
func RunPhase(logger *slog.Logger, name string, fn func(log *slog.Logger) error) error {
	p := Phase(logger, name)
	return p.End(fn(p.Logger()))
}

// Elapsed returns elapsed_ms, the whole milliseconds since start.
func Elapsed(start time.Time) slog.Attr {
	return ElapsedMS(time.Since(start))
}

// ElapsedMS returns elapsed_ms for d, truncated to whole milliseconds.
func ElapsedMS(d time.Duration) slog.Attr {
	return slog.Int64("elapsed_ms", d.Milliseconds())
}
