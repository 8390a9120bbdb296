package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func raws(t *testing.T, vals ...string) []json.RawMessage {
	t.Helper()
	var out []json.RawMessage
	for _, v := range vals {
		out = append(out, json.RawMessage(v))
	}
	return out
}

func TestGridExpansion(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.onnx"), []byte("model a"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "b.onnx"), []byte("model b"), 0o644); err != nil {
		t.Fatal(err)
	}
	sf := SweepFile{
		Models: []ModelSpec{{Path: "a.onnx"}, {Path: "b.onnx"}},
		Grid: map[string][]json.RawMessage{
			"--tiles":         raws(t, "16", "64"),
			"--seed":          raws(t, "1", "2"),
			"--downcast-fp64": raws(t, "false", "true"),
			"--arch":          raws(t, `"ipu21"`),
		},
	}
	configs, err := expand(sf, dir, "s.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(configs) != 16 {
		t.Fatalf("%d configurations, want 16", len(configs))
	}
	var got []string
	for _, c := range configs[:8] {
		got = append(got, c.Model+" "+c.Options)
	}
	want := []string{
		"a.onnx --arch ipu21 --seed 1 --tiles 16",
		"a.onnx --arch ipu21 --seed 1 --tiles 64",
		"a.onnx --arch ipu21 --seed 2 --tiles 16",
		"a.onnx --arch ipu21 --seed 2 --tiles 64",
		"a.onnx --arch ipu21 --downcast-fp64 --seed 1 --tiles 16",
		"a.onnx --arch ipu21 --downcast-fp64 --seed 1 --tiles 64",
		"a.onnx --arch ipu21 --downcast-fp64 --seed 2 --tiles 16",
		"a.onnx --arch ipu21 --downcast-fp64 --seed 2 --tiles 64",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("expansion (-want +got):\n%s", d)
	}
	if configs[8].Model != "b.onnx" {
		t.Errorf("configuration 8 is of %s, want b.onnx", configs[8].Model)
	}

	// Stable: the same sweep gives the same ids; ids are distinct and
	// depend on the model's bytes, not only its name.
	again, err := expand(sf, dir, "s.json")
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for i, c := range configs {
		if again[i].ID != c.ID {
			t.Errorf("configuration %d: id %s then %s", i, c.ID, again[i].ID)
		}
		if ids[c.ID] {
			t.Errorf("id %s twice", c.ID)
		}
		ids[c.ID] = true
		if !strings.HasPrefix(c.ID, strings.TrimSuffix(c.Model, ".onnx")+"-") {
			t.Errorf("id %s does not start with the model's name", c.ID)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "a.onnx"), []byte("model a, changed"), 0o644); err != nil {
		t.Fatal(err)
	}
	changed, err := expand(sf, dir, "s.json")
	if err != nil {
		t.Fatal(err)
	}
	if changed[0].ID == configs[0].ID || changed[8].ID != configs[8].ID {
		t.Errorf("ids after a.onnx changed: %s %s, before %s %s", changed[0].ID, changed[8].ID, configs[0].ID, configs[8].ID)
	}
	// The id of a fixed input is fixed across versions of the driver.
	if id := configID("m.onnx", "00", "", []string{"--tiles", "4"}); id != configID("m.onnx", "00", "", []string{"--tiles", "4"}) || !strings.HasPrefix(id, "m-") || len(id) != len("m-")+12 {
		t.Errorf("configID = %s", id)
	}
}

func TestSweepFileErrors(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.onnx"), []byte("a"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ text, want string }{
		{`{"models": [], "grid": {}}`, "no models"},
		{`{"models": [{"path": "missing.onnx"}]}`, "missing.onnx: no such file"},
		{`{"models": [{"path": "a.onnx"}], "grid": {"tiles": [1]}}`, `"tiles" is not a flag`},
		{`{"models": [{"path": "a.onnx"}], "grid": {"-o": ["x"]}}`, "set by the sweep driver"},
		{`{"models": [{"path": "a.onnx"}], "grid": {"--seed": []}}`, "--seed has no values"},
		{`{"models": [{"path": "a.onnx"}], "grid": {"--seed": [{"a": 1}]}}`, "not a number, string or boolean"},
		{`{"models": [{"path": "a.onnx"}], "grid": {"--seed": [1, 1]}}`, "given twice"},
		{`{"models": [{"path": "a.onnx"}], "extra": 1}`, "unknown field"},
		{`{"models": [{"path": "a.onnx", "data": "nodata"}]}`, "nodata: no such file"},
	} {
		p := filepath.Join(dir, "s.json")
		if err := os.WriteFile(p, []byte(tc.text), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := loadSweep(p)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error %v, want one line with %q", tc.text, err, tc.want)
		}
	}
}

