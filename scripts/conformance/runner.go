package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// runner is one run's configuration.
type runner struct {
	roots    []caseRoot
	bin      string // absolute
	binName  string // --bin as the messages name it
	work     string // absolute
	jobs     int
	filter   *regexp.Regexp // nil: every case
	arch     string         // "" when not given
	tiles    int            // 0 when not given
	downcast bool           // ipu-plan --downcast-fp64
	timeout  time.Duration
}

// caseRoot is a directory of cases, in either layout of the ONNX backend
// tests: ROOT/FOLDER/CASE (the conformance data) or ROOT/CASE (the model
// cases).
type caseRoot struct {
	Dir   string // absolute
	Given string // as the command line or the default names it, for messages
	// Label names the root in case names: the directory's base name, or
	// the name of a default root whichever directory stands for it.
	Label string
}

// testCase is a case folder, named Folder/Name in the output.
type testCase struct {
	// Folder groups the case in the summary: FOLDER for a ROOT/FOLDER/CASE
	// root when it is the only one, LABEL/FOLDER when there are several,
	// LABEL for a ROOT/CASE root.
	Folder, Name string
	Dir          string   // absolute
	DataSets     []string // the test_data_set_N folders, by N
}

// id is the case's name in the output and for --run.
func (c testCase) id() string { return c.Folder + "/" + c.Name }

// dataSetName matches the folders of data the ONNX backend layout gives a
// case.
var dataSetName = regexp.MustCompile(`^test_data_set_(\d+)$`)

// discover lists the cases under the roots that the filter selects,
// sorted by folder then case. A directory directly under a root is a
// case when it holds model.onnx or a test_data_set_N folder, and
// otherwise a folder whose every directory is a case; files and hidden
// entries are skipped.
func discover(roots []caseRoot, filter *regexp.Regexp) ([]testCase, error) {
	several := len(roots) > 1
	var cases []testCase
	add := func(folder, name, dir string) error {
		c := testCase{Folder: folder, Name: name, Dir: dir}
		if filter != nil && !filter.MatchString(c.id()) {
			return nil
		}
		var err error
		if c.DataSets, err = dataSets(c.Dir); err != nil {
			return err
		}
		cases = append(cases, c)
		return nil
	}
	for _, root := range roots {
		entries, err := subdirs(root.Dir)
		if err != nil {
			return nil, fmt.Errorf("case root: %w", err)
		}
		for _, e := range entries {
			dir := filepath.Join(root.Dir, e)
			if isCase(dir) {
				if err := add(root.Label, e, dir); err != nil {
					return nil, err
				}
				continue
			}
			folder := e
			if several {
				folder = root.Label + "/" + e
			}
			names, err := subdirs(dir)
			if err != nil {
				return nil, fmt.Errorf("case root %s: %w", root.Given, err)
			}
			for _, name := range names {
				if err := add(folder, name, filepath.Join(dir, name)); err != nil {
					return nil, err
				}
			}
		}
	}
	slices.SortStableFunc(cases, func(a, b testCase) int {
		return cmp.Or(strings.Compare(a.Folder, b.Folder), strings.Compare(a.Name, b.Name))
	})
	for i := 1; i < len(cases); i++ {
		if cases[i].id() == cases[i-1].id() {
			return nil, fmt.Errorf("two cases named %s: %s and %s", cases[i].id(), cases[i-1].Dir, cases[i].Dir)
		}
	}
	return cases, nil
}

// subdirs returns the names of the directories in dir that are not
// hidden, sorted.
func subdirs(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// isCase reports whether dir looks like a case rather than a folder of
// cases: it holds model.onnx or a test_data_set_N directory.
func isCase(dir string) bool {
	if _, err := os.Stat(filepath.Join(dir, "model.onnx")); err == nil {
		return true
	}
	sets, err := dataSets(dir)
	return err == nil && len(sets) > 0
}

// dataSets returns the test_data_set_N folders of a case in order of N.
func dataSets(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("case %s: %w", filepath.Base(dir), err)
	}
	type set struct {
		n    int
		name string
	}
	var sets []set
	for _, e := range entries {
		m := dataSetName.FindStringSubmatch(e.Name())
		if m == nil || !e.IsDir() {
			continue
		}
		n, err := strconv.Atoi(m[1])
		if err != nil {
			continue // more digits than an int holds: not a data set of ours
		}
		sets = append(sets, set{n, e.Name()})
	}
	slices.SortFunc(sets, func(a, b set) int { return a.n - b.n })
	names := make([]string, len(sets))
	for i, s := range sets {
		names[i] = s.name
	}
	return names, nil
}

