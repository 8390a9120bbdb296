package trace

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestHold: held lines carry the spans and fields of the logger they
// were held from, appear only at Flush, in order, and a dropped Held
// writes nothing.
func TestHold(t *testing.T) {
	var out bytes.Buffer
	log := New(&out, Options{})
	log = Span(log, BuildSpan, slog.Int("tile_count", 4))
	hd := Hold(log)
	ph := Phase(hd.Logger(), "place")
	ph.Logger().Info("first", slog.Int("n", 1))
	hd.Logger().Info("second")
	if out.Len() != 0 {
		t.Fatalf("held lines written before Flush: %q", out.String())
	}
	if err := hd.Flush(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `ipu_codegen.package.build{tile_count=4}:ipu_codegen.package.phase{phase="place"}: first n=1`) || !strings.Contains(lines[1], "second") {
		t.Fatalf("flushed %q", out.String())
	}
	out.Reset()
	Hold(log).Logger().Info("dropped")
	log.Info("kept")
	if s := out.String(); strings.Contains(s, "dropped") || !strings.Contains(s, "kept") {
		t.Fatalf("wrote %q", s)
	}
}
