package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The slurm engine submits the configurations not done as one job
// array, a task per configuration (the driver's --index N, N the
// task's $SLURM_ARRAY_TASK_ID), at most -j at once (--array=...%J), and
// a collect job (--collect) that starts when the array has ended
// (--dependency=afterany). Every path it writes is under the output
// directory, which every node must share; a task's device is
// node-local, NODE_DIR/ipu0 (--node-dir, else $TMPDIR/ipu-sweep, else
// /tmp/ipu-sweep), one per node, which the node's tasks share through
// ipu-load's ownership lock and the driver's pair lock.

// slurmOptions are the slurm engine's flags.
type slurmOptions struct {
	partition, account, timeLimit string
	nodeDir                       string
	noWait                        bool
	poll                          time.Duration
}

func (s *slurmOptions) flags(fs *flag.FlagSet) {
	fs.StringVar(&s.partition, "partition", "", "slurm: the jobs' partition (default: the cluster's)")
	fs.StringVar(&s.timeLimit, "time", "", "slurm: a task's time limit, as sbatch --time takes it (e.g. 30:00)")
	fs.StringVar(&s.account, "account", "", "slurm: the account charged")
	fs.StringVar(&s.nodeDir, "node-dir", "", "slurm: a node-local directory for the node's device (default: $TMPDIR/ipu-sweep on the node, else /tmp/ipu-sweep)")
	fs.BoolVar(&s.noWait, "no-wait", false, "slurm: submit and return")
	fs.DurationVar(&s.poll, "poll", 5*time.Second, "slurm: how often to ask squeue")
}

func (s *slurmOptions) given(set map[string]bool) bool {
	return set["partition"] || set["time"] || set["account"] || set["node-dir"] || set["no-wait"] || set["poll"]
}

// check refuses values that would break the generated script.
func (s *slurmOptions) check() error {
	for _, v := range []struct{ name, val string }{{"partition", s.partition}, {"time", s.timeLimit}, {"account", s.account}} {
		if strings.ContainsAny(v.val, " \t\n'\"\\$`") {
			return usageError{fmt.Sprintf("--%s %q: no spaces, quotes or shell characters", v.name, v.val)}
		}
	}
	if strings.ContainsAny(s.nodeDir, "\n'") {
		return usageError{fmt.Sprintf("--node-dir %q: no quotes or newlines", s.nodeDir)}
	}
	if s.poll <= 0 {
		return usageError{fmt.Sprintf("--poll %s: want a positive duration", s.poll)}
	}
	return nil
}

// runSlurm submits the configurations not done and the collect job,
// then waits for them unless --no-wait.
func (e *engine) runSlurm(ctx context.Context, o options, configs []Config) error {
	var todo []int
	for i, c := range configs {
		if _, ok := e.done(c); !ok {
			todo = append(todo, i)
		}
	}
	fmt.Fprintf(e.log, "sweep: %d configurations, %d done before, %d to submit\n", len(configs), len(configs)-len(todo), len(todo))
	if len(todo) == 0 {
		return e.collectAll(ctx, configs, e.recorded(configs), o.out)
	}
	sweepFile, err := filepath.Abs(o.sweepFile)
	if err != nil {
		return err
	}
	dir := filepath.Join(e.out, "slurm")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return errors.New(pathErr(err))
	}
	driver, err := e.copyDriver(dir)
	if err != nil {
		return err
	}
	common := []string{"--bin", e.bin, "-o", e.out, "--timeout", e.timeout.String()}
	array := e.script(o, "sweep-tasks", filepath.Join(dir, "task-%A_%a.out"),
		"#SBATCH --array="+arraySpec(todo)+"%"+strconv.Itoa(o.jobs),
		driver, append(common, "--lock-timeout", e.lockTimeout.String(), "--index", `"$SLURM_ARRAY_TASK_ID"`,
			"--device", `"$node_dir/ipu0"`), sweepFile)
	arrayID, err := e.sbatch(ctx, filepath.Join(dir, "tasks.sbatch"), array)
	if err != nil {
		return err
	}
	collectJob := e.script(o, "sweep-collect", filepath.Join(dir, "collect-%j.out"),
		"#SBATCH --dependency=afterany:"+arrayID, driver, append(common, "--collect"), sweepFile)
	collectID, err := e.sbatch(ctx, filepath.Join(dir, "collect.sbatch"), collectJob)
	if err != nil {
		return fmt.Errorf("%w (the array job %s is submitted: scancel %s)", err, arrayID, arrayID)
	}
	fmt.Fprintf(e.log, "slurm: submitted array job %s (%d tasks, %d at once) and collect job %s after it; logs in %s\n",
		arrayID, len(todo), o.jobs, collectID, dir)
	if o.slurm.noWait {
		fmt.Fprintf(e.log, "slurm: not waiting: %s when job %s ends\n", filepath.Join(o.out, "results.csv"), collectID)
		return nil
	}
	if err := e.waitSlurm(ctx, o.slurm.poll, arrayID, collectID, configs, todo); err != nil {
		return err
	}
	e.reportAccounting(ctx, arrayID, collectID, len(todo))
	return collectOutcome(filepath.Join(dir, "collect-"+collectID+".out"), collectID, e.log)
}