// runAll runs the cases on r.jobs workers and calls emit with each result
// in the order of cases, as soon as it and every earlier one are known.
func (r *runner) runAll(ctx context.Context, cases []testCase, emit func(Result)) []Result {
	done := make([]chan Result, len(cases))
	for i := range done {
		done[i] = make(chan Result, 1)
	}
	next := make(chan int)
	var wg sync.WaitGroup
	for range max(1, min(r.jobs, len(cases))) {
		wg.Go(func() {
			for i := range next {
				done[i] <- r.runCaseSafe(ctx, cases[i])
			}
		})
	}
	go func() {
		for i := range cases {
			next <- i
		}
		close(next)
	}()
	results := make([]Result, len(cases))
	for i := range cases {
		results[i] = <-done[i]
		emit(results[i])
	}
	wg.Wait()
	return results
}

// runCaseSafe is runCase, turning a panic into the case's FAIL so that
// one broken case never takes the run down.
func (r *runner) runCaseSafe(ctx context.Context, c testCase) (res Result) {
	defer func() {
		if p := recover(); p != nil {
			res = Result{Folder: c.Folder, Case: c.Name, Status: Fail,
				Detail: "conformance: internal error: " + oneLine(fmt.Sprint(p))}
		}
	}()
	return r.runCase(ctx, c)
}

// runCase compiles, loads and checks one case in its work directory
// WORK/folder/case, stopping at the first tool that fails.
func (r *runner) runCase(ctx context.Context, c testCase) Result {
	res := Result{Folder: c.Folder, Case: c.Name}
	fail := func(f failure) Result {
		res.Status, res.Detail = classify(f)
		return res
	}
	model := filepath.Join(c.Dir, "model.onnx")
	if _, err := os.Stat(model); err != nil {
		return fail(failure{Tool: "conformance", Exit: -1, Reason: "no model.onnx in the case"})
	}
	if len(c.DataSets) == 0 {
		return fail(failure{Tool: "conformance", Exit: -1, Reason: "no test_data_set_N folder in the case"})
	}
	w := filepath.Join(r.work, filepath.FromSlash(c.Folder), c.Name)
	if err := os.RemoveAll(w); err != nil {
		return fail(failure{Tool: "conformance", Exit: -1, Reason: "work dir: " + r.clean(err.Error(), c, w)})
	}
	if err := os.MkdirAll(w, 0o755); err != nil {
		return fail(failure{Tool: "conformance", Exit: -1, Reason: "work dir: " + r.clean(err.Error(), c, w)})
	}

	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()

	// The tools run in w and name their outputs relative to it, so that
	// their messages do not depend on where the work dir is.
	plan := []string{model, "-o", "model.plan"}
	if r.arch != "" {
		plan = append(plan, "--arch", r.arch)
	}
	if r.downcast {
		plan = append(plan, "--downcast-fp64")
	}
	if r.tiles != 0 {
		plan = append(plan, "--tiles", strconv.Itoa(r.tiles))
	}
	if len(c.DataSets) > 0 {
		// Compiled for the data's shapes: an exporter's symbolic
		// dimensions (dynamic axes) are bound by them.
		plan = append(plan, "--input-shapes", filepath.Join(c.Dir, c.DataSets[0]))
	}
	steps := []struct {
		tool string
		args []string
	}{
		{toolPlan, plan},
		{toolLink, []string{"model.plan", "-o", "model.ipuobj"}},
		{toolPack, []string{"model.ipuobj", "-o", "model.ipuexe"}},
		{toolLoad, []string{"--device", "ipu0", "model.ipuexe"}},
	}
	for _, s := range steps {
		if f, ok := r.exec(ctx, c, w, s.tool, s.args); !ok {
			return fail(f)
		}
	}
	for _, set := range c.DataSets {
		args := []string{"--device", "ipu0", "--data", filepath.Join(c.Dir, set), "model.ipuexe"}
		f, ok := r.exec(ctx, c, w, toolCheck, args)
		if ok && !passed(f.Stdout) {
			// Exit 0 without the verdicts would be a broken contract, not
			// a pass.
			f.Reason, ok = "exit status 0 without numericalTest=PASS and hardwareTest=PASS", false
		}
		if !ok {
			if len(c.DataSets) > 1 || set != "test_data_set_0" {
				f.Where = set
			}
			return fail(f)
		}
	}
	res.Status = Pass
	return res
}

