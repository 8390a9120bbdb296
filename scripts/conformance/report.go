package main

import (
	"fmt"
	"strings"
)

// Result is the outcome of one case.
type Result struct {
	Folder string // the case's name but its last element ("ort", "conformance/ort", "models")
	Case   string // the case's directory ("attention")
	Status Status
	Detail string // what failed, is unsupported or not lowered; "" for PASS
}

// Name is the case as the output names it: Folder/Case.
func (r Result) Name() string { return r.Folder + "/" + r.Case }

// Line is the result's output line: the status in a column wide enough
// for the longest one, the case, and the detail.
func (r Result) Line() string {
	line := fmt.Sprintf("%-11s %s", r.Status.label(), r.Name())
	if r.Detail != "" {
		line += ": " + r.Detail
	}
	return line
}

// Tally counts results by status.
type Tally struct {
	Cases, Pass, Fail, Unsupported, NotLowered int
}

// Add counts r.
func (t *Tally) Add(r Result) {
	t.Cases++
	switch r.Status {
	case Pass:
		t.Pass++
	case Unsupported:
		t.Unsupported++
	case NotLowered:
		t.NotLowered++
	default:
		t.Fail++
	}
}

// Supported is the cases the planner accepted: every case but the
// unsupported ones. The pass rate is over these.
func (t Tally) Supported() int { return t.Cases - t.Unsupported }

// Summary is the tally's line, headed by name:
//
//	ort: 9 cases: 9 pass, 0 fail, 0 unsupported, 0 not lowered; pass rate 100.0% (9/9 supported)
func (t Tally) Summary(name string) string {
	rate := "n/a"
	if s := t.Supported(); s > 0 {
		rate = fmt.Sprintf("%.1f%%", 100*float64(t.Pass)/float64(s))
	}
	return fmt.Sprintf("%s: %d cases: %d pass, %d fail, %d unsupported, %d not lowered; pass rate %s (%d/%d supported)",
		name, t.Cases, t.Pass, t.Fail, t.Unsupported, t.NotLowered, rate, t.Pass, t.Supported())
}

// summaries returns a summary line per folder, in the order the folders
// first appear in results (sorted), and the overall line, headed "total".
func summaries(results []Result) []string {
	var (
		order   []string
		folders = map[string]*Tally{}
		total   Tally
	)
	for _, r := range results {
		t := folders[r.Folder]
		if t == nil {
			t = &Tally{}
			folders[r.Folder] = t
			order = append(order, r.Folder)
		}
		t.Add(r)
		total.Add(r)
	}
	lines := make([]string, 0, len(order)+1)
	for _, f := range order {
		lines = append(lines, folders[f].Summary(f))
	}
	return append(lines, total.Summary("total"))
}

// oneLine makes s fit on one output line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
