// Command shardquality measures the plan a sharded search finds against
// its shard count: for each seed and each N of -shards, the model is
// planned by N shards (ipu-plan --shard I/N --state, each from the
// same analytic start) and merged (ipu-plan --merge), with the same
// total attempts (-attempts split over the shards) and with the same
// attempts per shard (-attempts each). It prints the merged plans'
// cost under the search's objective (-objective: inference, the linked
// final_cycles plus the host link's cycles; device, final_cycles alone),
// per seed and summarized, and plots the mean and the range over the
// seeds against N.
//
// Usage (make shard-quality):
//
//	go run ./scripts/shardquality [--bin bin] [--model M.onnx] [--tiles N] [--attempts A]
//	    [--seeds S] [--shards 1,2,4,8] [--objective inference|device] [-j 2] [-o shard-quality.png]
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// config is the command line.
type config struct {
	bin, model, out string
	objective       string // ipu-plan --objective of every shard
	tiles, attempts int
	seeds, jobs     int
	shards          []int
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parse(args)
	if err != nil {
		fmt.Fprintln(stderr, "shardquality: "+err.Error())
		return 2
	}
	rows, err := measure(ctx, cfg, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "shardquality: "+err.Error())
		return 1
	}
	report(stdout, cfg, rows)
	png, err := plotRows(cfg, rows)
	if err == nil {
		err = writeAtomic(cfg.out, png)
	}
	if err != nil {
		fmt.Fprintln(stderr, "shardquality: "+err.Error())
		return 1
	}
	fmt.Fprintf(stdout, "shardquality: %s\n", cfg.out)
	return 0
}

