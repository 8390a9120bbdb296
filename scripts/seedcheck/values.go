package main

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// A logged line: its seed key and its fields in order.
type line struct {
	key    string
	fields [][2]string // name, value
}

var pair = regexp.MustCompile(`(?:^| )([A-Za-z_][A-Za-z0-9_]*)=("(?:[^"\\]|\\.)*"|\[[^\]]*\]|\S*)`)

// lines returns the lines of path that have a key, with their fields.
func lines(path string) ([]line, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []line
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		text := sc.Text()
		k, ok := key(text)
		if !ok {
			continue
		}
		rest := text
		if m := stamped.FindStringSubmatch(text); m != nil {
			rest = m[1]
			if i := strings.LastIndex(rest, "}: "); i >= 0 && spanPath.MatchString(rest[:i+1]) {
				rest = rest[i+3:]
			}
		}
		l := line{key: k}
		for _, m := range pair.FindAllStringSubmatch(rest, -1) {
			l.fields = append(l.fields, [2]string{m[1], m[2]})
		}
		out = append(out, l)
	}
	return out, sc.Err()
}

// wallClock reports whether a field's value depends on the host rather
// than on the work: wall times and the host's thread count.
func wallClock(name string) bool {
	return strings.HasSuffix(name, "_ms") || name == "threads"
}

// golden is the values of every line of run whose key is a seed key, in
// the run's order, wall-clock fields masked: the text a golden file holds.
func golden(seed []string, run []line) string {
	want := map[string]bool{}
	for _, k := range seed {
		want[k] = true
	}
	var b strings.Builder
	for _, l := range run {
		if !want[l.key] {
			continue
		}
		msg, _, _ := strings.Cut(l.key, " | ")
		b.WriteString(msg)
		for _, f := range l.fields {
			v := f[1]
			if wallClock(f[0]) {
				v = "*"
			}
			fmt.Fprintf(&b, " %s=%s", f[0], v)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// checkGolden compares the run's values with the golden file (update:
// rewrites it) and returns the first differing lines.
func checkGolden(path string, seed []string, run []line, update bool) error {
	got := golden(seed, run)
	if update {
		return os.WriteFile(path, []byte(got), 0o644)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	want := string(data)
	if got == want {
		return nil
	}
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < max(len(g), len(w)); i++ {
		var gi, wi string
		if i < len(g) {
			gi = g[i]
		}
		if i < len(w) {
			wi = w[i]
		}
		if gi != wi {
			return fmt.Errorf("%s line %d differs:\n  golden: %s\n  run:    %s\n(a deliberate change: go run ./scripts/seedcheck -golden %s -update SEED RUN.log)", path, i+1, wi, gi, path)
		}
	}
	return nil
}

// machineFields are the fields that are one value in every run by their
// nature, with the reason: a property of the machine or of a format, not
// of the model.
var machineFields = map[string]string{
	"referenceInference":                "the number of the first inference",
	"application package read|tiles":    "a package images every tile of the device",
	"writing application package|tiles": "a package images every tile of the device",
	"|tiles":                            "the profile and the verdict name the device's tiles",
	"loading application|tile_count":    "the device's tiles",
	"application loaded and initial synchronization completed|tile_count": "the device's tiles",
	"loading application|final_mark":                                      "the simulator's sync mark after the startup program, which every package's runtime ends at its first host sync",
	"starting host exchange session|startup_mark":                         "the same mark, read back from the device's saved state",
	"screened exchange table geometry|fragment_limit":                     "the capacity of the exchange table format",
}

// exempt returns the reason a field may be one value in every run.
func exempt(msg, name string) (string, bool) {
	if r, ok := machineFields[name]; ok {
		return r, true
	}
	r, ok := machineFields[msg+"|"+name]
	return r, ok
}

// constants returns the fields that the seed shows non-zero and that have
// one and the same value in every run (each run's first line of the key):
// a value that does not follow the model is a label, not a measurement.
func constants(seed []line, runs [][]line) []string {
	first := func(ls []line) map[string]map[string]string {
		m := map[string]map[string]string{}
		for _, l := range ls {
			if m[l.key] != nil {
				continue
			}
			m[l.key] = map[string]string{}
			for _, f := range l.fields {
				m[l.key][f[0]] = f[1]
			}
		}
		return m
	}
	s := first(seed)
	var rs []map[string]map[string]string
	for _, r := range runs {
		rs = append(rs, first(r))
	}
	var out []string
	for k, fields := range s {
		for name, v := range fields {
			msg, _, _ := strings.Cut(k, " | ")
			if x, err := strconv.ParseFloat(v, 64); err != nil || x == 0 || wallClock(name) {
				continue
			}
			if _, ok := exempt(msg, name); ok {
				continue
			}
			same, seen := true, ""
			for i, r := range rs {
				got, ok := r[k][name]
				if !ok {
					same = false
					break
				}
				if i == 0 {
					seen = got
				} else if got != seen {
					same = false
				}
			}
			if same {
				out = append(out, fmt.Sprintf("%q %s=%s in every run", msg, name, seen))
			}
		}
	}
	sort.Strings(out)
	return out
}
