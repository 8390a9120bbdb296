// Command conformance compiles and checks every case of the conformance
// data and the model cases (ONNX backend test layout: CASE/model.onnx and
// CASE/test_data_set_N/) through the real pipeline, with the tool
// binaries of --bin:
//
//	ipu-plan  CASE/model.onnx -o W/model.plan [--arch A] [--tiles N]
//	ipu-link  W/model.plan -o W/model.ipuobj
//	ipu-pack  W/model.ipuobj -o W/model.ipuexe
//	ipu-load  --device W/ipu0 W/model.ipuexe
//	ipu-check --device W/ipu0 --data CASE/test_data_set_N W/model.ipuexe   (each N)
//
// Usage (from the repository, as `make conformance` runs it):
//
//	go run ./scripts/conformance [--root DIR]... [--bin DIR] [--work DIR] [--keep]
//	    [-j N] [--run REGEXP] [--arch NAME] [--tiles N] [--downcast-fp64] [--timeout DUR]
//
// --root names a directory of cases; it may be given more than once, or
// as a comma-separated list. A root holds cases either in folders,
// ROOT/FOLDER/CASE (the conformance data: ort/attention), or directly,
// ROOT/CASE (the model cases: bert_layer); a directory directly under a
// root is a case when it holds model.onnx or a test_data_set_N folder.
// Without --root the roots are those of these that exist, relative to the
// repository root (the directory of go.work, found from the working
// directory upwards):
//
//	conformance  ../shared/conformance, or else testdata/conformance (its
//	             committed copy)
//	models       ../shared/models, or else testdata/models/shared (the
//	             committed copies of its transformer cases)
//
// A case is named FOLDER/CASE when its root is the only one and has
// folders, and LABEL/FOLDER/CASE or LABEL/CASE otherwise, LABEL being the
// root's name above or, for --root, the directory's base name (roots must
// then have different base names): with the defaults, conformance/ort/attention
// and models/bert_layer. --run selects the cases whose name the
// expression matches (`--run models/bert_`).
//
// --bin defaults to bin in the repository root. W is WORK/NAME; WORK is
// a fresh temporary directory removed at the end unless --keep, or --work
// (kept). -j cases run at once (default: the host's CPUs), each within
// --timeout (default 5m).
//
// Each case is classified by the first rule that matches:
//
//	UNSUPPORTED X     ipu-plan refused the model for something outside the
//	                  supported set (`unsupported operator X (node "n")`,
//	                  an element type, a Cast target, an attribute; see
//	                  refusals in classify.go); X names it
//	NOT-LOWERED MSG   ipu-link failed with `... is not lowered`
//	FAIL TOOL: MSG    any other failure (a tool's error line, ipu-check's
//	                  FAIL verdicts, a missing tool, the timeout)
//	PASS              every tool succeeded on every data set
//
// The output is one line per case, sorted by the name's folder part then
// the case and printed in that order as the results come in, then a
// summary line per folder part (LABEL for a ROOT/CASE root) and one for
// all the cases:
//
//	UNSUPPORTED conformance/onnx-pytorch/test_ELU: Elu
//	PASS        conformance/ort/attention
//	PASS        models/bert_layer
//	...
//	conformance/ort: 9 cases: 9 pass, 0 fail, 0 unsupported, 0 not lowered; pass rate 100.0% (9/9 supported)
//	...
//
// The pass rate is over the supported cases (every case but the
// unsupported ones); NOT-LOWERED counts against it. The output has no
// times or absolute paths: the same tools and data give the same text.
//
// Exit status: 0 when every supported case passes (no FAIL, no
// NOT-LOWERED: the operators of a NOT-LOWERED case are in the supported
// list), 1 otherwise or when the run cannot start, 2 on a usage error.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"time"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// usageError is a command-line mistake: exit status 2.
type usageError struct{ error }