// repoRoot is the directory of go.work, found upwards.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Skip("no go.work above the test's directory")
		}
		dir = parent
	}
}

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  string
)

// tools builds the pipeline's tools once per test binary.
func tools(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the real tools")
	}
	root := repoRoot(t)
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "sweep-bin-")
		if err != nil {
			buildErr = err.Error()
			return
		}
		args := []string{"build", "-o", dir + string(filepath.Separator)}
		for _, tool := range pipelineTools {
			args = append(args, "./tools/"+tool)
		}
		cmd := exec.Command("go", args...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = "go build: " + err.Error() + "\n" + string(out)
			return
		}
		builtBin = dir
	})
	if buildErr != "" {
		t.Fatal(buildErr)
	}
	return builtBin
}

func TestMain(m *testing.M) {
	code := m.Run()
	if builtBin != "" {
		os.RemoveAll(builtBin)
	}
	os.Exit(code)
}

// TestSweepEndToEnd runs a tiny sweep through the real tools: two
// configurations that pass and one that fails, then the same sweep
// again (nothing runs), then again with one result removed (it alone
// runs).
func TestSweepEndToEnd(t *testing.T) {
	bin := tools(t)
	root := repoRoot(t)
	dir := t.TempDir()
	sweepFile := filepath.Join(dir, "tiny.json")
	model := filepath.Join(root, "testdata", "models", "qk-early.onnx")
	quoted, err := json.Marshal(model)
	if err != nil {
		t.Fatal(err)
	}
	text := `{"models": [{"path": ` + string(quoted) + `}],
		"grid": {"--tiles": [4, 99999, 8], "--max-attempts": [0]}}`
	if err := os.WriteFile(sweepFile, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	runSweep := func() string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), []string{"-j", "2", "--bin", bin, "-o", out, sweepFile}, &stdout, &stderr); code != 0 {
			t.Fatalf("sweep exit %d: %s%s", code, stdout.String(), stderr.String())
		}
		return stdout.String()
	}
	log := runSweep()
	if !strings.Contains(log, "3 configurations, 0 done before, 3 to run") {
		t.Errorf("first run's log:\n%s", log)
	}
	rows := readCSV(t, filepath.Join(out, "results.csv"))
	if len(rows) != 4 {
		t.Fatalf("results.csv has %d rows, want a header and 3:\n%v", len(rows), rows)
	}
	if d := cmp.Diff(csvHeader, rows[0]); d != "" {
		t.Errorf("header (-want +got):\n%s", d)
	}
	col := map[string]int{}
	for i, h := range rows[0] {
		col[h] = i
	}
	var opts []string
	for _, r := range rows[1:] {
		opts = append(opts, r[col["options"]])
		switch {
		case strings.HasSuffix(r[col["options"]], "--tiles 99999"):
			if r[col["verdict"]] != "ERROR" || !strings.Contains(r[col["error"]], "ipu-plan: --tiles 99999 out of range") {
				t.Errorf("failing configuration's row: %v", r)
			}
		default:
			if r[col["verdict"]] != "PASS" || r[col["error"]] != "" || r[col["final_cycles"]] == "" ||
				r[col["compute_bound"]] == "" || r[col["ratio"]] == "" || r[col["estimate"]] == "" {
				t.Errorf("passing configuration's row: %v", r)
			}
		}
	}
	if d := cmp.Diff([]string{"--max-attempts 0 --tiles 4", "--max-attempts 0 --tiles 99999", "--max-attempts 0 --tiles 8"}, opts); d != "" {
		t.Errorf("rows' order (-want +got):\n%s", d)
	}
	for _, f := range []string{"configs.json", "results.png", "best.json", filepath.Join(rows[1][0], "run.log"), filepath.Join(rows[1][0], "model.ipuexe")} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	var best []Best
	b, err := os.ReadFile(filepath.Join(out, "best.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &best); err != nil || len(best) != 1 || best[0].Passed != 2 || best[0].ID == "" {
		t.Errorf("best.json: %s (%v)", b, err)
	}
	first, err := os.ReadFile(filepath.Join(out, "results.csv"))
	if err != nil {
		t.Fatal(err)
	}

	// Again: every configuration is done, results.csv is the same.
	log = runSweep()
	if !strings.Contains(log, "3 configurations, 3 done before, 0 to run") {
		t.Errorf("second run's log:\n%s", log)
	}
	second, err := os.ReadFile(filepath.Join(out, "results.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(string(first), string(second)); d != "" {
		t.Errorf("results.csv changed on a re-run (-first +second):\n%s", d)
	}

	// A configuration not recorded (a killed sweep) runs again, alone;
	// its row matches the first run's but for the wall times.
	if err := os.Remove(filepath.Join(out, rows[3][0], "result.json")); err != nil {
		t.Fatal(err)
	}
	log = runSweep()
	if !strings.Contains(log, "3 configurations, 2 done before, 1 to run") {
		t.Errorf("third run's log:\n%s", log)
	}
	third := readCSV(t, filepath.Join(out, "results.csv"))
	mask := func(rows [][]string) [][]string {
		var m [][]string
		for _, r := range rows {
			r = append([]string(nil), r...)
			r[col["plan_seconds"]], r[col["link_seconds"]] = "", ""
			m = append(m, r)
		}
		return m
	}
	if d := cmp.Diff(mask(rows), mask(third)); d != "" {
		t.Errorf("results.csv after resuming (-first +third):\n%s", d)
	}
}

func readCSV(t *testing.T, path string) [][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// TestSweepTasksShareDevice runs a sweep as a job array would: each
// configuration by --index, at once, on one shared device, then
// --collect.
func TestSweepTasksShareDevice(t *testing.T) {
	bin := tools(t)
	root := repoRoot(t)
	dir := t.TempDir()
	sweepFile := filepath.Join(dir, "tiny.json")
	quoted, err := json.Marshal(filepath.Join(root, "testdata", "models", "qk-early.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	text := `{"models": [{"path": ` + string(quoted) + `}], "grid": {"--tiles": [4, 8, 16], "--max-attempts": [0]}}`
	if err := os.WriteFile(sweepFile, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	device := filepath.Join(dir, "node-local", "ipu0")
	sweep := func(args ...string) (int, string) {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), append(args, "--bin", bin, "-o", out, sweepFile), &stdout, &stderr)
		return code, stdout.String() + stderr.String()
	}
	// Collecting before anything ran: every configuration "not run".
	if code, log := sweep("--collect"); code != 0 {
		t.Fatalf("--collect: exit %d: %s", code, log)
	}
	for _, r := range readCSV(t, filepath.Join(out, "results.csv"))[1:] {
		if r[9] != "ERROR" || r[10] != "sweep: not run" {
			t.Errorf("row before running: %v", r)
		}
	}
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Go(func() {
			if code, log := sweep("--index", string(rune('0'+i)), "--device", device); code != 0 {
				t.Errorf("--index %d: exit %d: %s", i, code, log)
			}
		})
	}
	wg.Wait()
	if code, log := sweep("--collect"); code != 0 {
		t.Fatalf("--collect: exit %d: %s", code, log)
	}
	rows := readCSV(t, filepath.Join(out, "results.csv"))
	if len(rows) != 4 {
		t.Fatalf("results.csv: %v", rows)
	}
	for _, r := range rows[1:] {
		if r[9] != "PASS" {
			t.Errorf("row: %v", r)
		}
	}
	if code, log := sweep("--index", "3"); code != 2 || !strings.Contains(log, "has 3 configurations") {
		t.Errorf("--index 3: exit %d: %s", code, log)
	}
}
