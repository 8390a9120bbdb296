package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"ipu.local/formats/obj"
)

func TestDump(t *testing.T) {
	aPlan := filepath.Join(t.TempDir(), "model.plan")
	if err := os.WriteFile(aPlan, []byte("{\n  \"format\": \"ipu-plan/1\"\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		args   []string
		status int
		out    string // substring of stdout
		err    string // substring of stderr
	}{
		{"object", []string{"../../formats/obj/testdata/full.ipuobj"}, 0, "segment", ""},
		{"object memory", []string{"../../formats/obj/testdata/full.ipuobj"}, 0, "\n\nmemory tiles 2 usable 637872 bytes per tile\n" +
			"  tile 0: code 24 exchange 0 constants 4096 variables 65536 profile 0 stacks 0 used 69656 free 568216\n", ""},
		{"package", []string{"../../formats/ipuexe/testdata/full.ipuexe"}, 0, "image 0", ""},
		// --memory: the whole output, fullest tiles first.
		{"memory only", []string{"--memory", "../../formats/obj/testdata/full.ipuobj"}, 0, "memory tiles 2 usable 637872 bytes per tile, fullest first\n" +
			"  tile 0: code 24 exchange 0 constants 4096 variables 65536 profile 0 stacks 0 used 69656 (10.9%) free 568216\n" +
			"  tile 2: code 4 exchange 0 constants 0 variables 0 profile 0 stacks 0 used 4 (0.0%) free 637868\n", ""},
		{"memory of a package", []string{"--memory", "../../formats/ipuexe/testdata/full.ipuexe"}, 1, "", "--memory: not an object"},
		{"not an artifact", []string{"main.go"}, 1, "", "not an object, package or profile"},
		{"a plan", []string{aPlan}, 1, "", aPlan + ": a plan, not an object, package or profile (a plan is JSON to read as it is; ipu-diff compares two)"},
		{"missing file", []string{"nope.ipuobj"}, 1, "", "nope.ipuobj"},
		{"no argument", nil, 2, "", "want exactly one FILE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			status := run(append([]string{"ipu-dump"}, tt.args...), &stdout, &stderr)
			if status != tt.status {
				t.Fatalf("status %d, want %d (stderr %q)", status, tt.status, stderr.String())
			}
			if !strings.Contains(stdout.String(), tt.out) {
				t.Errorf("stdout lacks %q:\n%s", tt.out, stdout.String())
			}
			if !strings.Contains(stderr.String(), tt.err) {
				t.Errorf("stderr %q lacks %q", stderr.String(), tt.err)
			}
			if tt.status != 0 && strings.Count(strings.TrimSpace(stderr.String()), "\n") != 0 {
				t.Errorf("error is not one line: %q", stderr.String())
			}
		})
	}
}

// The dump is stable: the same file gives the same text, and a corrupted
// package is refused with one line naming the section.
func TestDumpStableAndCorrupt(t *testing.T) {
	in := "../../formats/ipuexe/testdata/full.ipuexe"
	var a, b, e bytes.Buffer
	run([]string{"ipu-dump", in}, &a, &e)
	run([]string{"ipu-dump", in}, &b, &e)
	if a.String() != b.String() || a.Len() == 0 {
		t.Fatal("two dumps of one package differ")
	}
	data, err := os.ReadFile(in)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-3] ^= 0xff
	bad := filepath.Join(t.TempDir(), "bad.ipuexe")
	if err := os.WriteFile(bad, data, 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if status := run([]string{"ipu-dump", bad}, &out, &errb); status != 1 {
		t.Fatalf("status %d, want 1", status)
	}
	if !strings.Contains(errb.String(), "section") {
		t.Errorf("error %q does not name the section", errb.String())
	}
}

// An object for an architecture that has no preset is dumped all the
// same, with a line instead of the memory report.
func TestDumpUnknownArch(t *testing.T) {
	data, err := obj.Marshal(&obj.Object{Arch: "ipu99", Compiler: "0.1.0"})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "x.ipuobj")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if status := run([]string{"ipu-dump", path}, &out, &errb); status != 0 {
		t.Fatalf("status %d, want 0 (stderr %q)", status, errb.String())
	}
	if want := "\n\nmemory: no report: unknown architecture \"ipu99\"\n"; !strings.HasSuffix(out.String(), want) {
		t.Errorf("stdout does not end with %q:\n%s", want, out.String())
	}
}