// run is the command with args (without the program name); it returns
// the exit status.
func run(args []string, stdout, stderr io.Writer) (status int) {
	defer func() {
		if p := recover(); p != nil {
			fmt.Fprintf(stderr, "conformance: internal error: %s\n", oneLine(fmt.Sprint(p)))
			status = 1
		}
	}()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	fail, err := conformance(ctx, args, stdout, stderr)
	var usage usageError
	switch {
	case errors.As(err, &usage):
		fmt.Fprintf(stderr, "conformance: %s (run conformance -h)\n", oneLine(err.Error()))
		return 2
	case errors.Is(err, flag.ErrHelp):
		return 0
	case err != nil:
		fmt.Fprintf(stderr, "conformance: %s\n", oneLine(err.Error()))
		return 1
	case fail:
		return 1
	}
	return 0
}

// conformance parses the flags, runs the selected cases and prints their
// results; fail reports whether a case FAILed.
func conformance(ctx context.Context, args []string, stdout, stderr io.Writer) (fail bool, err error) {
	fs := flag.NewFlagSet("conformance", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var roots rootList
	fs.Var(&roots, "root", "case root `DIR` (repeatable, or a comma-separated list; default ../shared/conformance and ../shared/models, or testdata/conformance and testdata/models/shared without them, from the repository root)")
	bin := fs.String("bin", "", "tool binaries `DIR` (default bin in the repository root)")
	work := fs.String("work", "", "work `DIR`, kept (default a temporary directory)")
	keep := fs.Bool("keep", false, "keep the temporary work directory")
	jobs := fs.Int("j", runtime.NumCPU(), "`N` cases at once")
	filter := fs.String("run", "", "only the cases whose name (FOLDER/CASE, LABEL/...) matches `REGEXP`")
	arch := fs.String("arch", "", "architecture preset `NAME` for ipu-plan")
	tiles := fs.Int("tiles", 0, "plan over `N` tiles (ipu-plan --tiles)")
	downcast := fs.Bool("downcast-fp64", false, "compute DOUBLE tensors in FP32 (ipu-plan --downcast-fp64)")
	timeout := fs.Duration("timeout", 5*time.Minute, "time allowed to each case")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return false, err
		}
		return false, usageError{err}
	}
	if fs.NArg() != 0 {
		return false, usageError{fmt.Errorf("unexpected argument %q", fs.Arg(0))}
	}
	if *jobs < 1 {
		return false, usageError{fmt.Errorf("-j %d: want at least 1", *jobs)}
	}
	if *tiles < 0 {
		return false, usageError{fmt.Errorf("--tiles %d is negative", *tiles)}
	}
	if *timeout <= 0 {
		return false, usageError{fmt.Errorf("--timeout %v: want a positive duration", *timeout)}
	}
	r := &runner{jobs: *jobs, arch: *arch, tiles: *tiles, downcast: *downcast, timeout: *timeout, binName: *bin}
	if *filter != "" {
		if r.filter, err = regexp.Compile(*filter); err != nil {
			return false, usageError{fmt.Errorf("--run: %w", err)}
		}
	}

	if len(roots) == 0 || *bin == "" {
		repo, err := repoRoot()
		if err != nil {
			return false, err
		}
		if len(roots) == 0 {
			if r.roots, err = defaultRoots(repo); err != nil {
				return false, err
			}
		}
		if *bin == "" {
			*bin, r.binName = filepath.Join(repo, "bin"), "bin"
		}
	}
	if len(roots) > 0 {
		if r.roots, err = givenRoots(roots); err != nil {
			return false, err
		}
	}
	if r.bin, err = filepath.Abs(*bin); err != nil {
		return false, err
	}

	cases, err := discover(r.roots, r.filter)
	if err != nil {
		return false, err
	}
	if len(cases) == 0 {
		var given []string
		for _, root := range r.roots {
			given = append(given, root.Given)
		}
		under := strings.Join(given, ", ")
		if r.filter != nil {
			return false, fmt.Errorf("no case under %s matches --run %q", under, *filter)
		}
		return false, fmt.Errorf("no case under %s", under)
	}

	if *work != "" {
		r.work, err = filepath.Abs(*work)
		if err == nil {
			err = os.MkdirAll(r.work, 0o755)
		}
	} else {
		r.work, err = os.MkdirTemp("", "conformance-")
		if err == nil {
			defer func() {
				if *keep {
					fmt.Fprintf(stderr, "conformance: work directory kept: %s\n", r.work)
					return
				}
				if rmErr := os.RemoveAll(r.work); rmErr != nil && err == nil {
					err = fmt.Errorf("remove work directory: %w", rmErr)
				}
			}()
		}
	}
	if err != nil {
		return false, fmt.Errorf("work directory: %w", err)
	}

	results := r.runAll(ctx, cases, func(res Result) { fmt.Fprintln(stdout, res.Line()) })
	for _, l := range summaries(results) {
		fmt.Fprintln(stdout, l)
	}
	for _, res := range results {
		if res.Status == Fail || res.Status == NotLowered {
			fail = true
		}
	}
	return fail, nil
}

