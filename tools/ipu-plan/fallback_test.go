package main

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"ipu.local/formats/plan"
	"ipu.local/libs/link"
)

// TestFallbackToDevice: when the inference objective's incumbent does
// not link (a placement the search's memory checks missed, which no
// committed model shows since strided multicasts changed the plans),
// ipu-plan says why, searches again under the device objective and
// writes that plan and state; a placement failure is searched again with
// memory kept free; a failure of every plan is the run's error.
func TestFallbackToDevice(t *testing.T) {
	model := filepath.Join("..", "..", "testdata", "models", "qk-early.onnx")
	failing := func(objective string) func(*slog.Logger, config, *plan.Plan, []plan.Exchange) (*link.Stats, error) {
		return func(log *slog.Logger, cfg config, pl *plan.Plan, saved []plan.Exchange) (*link.Stats, error) {
			if plan.ObjectiveOf(pl.Search.Objective) == objective || objective == "any" {
				return nil, errors.New("lowering the plan: tile 0: buffer b of 2560 bytes does not fit in interleaved memory (injected)")
			}
			return validateCompact(log, cfg, pl, saved)
		}
	}
	defer func() { validateLink = validateCompact }()

	t.Run("falls back", func(t *testing.T) {
		validateLink = failing(plan.ObjectiveInference)
		dir := t.TempDir()
		out, state := filepath.Join(dir, "fb.plan"), filepath.Join(dir, "fb.json")
		var stdout, stderr bytes.Buffer
		if status := run([]string{"ipu-plan", model, "-o", out, "--tiles", "64", "--max-attempts", "2", "--state", state}, &stdout, &stderr); status != 0 {
			t.Fatalf("status %d:\n%s", status, stderr.String())
		}
		if n := strings.Count(stderr.String(), `the inference objective's plan does not link: planning under the device objective reason="lowering the plan: tile 0: buffer b of 2560 bytes does not fit in interleaved memory (injected)"`); n != 1 {
			t.Errorf("%d fallback warnings, want 1:\n%s", n, stderr.String())
		}
		for _, f := range []string{out, state} {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(data, []byte(`"objective": "device"`)) {
				t.Errorf("%s is not the device objective's", f)
			}
		}
	})
	t.Run("a reserve places", func(t *testing.T) {
		// The first two links (the inference objective's and the device
		// objective's plans) do not place: the search runs again with a
		// sixteenth kept free, that plan links, and the state keeps the
		// reserve for a resumed search, which links at once.
		calls := 0
		validateLink = func(log *slog.Logger, cfg config, pl *plan.Plan, saved []plan.Exchange) (*link.Stats, error) {
			if calls++; calls <= 2 {
				return nil, &link.MemoryError{Tile: 3, Buffer: "b", Size: 2560, Region: "interleaved memory"}
			}
			return validateCompact(log, cfg, pl, saved)
		}
		dir := t.TempDir()
		out, state := filepath.Join(dir, "r.plan"), filepath.Join(dir, "r.json")
		var stdout, stderr bytes.Buffer
		if status := run([]string{"ipu-plan", model, "-o", out, "--tiles", "64", "--max-attempts", "2", "--state", state}, &stdout, &stderr); status != 0 {
			t.Fatalf("status %d:\n%s", status, stderr.String())
		}
		if !strings.Contains(stderr.String(), "the plan does not place: searching again with memory kept free on every tile reserve_bytes=39867 reason=\"tile 3: buffer b of 2560 bytes does not fit in interleaved memory") {
			t.Errorf("no retry with a sixteenth kept free:\n%s", stderr.String())
		}
		data, err := os.ReadFile(state)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(data, []byte(`"memory_reserve": 39867`)) {
			t.Errorf("the state keeps no reserve")
		}
		stderr.Reset()
		if status := run([]string{"ipu-plan", model, "-o", filepath.Join(dir, "r2.plan"), "--tiles", "64", "--max-attempts", "2", "--state", state, "--objective", "device"}, &stdout, &stderr); status != 0 {
			t.Fatalf("resumed: status %d:\n%s", status, stderr.String())
		}
		if !strings.Contains(stderr.String(), "loaded mid-plan search state") || strings.Contains(stderr.String(), "does not place") {
			t.Errorf("the resumed search did not load the state or did not place:\n%s", stderr.String())
		}
	})
	t.Run("no reserve places", func(t *testing.T) {
		// Every link a placement failure: the search runs again with a
		// sixteenth, an eighth and a quarter kept free, then fails with
		// the placement's error and writes nothing.
		validateLink = func(*slog.Logger, config, *plan.Plan, []plan.Exchange) (*link.Stats, error) {
			return nil, &link.MemoryError{Tile: 3, Buffer: "b", Size: 2560, Region: "interleaved memory"}
		}
		dir := t.TempDir()
		out, state := filepath.Join(dir, "r.plan"), filepath.Join(dir, "r.json")
		var stdout, stderr bytes.Buffer
		if status := run([]string{"ipu-plan", model, "-o", out, "--tiles", "64", "--max-attempts", "2", "--state", state}, &stdout, &stderr); status != 1 {
			t.Fatalf("status %d, want 1:\n%s", status, stderr.String())
		}
		for _, r := range []string{"39867", "79734", "159468"} {
			if !strings.Contains(stderr.String(), "the plan does not place: searching again with memory kept free on every tile reserve_bytes="+r+" ") {
				t.Errorf("no retry with %s bytes kept free:\n%s", r, stderr.String())
			}
		}
		lines := strings.Split(strings.TrimRight(stderr.String(), "\n"), "\n")
		if last := lines[len(lines)-1]; last != "ipu-plan: tile 3: buffer b of 2560 bytes does not fit in interleaved memory (largest free range 0 bytes while it lives)" {
			t.Errorf("last line %q", last)
		}
		for _, f := range []string{out, state} {
			if _, err := os.Stat(f); err == nil {
				t.Errorf("a failed run wrote %s", f)
			}
		}
	})
	t.Run("a smaller largest variable places", func(t *testing.T) {
		// Every link until the reserves are spent is a variable that did
		// not place in memory free in pieces: the search runs again as
		// the first one (the inference objective, no reserve) with every
		// variable smaller than it, that plan links, and the state keeps
		// the limit for a resumed search, which links at once.
		calls := 0
		validateLink = func(log *slog.Logger, cfg config, pl *plan.Plan, saved []plan.Exchange) (*link.Stats, error) {
			if calls++; calls <= 5 {
				return nil, &link.MemoryError{Tile: 3, Buffer: "v", Size: 1 << 20, Free: 1 << 19, FreeAll: 1 << 21, Variable: true}
			}
			return validateCompact(log, cfg, pl, saved)
		}
		dir := t.TempDir()
		out, state := filepath.Join(dir, "v.plan"), filepath.Join(dir, "v.json")
		var stdout, stderr bytes.Buffer
		if status := run([]string{"ipu-plan", model, "-o", out, "--tiles", "64", "--max-attempts", "2", "--state", state}, &stdout, &stderr); status != 0 {
			t.Fatalf("status %d:\n%s", status, stderr.String())
		}
		if calls != 6 {
			t.Errorf("%d links, want 6 (two objectives, three reserves, the limit)", calls)
		}
		if !strings.Contains(stderr.String(), "the plan does not place: searching again with every variable smaller on a tile max_variable_bytes=1048575 reason=\"tile 3: buffer v of 1048576 bytes does not fit (largest free range 524288 bytes of 2097152 free while it lives)\"") {
			t.Errorf("no retry with a largest variable:\n%s", stderr.String())
		}
		data, err := os.ReadFile(state)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{`"max_variable_bytes": 1048575`, `"objective": "inference"`} {
			if !bytes.Contains(data, []byte(want)) {
				t.Errorf("the state has no %s:\n%s", want, data)
			}
		}
		if bytes.Contains(data, []byte(`"memory_reserve"`)) {
			t.Errorf("the state keeps a reserve:\n%s", data)
		}
		stderr.Reset()
		if status := run([]string{"ipu-plan", model, "-o", filepath.Join(dir, "v2.plan"), "--tiles", "64", "--max-attempts", "2", "--state", state}, &stdout, &stderr); status != 0 {
			t.Fatalf("resumed: status %d:\n%s", status, stderr.String())
		}
		if !strings.Contains(stderr.String(), "loaded mid-plan search state") || strings.Contains(stderr.String(), "does not place") {
			t.Errorf("the resumed search did not load the state or did not place:\n%s", stderr.String())
		}
	})
	t.Run("no plan has variables that small", func(t *testing.T) {
		// A variable of 2 bytes that does not place: no plan keeps every
		// variable under 2 bytes, and the placement's error is the run's.
		validateLink = func(*slog.Logger, config, *plan.Plan, []plan.Exchange) (*link.Stats, error) {
			return nil, &link.MemoryError{Tile: 3, Buffer: "v", Size: 2, Free: 1, FreeAll: 2, Variable: true}
		}
		dir := t.TempDir()
		out := filepath.Join(dir, "v.plan")
		var stdout, stderr bytes.Buffer
		if status := run([]string{"ipu-plan", model, "-o", out, "--tiles", "64", "--max-attempts", "2"}, &stdout, &stderr); status != 1 {
			t.Fatalf("status %d, want 1:\n%s", status, stderr.String())
		}
		if n := strings.Count(stderr.String(), "no plan keeps its variables that small max_variable_bytes=1 reason=\"variables larger than 1 bytes"); n != 1 {
			t.Errorf("%d warnings that no plan keeps the variables that small, want 1:\n%s", n, stderr.String())
		}
		lines := strings.Split(strings.TrimRight(stderr.String(), "\n"), "\n")
		if last := lines[len(lines)-1]; last != "ipu-plan: tile 3: buffer v of 2 bytes does not fit (largest free range 1 bytes of 2 free while it lives)" {
			t.Errorf("last line %q", last)
		}
		if _, err := os.Stat(out); err == nil {
			t.Error("a failed run wrote its plan")
		}
	})
	t.Run("both fail", func(t *testing.T) {
		validateLink = failing("any")
		dir := t.TempDir()
		out := filepath.Join(dir, "fb.plan")
		var stdout, stderr bytes.Buffer
		if status := run([]string{"ipu-plan", model, "-o", out, "--tiles", "64", "--max-attempts", "2"}, &stdout, &stderr); status != 1 {
			t.Fatalf("status %d, want 1:\n%s", status, stderr.String())
		}
		lines := strings.Split(strings.TrimRight(stderr.String(), "\n"), "\n")
		if last := lines[len(lines)-1]; !strings.HasPrefix(last, "ipu-plan: lowering the plan: tile 0: buffer b of 2560 bytes") {
			t.Errorf("last line %q", last)
		}
		if _, err := os.Stat(out); err == nil {
			t.Error("a failed run wrote its plan")
		}
	})
}
