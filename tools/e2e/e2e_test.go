// Package e2e runs the whole assembly pipeline through the real tool
// binaries: ipu-plan, ipu-link, ipu-as, ipu-pack, ipu-load, ipu-check,
// ipu-dump, ipu-diff.
package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "ipu-e2e-")
	if err != nil {
		panic(err)
	}
	cmd := exec.Command("go", "build", "-o", dir+string(os.PathSeparator),
		"../ipu-plan", "../ipu-link", "../ipu-as", "../ipu-pack", "../ipu-load", "../ipu-check", "../ipu-dump", "../ipu-diff")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		panic("building the tools: " + err.Error())
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func TestScript(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Setup: func(env *testscript.Env) error {
			env.Setenv("PATH", binDir+string(os.PathListSeparator)+os.Getenv("PATH"))
			env.Setenv("ROOT", root)
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			// corrupt IN OUT writes IN with its middle byte flipped.
			"corrupt": func(ts *testscript.TestScript, neg bool, args []string) {
				if len(args) != 2 {
					ts.Fatalf("usage: corrupt IN OUT")
				}
				b := []byte(ts.ReadFile(args[0]))
				b[len(b)/2] ^= 0x55
				ts.Check(os.WriteFile(ts.MkAbs(args[1]), b, 0o644))
			},
			// subst OLD NEW IN OUT writes IN with OLD replaced by NEW.
			"subst": func(ts *testscript.TestScript, neg bool, args []string) {
				if len(args) != 4 {
					ts.Fatalf("usage: subst OLD NEW IN OUT")
				}
				in := ts.ReadFile(args[2])
				out := strings.Replace(in, args[0], args[1], 1)
				if out == in {
					ts.Fatalf("subst: %q not found in %s", args[0], args[2])
				}
				ts.Check(os.WriteFile(ts.MkAbs(args[3]), []byte(out), 0o644))
			},
		},
	})
}
