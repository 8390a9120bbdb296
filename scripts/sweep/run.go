package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The pipeline's tools, in the order a configuration runs them.
var pipelineTools = []string{"ipu-plan", "ipu-link", "ipu-pack", "ipu-load", "ipu-check"}

// Result is one configuration's outcome, kept in DIR/<id>/result.json.
type Result struct {
	ID          string `json:"id"`
	Model       string `json:"model"`
	Options     string `json:"options"`
	FinalCycles int64  `json:"final_cycles"` // 0: not known
	// HostLinkCycles is the host link's cycles for the inputs and
	// outputs (the plan's and ipu-link's host_link_cycles; 0: not known).
	HostLinkCycles int64   `json:"host_link_cycles,omitempty"`
	ComputeBound   int64   `json:"compute_bound"` // 0: not known
	Estimate       int64   `json:"estimate"`      // 0: not known
	PlanSeconds    float64 `json:"plan_seconds"`
	LinkSeconds    float64 `json:"link_seconds"`
	Verdict        string  `json:"verdict"` // PASS, FAIL or ERROR
	Error          string  `json:"error,omitempty"`
	// Key fingerprints the configuration's inputs: the result stands
	// for a re-run while it is unchanged.
	Key string `json:"key"`
}

// engine runs configurations on this host.
type engine struct {
	out         string // absolute
	bin         string // absolute
	jobs        int
	toolsFP     string
	device      string // "": DIR/devices/ipuN, worker N's own
	lockTimeout time.Duration
	timeout     time.Duration
	log         io.Writer // progress lines
}