// passed reports whether ipu-check's stdout holds passing verdicts and no
// failing one.
func passed(stdout string) bool {
	return strings.Contains(stdout, "numericalTest=PASS") && strings.Contains(stdout, "hardwareTest=PASS") &&
		!strings.Contains(stdout, "=FAIL")
}

// capLimit bounds the output kept of one tool run; the end is kept, as
// the error line and the verdicts come last.
const capLimit = 1 << 20

// exec runs bin/tool with args in dir, for case c. It returns ok when the
// tool exited 0, and otherwise what it left behind.
func (r *runner) exec(ctx context.Context, c testCase, dir, tool string, args []string) (failure, bool) {
	f := failure{Tool: tool, Exit: -1}
	path := filepath.Join(r.bin, tool)
	if st, err := os.Stat(path); err != nil || st.IsDir() {
		if err == nil || errors.Is(err, fs.ErrNotExist) {
			f.Reason = "not found in " + r.binName + "/"
		} else {
			f.Reason = r.clean(err.Error(), c, dir)
		}
		return f, false
	}
	if ctx.Err() != nil {
		f.Reason = r.ctxReason(ctx)
		return f, false
	}
	var stdout, stderr tailBuffer
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Dir = dir
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	// A tool's child holding the pipes open must not hang the run.
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	f.Stdout = r.clean(stdout.String(), c, dir)
	f.Stderr = r.clean(stderr.String(), c, dir)
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		f.Reason = r.ctxReason(ctx)
	case errors.As(err, &exit):
		f.Exit = exit.ExitCode()
		if f.Exit < 0 {
			f.Reason = oneLine(exit.String()) // killed by a signal
		}
	case err != nil:
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // without the binary's absolute path
		}
		f.Reason = "run: " + oneLine(err.Error())
	default:
		f.Exit = 0
		return f, true
	}
	return f, false
}

// ctxReason says why ctx ended: the case's timeout or an interrupt.
func (r *runner) ctxReason(ctx context.Context) string {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return "timeout after " + r.timeout.String()
	}
	return "interrupted"
}

// clean removes dir (the case's work directory) and the work directory
// from a tool's output, and names the case's directory by the case's
// name: the messages then name artifacts relative to the work directory
// and the case's files as NAME/model.onnx, the same from run to run.
func (r *runner) clean(s string, c testCase, dir string) string {
	sep := string(filepath.Separator)
	s = strings.ReplaceAll(s, dir+sep, "")
	s = strings.ReplaceAll(s, r.work+sep, "")
	return strings.ReplaceAll(s, c.Dir+sep, c.id()+"/")
}

// tailBuffer keeps the last capLimit bytes written to it.
type tailBuffer struct {
	buf     bytes.Buffer
	dropped bool
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	n := len(p)
	if len(p) > capLimit {
		p = p[len(p)-capLimit:]
		t.buf.Reset()
		t.dropped = true
	}
	if over := t.buf.Len() + len(p) - capLimit; over > 0 {
		t.buf.Next(over)
		t.dropped = true
	}
	t.buf.Write(p)
	return n, nil
}

// String returns the kept bytes, starting at a line boundary when the
// beginning was dropped.
func (t *tailBuffer) String() string {
	s := t.buf.String()
	if t.dropped {
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			s = s[i+1:]
		}
	}
	return s
}
