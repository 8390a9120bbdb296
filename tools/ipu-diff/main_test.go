package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"ipu.local/formats/ipuexe"
	"ipu.local/formats/obj"
	"ipu.local/libs/arch"
	"ipu.local/libs/asm"
	"ipu.local/libs/pack"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"ipu-diff": func() { os.Exit(run(os.Args, os.Stdout, os.Stderr)) },
		"asm":      func() { os.Exit(helper(assemble, os.Args[1:])) },
		"pack":     func() { os.Exit(helper(packFile, os.Args[1:])) },
		"flip":     func() { os.Exit(helper(flip, os.Args[1:])) },
	})
}

// TestScript runs testdata/script/*.txtar. Besides ipu-diff the scripts
// have:
//
//	asm [-source FP] SRC.s OUT.ipuobj
//	                          assemble a source into an object; -source
//	                          records FP as the source fingerprint
//	pack IN.ipuobj OUT.ipuexe pack an object for its architecture
//	flip FILE                 invert the last byte of FILE
//	status N PROG [ARGS...]   run PROG, expect exit status N
func TestScript(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"status": status,
		},
	})
}

func status(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: status N PROG [ARGS...]")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("status %q: not a number", args[0])
	}
	err = ts.Exec(args[1], args[2:]...)
	got := 0
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		got = exit.ExitCode()
	case err != nil:
		ts.Fatalf("%s: %v", args[1], err)
	}
	if got != want {
		ts.Fatalf("%s exited with status %d, want %d", args[1], got, want)
	}
}

func helper(f func(args []string) error, args []string) int {
	if err := f(args); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func assemble(args []string) error {
	fs := flag.NewFlagSet("asm", flag.ContinueOnError)
	source := fs.String("source", "", "record this source fingerprint")
	if err := fs.Parse(args); err != nil || fs.NArg() != 2 {
		return errors.New("usage: asm [-source FINGERPRINT] SRC.s OUT.ipuobj")
	}
	src, err := os.ReadFile(fs.Arg(0))
	if err != nil {
		return err
	}
	o, err := asm.Assemble(fs.Arg(0), src, asm.Options{})
	if err != nil {
		return err
	}
	if *source != "" {
		o.Source = *source
	}
	data, err := obj.Marshal(o)
	if err != nil {
		return err
	}
	return os.WriteFile(fs.Arg(1), data, 0o644)
}

func packFile(args []string) error {
	if len(args) != 2 {
		return errors.New("usage: pack IN.ipuobj OUT.ipuexe")
	}
	data, err := os.ReadFile(args[0])
	if err != nil {
		return err
	}
	o, err := obj.Read(data)
	if err != nil {
		return err
	}
	p, err := arch.Lookup(o.Arch)
	if err != nil {
		return err
	}
	pkg, err := pack.Build(o, p)
	if err != nil {
		return err
	}
	pkg.Object = obj.Fingerprint(data)
	out, err := ipuexe.Marshal(pkg)
	if err != nil {
		return err
	}
	return os.WriteFile(args[1], out, 0o644)
}

func flip(args []string) error {
	if len(args) != 1 {
		return errors.New("usage: flip FILE")
	}
	data, err := os.ReadFile(args[0])
	if err != nil {
		return err
	}
	if len(data) == 0 {
		return errors.New("flip: empty file")
	}
	data[len(data)-1] ^= 0xff
	return os.WriteFile(args[0], data, 0o644)
}

func sum(t *testing.T, path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return obj.Fingerprint(data)
}

// TestExitStatus checks the statuses and that trouble is one line on
// stderr and nothing on stdout.
func TestExitStatus(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "p.s")
	if err := os.WriteFile(src, []byte(".arch ipu21-tiny\n.tile 0\n.section t, code\n\thalt\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	src2 := filepath.Join(dir, "q.s")
	if err := os.WriteFile(src2, []byte(".arch ipu21-tiny\n.tile 0-1\n.section t, code\n\thalt\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	a, b, p := filepath.Join(dir, "a.ipuobj"), filepath.Join(dir, "b.ipuobj"), filepath.Join(dir, "a.ipuexe")
	for _, err := range []error{assemble([]string{src, a}), assemble([]string{src2, b}), packFile([]string{a, p})} {
		if err != nil {
			t.Fatal(err)
		}
	}
	missing := filepath.Join(dir, "none.ipuobj")
	tests := []struct {
		name   string
		args   []string
		status int
		stdout string
		stderr string // a prefix of the one line
	}{
		{"equal", []string{a, a}, 0, "", ""},
		{"different", []string{b, a}, 1, "header: source \"" + sum(t, src2) + "\" -> \"" + sum(t, src) + "\"\ntile 1: removed\n", ""},
		{"no arguments", nil, 2, "", "ipu-diff: want two artifacts A B, got 0 arguments (run ipu-diff --help)"},
		{"three arguments", []string{a, a, a}, 2, "", "ipu-diff: want two artifacts A B, got 3 arguments"},
		{"missing file", []string{a, missing}, 2, "", "ipu-diff: open " + missing + ": no such file or directory"},
		{"kinds differ", []string{a, p}, 2, "", "ipu-diff: " + a + " is an object, " + p + " is a package: cannot compare"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			got := run(append([]string{"ipu-diff"}, tt.args...), &stdout, &stderr)
			if got != tt.status {
				t.Errorf("status %d, want %d (stderr %q)", got, tt.status, stderr.String())
			}
			if stdout.String() != tt.stdout {
				t.Errorf("stdout %q, want %q", stdout.String(), tt.stdout)
			}
			lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
			switch {
			case tt.stderr == "" && stderr.Len() != 0:
				t.Errorf("stderr %q, want nothing", stderr.String())
			case tt.stderr != "" && (len(lines) != 1 || !strings.HasPrefix(lines[0], tt.stderr)):
				t.Errorf("stderr %q, want one line starting %q", stderr.String(), tt.stderr)
			}
		})
	}
}
