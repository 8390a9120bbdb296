package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"ipu.local/formats/obj"
	"ipu.local/libs/asm"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"ipu-as": func() { os.Exit(run(os.Args, os.Stdout, os.Stderr)) },
		"disasm": func() { os.Exit(disasm(os.Args[1:])) },
	})
}

// TestScript runs testdata/script/*.txtar. Besides ipu-as the scripts
// have:
//
//	disasm FILE.ipuobj        print the object as assembly source
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

func disasm(args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: disasm FILE.ipuobj")
		return 2
	}
	data, err := os.ReadFile(args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, "disasm:", err)
		return 1
	}
	o, err := obj.Read(data)
	if err != nil {
		fmt.Fprintf(os.Stderr, "disasm: %s: %v\n", args[0], err)
		return 1
	}
	os.Stdout.Write(asm.DisassembleObject(o))
	return 0
}