// toolsFingerprint hashes the pipeline's binaries in bin.
func toolsFingerprint(bin string) (string, error) {
	h := sha256.New()
	for _, t := range pipelineTools {
		b, err := os.ReadFile(filepath.Join(bin, t))
		if err != nil {
			return "", fmt.Errorf("tools: %s", pathErr(err))
		}
		sum := sha256.Sum256(b)
		fmt.Fprintf(h, "%s %x\n", t, sum)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// key is the fingerprint of a configuration's inputs: its id (model,
// data set and options), the tools and what the driver adds to their
// command lines.
func (e *engine) key(c Config) string {
	h := sha256.New()
	fmt.Fprintf(h, "id %s\ntools %s\ndriver v2\n", c.ID, e.toolsFP)
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// done returns the recorded result of c when its key still matches.
func (e *engine) done(c Config) (Result, bool) {
	b, err := os.ReadFile(filepath.Join(e.out, c.ID, "result.json"))
	if err != nil {
		return Result{}, false
	}
	var r Result
	if json.Unmarshal(b, &r) != nil || r.Key != e.key(c) || r.ID != c.ID {
		return Result{}, false
	}
	return r, true
}

// recorded returns the recorded results, a configuration without one
// as an ERROR "not run".
func (e *engine) recorded(configs []Config) []Result {
	results := make([]Result, len(configs))
	for i, c := range configs {
		r, ok := e.done(c)
		if !ok {
			r = e.base(c)
			r.Verdict, r.Error = "ERROR", "sweep: not run"
		}
		results[i] = r
	}
	return results
}

// runAll runs the configurations that are not done on e.jobs workers,
// each worker with its own device DIR/devices/ipuN. It returns the
// results in the order of configs, and whether the run was interrupted.
func (e *engine) runAll(ctx context.Context, configs []Config) ([]Result, bool) {
	results := make([]Result, len(configs))
	var todo []int
	for i, c := range configs {
		if r, ok := e.done(c); ok {
			results[i] = r
			continue
		}
		todo = append(todo, i)
	}
	fmt.Fprintf(e.log, "sweep: %d configurations, %d done before, %d to run on %d workers\n",
		len(configs), len(configs)-len(todo), len(todo), max(1, min(e.jobs, len(todo))))
	next := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	finished, interrupted := 0, false
	for w := range max(1, min(e.jobs, len(todo))) {
		device := e.device
		if device == "" {
			device = filepath.Join(e.out, "devices", "ipu"+strconv.Itoa(w))
		}
		wg.Go(func() {
			for i := range next {
				if ctx.Err() != nil {
					continue // interrupted: not started
				}
				r, ok := e.runSafe(ctx, configs[i], device)
				mu.Lock()
				results[i] = r
				finished++
				if !ok {
					interrupted = true
					fmt.Fprintf(e.log, "[%d/%d] %s interrupted (not recorded)\n", finished, len(todo), r.ID)
				} else {
					fmt.Fprintf(e.log, "[%d/%d] %s\n", finished, len(todo), summary(r))
				}
				mu.Unlock()
			}
		})
	}
dispatch:
	for _, i := range todo {
		select {
		case next <- i:
		case <-ctx.Done():
			break dispatch
		}
	}
	close(next)
	wg.Wait()
	return results, interrupted || ctx.Err() != nil
}

func summary(r Result) string {
	s := fmt.Sprintf("%s %s %s: %s", r.ID, r.Model, r.Options, r.Verdict)
	if r.FinalCycles > 0 {
		s += " final_cycles=" + strconv.FormatInt(r.FinalCycles, 10)
	}
	if r.Error != "" {
		s += " (" + r.Error + ")"
	}
	return s
}

// runSafe is run, turning a panic into the configuration's error. ok
// is false when the run was interrupted: nothing is recorded then.
func (e *engine) runSafe(ctx context.Context, c Config, device string) (r Result, ok bool) {
	defer func() {
		if p := recover(); p != nil {
			r = e.base(c)
			r.Verdict, r.Error = "ERROR", "sweep: internal error: "+oneLine(fmt.Sprint(p))
			ok = e.record(r) == nil
		}
	}()
	return e.run(ctx, c, device)
}

func (e *engine) base(c Config) Result {
	return Result{ID: c.ID, Model: c.Model, Options: c.Options, Key: e.key(c)}
}

var (
	finalRe    = regexp.MustCompile(`costed final placed program final_cycles=(\d+)`)
	estimateRe = regexp.MustCompile(`costed search incumbent estimated_cycles=(\d+)`)
	hostLinkRe = regexp.MustCompile(`costed host supersteps .*host_link_cycles=(\d+)`)
)

// run runs one configuration's pipeline in DIR/<id>/, its log in
// DIR/<id>/run.log, and records the result.
func (e *engine) run(ctx context.Context, c Config, device string) (Result, bool) {
	r := e.base(c)
	dir := filepath.Join(e.out, c.ID)
	parent := ctx
	fail := func(msg string) (Result, bool) {
		if parent.Err() != nil {
			return r, false
		}
		r.Verdict, r.Error = "ERROR", oneLine(msg)
		if err := e.record(r); err != nil {
			r.Error += "; " + oneLine(err.Error())
		}
		return r, true
	}
	if err := os.RemoveAll(dir); err != nil {
		return fail("sweep: " + pathErr(err))
	}
	if err := os.MkdirAll(filepath.Dir(device), 0o755); err != nil {
		return fail("sweep: " + pathErr(err))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fail("sweep: " + pathErr(err))
	}
	logf, err := os.Create(filepath.Join(dir, "run.log"))
	if err != nil {
		return fail("sweep: " + pathErr(err))
	}
	defer logf.Close()
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()

	lockTimeout := e.lockTimeout.String()
	plan := append([]string{c.modelPath, "-o", "model.plan"}, c.Args...)
	if c.Search != "" {
		plan = append(plan, "--state", "state.json") // the shard's, for the merge
	}
	check := []string{"--device", device, "--lock-timeout", lockTimeout}
	if c.dataPath != "" {
		check = append(check, "--data", c.dataPath)
	}
	check = append(check, "model.ipuexe")
	steps := []struct {
		tool string
		args []string
	}{
		{"ipu-plan", plan},
		{"ipu-link", []string{"model.plan", "-o", "model.ipuobj"}},
		{"ipu-pack", []string{"model.ipuobj", "-o", "model.ipuexe"}},
		{"ipu-load", []string{"--device", device, "--lock-timeout", lockTimeout, "model.ipuexe"}},
		{"ipu-check", check},
	}
	var pair *pairLock
	defer func() { pair.release() }()
	for _, s := range steps {
		if s.tool == "ipu-load" {
			var err error
			if pair, err = acquirePair(ctx, device, e.lockTimeout); err != nil {
				if parent.Err() != nil {
					return r, false
				}
				return fail(err.Error())
			}
		}
		start := time.Now()
		stdout, stderr, err := e.exec(ctx, dir, logf, s.tool, s.args)
		elapsed := time.Since(start).Seconds()
		switch s.tool {
		case "ipu-plan":
			r.PlanSeconds = elapsed
			if m := estimateRe.FindStringSubmatch(stderr); m != nil {
				r.Estimate, _ = strconv.ParseInt(m[1], 10, 64)
			}
			if err == nil {
				r.ComputeBound, r.FinalCycles, r.HostLinkCycles = planCost(filepath.Join(dir, "model.plan"))
			}
		case "ipu-link":
			r.LinkSeconds = elapsed
			if m := finalRe.FindStringSubmatch(stderr); m != nil {
				r.FinalCycles, _ = strconv.ParseInt(m[1], 10, 64)
			}
			if m := hostLinkRe.FindStringSubmatch(stderr); m != nil {
				r.HostLinkCycles, _ = strconv.ParseInt(m[1], 10, 64)
			}
		case "ipu-check":
			if err == nil || strings.Contains(stdout, "numericalTest=") {
				r.Verdict = "FAIL"
				if passed(stdout) {
					r.Verdict = "PASS"
				}
			}
		}
		if err != nil {
			if parent.Err() != nil {
				return r, false
			}
			if ctx.Err() != nil {
				return fail(s.tool + ": timeout after " + e.timeout.String())
			}
			msg := toolError(s.tool, stderr, err)
			if r.Verdict == "FAIL" {
				r.Error = oneLine(msg)
				if rerr := e.record(r); rerr != nil {
					r.Error += "; " + oneLine(rerr.Error())
				}
				return r, true
			}
			return fail(msg)
		}
	}
	if r.Verdict == "" {
		return fail("ipu-check: exit status 0 without numericalTest and hardwareTest verdicts")
	}
	if r.Verdict == "FAIL" {
		r.Error = "ipu-check: exit status 0 with a FAIL verdict"
	}
	if err := e.record(r); err != nil {
		r.Verdict, r.Error = "ERROR", oneLine(err.Error())
	}
	return r, true
}

// record writes r to DIR/<id>/result.json, atomically: a killed sweep
// leaves a configuration either recorded or not.
func (e *engine) record(r Result) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return writeAtomic(filepath.Join(e.out, r.ID, "result.json"), append(b, '\n'))
}

// exec runs bin/tool with args in dir, appending its command line and
// output to the log; it returns the tool's stdout and stderr.
func (e *engine) exec(ctx context.Context, dir string, logf io.Writer, tool string, args []string) (string, string, error) {
	fmt.Fprintf(logf, "$ %s %s\n", tool, strings.Join(args, " "))
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, filepath.Join(e.bin, tool), args...)
	cmd.Dir = dir
	cmd.Stdout = io.MultiWriter(&stdout, logf)
	cmd.Stderr = io.MultiWriter(&stderr, logf)
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	if err != nil {
		fmt.Fprintf(logf, "# %s: %s\n", tool, oneLine(err.Error()))
	}
	return stdout.String(), stderr.String(), err
}

// toolError is the one line that says why a tool failed: its last
// error line ("ipu-plan: ..."), else its last line, else its exit.
func toolError(tool, stderr string, err error) string {
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(lines[i], tool+": ") {
			return oneLine(lines[i])
		}
	}
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			return tool + ": " + oneLine(l)
		}
	}
	var pe *os.PathError
	if errors.As(err, &pe) {
		return tool + ": " + pe.Err.Error()
	}
	return tool + ": " + oneLine(err.Error())
}

