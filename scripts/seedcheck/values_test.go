package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeLog(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const stamp = "2026-12-03T06:00:00.000000Z  INFO span{a=1}: "

func TestGoldenMasksWallClock(t *testing.T) {
	dir := t.TempDir()
	seed := writeLog(t, dir, "seed", stamp+"did work n=5 elapsed_ms=3\n"+stamp+"other x=1\n")
	run := writeLog(t, dir, "run", stamp+"did work n=7 elapsed_ms=99\n"+stamp+"unrelated y=2\n")
	keysSeed, _ := keys(seed)
	ls, err := lines(run)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := golden(keysSeed, ls), "did work n=7 elapsed_ms=*\n"; got != want {
		t.Fatalf("golden %q, want %q", got, want)
	}
	g := filepath.Join(dir, "golden")
	if err := checkGolden(g, keysSeed, ls, true); err != nil {
		t.Fatal(err)
	}
	if err := checkGolden(g, keysSeed, ls, false); err != nil {
		t.Fatalf("unchanged run: %v", err)
	}
	ls[0].fields[0][1] = "8"
	if err := checkGolden(g, keysSeed, ls, false); err == nil || !strings.Contains(err.Error(), "line 1 differs") {
		t.Fatalf("changed value: %v", err)
	}
}

func TestConstantsFlagsLabels(t *testing.T) {
	dir := t.TempDir()
	seed, _ := lines(writeLog(t, dir, "seed", stamp+"screened exchange table geometry c=12 z=0 fragment_limit=9 m=4 elapsed_ms=1\n"))
	var runs [][]line
	for i, v := range []string{"3", "4", "5"} {
		r, _ := lines(writeLog(t, dir, "r"+v, stamp+"screened exchange table geometry c="+v+" z=0 fragment_limit=9 m=4 elapsed_ms="+v+"\n"))
		runs = append(runs, r)
		_ = i
	}
	got := constants(seed, runs)
	if len(got) != 1 || !strings.Contains(got[0], "m=4") {
		t.Fatalf("constants %v, want only m (c varies, z is zero in the seed, fragment_limit is the format's)", got)
	}
}
