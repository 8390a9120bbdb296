// Command seedcheck checks that a log has a counterpart for every line of
// the seed log: a line with the same message and the same field names, in
// the same order (values are this project's own). Lines without a
// timestamp (the verdict lines ipu-check prints on stdout) are matched by
// their field names alone.
//
// Usage: go run ./scripts/seedcheck SEED.txt RUN.log
//
// It prints each seed line's key and whether it was found, and exits 1
// when any is missing.
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: seedcheck SEED.txt RUN.log")
		os.Exit(2)
	}
	seed, err := keys(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "seedcheck:", err)
		os.Exit(1)
	}
	got, err := keys(os.Args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, "seedcheck:", err)
		os.Exit(1)
	}
	if missing := check(os.Stdout, seed, got); missing > 0 {
		fmt.Fprintf(os.Stderr, "seedcheck: %d of %d seed lines have no counterpart in %s\n", missing, len(seed), os.Args[2])
		os.Exit(1)
	}
}

// check reports every seed key and returns how many are missing.
func check(w io.Writer, seed []string, got []string) int {
	have := map[string]bool{}
	for _, k := range got {
		have[k] = true
	}
	seen := map[string]bool{}
	missing := 0
	for _, k := range seed {
		if seen[k] {
			continue
		}
		seen[k] = true
		status := "ok     "
		if !have[k] {
			status = "MISSING"
			missing++
		}
		fmt.Fprintf(w, "%s %s\n", status, k)
	}
	return missing
}

func keys(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		if k, ok := key(sc.Text()); ok {
			out = append(out, k)
		}
	}
	return out, sc.Err()
}

var (
	stamped = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z +[A-Z]+ +(.*)$`)
	field   = regexp.MustCompile(`(?:^| )([A-Za-z_][A-Za-z0-9_]*)=`)
	bare    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=\S`)
)

// key is a log line's message and field names: "message | a b c". Span
// prefixes (name{fields}:...: ) are dropped.
func key(line string) (string, bool) {
	rest := line
	if m := stamped.FindStringSubmatch(line); m != nil {
		rest = m[1]
		// Drop the span path: up to the last "}: " before the message.
		if i := strings.LastIndex(rest, "}: "); i >= 0 && spanPath.MatchString(rest[:i+1]) {
			rest = rest[i+3:]
		}
	} else if !bare.MatchString(line) {
		return "", false
	}
	locs := field.FindAllStringSubmatchIndex(rest, -1)
	msg := rest
	var names []string
	for k, l := range locs {
		if k == 0 {
			msg = strings.TrimSpace(rest[:l[0]])
		}
		names = append(names, rest[l[2]:l[3]])
	}
	if len(locs) == 0 {
		msg = strings.TrimSpace(rest)
	}
	return msg + " | " + strings.Join(names, " "), true
}

// spanPath matches a span path: name{fields}:name{fields}.
var spanPath = regexp.MustCompile(`^([A-Za-z_.]+\{[^{}]*\}:?)+$`)
