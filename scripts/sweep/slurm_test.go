package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSearchExpansion(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.onnx"), []byte("model a"), 0o644); err != nil {
		t.Fatal(err)
	}
	sf := SweepFile{Type: "search", Shards: 3, Models: []ModelSpec{{Path: "a.onnx"}},
		Grid: map[string][]json.RawMessage{
			"--tiles":         raws(t, "16"),
			"--downcast-fp64": raws(t, "true"),
			"--max-attempts":  raws(t, "5"),
		}}
	configs, err := expand(sf, dir, "s.json")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range configs {
		got = append(got, c.Options+" | "+strings.Join(c.MergeArgs, " "))
		if c.Search == "" || c.Search != configs[0].Search || c.ID == c.Search || c.Shards != 3 {
			t.Errorf("shard %d: search %q id %q shards %d", c.Shard, c.Search, c.ID, c.Shards)
		}
	}
	want := []string{
		"--downcast-fp64 --max-attempts 5 --tiles 16 --shard 0/3 | --downcast-fp64",
		"--downcast-fp64 --max-attempts 5 --tiles 16 --shard 1/3 | --downcast-fp64",
		"--downcast-fp64 --max-attempts 5 --tiles 16 --shard 2/3 | --downcast-fp64",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("shards (-want +got):\n%s", d)
	}
	if o := searchOptions(configs[1]); o != "--downcast-fp64 --max-attempts 5 --tiles 16" {
		t.Errorf("search options %q", o)
	}
	for _, tc := range []struct{ text, want string }{
		{`{"type": "search", "models": [{"path": "a.onnx"}]}`, "shards: 0 out of range [1, 4096]"},
		{`{"type": "grid", "shards": 2, "models": [{"path": "a.onnx"}]}`, `only a sweep of type "search" has shards`},
		{`{"type": "walk", "models": [{"path": "a.onnx"}]}`, `type: "walk" is not grid or search`},
		{`{"type": "search", "shards": 2, "models": [{"path": "a.onnx"}], "grid": {"--state": ["s"]}}`, "--state is set by the sweep driver"},
		{`{"type": "search", "shards": 2, "models": [{"path": "a.onnx"}], "grid": {"--shard": ["0/1"]}}`, "--shard is set by the sweep driver"},
		{`{"models": [{"path": "a.onnx"}], "grid": {"--merge": [true]}}`, "--merge is set by the sweep driver"},
	} {
		p := filepath.Join(dir, "s.json")
		if err := os.WriteFile(p, []byte(tc.text), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := loadSweep(p); err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: error %v, want one naming the file with %q", tc.text, err, tc.want)
		}
	}
}

func TestArraySpec(t *testing.T) {
	for _, tc := range []struct {
		idx  []int
		want string
	}{{[]int{0, 1, 2, 3}, "0-3"}, {[]int{1, 3, 4, 5, 9}, "1,3-5,9"}, {[]int{7}, "7"}} {
		if got := arraySpec(tc.idx); got != tc.want {
			t.Errorf("arraySpec(%v) = %q, want %q", tc.idx, got, tc.want)
		}
	}
}

func TestSqueueStates(t *testing.T) {
	out := "12_[4-7%2]|PENDING\n12_0|RUNNING\n12_1|RUNNING\n13|PENDING\n"
	got, queued := squeueStates(out, "12", "13")
	if want := "array 12: 4 pending, 2 running; collect 13: pending"; got != want || !queued {
		t.Errorf("squeueStates = %q %v, want %q true", got, queued, want)
	}
	got, queued = squeueStates("", "12", "13")
	if want := "array 12: ended; collect 13: done"; got != want || queued {
		t.Errorf("squeueStates(empty) = %q %v, want %q false", got, queued, want)
	}
	if n := bracketCount("[0-3,7,9-10%2]"); n != 7 {
		t.Errorf("bracketCount = %d, want 7", n)
	}
}

func TestSacctRecords(t *testing.T) {
	out := "2|COMPLETED|0:0\n1_10|FAILED|1:0\n1_0|COMPLETED|0:0\n1_[11-12]|PENDING|0:0\n1_2|CANCELLED by 0|0:15\n"
	want := []jobRecord{{"1_[11-12]", "PENDING", "0:0"}, {"1_0", "COMPLETED", "0:0"}, {"1_2", "CANCELLED by 0", "0:15"},
		{"1_10", "FAILED", "1:0"}, {"2", "COMPLETED", "0:0"}}
	recs := sacctRecords(out, "1")
	if d := cmp.Diff(want, recs, cmp.AllowUnexported(jobRecord{})); d != "" {
		t.Errorf("records (-want +got):\n%s", d)
	}
	if settled(recs, 5) {
		t.Errorf("settled with a task pending")
	}
	if !settled(recs[1:], 4) || settled(recs[1:], 5) {
		t.Errorf("settled(ended records) = false, or true with one missing")
	}
}

