package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// pipelineTools are the phases timed, in order.
var pipelineTools = []string{"ipu-plan", "ipu-link", "ipu-pack", "ipu-load", "ipu-check"}

// pipelineRun is one row's pipeline wall times.
type pipelineRun struct {
	row
	wall []time.Duration // by pipelineTools; only the phases that ran
	err  error           // the failed phase's error (the later ones did not run)
}

// bestPipeline runs the row's pipeline cfg.reps times and keeps each
// tool's best wall time; a failed run is the row's result.
func bestPipeline(cfg config, r row) pipelineRun {
	var best pipelineRun
	for k := 0; k < cfg.reps; k++ {
		pr := timePipeline(cfg, r)
		if pr.err != nil {
			return pr
		}
		if k == 0 {
			best = pr
			continue
		}
		for i, d := range pr.wall {
			best.wall[i] = min(best.wall[i], d)
		}
	}
	return best
}

// timePipeline runs the pipeline's tools on one row in a fresh temporary
// directory with its own device file.
func timePipeline(cfg config, r row) pipelineRun {
	pr := pipelineRun{row: r}
	dir, err := os.MkdirTemp("", "benchcompile-")
	if err != nil {
		pr.err = fmt.Errorf("temporary directory: %w", err)
		return pr
	}
	defer os.RemoveAll(dir)
	planFile := filepath.Join(dir, "model.plan")
	objFile := filepath.Join(dir, "model.ipuobj")
	exeFile := filepath.Join(dir, "model.ipuexe")
	device := filepath.Join(dir, "ipu0")
	planArgs := []string{r.model, "-o", planFile, "--arch", cfg.arch.Name, "--objective", r.objective}
	if r.tiles != cfg.arch.Tiles {
		planArgs = append(planArgs, "--tiles", strconv.Itoa(r.tiles))
	}
	argv := [][]string{
		planArgs,
		{planFile, "-o", objFile},
		{objFile, "-o", exeFile},
		{"--device", device, exeFile},
		{"--device", device, "--inferences", "1", exeFile},
	}
	for i, tool := range pipelineTools {
		fmt.Fprintf(cfg.progress, "benchcompile: %s: %s\n", r.label(), tool)
		d, err := runTool(filepath.Join(cfg.bin, tool), argv[i])
		if err != nil {
			// The temporary directory differs every run; the message should not.
			pr.err = fmt.Errorf("%s: %s", tool, strings.ReplaceAll(err.Error(), dir, "$TMPDIR"))
			return pr
		}
		pr.wall = append(pr.wall, d)
	}
	return pr
}

// runTool runs one tool and returns its wall time; a failure is its exit
// status and the last line it wrote that names it (its error), or else
// its last line.
func runTool(path string, args []string) (time.Duration, error) {
	var out bytes.Buffer
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	d := time.Since(start)
	if err == nil {
		return d, nil
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		return d, err
	}
	return d, fmt.Errorf("exit status %d: %s", exit.ExitCode(), lastLine(out.String(), filepath.Base(path)+":"))
}

// lastLine is the last line of s starting with prefix, or else its last
// non-empty line.
func lastLine(s, prefix string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(lines[i], prefix) {
			return strings.TrimSpace(strings.TrimPrefix(lines[i], prefix))
		}
	}
	if len(lines) == 0 || lines[len(lines)-1] == "" {
		return "no output"
	}
	return lines[len(lines)-1]
}

// printStartBaseline writes the pipeline's floor on this host, measured
// in the same run: the wall time of starting and ending each of the
// pipeline's tools (--version), each its best of cfg.reps, summed. A
// shared host's process start moves the whole pipeline's time with it
// (14 ms a tool on a quiet day, 25 ms on a slow one).
func printStartBaseline(w io.Writer, cfg config) {
	var total time.Duration
	for _, tool := range pipelineTools {
		var best time.Duration
		for k := 0; k < cfg.reps; k++ {
			d, err := runTool(filepath.Join(cfg.bin, tool), []string{"--version"})
			if err != nil {
				fmt.Fprintf(w, "process start baseline: %s --version: %v\n", tool, err)
				return
			}
			if k == 0 || d < best {
				best = d
			}
		}
		total += best
	}
	fmt.Fprintf(w, "process start baseline (the %d tools' --version, each its best of %d, summed; measured in this run): %s\n", len(pipelineTools), cfg.reps, seconds(total))
}

// printPipeline writes the wall-time table and, under it, each failed
// row's error.
func printPipeline(w io.Writer, cfg config, rows []pipelineRun) {
	fmt.Fprintf(w, "pipeline wall time (%s/, temporary directory and device file; ipu-check: host reference, 1 inference; each tool's best of %d runs)\n", filepath.ToSlash(filepath.Clean(cfg.bin)), cfg.reps)
	tw := table(w)
	fmt.Fprintln(tw, "model\ttiles\t"+strings.Join(pipelineTools, "\t")+"\ttotal\ttarget\tplan+link\tplan+link_target\tcheck_target\t")
	var errs []string
	for _, pr := range rows {
		cells := []string{modelName(pr.model), fmt.Sprint(pr.tiles)}
		var total time.Duration
		for i := range pipelineTools {
			switch {
			case i < len(pr.wall):
				total += pr.wall[i]
				cells = append(cells, seconds(pr.wall[i]))
			case i == len(pr.wall):
				cells = append(cells, "error")
			default:
				cells = append(cells, "-")
			}
		}
		target := "-"
		lim, hasTarget := targetOf(pipelineTargets, pr.row)
		if pr.err != nil {
			cells = append(cells, seconds(total)+"+")
			if hasTarget {
				target = fmt.Sprintf("INCOMPLETE (<%s)", seconds(lim))
			}
			errs = append(errs, fmt.Sprintf("%s: %v", pr.label(), pr.err))
		} else {
			cells = append(cells, seconds(total))
			if hasTarget {
				target = fmt.Sprintf("%s (<%s)", passMiss(total < lim), seconds(lim))
			}
		}
		cells = append(cells, target)
		compile, compileTarget := "-", "-"
		if len(pr.wall) >= 2 {
			c := pr.wall[0] + pr.wall[1]
			compile = seconds(c)
			if lim, ok := targetOf(compileTargets, pr.row); ok {
				compileTarget = fmt.Sprintf("%s (<%s)", passMiss(c < lim), seconds(lim))
			}
		}
		cells = append(cells, compile, compileTarget)
		checkTarget := "-"
		if lim, ok := targetOf(checkTargets, pr.row); ok && len(pr.wall) == len(pipelineTools) {
			c := pr.wall[len(pr.wall)-1]
			checkTarget = fmt.Sprintf("%s (<%s)", passMiss(c < lim), seconds(lim))
		}
		cells = append(cells, checkTarget)
		fmt.Fprintln(tw, joinCells(cells))
	}
	tw.Flush()
	for _, e := range errs {
		fmt.Fprintln(w, e)
	}
}
