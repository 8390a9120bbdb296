// Command sweep runs a sweep: every configuration of a sweep file (its
// models times its grid of ipu-plan options) through the pipeline's
// tools, then collects the results.
//
// Usage (from the repository, as `make sweep` runs it):
//
//	go run ./scripts/sweep [--engine local|slurm] [-j N] [--bin DIR] [--lock-timeout DUR]
//	    [--timeout DUR] [--device PATH] [--index N | --collect]
//	    [--partition P] [--time T] [--account A] [--node-dir DIR] [--no-wait] [--poll DUR]
//	    -o DIR SWEEP.json
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
// --engine slurm submits the configurations not done as a job array
// (engine_slurm.go), each task one --index, and a --collect job after
// it; it waits, reporting through squeue and sacct, unless --no-wait.
//
// A sweep of type "search" runs each search's shards as configurations
// (ipu-plan --shard I/N --state state.json) and the collect step merges
// them (search.go): DIR/<search>/model.plan and DIR/searches.csv.
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

// options are the driver's command line.
type options struct {
	engine      string
	jobs        int
	bin, out    string
	lockTimeout time.Duration
	timeout     time.Duration
	device      string
	index       int
	collectOnly bool
	sweepFile   string
	slurm       slurmOptions
}

const usage = "usage: sweep [--engine local|slurm] [-j N] [--bin DIR] -o DIR SWEEP.json"

// parseFlags reads the command line; help is true when -h was asked
// for (the usage is printed then).
func parseFlags(args []string, stdout io.Writer) (o options, help bool, err error) {
	fs := flag.NewFlagSet("sweep", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.engine, "engine", "local", "engine: local (this host) or slurm (a job array)")
	fs.IntVar(&o.jobs, "j", 2, "configurations at once (slurm: the job array's %J throttle)")
	fs.StringVar(&o.bin, "bin", "bin", "directory of the tools")
	fs.StringVar(&o.out, "o", "", "output directory (slurm: on a file system every node shares)")
	fs.DurationVar(&o.lockTimeout, "lock-timeout", 30*time.Minute, "ipu-load and ipu-check --lock-timeout (slurm default: 2h)")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Minute, "a configuration's time limit")
	fs.StringVar(&o.device, "device", "", "one device for every worker (default: DIR/devices/ipuN, worker N's own)")
	fs.IntVar(&o.index, "index", -1, "run only configuration N of DIR/configs.json (0-based), and collect nothing")
	fs.BoolVar(&o.collectOnly, "collect", false, "run nothing: collect the recorded results")
	o.slurm.flags(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(stdout, usage)
			fs.SetOutput(stdout)
			fs.PrintDefaults()
			return o, true, nil
		}
		return o, false, usageError{err.Error() + " (" + usage + ")"}
	}
	if fs.NArg() != 1 {
		return o, false, usageError{"want one sweep file (" + usage + ")"}
	}
	o.sweepFile = fs.Arg(0)
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch {
	case o.out == "":
		return o, false, usageError{"-o DIR is required"}
	case o.engine != "local" && o.engine != "slurm":
		return o, false, usageError{fmt.Sprintf("--engine %q: want local or slurm", o.engine)}
	case o.index >= 0 && o.collectOnly:
		return o, false, usageError{"--index and --collect exclude each other"}
	case o.jobs < 1:
		return o, false, usageError{fmt.Sprintf("-j %d: want at least 1", o.jobs)}
	case o.engine == "slurm" && (o.index >= 0 || o.collectOnly || o.device != ""):
		return o, false, usageError{"--engine slurm submits --index, --collect and --device jobs itself: do not give them"}
	case o.engine != "slurm" && o.slurm.given(set):
		return o, false, usageError{"--partition, --time, --account, --node-dir, --no-wait and --poll are the slurm engine's"}
	}
	if o.engine == "slurm" && !set["lock-timeout"] {
		o.lockTimeout = 2 * time.Hour // every task of a node waits for its one device
	}
	return o, false, o.slurm.check()
}