func TestJobcompRecords(t *testing.T) {
	text := "JobId=5 JobState=COMPLETED ArrayJobId=3 ArrayTaskId=2 ExitCode=0:0\n" +
		"JobId=3 JobState=FAILED ArrayJobId=3 ArrayTaskId=10 ExitCode=1:0\n" +
		"JobId=4 JobState=COMPLETED ArrayJobId=3 ArrayTaskId=0 ExitCode=0:0\n" +
		"JobId=6 JobState=COMPLETED ExitCode=0:0\n" +
		"JobId=9 JobState=COMPLETED ArrayJobId=8 ArrayTaskId=0 ExitCode=0:0\n"
	want := []jobRecord{{"3_0", "COMPLETED", "0:0"}, {"3_2", "COMPLETED", "0:0"}, {"3_10", "FAILED", "1:0"}, {"6", "COMPLETED", "0:0"}}
	if d := cmp.Diff(want, jobcompRecords(text, "3", "6"), cmp.AllowUnexported(jobRecord{})); d != "" {
		t.Errorf("records (-want +got):\n%s", d)
	}
	if v := configValue("JobCompLoc              = /tmp/x/jobcomp.txt\nJobCompType = jobcomp/filetxt\n", "JobCompLoc"); v != "/tmp/x/jobcomp.txt" {
		t.Errorf("configValue = %q", v)
	}
}

func TestCollectOutcome(t *testing.T) {
	dir := t.TempDir()
	ok := filepath.Join(dir, "ok.out")
	os.WriteFile(ok, []byte("sweep: search s1 m: 2/2 shards planned\nsweep: 2 configurations, 2 PASS, 0 not; a, b, c\n"), 0o644)
	var log bytes.Buffer
	if err := collectOutcome(ok, "7", &log); err != nil || !strings.Contains(log.String(), "sweep: search s1") {
		t.Errorf("collectOutcome: %v, log %q", err, log.String())
	}
	bad := filepath.Join(dir, "bad.out")
	os.WriteFile(bad, []byte("sweep: tools: bin/ipu-plan: no such file or directory\n"), 0o644)
	if err := collectOutcome(bad, "7", &log); err == nil || err.Error() != "collect job 7: tools: bin/ipu-plan: no such file or directory ("+bad+")" {
		t.Errorf("collectOutcome(bad) = %v", err)
	}
	if err := collectOutcome(filepath.Join(dir, "none.out"), "7", &log); err == nil || !strings.Contains(err.Error(), "none.out: no such file") {
		t.Errorf("collectOutcome(missing) = %v", err)
	}
}

func TestSlurmUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--engine", "slurm", "--index", "0", "-o", "x", "s.json"}, "submits --index, --collect and --device jobs itself"},
		{[]string{"--partition", "p", "-o", "x", "s.json"}, "are the slurm engine's"},
		{[]string{"--engine", "slurm", "--account", "a b", "-o", "x", "s.json"}, `--account "a b": no spaces`},
		{[]string{"--engine", "slurm", "--poll", "0s", "-o", "x", "s.json"}, "--poll 0s: want a positive duration"},
		{[]string{"--engine", "pbs", "-o", "x", "s.json"}, `--engine "pbs": want local or slurm`},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), tc.args, &stdout, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), tc.want) || strings.Count(stderr.String(), "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q; want 2 and one line with %q", tc.args, code, stderr.String(), tc.want)
		}
	}
}

// A search sweep through the local engine: its shards run, the collect
// step merges them into the best shard's plan.
func TestSearchSweep(t *testing.T) {
	bin := tools(t)
	root := repoRoot(t)
	dir := t.TempDir()
	model, _ := json.Marshal(filepath.Join(root, "testdata", "models", "qk-early.onnx"))
	sweepFile := filepath.Join(dir, "search.json")
	text := `{"type": "search", "shards": 2, "models": [{"path": ` + string(model) + `}], "grid": {"--tiles": [8], "--max-attempts": [2]}}`
	if err := os.WriteFile(sweepFile, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"--bin", bin, "-o", out, sweepFile}, &stdout, &stderr); code != 0 {
		t.Fatalf("sweep exit %d: %s%s", code, stdout.String(), stderr.String())
	}
	rows := readCSV(t, filepath.Join(out, "searches.csv"))
	if len(rows) != 2 || rows[1][4] != "2" || rows[1][5] != "0" || rows[1][8] != "PASS" {
		t.Fatalf("searches.csv: %v", rows)
	}
	merged, err := os.ReadFile(filepath.Join(out, rows[1][0], "model.plan"))
	if err != nil {
		t.Fatal(err)
	}
	best, err := os.ReadFile(filepath.Join(out, rows[1][6], "model.plan"))
	if err != nil || !bytes.Equal(merged, best) {
		t.Errorf("merged plan is not the best shard's (%v)", err)
	}
}