// copyDriver copies the running driver to DIR/slurm/sweep, where every
// node finds it (`go run` builds it into a temporary directory).
func (e *engine) copyDriver(dir string) (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("sweep: the driver's own path: %w", err)
	}
	b, err := os.ReadFile(self)
	if err != nil {
		return "", errors.New("sweep: " + pathErr(err))
	}
	dst := filepath.Join(dir, "sweep")
	if err := writeAtomic(dst, b); err != nil {
		return "", err
	}
	return dst, os.Chmod(dst, 0o755)
}

// arraySpec is sbatch's --array list of the indices, runs as ranges:
// 0-3,5,7-9.
func arraySpec(idx []int) string {
	var parts []string
	for i := 0; i < len(idx); {
		j := i
		for j+1 < len(idx) && idx[j+1] == idx[j]+1 {
			j++
		}
		if j == i {
			parts = append(parts, strconv.Itoa(idx[i]))
		} else {
			parts = append(parts, strconv.Itoa(idx[i])+"-"+strconv.Itoa(idx[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

// shellQuote quotes s for sh; an argument starting with `"` is the
// script's own (a variable), left as written.
func shellQuote(s string) string {
	if strings.HasPrefix(s, `"`) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// script is a batch script running the driver with args on the sweep
// file, its output in out (sbatch's patterns), extra an #SBATCH line.
func (e *engine) script(o options, name, out, extra, driver string, args []string, sweepFile string) string {
	var b strings.Builder
	b.WriteString("#!/bin/sh\n")
	fmt.Fprintf(&b, "#SBATCH --job-name=%s\n#SBATCH --output=%s\n#SBATCH --ntasks=1\n#SBATCH --cpus-per-task=1\n%s\n", name, out, extra)
	for _, f := range []struct{ flag, val string }{{"partition", o.slurm.partition}, {"time", o.slurm.timeLimit}, {"account", o.slurm.account}} {
		if f.val != "" {
			fmt.Fprintf(&b, "#SBATCH --%s=%s\n", f.flag, f.val)
		}
	}
	b.WriteString("# Written by scripts/sweep; the output directory is shared, the device node-local.\nset -eu\n")
	if o.slurm.nodeDir != "" {
		fmt.Fprintf(&b, "node_dir=%s\n", shellQuote(o.slurm.nodeDir))
	} else {
		b.WriteString("node_dir=\"${TMPDIR:-/tmp}/ipu-sweep\"\n")
	}
	b.WriteString("exec " + shellQuote(driver))
	for _, a := range append(slices.Clip(args), sweepFile) {
		b.WriteString(" " + shellQuote(a))
	}
	b.WriteString("\n")
	return b.String()
}

// sbatch writes the script to path and submits it; it returns the job
// id.
func (e *engine) sbatch(ctx context.Context, path, script string) (string, error) {
	if err := writeAtomic(path, []byte(script)); err != nil {
		return "", err
	}
	out, err := slurmCmd(ctx, "sbatch", "--parsable", path)
	if err != nil {
		return "", err
	}
	id, _, _ := strings.Cut(strings.TrimSpace(out), ";") // id;cluster
	if _, err := strconv.Atoi(id); err != nil {
		return "", fmt.Errorf("sbatch %s: job id %q is not a number", path, oneLine(out))
	}
	return id, nil
}

// slurmCmd runs a Slurm command and returns its stdout; its error is
// one line with the command's own words.
func slurmCmd(ctx context.Context, name string, args ...string) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := oneLine(stderr.String())
		if msg == "" {
			msg = oneLine(err.Error())
		}
		return stdout.String(), fmt.Errorf("%s: %s", name, msg)
	}
	return stdout.String(), nil
}

// waitSlurm polls squeue until neither job is queued or running,
// printing the tasks' states and the configurations recorded whenever
// they change.
func (e *engine) waitSlurm(ctx context.Context, poll time.Duration, arrayID, collectID string, configs []Config, todo []int) error {
	last := ""
	for {
		out, err := slurmCmd(ctx, "squeue", "-h", "-j", arrayID+","+collectID, "-o", "%i|%T")
		if err != nil && !strings.Contains(err.Error(), "Invalid job id") {
			if ctx.Err() != nil {
				return fmt.Errorf("interrupted: jobs %s and %s go on (scancel %s %s stops them)", arrayID, collectID, arrayID, collectID)
			}
			return err
		}
		recorded := 0
		for _, i := range todo {
			if _, ok := e.done(configs[i]); ok {
				recorded++
			}
		}
		states, queued := squeueStates(out, arrayID, collectID)
		line := fmt.Sprintf("slurm: [%d/%d] recorded; %s", recorded, len(todo), states)
		if line != last {
			fmt.Fprintln(e.log, line)
			last = line
		}
		if !queued {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("interrupted: jobs %s and %s go on (scancel %s %s stops them)", arrayID, collectID, arrayID, collectID)
		case <-time.After(poll):
		}
	}
}

// squeueStates summarizes squeue's "ID|STATE" lines: the array's tasks
// by state and the collect job's state; queued is false when neither
// job is listed.
func squeueStates(out, arrayID, collectID string) (string, bool) {
	tasks := map[string]int{}
	collectState := "done"
	queued := false
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		id, state, ok := strings.Cut(l, "|")
		if !ok {
			continue
		}
		queued = true
		switch {
		case id == collectID:
			collectState = strings.ToLower(state)
		case strings.HasPrefix(id, arrayID+"_"):
			n := 1
			if strings.Contains(id, "[") { // pending tasks folded: 12_[3-5%2]
				n = bracketCount(id[len(arrayID)+1:])
			}
			tasks[strings.ToLower(state)] += n
		}
	}
	var parts []string
	for _, s := range slices.Sorted(maps.Keys(tasks)) {
		parts = append(parts, fmt.Sprintf("%d %s", tasks[s], s))
	}
	if len(parts) == 0 {
		parts = append(parts, "ended")
	}
	return fmt.Sprintf("array %s: %s; collect %s: %s", arrayID, strings.Join(parts, ", "), collectID, collectState), queued
}

var rangeRe = regexp.MustCompile(`(\d+)(?:-(\d+))?(?::\d+)?`)

// bracketCount counts the tasks of a folded array list, "[0-3,7%2]".
func bracketCount(s string) int {
	s = strings.Trim(s, "[]")
	s, _, _ = strings.Cut(s, "%")
	n := 0
	for _, m := range rangeRe.FindAllStringSubmatch(s, -1) {
		lo, _ := strconv.Atoi(m[1])
		hi := lo
		if m[2] != "" {
			hi, _ = strconv.Atoi(m[2])
		}
		n += max(0, hi-lo+1)
	}
	return max(n, 1)
}

// collectOutcome reads the collect job's output: its last "sweep: "
// line is the sweep's summary, or the collect job's error.
func collectOutcome(path, collectID string, log io.Writer) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("collect job %s: %s", collectID, pathErr(err))
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		l := lines[i]
		if !strings.HasPrefix(l, "sweep: ") {
			continue
		}
		if regexp.MustCompile(`^sweep: \d+ configurations, `).MatchString(l) {
			for _, s := range lines {
				if strings.HasPrefix(s, "sweep: search ") {
					fmt.Fprintln(log, s)
				}
			}
			fmt.Fprintln(log, l)
			return nil
		}
		return fmt.Errorf("collect job %s: %s (%s)", collectID, strings.TrimPrefix(l, "sweep: "), path)
	}
	return fmt.Errorf("collect job %s ended without a summary (%s)", collectID, path)
}