// passed reports whether ipu-check's stdout holds passing verdicts and
// no failing one.
func passed(stdout string) bool {
	return strings.Contains(stdout, "numericalTest=PASS") && strings.Contains(stdout, "hardwareTest=PASS") &&
		!strings.Contains(stdout, "=FAIL")
}

// planCost reads the plan's cost section: its compute bound and
// final_cycles (0 when not there).
func planCost(path string) (bound, final, host int64) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, 0
	}
	var p struct {
		Cost struct {
			FinalCycles    int64 `json:"final_cycles"`
			ComputeBound   int64 `json:"compute_bound"`
			HostLinkCycles int64 `json:"host_link_cycles"`
		} `json:"cost"`
	}
	if json.Unmarshal(b, &p) != nil {
		return 0, 0, 0
	}
	return p.Cost.ComputeBound, p.Cost.FinalCycles, p.Cost.HostLinkCycles
}

// inference is an inference's cycles end to end as far as known: the
// device's final_cycles and the host link's.
func (r Result) inference() int64 {
	if r.FinalCycles <= 0 {
		return 0
	}
	return r.FinalCycles + max(r.HostLinkCycles, 0)
}

// writeAtomic writes data to path through a temporary file renamed
// over it.
func writeAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return errors.New(pathErr(err))
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return errors.New(pathErr(err))
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return errors.New(pathErr(err))
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return errors.New(pathErr(err))
	}
	return nil
}
