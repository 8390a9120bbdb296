// Command seedcheck checks that a log has a counterpart for every line of
// the seed log: a line with the same message and the same field names, in
// the same order (values are this project's own). Lines without a
// timestamp (the verdict lines ipu-check prints on stdout) are matched by
// their field names alone.
//
// Usage:
//
//	go run ./scripts/seedcheck [-golden FILE [-update]] SEED.txt RUN.log
//	go run ./scripts/seedcheck -vary SEED.txt A.log B.log C.log
//
// It prints each seed line's key and whether it was found, and exits 1
// when any is missing. With -golden it also compares the values of every
// seed line's counterparts (in the run's order, wall times and the host's
// thread count masked) with FILE, which -update rewrites after a
// deliberate change. With -vary it checks runs of different models: a
// field the seed shows non-zero must not have one value in all of them
// (a constant is a label, not the work the line names).
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
)

func main() {
	goldenPath := flag.String("golden", "", "compare the seed lines' values with `FILE`")
	update := flag.Bool("update", false, "rewrite the -golden file")
	vary := flag.Bool("vary", false, "check that no field the seed shows non-zero is a constant across the runs")
	flag.Parse()
	args := flag.Args()
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "seedcheck:", err)
		os.Exit(1)
	}
	if *vary {
		if len(args) < 3 {
			fmt.Fprintln(os.Stderr, "usage: seedcheck -vary SEED.txt A.log B.log [C.log ...]")
			os.Exit(2)
		}
		seed, err := lines(args[0])
		if err != nil {
			fail(err)
		}
		var runs [][]line
		for _, p := range args[1:] {
			r, err := lines(p)
			if err != nil {
				fail(err)
			}
			runs = append(runs, r)
		}
		if cs := constants(seed, runs); len(cs) > 0 {
			for _, c := range cs {
				fmt.Fprintln(os.Stderr, "seedcheck: constant:", c)
			}
			fail(fmt.Errorf("%d fields the seed shows non-zero have one value in all %d runs", len(cs), len(runs)))
		}
		return
	}
	if len(args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: seedcheck [-golden FILE [-update]] SEED.txt RUN.log")
		os.Exit(2)
	}
	seed, err := keys(args[0])
	if err != nil {
		fail(err)
	}
	got, err := keys(args[1])
	if err != nil {
		fail(err)
	}
	if missing := check(os.Stdout, seed, got); missing > 0 {
		fmt.Fprintf(os.Stderr, "seedcheck: %d of %d seed lines have no counterpart in %s\n", missing, len(seed), args[1])
		os.Exit(1)
	}
	if *goldenPath != "" {
		run, err := lines(args[1])
		if err != nil {
			fail(err)
		}
		if err := checkGolden(*goldenPath, seed, run, *update); err != nil {
			fail(err)
		}
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
