package main

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"ipu.local/formats/plan"
	"ipu.local/libs/arch"
	"ipu.local/libs/artdiff"
	"ipu.local/libs/onnx"
	"ipu.local/libs/toolrun"
	"ipu.local/tools/internal/progress"
)

// parseShard reads --shard I/N.
func parseShard(s string) (int, int, error) {
	i, n, ok := strings.Cut(s, "/")
	shard, err1 := strconv.Atoi(i)
	shards, err2 := strconv.Atoi(n)
	if !ok || err1 != nil || err2 != nil {
		return 0, 0, toolrun.Usagef("--shard %q: want I/N, e.g. 0/4", s)
	}
	if shards < 1 || shards > plan.MaxShards || shard < 0 || shard >= shards {
		return 0, 0, toolrun.Usagef("--shard %s: want 0 <= I < N <= %d", s, plan.MaxShards)
	}
	return shard, shards, nil
}

// shardState is one state given to --merge.
type shardState struct {
	path string
	s    *plan.State
}

// mergeAction is ipu-plan --merge MODEL.onnx STATE.json...: the plan of
// the best validated incumbent of the shards' states (the fewest linked
// cycles, the lowest shard on a tie), planned again from its state with
// no move, as the shard itself wrote it.
func mergeAction(c *cli.Context) error {
	if c.NArg() < 2 {
		return toolrun.Usagef("--merge wants MODEL.onnx and at least one STATE.json, got %d arguments", c.NArg())
	}
	for _, f := range []string{"state", "shard", "max-attempts", "tiles", "seed", "objective"} {
		if c.IsSet(f) {
			return toolrun.Usagef("--merge takes --%s from the states: do not give it", f)
		}
	}
	if err := progress.Check(c.String("progress")); err != nil {
		return toolrun.Usagef("%v", err)
	}
	p, err := arch.Lookup(c.String("arch"))
	if err != nil {
		return toolrun.Usagef("--arch: %w", err)
	}
	dims, err := parseDims(c.StringSlice("dim"))
	if err != nil {
		return err
	}
	args := c.Args().Slice()
	model := args[0]
	data, err := os.ReadFile(model)
	if err != nil {
		return fmt.Errorf("read model: %w", err)
	}
	err = artdiff.NotKind(data, "ONNX model")
	var m *onnx.Model
	if err == nil {
		m, err = onnx.ReadModel(data)
	}
	if err == nil {
		err = m.LoadExternal(filepath.Dir(model))
	}
	if err != nil {
		return fmt.Errorf("%s: %w", model, err)
	}
	best, err := pickShard(onnx.FingerprintModel(data, m), model, args[1:])
	if err != nil {
		return err
	}
	if best.s.Arch != p.Name {
		p, err = arch.Lookup(best.s.Arch)
		if err != nil {
			return fmt.Errorf("%s: search state: arch: %w", best.path, err)
		}
	}
	log := toolrun.Logger(c)
	log.Info("merged search shards", slog.Int("states", len(args)-1), slog.Int("shards", best.s.Shards),
		slog.Int("best_shard", best.s.Shard), slog.Int64("validated_cycles", best.s.Validated))
	cfg := config{
		model: model, out: c.String("o"), state: best.path, merge: true, arch: p,
		tiles: best.s.Tiles, seed: best.s.Seed, shard: best.s.Shard, shards: best.s.Shards, objective: plan.ObjectiveOf(best.s.Objective),
		downcast: c.Bool("downcast-fp64"), shapesDir: c.String("input-shapes"), dims: dims,
		progress: progress.Never, progressOut: c.App.ErrWriter,
	}
	return planModel(log, cfg)
}

// pickShard reads the states, checks that they are shards of one search
// of the model (same model, architecture, tiles, seed and shard count,
// each shard once, each validated) and returns the best: the fewest
// validated cycles, the lowest shard on a tie.
func pickShard(modelFP, model string, paths []string) (shardState, error) {
	var states []shardState
	seen := map[int]string{}
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			return shardState{}, fmt.Errorf("read search state: %w", err)
		}
		s, err := plan.ReadState(data)
		if err != nil {
			return shardState{}, fmt.Errorf("%s: %w", path, err)
		}
		if s.Model != modelFP {
			return shardState{}, fmt.Errorf("%s: search state is for model %.12s, not %s (%.12s)", path, s.Model, model, modelFP)
		}
		if s.Validated <= 0 {
			return shardState{}, fmt.Errorf("%s: search state has no validated incumbent", path)
		}
		if len(states) > 0 {
			f := states[0].s
			if s.Arch != f.Arch || s.Tiles != f.Tiles || s.Seed != f.Seed || s.Shards != f.Shards {
				return shardState{}, fmt.Errorf("%s: search state is for arch %s tiles %d seed %d shards %d, not arch %s tiles %d seed %d shards %d as %s",
					path, s.Arch, s.Tiles, s.Seed, s.Shards, f.Arch, f.Tiles, f.Seed, f.Shards, states[0].path)
			}
			if plan.ObjectiveOf(s.Objective) != plan.ObjectiveOf(f.Objective) {
				return shardState{}, fmt.Errorf("%s: search state is for objective %s, not %s as %s", path, plan.ObjectiveOf(s.Objective), plan.ObjectiveOf(f.Objective), states[0].path)
			}
		}
		if prev, ok := seen[s.Shard]; ok {
			return shardState{}, fmt.Errorf("%s: search state is shard %d/%d, as %s is", path, s.Shard, s.Shards, prev)
		}
		seen[s.Shard] = path
		states = append(states, shardState{path, s})
	}
	best := states[0]
	for _, st := range states[1:] {
		if st.s.Validated < best.s.Validated || st.s.Validated == best.s.Validated && st.s.Shard < best.s.Shard {
			best = st
		}
	}
	return best, nil
}
