// Command sweep runs a sweep: every configuration of a sweep file (its
// models times its grid of ipu-plan options) through the pipeline's
// tools, then collects the results.
//
// Usage (from the repository, as `make sweep` runs it):
//
//	go run ./scripts/sweep [--engine local] [-j N] [--bin DIR] [--lock-timeout DUR]
//	    [--timeout DUR] [--device PATH] [--index N | --collect] -o DIR SWEEP.json
//
// Each configuration has a stable id, MODEL-HASH (HASH: of the model's
// bytes, its data set's files and the options), listed in
// DIR/configs.json. It runs in DIR/<id>/, its log in DIR/<id>/run.log:
//
//	ipu-plan  MODEL -o model.plan OPTIONS...
//	ipu-link  model.plan -o model.ipuobj
//	ipu-pack  model.ipuobj -o model.ipuexe
//	ipu-load  --device DIR/devices/ipuW --lock-timeout DUR model.ipuexe
//	ipu-check --device DIR/devices/ipuW --lock-timeout DUR [--data DATA] model.ipuexe
//
// -j configurations run at once (default 2), worker W with its own
// simulated device DIR/devices/ipuW, taken through the device's
// ownership lock. A configuration's outcome goes to DIR/<id>/result.json
// with the fingerprint of its inputs (model, data, options, the tools'
// binaries); a re-run skips the configurations whose fingerprint is
// unchanged, so a killed sweep resumes. A failing configuration is
// recorded with its one-line error and the sweep goes on.
//
// --device PATH gives every worker the one device PATH instead (a
// node-local path shared by the jobs of a node): a configuration holds
// PATH.sweep.lock from its ipu-load to the end of its ipu-check, so that
// no other job loads the device in between. --index N runs configuration
// N only (a job array's task) and collects nothing; --collect runs
// nothing and collects what is recorded (a configuration not recorded is
// an ERROR "sweep: not run").
//
// Then DIR/results.csv (a row per configuration, in the sweep's order),
// DIR/results.png (final_cycles per configuration, by model, each
// model's best marked) and DIR/best.json (each model's best passing
// configuration).
//
// Exit status: 0 when every configuration ran (whatever its verdict), 1
// on an error or an interrupt, 2 on a usage error.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

type usageError struct{ msg string }

func (u usageError) Error() string { return u.msg }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	err := sweep(ctx, args, stdout)
	if err == nil {
		return 0
	}
	fmt.Fprintln(stderr, "sweep: "+oneLine(err.Error()))
	var u usageError
	if errors.As(err, &u) {
		return 2
	}
	return 1
}

func sweep(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("sweep", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	engineName := fs.String("engine", "local", "engine: local")
	jobs := fs.Int("j", 2, "configurations at once")
	bin := fs.String("bin", "bin", "directory of the tools")
	out := fs.String("o", "", "output directory")
	lockTimeout := fs.Duration("lock-timeout", 30*time.Minute, "ipu-load and ipu-check --lock-timeout")
	timeout := fs.Duration("timeout", 30*time.Minute, "a configuration's time limit")
	device := fs.String("device", "", "one device for every worker (default: DIR/devices/ipuN, worker N's own)")
	index := fs.Int("index", -1, "run only configuration N of DIR/configs.json (0-based), and collect nothing")
	collectOnly := fs.Bool("collect", false, "run nothing: collect the recorded results")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(stdout, "usage: sweep [flags] -o DIR SWEEP.json")
			fs.SetOutput(stdout)
			fs.PrintDefaults()
			return nil
		}
		return usageError{err.Error() + " (usage: sweep [--engine local] [-j N] [--bin DIR] -o DIR SWEEP.json)"}
	}
	if fs.NArg() != 1 {
		return usageError{"want one sweep file (usage: sweep [--engine local] [-j N] [--bin DIR] -o DIR SWEEP.json)"}
	}
	if *out == "" {
		return usageError{"-o DIR is required"}
	}
	if *engineName != "local" {
		return usageError{fmt.Sprintf("--engine %q: only local is implemented", *engineName)}
	}
	if *index >= 0 && *collectOnly {
		return usageError{"--index and --collect exclude each other"}
	}
	if *jobs < 1 {
		return usageError{fmt.Sprintf("-j %d: want at least 1", *jobs)}
	}
	configs, err := loadSweep(fs.Arg(0))
	if err != nil {
		return err
	}
	absOut, err := filepath.Abs(*out)
	if err != nil {
		return err
	}
	absBin, err := filepath.Abs(*bin)
	if err != nil {
		return err
	}
	toolsFP, err := toolsFingerprint(absBin)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(absOut, 0o755); err != nil {
		return errors.New(pathErr(err))
	}
	cj, err := json.MarshalIndent(struct {
		Sweep   string   `json:"sweep"`
		Configs []Config `json:"configs"`
	}{filepath.ToSlash(fs.Arg(0)), configs}, "", "  ")
	if err != nil {
		return err
	}
	if err := writeAtomic(filepath.Join(absOut, "configs.json"), append(cj, '\n')); err != nil {
		return err
	}
	e := &engine{out: absOut, bin: absBin, jobs: *jobs, toolsFP: toolsFP,
		lockTimeout: *lockTimeout, timeout: *timeout, log: stdout}
	if *device != "" {
		if e.device, err = filepath.Abs(*device); err != nil {
			return err
		}
	}
	var results []Result
	switch {
	case *collectOnly:
		results = e.recorded(configs)
	case *index >= 0:
		if *index >= len(configs) {
			return usageError{fmt.Sprintf("--index %d: the sweep has %d configurations", *index, len(configs))}
		}
		one := configs[*index : *index+1]
		if _, interrupted := e.runAll(ctx, one); interrupted {
			return errors.New("interrupted: configuration " + one[0].ID + " not recorded")
		}
		return nil
	default:
		var interrupted bool
		results, interrupted = e.runAll(ctx, configs)
		if interrupted {
			return errors.New("interrupted: the configurations finished are recorded; run the sweep again to resume")
		}
	}
	if err := collect(absOut, results); err != nil {
		return err
	}
	pass := 0
	for _, r := range results {
		if r.Verdict == "PASS" {
			pass++
		}
	}
	fmt.Fprintf(stdout, "sweep: %d configurations, %d PASS, %d not; %s, %s, %s\n", len(results), pass, len(results)-pass,
		filepath.Join(*out, "results.csv"), filepath.Join(*out, "results.png"), filepath.Join(*out, "best.json"))
	return nil
}