// rootList is the --root flag: directories, from repeated flags and
// comma-separated lists, in order.
type rootList []string

func (l *rootList) String() string { return strings.Join(*l, ",") }

func (l *rootList) Set(s string) error {
	for dir := range strings.SplitSeq(s, ",") {
		if dir = strings.TrimSpace(dir); dir == "" {
			return errors.New("empty directory")
		}
		*l = append(*l, dir)
	}
	return nil
}

// givenRoots returns the roots of the command line, labelled by their base
// names, which must differ when there are several.
func givenRoots(dirs []string) ([]caseRoot, error) {
	roots := make([]caseRoot, len(dirs))
	seen := map[string]string{}
	for i, d := range dirs {
		abs, err := filepath.Abs(d)
		if err != nil {
			return nil, err
		}
		label := filepath.Base(abs)
		if prev, ok := seen[label]; ok {
			return nil, usageError{fmt.Errorf("--root %s and %s: two roots named %s", prev, d, label)}
		}
		seen[label] = d
		roots[i] = caseRoot{Dir: abs, Given: d, Label: label}
	}
	return roots, nil
}

// defaultRoots returns the roots used without --root, those that exist:
// the conformance data beside the repository, and its model cases or, on
// a clone without them, the committed copies of the transformer cases
// (named models all the same, so that --run models/ selects them).
func defaultRoots(repo string) ([]caseRoot, error) {
	candidates := []struct {
		label string
		rels  []string // the first that exists
	}{
		{"conformance", []string{filepath.Join("..", "shared", "conformance"), filepath.Join("testdata", "conformance")}},
		{"models", []string{filepath.Join("..", "shared", "models"), filepath.Join("testdata", "models", "shared")}},
	}
	var roots []caseRoot
	var tried []string
	for _, c := range candidates {
		for _, rel := range c.rels {
			tried = append(tried, rel)
			dir := filepath.Join(repo, rel)
			if st, err := os.Stat(dir); err == nil && st.IsDir() {
				roots = append(roots, caseRoot{Dir: dir, Given: rel, Label: c.label})
				break
			}
		}
	}
	if len(roots) == 0 {
		return nil, fmt.Errorf("no case root: none of %s exists in the repository (give --root)", strings.Join(tried, ", "))
	}
	return roots, nil
}

// repoRoot returns the repository root: the nearest directory holding
// go.work, from the working directory up.
func repoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find the repository root: %w", err)
	}
	for dir := wd; ; {
		if st, err := os.Stat(filepath.Join(dir, "go.work")); err == nil && !st.IsDir() {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("find the repository root: no go.work in %s or above (give --root and --bin)", wd)
		}
		dir = parent
	}
}
