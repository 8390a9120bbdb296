package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"ipu.local/libs/onnx"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"ipu-plan": func() { os.Exit(run(os.Args, os.Stdout, os.Stderr)) },
		"mkmodel":  func() { os.Exit(mkmodel(os.Args[1:])) },
		"truncate": func() { os.Exit(truncate(os.Args[1:])) },
	})
}

// TestScript runs testdata/script/*.txtar, with ROOT set to the
// repository root and the programs of TestMain:
//
//	mkmodel KIND OUT
//	    write a small model: lstm (an LSTM node, unsupported) or
//	    matmul (one 64x64 MatMul)
//	truncate IN OUT N
//	    copy the first N bytes of IN to OUT
//	cmpjson FIELD A B
//	    the top-level FIELD of the JSON files A and B is the same
//	bestshard STATE...
//	    set BEST_PLAN to sI.plan, I the shard of the state with the
//	    fewest validated_cycles (the lowest shard on a tie)
//	unvalidate IN OUT
//	    copy the state IN to OUT without its validated_cycles
func TestScript(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Setup: func(env *testscript.Env) error {
			env.Setenv("ROOT", root)
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"cmpjson":    cmpJSON,
			"bestshard":  bestShard,
			"unvalidate": unvalidate,
		},
	})
}

// testModel returns the model of mkmodel's KIND.
func testModel(kind string) ([]byte, error) {
	b := onnx.NewModel(21)
	switch kind {
	case "lstm":
		b.AddInput("x", onnx.Float, []int64{5, 1, 8})
		w := make([]float32, 4*4*8)
		b.AddInitializer(onnx.NewFloat32("w", []int64{1, 16, 8}, w))
		b.AddInitializer(onnx.NewFloat32("r", []int64{1, 16, 4}, make([]float32, 64)))
		b.AddNode("LSTM", "lstm0", []string{"x", "w", "r"}, []string{"y"}, onnx.IntAttr("hidden_size", 4))
		b.AddOutput("y", onnx.Float, []int64{5, 1, 1, 4})
	case "matmul":
		b.AddInput("a", onnx.Float, []int64{64, 64})
		b.AddInput("b", onnx.Float, []int64{64, 64})
		b.AddNode("MatMul", "mm0", []string{"a", "b"}, []string{"y"})
		b.AddOutput("y", onnx.Float, []int64{64, 64})
	default:
		return nil, fmt.Errorf("unknown model kind %q (want lstm or matmul)", kind)
	}
	return b.Marshal(), nil
}

func mkmodel(args []string) int {
	if len(args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: mkmodel KIND OUT")
		return 2
	}
	data, err := testModel(args[0])
	if err == nil {
		err = os.WriteFile(args[1], data, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mkmodel:", err)
		return 1
	}
	return 0
}

func truncate(args []string) int {
	if len(args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: truncate IN OUT N")
		return 2
	}
	err := func() error {
		n, err := strconv.Atoi(args[2])
		if err != nil {
			return err
		}
		data, err := os.ReadFile(args[0])
		if err != nil {
			return err
		}
		if n < 0 || n > len(data) {
			return fmt.Errorf("%d out of range [0, %d]", n, len(data))
		}
		return os.WriteFile(args[1], data[:n], 0o644)
	}()
	if err != nil {
		fmt.Fprintln(os.Stderr, "truncate:", err)
		return 1
	}
	return 0
}

// TestExitStatus checks the statuses of the pipeline contract, which
// scripts cannot see, and that a failed run leaves no output.
func TestExitStatus(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join("..", "..", "testdata", "models", "qk-early.onnx")
	lstm := filepath.Join(dir, "lstm.onnx")
	if code := mkmodel([]string{"lstm", lstm}); code != 0 {
		t.Fatal("mkmodel failed")
	}
	out := filepath.Join(dir, "out.plan")
	missing := filepath.Join(dir, "none.onnx")
	tests := []struct {
		name   string
		args   []string
		status int
		stderr string // last line, a prefix
	}{
		{"ok", []string{good, "-o", out, "--tiles", "64", "--max-attempts", "2"}, 0, "package build phase finished phase=\"plan_package\""},
		{"no output flag", []string{good}, 2, `ipu-plan: required flag "o" not set (run ipu-plan --help)`},
		{"no input", []string{"-o", out}, 2, "ipu-plan: want exactly one model MODEL.onnx, got 0 arguments (run ipu-plan --help)"},
		{"bad arch", []string{good, "-o", out, "--arch", "ipu9"}, 2, `ipu-plan: --arch: unknown architecture "ipu9"`},
		{"bad tiles", []string{good, "-o", out, "--tiles", "5", "--arch", "ipu21-tiny"}, 2, "ipu-plan: --tiles 5 out of range [1, 4] of ipu21-tiny"},
		{"negative attempts", []string{good, "-o", out, "--max-attempts", "-1"}, 2, "ipu-plan: --max-attempts -1 is negative"},
		{"missing input", []string{missing, "-o", out}, 1, "ipu-plan: read model: open " + missing + ": no such file or directory"},
		{"unsupported", []string{lstm, "-o", out}, 1, `ipu-plan: unsupported operator LSTM (node "lstm0")`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			os.Remove(out)
			var stdout, stderr bytes.Buffer
			status := run(append([]string{"ipu-plan"}, tt.args...), &stdout, &stderr)
			lines := strings.Split(strings.TrimRight(stderr.String(), "\n"), "\n")
			last := lines[len(lines)-1]
			if tt.status == 0 {
				last = last[strings.Index(last, ": package build")+2:]
			}
			if status != tt.status || !strings.HasPrefix(last, tt.stderr) {
				t.Errorf("status %d, stderr %q; want %d, %q", status, stderr.String(), tt.status, tt.stderr)
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout %q, want nothing", stdout.String())
			}
			if tt.status != 0 {
				if len(lines) != 1 {
					t.Errorf("stderr has %d lines, want 1:\n%s", len(lines), stderr.String())
				}
				if _, err := os.Stat(out); err == nil {
					t.Errorf("%s written by a failed run", out)
				}
			}
		})
	}
}

// The search's progress bar, the start's products decided and then the
// attempts: drawn with --progress always, never drawn
// on a writer that is not a terminal (auto), so logs hold no carriage
// return; a bad mode is a usage error.
func TestProgress(t *testing.T) {
	model := filepath.Join("..", "..", "testdata", "models", "qk-early.onnx")
	for _, c := range []struct {
		mode   string
		status int
		bar    bool
	}{{"always", 0, true}, {"auto", 0, false}, {"never", 0, false}, {"sometimes", 2, false}} {
		var stdout, stderr bytes.Buffer
		out := filepath.Join(t.TempDir(), "p.plan")
		status := run([]string{"ipu-plan", model, "-o", out, "--tiles", "64", "--max-attempts", "3", "--progress", c.mode}, &stdout, &stderr)
		if status != c.status {
			t.Fatalf("--progress %s: status %d, want %d (%s)", c.mode, status, c.status, stderr.String())
		}
		if got := strings.Contains(stderr.String(), "\r"); got != c.bar {
			t.Errorf("--progress %s: carriage returns %v, want %v", c.mode, got, c.bar)
		}
		if c.bar && !strings.Contains(stderr.String(), "search: incumbent") {
			t.Errorf("--progress %s: no bar in %q", c.mode, stderr.String())
		}
		if c.bar && !strings.Contains(stderr.String(), "search: start, 1 of 1 products decided") {
			t.Errorf("--progress %s: no start progress in %q", c.mode, stderr.String())
		}
	}
}