func parse(args []string) (config, error) {
	fs := flag.NewFlagSet("shardquality", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var c config
	var shards string
	fs.StringVar(&c.bin, "bin", "bin", "directory of ipu-plan")
	fs.StringVar(&c.model, "model", "testdata/models/shared/torch_attention/model.onnx", "the model")
	fs.IntVar(&c.tiles, "tiles", 64, "ipu-plan --tiles")
	fs.IntVar(&c.attempts, "attempts", 64, "the total attempts (same total), or each shard's (same per shard)")
	fs.IntVar(&c.seeds, "seeds", 6, "seeds 1..S, each a whole measurement")
	fs.StringVar(&shards, "shards", "1,2,4,8", "the shard counts")
	fs.StringVar(&c.objective, "objective", "inference", "ipu-plan --objective: what the shards minimise and the figures measure")
	fs.IntVar(&c.jobs, "j", 2, "ipu-plan runs at once")
	fs.StringVar(&c.out, "o", "shard-quality.png", "the plot")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() != 0 {
		return c, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	for _, s := range strings.Split(shards, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 || n > 4096 {
			return c, fmt.Errorf("--shards %q: want shard counts in [1, 4096], comma-separated", shards)
		}
		c.shards = append(c.shards, n)
	}
	switch {
	case c.attempts < 1:
		return c, fmt.Errorf("--attempts %d: want at least 1", c.attempts)
	case c.seeds < 1:
		return c, fmt.Errorf("--seeds %d: want at least 1", c.seeds)
	case c.jobs < 1:
		return c, fmt.Errorf("-j %d: want at least 1", c.jobs)
	case c.tiles < 1:
		return c, fmt.Errorf("--tiles %d: want at least 1", c.tiles)
	case c.objective != "inference" && c.objective != "device":
		return c, fmt.Errorf("--objective %q: want inference or device", c.objective)
	}
	if _, err := os.Stat(c.model); err != nil {
		return c, fmt.Errorf("--model: %w", err)
	}
	return c, nil
}

// Regimes: the attempts a shard makes.
const (
	sameTotal    = "same total attempts"
	samePerShard = "same attempts per shard"
)

var regimes = []string{sameTotal, samePerShard}

// row is one (regime, shard count): the merged plan's cost by seed.
type row struct {
	regime   string
	shards   int
	perShard int
	cycles   []int64 // the objective's cycles, by seed
}

// perShard is the attempts each of n shards makes in a regime.
func perShard(c config, regime string, n int) int {
	if regime == sameTotal {
		return max(1, c.attempts/n)
	}
	return c.attempts
}

// measure runs every (regime, shard count, seed): its shards at once,
// -j at a time, then its merge.
func measure(ctx context.Context, c config, progress io.Writer) ([]row, error) {
	tmp, err := os.MkdirTemp("", "shardquality-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	var rows []row
	for _, reg := range regimes {
		for _, n := range c.shards {
			r := row{regime: reg, shards: n, perShard: perShard(c, reg, n), cycles: make([]int64, c.seeds)}
			for s := range c.seeds {
				dir := filepath.Join(tmp, fmt.Sprintf("%s-%d-%d", strings.ReplaceAll(reg, " ", "_"), n, s+1))
				cy, err := search(ctx, c, dir, n, r.perShard, uint64(s+1))
				if err != nil {
					return nil, err
				}
				r.cycles[s] = cy
			}
			mean, _, _ := stats(r.cycles)
			fmt.Fprintf(progress, "shardquality: %s, %d shards: mean %.1f\n", reg, n, mean)
			rows = append(rows, r)
		}
	}
	return rows, nil
}

// search runs one sharded search in dir and returns the merged plan's
// cost under its objective.
func search(ctx context.Context, c config, dir string, n, attempts int, seed uint64) (int64, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, err
	}
	model, err := filepath.Abs(c.model)
	if err != nil {
		return 0, err
	}
	plan := filepath.Join(c.bin, "ipu-plan")
	if plan, err = filepath.Abs(plan); err != nil {
		return 0, err
	}
	sem := make(chan struct{}, c.jobs)
	errs := make([]error, n)
	states := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		states[i] = fmt.Sprintf("s%d.json", i)
		args := []string{model, "-o", fmt.Sprintf("s%d.plan", i), "--tiles", strconv.Itoa(c.tiles),
			"--max-attempts", strconv.Itoa(attempts), "--seed", strconv.FormatUint(seed, 10),
			"--state", states[i], "--shard", fmt.Sprintf("%d/%d", i, n), "--objective", c.objective}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			errs[i] = tool(ctx, plan, dir, args)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	if err := tool(ctx, plan, dir, append(append([]string{"--merge", model}, states...), "-o", "merged.plan")); err != nil {
		return 0, err
	}
	return planCost(filepath.Join(dir, "merged.plan"))
}

// tool runs ipu-plan in dir; its error is its last line.
func tool(ctx context.Context, path, dir string, args []string) error {
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		return fmt.Errorf("ipu-plan %s: %s", strings.Join(args, " "), lines[len(lines)-1])
	}
	return nil
}

// planCost reads a plan's cost under the objective its search
// minimised (search.objective): cost.final_cycles, plus
// cost.host_link_cycles under the inference objective.
func planCost(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	var p struct {
		Cost struct {
			FinalCycles    int64 `json:"final_cycles"`
			HostLinkCycles int64 `json:"host_link_cycles"`
		} `json:"cost"`
		Search struct {
			Objective string `json:"objective"`
		} `json:"search"`
	}
	if err := json.Unmarshal(b, &p); err != nil || p.Cost.FinalCycles <= 0 {
		return 0, fmt.Errorf("%s: no cost.final_cycles", path)
	}
	switch p.Search.Objective {
	case "device":
		return p.Cost.FinalCycles, nil
	case "inference":
		return p.Cost.FinalCycles + p.Cost.HostLinkCycles, nil
	}
	return 0, fmt.Errorf("%s: search.objective %q: want inference or device", path, p.Search.Objective)
}

// measured names what the figures are under an objective.
func measured(objective string) string {
	if objective == "device" {
		return "linked final_cycles (objective device)"
	}
	return "inference cycles: linked final_cycles + host_link_cycles (objective inference)"
}

// stats are a row's mean, best and worst.
func stats(cy []int64) (mean float64, lo, hi int64) {
	lo, hi = slices.Min(cy), slices.Max(cy)
	var sum int64
	for _, c := range cy {
		sum += c
	}
	return float64(sum) / float64(len(cy)), lo, hi
}

func report(w io.Writer, c config, rows []row) {
	fmt.Fprintf(w, "shardquality: %s on %d tiles, %d attempts, seeds 1..%d: merged plan's %s\n", c.model, c.tiles, c.attempts, c.seeds, measured(c.objective))
	fmt.Fprintf(w, "%-24s %6s %9s %12s %10s %10s  %s\n", "regime", "shards", "per_shard", "mean", "best", "worst", "by seed")
	for _, r := range rows {
		mean, lo, hi := stats(r.cycles)
		var by []string
		for _, cy := range r.cycles {
			by = append(by, strconv.FormatInt(cy, 10))
		}
		fmt.Fprintf(w, "%-24s %6d %9d %12.1f %10d %10d  %s\n", r.regime, r.shards, r.perShard, mean, lo, hi, strings.Join(by, " "))
	}
}

// writeAtomic writes data to path through a temporary file renamed
// over it.
func writeAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}
