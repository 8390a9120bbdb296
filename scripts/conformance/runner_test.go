package main

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// fakeTools are shell stand-ins for the pipeline's tools, with the
// command lines of the real ones. An artifact carries the model's text
// down the pipeline, and the text says how the case goes.
var fakeTools = map[string]string{
	toolPlan: `model=$1; out=$3; shift 3
echo "$*" > plan.args
echo "2026-12-02T16:53:41.756235Z  INFO ipu_codegen.package.build{tile_count=4}: planning" >&2
case "$(cat "$model")" in
unsupported) echo 'ipu-plan: unsupported operator Elu (node "elu0")' >&2; exit 1;;
badplan) echo "ipu-plan: $model: node \"a\" (Add) input 1: shape [3] does not broadcast to [4]" >&2; exit 1;;
esac
cp "$model" "$out"
`,
	toolLink: `case "$(cat "$1")" in
notlowered) echo 'ipu-link: model.plan: node "sm" (Softmax): operator Softmax is not lowered' >&2; exit 1;;
esac
cp "$1" "$3"
`,
	toolPack: `cp "$1" "$3"
`,
	toolLoad: `cp "$3" "$2"
`,
	toolCheck: `dev=$2; data=$4; pkg=$5
if [ "$(cat "$dev")" != "$(cat "$pkg")" ]; then echo "ipu-check: device $dev: not loaded with $pkg" >&2; exit 1; fi
if [ "$(cat "$pkg")" = slow ]; then exec sleep 20; fi
if [ "$(cat "$pkg")" = silent ]; then exit 0; fi
if [ "$(cat "$data/output_0.pb")" = wrong ]; then
	echo "referenceInference=1 numericalTest=FAIL"
	echo "2026-12-02T16:53:42.000001Z ERROR ipu_check: numerical mismatch inference=1 output=y index=0 got=1 want=2" >&2
	echo "referenceMaximumAbsoluteError=1 numericalTest=FAIL"
	echo "package=$pkg tiles=4 hardwareTest=PASS"
	exit 1
fi
echo "referenceInference=1 numericalTest=PASS"
echo "referenceMaximumAbsoluteError=0 numericalTest=PASS"
echo "package=$pkg tiles=4 hardwareTest=PASS"
`,
}

// fakeCases are the cases of the fake root: model text, then the
// expected output of each data set ("" for a case without data).
var fakeCases = map[string][]string{
	"a/pass":        {"ok", "right", "right"},
	"a/unsupported": {"unsupported", "right"},
	"a/wrongdata":   {"ok", "right", "wrong"},
	"b/badplan":     {"badplan", "right"},
	"b/nodata":      {"ok"},
	"b/notlowered":  {"notlowered", "right"},
	"b/silent":      {"silent", "right"},
	"c/slow":        {"slow", "right"},
}

// fakeSetup writes the fake root and bin directory, leaving out the
// tools named in missing.
func fakeSetup(t *testing.T, missing ...string) (root, bin string) {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("the fake tools are shell scripts")
	}
	dir := t.TempDir()
	root, bin = filepath.Join(dir, "root"), filepath.Join(dir, "bin")
	write := func(path, text string, mode os.FileMode) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), mode); err != nil {
			t.Fatal(err)
		}
	}
	for tool, script := range fakeTools {
		if !strings.Contains(strings.Join(missing, " "), tool) {
			write(filepath.Join(bin, tool), "#!/bin/sh\n"+script, 0o755)
		}
	}
	for name, spec := range fakeCases {
		write(filepath.Join(root, name, "model.onnx"), spec[0], 0o644)
		for i, out := range spec[1:] {
			set := filepath.Join(root, name, "test_data_set_"+string(rune('0'+i)))
			write(filepath.Join(set, "input_0.pb"), "in", 0o644)
			write(filepath.Join(set, "output_0.pb"), out, 0o644)
		}
	}
	// Not cases: a file in the root and a hidden folder.
	write(filepath.Join(root, "README.md"), "fake", 0o644)
	write(filepath.Join(root, ".git", "x", "model.onnx"), "ok", 0o644)

	// A second root, models, in the layout without folders: ROOT/CASE.
	models := filepath.Join(dir, "models")
	for name, spec := range fakeModels {
		if spec[0] != "" {
			write(filepath.Join(models, name, "model.onnx"), spec[0], 0o644)
		}
		for i, out := range spec[1:] {
			set := filepath.Join(models, name, "test_data_set_"+string(rune('0'+i)))
			write(filepath.Join(set, "input_0.pb"), "in", 0o644)
			write(filepath.Join(set, "output_0.pb"), out, 0o644)
		}
	}
	write(filepath.Join(models, "README.md"), "fake", 0o644)
	return root, bin
}

