package trace

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var fixed = time.Date(2026, 9, 13, 18, 44, 35, 171366789, time.FixedZone("CEST", 2*3600))

func fixedNow() time.Time { return fixed }

func TestText(t *testing.T) {
	const ts = "2026-09-13T16:44:35.171366Z"
	tests := []struct {
		name string
		opts Options
		log  func(*slog.Logger)
		want string
	}{
		{
			name: "levels aligned",
			opts: Options{Level: slog.LevelDebug},
			log: func(l *slog.Logger) {
				l.Debug("d")
				l.Info("i")
				l.Warn("w")
				l.Error("e")
			},
			want: ts + " DEBUG d\n" + ts + "  INFO i\n" + ts + "  WARN w\n" + ts + " ERROR e\n",
		},
		{
			name: "level filter",
			opts: Options{Level: slog.LevelWarn},
			log: func(l *slog.Logger) {
				l.Info("hidden")
				l.Warn("shown")
			},
			want: ts + "  WARN shown\n",
		},
		{
			name: "value kinds",
			log: func(l *slog.Logger) {
				l.Info("m", "s", "a b", "empty", "", "q", `x"y`, "i", -3, "u", uint64(7),
					"f", 0.000717, "big", 1e21, "b", false, "d", 1500*time.Millisecond,
					"err", errors.New("bad thing"), "list", []int{1, 2})
			},
			want: ts + `  INFO m s="a b" empty="" q="x\"y" i=-3 u=7 f=0.000717 big=1e+21 b=false d=1.5s err="bad thing" list="[1 2]"` + "\n",
		},
		{
			name: "bare",
			log: func(l *slog.Logger) {
				l.Info("m", Bare("path", "a/b c"), Bare("nl", "x\ny"))
			},
			want: ts + `  INFO m path=a/b c nl="x\ny"` + "\n",
		},
		{
			name: "message with newline stays one line",
			log:  func(l *slog.Logger) { l.Info("two\nlines") },
			want: ts + `  INFO "two\nlines"` + "\n",
		},
		{
			name: "groups and bound attrs",
			log: func(l *slog.Logger) {
				l.With("tool", "ipu-plan").WithGroup("g").With("a", 1).Info("m", "b", 2,
					slog.Group("h", "c", 3), slog.Group("empty"), slog.Group("", "inline", 4))
			},
			want: ts + `  INFO m tool="ipu-plan" g.a=1 g.b=2 g.h.c=3 g.inline=4` + "\n",
		},
		{
			name: "empty group after WithGroup is dropped",
			log:  func(l *slog.Logger) { l.WithGroup("g").Info("m") },
			want: ts + "  INFO m\n",
		},
		{
			name: "spans nest and carry fields",
			log: func(l *slog.Logger) {
				s := Span(l, "outer", slog.Int("n", 1), slog.String("k", "v"))
				Span(s, "inner").Info("m", "x", 1)
				l.Info("root")
			},
			want: ts + `  INFO outer{n=1 k="v"}:inner: m x=1` + "\n" + ts + "  INFO root\n",
		},
		{
			name: "sibling spans do not share storage",
			log: func(l *slog.Logger) {
				s := Span(l, "a")
				x := Span(s, "x")
				y := Span(s, "y")
				x.Info("m")
				y.Info("m")
			},
			want: ts + "  INFO a:x: m\n" + ts + "  INFO a:y: m\n",
		},
		{
			name: "phase success and failure",
			log: func(l *slog.Logger) {
				b := Span(l, BuildSpan, slog.Int("tile_count", 4))
				RunPhase(b, "ok", func(l *slog.Logger) error { return nil })
				err := RunPhase(b, "bad", func(l *slog.Logger) error { return errors.New("no space") })
				if err == nil {
					panic("RunPhase lost the error")
				}
			},
			want: ts + `  INFO ipu_codegen.package.build{tile_count=4}:ipu_codegen.package.phase{phase="ok"}: package build phase finished phase="ok" elapsed_ms=0 success=true` + "\n" +
				ts + ` ERROR ipu_codegen.package.build{tile_count=4}:ipu_codegen.package.phase{phase="bad"}: package build phase finished phase="bad" elapsed_ms=0 success=false error="no space"` + "\n",
		},
		{
			name: "phase failure recovered",
			log: func(l *slog.Logger) {
				b := Span(l, BuildSpan, slog.Int("tile_count", 4))
				p := Phase(b, "place")
				if err := p.EndRecovered(errors.New("full")); err == nil || err.Error() != "full" {
					panic("EndRecovered lost the error")
				}
			},
			want: ts + `  WARN ipu_codegen.package.build{tile_count=4}:ipu_codegen.package.phase{phase="place"}: package build phase finished phase="place" elapsed_ms=0 success=false error="full"` + "\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			opts := tt.opts
			opts.Now = fixedNow
			tt.log(New(&buf, opts))
			if diff := cmp.Diff(tt.want, buf.String()); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestJSON(t *testing.T) {
	tests := []struct {
		name string
		log  func(*slog.Logger)
		want string
	}{
		{
			name: "kinds",
			log: func(l *slog.Logger) {
				l.Warn("m<&>", "s", "a\"b\n", "f", 1.5, "nan", nanValue(), "d", time.Second,
					"err", errors.New("e"), "m", map[string]int{"b": 2, "a": 1}, Bare("p", "x/y"))
			},
			want: `{"time":"2026-09-13T16:44:35.171366Z","level":"WARN","msg":"m<&>","s":"a\"b\n","f":1.5,"nan":"NaN","d":1000000000,"err":"e","m":{"a":1,"b":2},"p":"x/y"}` + "\n",
		},
		{
			name: "spans and groups",
			log: func(l *slog.Logger) {
				s := Span(l, "outer", slog.Int("n", 1))
				Span(s, "inner").With("a", 1).WithGroup("g").Info("m", "b", 2, slog.Group("empty"))
			},
			want: `{"time":"2026-09-13T16:44:35.171366Z","level":"INFO","spans":[{"name":"outer","fields":{"n":1}},{"name":"inner","fields":{}}],"msg":"m","a":1,"g":{"b":2}}` + "\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			tt.log(New(&buf, Options{Format: FormatJSON, Now: fixedNow}))
			if diff := cmp.Diff(tt.want, buf.String()); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
			if !json.Valid(buf.Bytes()) {
				t.Errorf("invalid JSON: %s", buf.String())
			}
		})
	}
}

func nanValue() float64 {
	zero := 0.0
	return zero / zero
}

func TestSeedJSONValid(t *testing.T) {
	clk := &fakeClock{t: t}
	var got bytes.Buffer
	replaySeed(clk, New(&got, Options{Format: FormatJSON, Now: clk.Now}), &bytes.Buffer{})
	for i, line := range strings.Split(strings.TrimSuffix(got.String(), "\n"), "\n") {
		if !json.Valid([]byte(line)) {
			t.Errorf("line %d: invalid JSON: %s", i, line)
		}
	}
}

func TestResult(t *testing.T) {
	tests := []struct {
		name   string
		fields []any
		want   string
	}{
		{"bare strings", []any{"referencePrecision", "device"}, "referencePrecision=device\n"},
		{"mixed", []any{"referenceMaximumAbsoluteError", 0.000717, "numericalTest", "FAIL", "ok", true}, "referenceMaximumAbsoluteError=0.000717 numericalTest=FAIL ok=true\n"},
		{"quoted when needed", []any{"a", "x y", "b", "", "c", "k=v"}, `a="x y" b="" c="k=v"` + "\n"},
		{"attrs", []any{slog.Int("n", 3), Bare("r", "[(0, 1)]")}, "n=3 r=[(0, 1)]\n"},
		{"odd args", []any{"lonely"}, "!BADKEY=lonely\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := Result(&buf, tt.fields...); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, buf.String()); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// countingWriter records each Write so the test can check that a line is
// never split across writes.
type countingWriter struct {
	mu     sync.Mutex
	writes []string
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes = append(w.writes, string(p))
	return len(p), nil
}

func TestConcurrentLinesWholeWrites(t *testing.T) {
	w := &countingWriter{}
	log := New(w, Options{Now: fixedNow})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := Span(log, "worker", slog.Int("g", g))
			for i := range 50 {
				l.Info("step", "i", i)
			}
		}()
	}
	wg.Wait()
	if len(w.writes) != 400 {
		t.Fatalf("got %d writes, want 400", len(w.writes))
	}
	for _, s := range w.writes {
		if strings.Count(s, "\n") != 1 || !strings.HasSuffix(s, "\n") {
			t.Fatalf("write is not one line: %q", s)
		}
	}
}

func TestSpanForeignHandler(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
	Span(l, "s", slog.Int("n", 1)).Info("m")
	want := "level=INFO msg=m s.n=1\n"
	if diff := cmp.Diff(want, buf.String()); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}

func TestCheckFormat(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want bool
	}{{"text", true}, {"json", true}, {"", false}, {"xml", false}} {
		t.Run(tt.in, func(t *testing.T) {
			if got := CheckFormat(tt.in); got != tt.want {
				t.Errorf("CheckFormat(%q) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}