func sweep(ctx context.Context, args []string, stdout io.Writer) error {
	o, help, err := parseFlags(args, stdout)
	if help || err != nil {
		return err
	}
	configs, err := loadSweep(o.sweepFile)
	if err != nil {
		return err
	}
	e, err := newEngine(o, stdout)
	if err != nil {
		return err
	}
	if o.index >= 0 {
		return e.runIndex(ctx, configs, o.index)
	}
	if err := e.writeConfigs(o.sweepFile, configs); err != nil {
		return err
	}
	var results []Result
	switch {
	case o.engine == "slurm":
		return e.runSlurm(ctx, o, configs)
	case o.collectOnly:
		results = e.recorded(configs)
	default:
		var interrupted bool
		results, interrupted = e.runAll(ctx, configs)
		if interrupted {
			return errors.New("interrupted: the configurations finished are recorded; run the sweep again to resume")
		}
	}
	return e.collectAll(ctx, configs, results, o.out)
}

// newEngine sets up the engine of the options.
func newEngine(o options, stdout io.Writer) (*engine, error) {
	absOut, err := filepath.Abs(o.out)
	if err != nil {
		return nil, err
	}
	absBin, err := filepath.Abs(o.bin)
	if err != nil {
		return nil, err
	}
	toolsFP, err := toolsFingerprint(absBin)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(absOut, 0o755); err != nil {
		return nil, errors.New(pathErr(err))
	}
	e := &engine{out: absOut, bin: absBin, jobs: o.jobs, toolsFP: toolsFP,
		lockTimeout: o.lockTimeout, timeout: o.timeout, log: stdout}
	if o.device != "" {
		if e.device, err = filepath.Abs(o.device); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// writeConfigs writes DIR/configs.json: the configurations in order,
// which --index numbers.
func (e *engine) writeConfigs(sweepFile string, configs []Config) error {
	cj, err := json.MarshalIndent(struct {
		Sweep   string   `json:"sweep"`
		Configs []Config `json:"configs"`
	}{filepath.ToSlash(sweepFile), configs}, "", "  ")
	if err != nil {
		return err
	}
	return writeAtomic(filepath.Join(e.out, "configs.json"), append(cj, '\n'))
}

// runIndex runs configuration n of DIR/configs.json (a job array's
// task), after checking that the sweep file still expands to it.
func (e *engine) runIndex(ctx context.Context, configs []Config, n int) error {
	if n >= len(configs) {
		return usageError{fmt.Sprintf("--index %d: the sweep has %d configurations", n, len(configs))}
	}
	path := filepath.Join(e.out, "configs.json")
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("--index %d: %s (run the sweep, or --collect, once to write it)", n, pathErr(err))
	}
	var recorded struct {
		Configs []struct {
			ID string `json:"id"`
		} `json:"configs"`
	}
	if err := json.Unmarshal(b, &recorded); err != nil {
		return fmt.Errorf("%s: %s", path, oneLine(err.Error()))
	}
	if n >= len(recorded.Configs) || recorded.Configs[n].ID != configs[n].ID {
		return fmt.Errorf("%s: configuration %d is not the sweep file's %s: the sweep file changed since it was written", path, n, configs[n].ID)
	}
	one := configs[n : n+1]
	if _, interrupted := e.runAll(ctx, one); interrupted {
		return errors.New("interrupted: configuration " + one[0].ID + " not recorded")
	}
	return nil
}

// collectAll merges the searches and writes the results.
func (e *engine) collectAll(ctx context.Context, configs []Config, results []Result, out string) error {
	searches := e.mergeSearches(ctx, configs, results)
	if ctx.Err() != nil {
		return errors.New("interrupted while merging searches: run the sweep again to collect")
	}
	if err := collect(e.out, results); err != nil {
		return err
	}
	if searches != nil {
		if err := writeSearches(e.out, searches, func(s string) { fmt.Fprintln(e.log, "sweep: "+s) }); err != nil {
			return err
		}
	}
	pass := 0
	for _, r := range results {
		if r.Verdict == "PASS" {
			pass++
		}
	}
	fmt.Fprintf(e.log, "sweep: %d configurations, %d PASS, %d not; %s, %s, %s\n", len(results), pass, len(results)-pass,
		filepath.Join(out, "results.csv"), filepath.Join(out, "results.png"), filepath.Join(out, "best.json"))
	return nil
}
