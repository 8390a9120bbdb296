package main

import (
	"fmt"
	"os"
	"strconv"

	"ipu.local/formats/plan"
	"ipu.local/libs/arch"
	"ipu.local/libs/graph"
	"ipu.local/libs/onnx"
	"ipu.local/libs/planner"
	"path/filepath"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"ipu-link": func() { os.Exit(run(os.Args, os.Stdout, os.Stderr)) },
		"mkplan":   func() { os.Exit(mkplan(os.Args[1:])) },
		"mkperm": func() {
			// mkperm OUT: a model transposing a 3-D tensor [2,3,4] by
			// perm [2,0,1], an operator the linker does not lower.
			b := onnx.NewModel(17)
			b.AddInput("x", onnx.Float, []int64{2, 3, 4})
			b.AddNode("Transpose", "perm0", []string{"x"}, []string{"y"}, onnx.IntsAttr("perm", 2, 0, 1))
			b.AddOutput("y", onnx.Float, []int64{4, 2, 3})
			if err := os.WriteFile(os.Args[1], b.Marshal(), 0o644); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
		},
	})
}

// mkplan MODEL OUT TILES plans MODEL over TILES tiles of ipu21 (seed 1,
// 4 attempts), as ipu-plan would, and writes the plan.
func mkplan(args []string) int {
	if len(args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: mkplan MODEL OUT TILES")
		return 2
	}
	tiles, err := strconv.Atoi(args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	err = func() error {
		data, err := os.ReadFile(args[0])
		if err != nil {
			return err
		}
		m, err := onnx.ReadModel(data)
		if err != nil {
			return err
		}
		g, err := graph.Build(m)
		if err != nil {
			return err
		}
		p, err := arch.Lookup("ipu21")
		if err != nil {
			return err
		}
		pl, _, _, err := planner.Plan(g, p, planner.Options{Tiles: tiles, Seed: 1, MaxAttempts: 4,
			ModelPath: filepath.Base(args[0]), ModelFingerprint: onnx.Fingerprint(data)})
		if err != nil {
			return err
		}
		out, err := plan.Marshal(pl)
		if err != nil {
			return err
		}
		return os.WriteFile(args[1], out, 0o644)
	}()
	if err != nil {
		fmt.Fprintln(os.Stderr, "mkplan:", err)
		return 1
	}
	return 0
}

// TestScript runs testdata/script/*.txtar with ROOT set to the
// repository root; ipu-plan is built from ../ipu-plan into $WORK/bin.
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
	})
}