// fakeModels are the cases of the fake models root, as fakeCases ("" for
// a case without a model).
var fakeModels = map[string][]string{
	"bert_ok":  {"ok", "right"},
	"gpt2_bad": {"badplan", "right"},
	"nomodel":  {"", "right"},
}

// runMain runs the command and returns its status, stdout and stderr.
func runMain(args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	status := run(args, &stdout, &stderr)
	return status, stdout.String(), stderr.String()
}

func TestRunner(t *testing.T) {
	root, bin := fakeSetup(t)
	want := strings.Join([]string{
		"PASS        a/pass",
		"UNSUPPORTED a/unsupported: Elu",
		"FAIL        a/wrongdata: ipu-check: test_data_set_1: referenceInference=1 numericalTest=FAIL; " +
			"referenceMaximumAbsoluteError=1 numericalTest=FAIL; numerical mismatch inference=1 output=y index=0 got=1 want=2",
		`FAIL        b/badplan: ipu-plan: b/badplan/model.onnx: node "a" (Add) input 1: shape [3] does not broadcast to [4]`,
		"FAIL        b/nodata: conformance: no test_data_set_N folder in the case",
		`NOT-LOWERED b/notlowered: model.plan: node "sm" (Softmax): operator Softmax is not lowered`,
		"FAIL        b/silent: ipu-check: exit status 0 without numericalTest=PASS and hardwareTest=PASS",
		"a: 3 cases: 1 pass, 1 fail, 1 unsupported, 0 not lowered; pass rate 50.0% (1/2 supported)",
		"b: 4 cases: 0 pass, 3 fail, 0 unsupported, 1 not lowered; pass rate 0.0% (0/4 supported)",
		"total: 7 cases: 1 pass, 4 fail, 1 unsupported, 1 not lowered; pass rate 16.7% (1/6 supported)",
		"",
	}, "\n")
	for _, jobs := range []string{"1", "8"} {
		t.Run("j"+jobs, func(t *testing.T) {
			status, stdout, stderr := runMain("--root", root, "--bin", bin, "-j", jobs, "--run", "^[ab]/")
			if status != 1 {
				t.Errorf("status %d, want 1 (stderr %q)", status, stderr)
			}
			if diff := cmp.Diff(want, stdout); diff != "" {
				t.Errorf("output mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRunnerTimeout runs a case whose ipu-check never ends. Which tool
// the timeout stops depends on the host's load; the case must FAIL with
// the timeout either way.
func TestRunnerTimeout(t *testing.T) {
	root, bin := fakeSetup(t)
	start := time.Now()
	status, stdout, stderr := runMain("--root", root, "--bin", bin, "--run", "^c/", "--timeout", "2s")
	if status != 1 {
		t.Errorf("status %d, want 1 (stderr %q)", status, stderr)
	}
	if elapsed := time.Since(start); elapsed > 15*time.Second {
		t.Errorf("the run took %v, the fake ipu-check was not stopped", elapsed)
	}
	first, _, _ := strings.Cut(stdout, "\n")
	if !strings.HasPrefix(first, "FAIL        c/slow: ipu-") || !strings.HasSuffix(first, ": timeout after 2s") {
		t.Errorf("got %q, want FAIL        c/slow: ipu-TOOL: timeout after 2s", first)
	}
}

func TestRunnerMissingTool(t *testing.T) {
	root, bin := fakeSetup(t, toolLink)
	status, stdout, stderr := runMain("--root", root, "--bin", bin, "--run", "^a/(pass|unsupported)$")
	want := strings.Join([]string{
		"FAIL        a/pass: ipu-link: not found in " + bin + "/",
		"UNSUPPORTED a/unsupported: Elu",
		"a: 2 cases: 0 pass, 1 fail, 1 unsupported, 0 not lowered; pass rate 0.0% (0/1 supported)",
		"total: 2 cases: 0 pass, 1 fail, 1 unsupported, 0 not lowered; pass rate 0.0% (0/1 supported)",
		"",
	}, "\n")
	if status != 1 {
		t.Errorf("status %d, want 1 (stderr %q)", status, stderr)
	}
	if diff := cmp.Diff(want, stdout); diff != "" {
		t.Errorf("output mismatch (-want +got):\n%s", diff)
	}
}

// TestRunnerWork checks the work directories: --work is kept with the
// artifacts, --arch and --tiles reach ipu-plan (with --input-shapes), and the default temporary
// directory is removed.
func TestRunnerWork(t *testing.T) {
	root, bin := fakeSetup(t)
	tests := []struct {
		name     string
		args     []string
		wantArgs string
	}{
		{"plain", nil, ""},
		{"arch and tiles", []string{"--arch", "ipu21", "--tiles", "4"}, "--arch ipu21 --tiles 4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			work := t.TempDir()
			args := append([]string{"--root", root, "--bin", bin, "--work", work, "--run", "a/pass"}, tt.args...)
			status, stdout, stderr := runMain(args...)
			if status != 0 {
				t.Fatalf("status %d, want 0 (stdout %q, stderr %q)", status, stdout, stderr)
			}
			got, err := os.ReadFile(filepath.Join(work, "a", "pass", "plan.args"))
			if err != nil {
				t.Fatal(err)
			}
			// Every case is compiled for its first data set's shapes.
			want := strings.TrimSpace(tt.wantArgs+" --input-shapes "+filepath.Join(root, "a", "pass", "test_data_set_0")) + "\n"
			if diff := cmp.Diff(want, string(got)); diff != "" {
				t.Errorf("ipu-plan arguments mismatch (-want +got):\n%s", diff)
			}
			for _, f := range []string{"model.plan", "model.ipuobj", "model.ipuexe", "ipu0"} {
				if _, err := os.Stat(filepath.Join(work, "a", "pass", f)); err != nil {
					t.Errorf("artifact: %v", err)
				}
			}
		})
	}

	t.Run("temporary", func(t *testing.T) {
		tmp := t.TempDir()
		t.Setenv("TMPDIR", tmp)
		status, stdout, stderr := runMain("--root", root, "--bin", bin, "--run", "a/pass")
		if status != 0 {
			t.Fatalf("status %d, want 0 (stdout %q, stderr %q)", status, stdout, stderr)
		}
		if left, _ := os.ReadDir(tmp); len(left) != 0 {
			t.Errorf("work directory not removed: %v", left)
		}
	})
}

func TestRunnerErrors(t *testing.T) {
	root, bin := fakeSetup(t)
	tests := []struct {
		name       string
		args       []string
		wantStatus int
		wantErr    string
	}{
		{"bad regexp", []string{"--run", "("}, 2, "conformance: --run: error parsing regexp"},
		{"no jobs", []string{"-j", "0"}, 2, "conformance: -j 0: want at least 1"},
		{"argument", []string{"extra"}, 2, `conformance: unexpected argument "extra"`},
		{"bad flag", []string{"--nope"}, 2, "conformance: flag provided but not defined: -nope"},
		{"no match", []string{"--run", "zzz"}, 1, `conformance: no case under ` + root + ` matches --run "zzz"`},
		{"no root", []string{"--root", filepath.Join(root, "none")}, 1, "conformance: case root: open "},
		{"same root names", []string{"--root", filepath.Join(root, "a", "..")}, 2, "conformance: --root " + root + " and " + filepath.Join(root, "a", "..") + ": two roots named root"},
		{"empty root", []string{"--root", root + ","}, 2, `conformance: invalid value "` + root + `," for flag -root: empty directory`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"--root", root, "--bin", bin}, tt.args...)
			status, stdout, stderr := runMain(args...)
			if status != tt.wantStatus {
				t.Errorf("status %d, want %d", status, tt.wantStatus)
			}
			if stdout != "" {
				t.Errorf("stdout %q, want none", stdout)
			}
			lines := strings.Split(strings.TrimSpace(stderr), "\n")
			if last := lines[len(lines)-1]; !strings.HasPrefix(last, tt.wantErr) {
				t.Errorf("stderr ends %q, want it to start %q", last, tt.wantErr)
			}
		})
	}
}

// TestRunnerRoots runs cases from two roots, with and without folders:
// every case is named after its root, --run selects on that name, and
// tools' messages name the case's files by it.
func TestRunnerRoots(t *testing.T) {
	root, bin := fakeSetup(t)
	models := filepath.Join(filepath.Dir(root), "models")
	both := strings.Join([]string{
		`FAIL        models/gpt2_bad: ipu-plan: models/gpt2_bad/model.onnx: node "a" (Add) input 1: shape [3] does not broadcast to [4]`,
		"FAIL        models/nomodel: conformance: no model.onnx in the case",
		"PASS        root/a/pass",
		`FAIL        root/b/badplan: ipu-plan: root/b/badplan/model.onnx: node "a" (Add) input 1: shape [3] does not broadcast to [4]`,
		"models: 2 cases: 0 pass, 2 fail, 0 unsupported, 0 not lowered; pass rate 0.0% (0/2 supported)",
		"root/a: 1 cases: 1 pass, 0 fail, 0 unsupported, 0 not lowered; pass rate 100.0% (1/1 supported)",
		"root/b: 1 cases: 0 pass, 1 fail, 0 unsupported, 0 not lowered; pass rate 0.0% (0/1 supported)",
		"total: 4 cases: 1 pass, 3 fail, 0 unsupported, 0 not lowered; pass rate 25.0% (1/4 supported)",
		"",
	}, "\n")
	bert := strings.Join([]string{
		"PASS        models/bert_ok",
		"models: 1 cases: 1 pass, 0 fail, 0 unsupported, 0 not lowered; pass rate 100.0% (1/1 supported)",
		"total: 1 cases: 1 pass, 0 fail, 0 unsupported, 0 not lowered; pass rate 100.0% (1/1 supported)",
		"",
	}, "\n")
	tests := []struct {
		name       string
		args       []string
		wantStatus int
		want       string
	}{
		{"repeated", []string{"--root", root, "--root", models, "--run", "^(models/[gn]|root/a/pass|root/b/badplan)"}, 1, both},
		{"list", []string{"--root", models + "," + root, "-j", "1", "--run", "^(models/[gn]|root/a/pass|root/b/badplan)"}, 1, both},
		{"select models", []string{"--root", root, "--root", models, "--run", "models/bert_"}, 0, bert},
		{"models alone", []string{"--root", models, "--run", "bert_"}, 0, bert},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			work := t.TempDir()
			args := append([]string{"--bin", bin, "--work", work}, tt.args...)
			status, stdout, stderr := runMain(args...)
			if status != tt.wantStatus {
				t.Errorf("status %d, want %d (stderr %q)", status, tt.wantStatus, stderr)
			}
			if diff := cmp.Diff(tt.want, stdout); diff != "" {
				t.Errorf("output mismatch (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("work", func(t *testing.T) {
		work := t.TempDir()
		status, stdout, stderr := runMain("--bin", bin, "--work", work, "--root", root+","+models, "--run", "models/bert_ok|a/pass")
		if status != 0 {
			t.Fatalf("status %d, want 0 (stdout %q, stderr %q)", status, stdout, stderr)
		}
		for _, dir := range []string{filepath.Join("models", "bert_ok"), filepath.Join("root", "a", "pass")} {
			if _, err := os.Stat(filepath.Join(work, dir, "model.ipuexe")); err != nil {
				t.Errorf("artifact: %v", err)
			}
		}
	})
}

// TestDefaultRoots checks which roots are used without --root: those
// that exist, the committed copies standing in for the shared models.
func TestDefaultRoots(t *testing.T) {
	conformance := filepath.Join("..", "shared", "conformance")
	models := filepath.Join("..", "shared", "models")
	copies := filepath.Join("testdata", "models", "shared")
	confCopy := filepath.Join("testdata", "conformance")
	tests := []struct {
		name    string
		exist   []string // relative to the repository
		want    []caseRoot
		wantErr string
	}{
		{"beside", []string{conformance, models, copies},
			[]caseRoot{{Given: conformance, Label: "conformance"}, {Given: models, Label: "models"}}, ""},
		{"beside with copies", []string{conformance, models, confCopy, copies},
			[]caseRoot{{Given: conformance, Label: "conformance"}, {Given: models, Label: "models"}}, ""},
		{"clone", []string{confCopy, copies},
			[]caseRoot{{Given: confCopy, Label: "conformance"}, {Given: copies, Label: "models"}}, ""},
		{"clone without conformance copy", []string{copies},
			[]caseRoot{{Given: copies, Label: "models"}}, ""},
		{"conformance only", []string{conformance},
			[]caseRoot{{Given: conformance, Label: "conformance"}}, ""},
		{"nothing", nil, nil,
			"no case root: none of " + conformance + ", " + confCopy + ", " + models + ", " + copies + " exists in the repository (give --root)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			repo := filepath.Join(t.TempDir(), "repo")
			for _, rel := range append([]string{"."}, tt.exist...) {
				if err := os.MkdirAll(filepath.Join(repo, rel), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			got, err := defaultRoots(repo)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("got error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for i := range tt.want {
				tt.want[i].Dir = filepath.Join(repo, tt.want[i].Given)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("roots mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
