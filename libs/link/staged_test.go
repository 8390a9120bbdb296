package link

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"ipu.local/formats/obj"
	"ipu.local/formats/plan"
)

// TestStagingWhenFull: a plan that packs in place and runs out of room
// links again with every pack staged, saying why; any other error, or a
// plan already staged, is returned as it is; the caller's plan is left
// as it was.
func TestStagingWhenFull(t *testing.T) {
	full := &MemoryError{Tile: 3, Buffer: "y.c", Size: 4096, Free: 1024, Region: "interleaved"}
	other := errors.New("tile 3: code of 300000 bytes does not fit")
	for _, tc := range []struct {
		name        string
		packs       string
		inPlace     error // try's error on the plan as given
		staged      error // on the staged copy
		wantCalls   int
		wantErr     error
		wantStaged  bool
		wantWarning bool
	}{
		{name: "fits", wantCalls: 1},
		{name: "full, staged fits", inPlace: full, wantCalls: 2, wantStaged: true, wantWarning: true},
		{name: "full, staged full too", inPlace: full, staged: other, wantCalls: 2, wantErr: other, wantWarning: true},
		{name: "other error", inPlace: other, wantCalls: 1, wantErr: other},
		{name: "already staged", packs: plan.StagedPacks, inPlace: full, wantCalls: 1, wantErr: full},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pl := &plan.Plan{Packs: tc.packs}
			var logs bytes.Buffer
			calls := 0
			o, st, err := stagingWhenFull(pl, slog.New(slog.NewTextHandler(&logs, nil)), func(p *plan.Plan) (*obj.Object, *Stats, error) {
				calls++
				if calls == 2 && p.Packs != plan.StagedPacks {
					t.Errorf("second attempt packs %q, want %q", p.Packs, plan.StagedPacks)
				}
				if e := map[bool]error{true: tc.inPlace, false: tc.staged}[calls == 1]; e != nil {
					return nil, nil, e
				}
				return &obj.Object{}, &Stats{}, nil
			})
			if calls != tc.wantCalls {
				t.Errorf("%d attempts, want %d", calls, tc.wantCalls)
			}
			if !errors.Is(err, tc.wantErr) || (err == nil) != (tc.wantErr == nil) {
				t.Errorf("error %v, want %v", err, tc.wantErr)
			}
			if err == nil && (o == nil || st == nil || st.StagedPacks != tc.wantStaged) {
				t.Errorf("object %v, stats %+v: want staged %v", o, st, tc.wantStaged)
			}
			if pl.Packs != tc.packs {
				t.Errorf("the caller's plan now packs %q", pl.Packs)
			}
			warned := strings.Contains(logs.String(), "operand blocks packed in place do not fit")
			if warned != tc.wantWarning {
				t.Errorf("warning logged %v, want %v: %s", warned, tc.wantWarning, logs.String())
			}
			if warned && !strings.Contains(logs.String(), "y.c") {
				t.Errorf("the warning does not name the buffer: %s", logs.String())
			}
		})
	}
}

// TestPhaseLevelWhenStagingFollows: a phase failing for room on a plan
// that packs in place ends at warn level (Link goes on staged, so a run
// that then succeeds logs no error); the same failure on a staged plan,
// or any other failure, ends at error level.
func TestPhaseLevelWhenStagingFollows(t *testing.T) {
	full := &MemoryError{Tile: 3, Buffer: "y.c", Size: 4096, Free: 1024, Region: "interleaved"}
	for _, tc := range []struct {
		name  string
		packs string
		err   error
		want  string
	}{
		{"full, in place", "", full, "level=WARN"},
		{"full, staged", plan.StagedPacks, full, "level=ERROR"},
		{"other error", "", errors.New("tile 3: code does not fit"), "level=ERROR"},
		{"wrapped full", "", fmt.Errorf("placing: %w", full), "level=WARN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			l := &linker{pl: &plan.Plan{Packs: tc.packs}, log: slog.New(slog.NewTextHandler(&logs, nil))}
			err := l.phase("place_storage", func(*slog.Logger) error { return tc.err })
			if !errors.Is(err, tc.err) {
				t.Errorf("error %v, want %v", err, tc.err)
			}
			if !strings.Contains(logs.String(), tc.want) || !strings.Contains(logs.String(), "success=false") {
				t.Errorf("phase end logged %q, want %s and success=false", logs.String(), tc.want)
			}
		})
	}
}
