package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"ipu.local/formats/plan"
	"ipu.local/libs/arch"
	"ipu.local/libs/artdiff"
	"ipu.local/libs/atomicfile"
	"ipu.local/libs/graph"
	"ipu.local/libs/link"
	"ipu.local/libs/onnx"
	"ipu.local/libs/pack"
	"ipu.local/libs/par"
	"ipu.local/libs/planner"
	"ipu.local/libs/toolrun"
	"ipu.local/libs/trace"
	"ipu.local/tools/internal/progress"
)

// defaultAttempts is the local moves a run makes without --max-attempts.
const defaultAttempts = 20

func run(args []string, stdout, stderr io.Writer) int {
	app := &cli.App{
		Name:      "ipu-plan",
		Usage:     "map an ONNX model onto the tiles and write the plan",
		ArgsUsage: "MODEL.onnx",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "o", Usage: "write the plan to `OUT.plan`", Required: true},
			&cli.StringFlag{Name: "arch", Usage: "architecture preset `NAME`", Value: "ipu21"},
			&cli.IntFlag{Name: "tiles", Usage: "plan over the first `N` tiles (0: all of the preset's)"},
			&cli.StringFlag{Name: "state", Usage: "load and save the resumable search state in `STATE.json`"},
			&cli.IntFlag{Name: "max-attempts", Usage: "local search moves this run makes", Value: defaultAttempts},
			&cli.Uint64Flag{Name: "seed", Usage: "search seed", Value: 1},
			&cli.BoolFlag{Name: "downcast-fp64", Usage: "compute DOUBLE tensors in FP32 (each one is logged; ipu-check then checks them at FP32)"},
			&cli.StringSliceFlag{Name: "dim", Usage: "bind a symbolic input dimension (an exporter's dynamic axis): `NAME=N` (repeatable)"},
			&cli.StringFlag{Name: "progress", Usage: "a progress bar of the search: `auto` (when stderr is a terminal), always or never", Value: progress.Auto},
			&cli.StringFlag{Name: "input-shapes", Usage: "compile for the shapes of `DIR`/input_N.pb (an ONNX test data set), binding the model's symbolic dimensions"},
			&cli.StringFlag{Name: "shard", Usage: "search shard `I/N` of a search split N ways (its own --state; --merge joins them)"},
			&cli.StringFlag{Name: "objective", Usage: "what the search minimises: `inference` (final_cycles plus the host link's cycles for the inputs and outputs) or device (final_cycles alone)", Value: plan.ObjectiveInference},
			&cli.BoolFlag{Name: "merge", Usage: "arguments MODEL.onnx STATE.json...: write the plan of the shards' best validated incumbent"},
		},
		Action: func(c *cli.Context) error {
			if c.Bool("merge") {
				return mergeAction(c)
			}
			if c.NArg() != 1 {
				return toolrun.Usagef("want exactly one model MODEL.onnx, got %d arguments", c.NArg())
			}
			cfg := config{
				model: c.Args().First(), out: c.String("o"), state: c.String("state"),
				tiles: c.Int("tiles"), attempts: c.Int("max-attempts"), seed: c.Uint64("seed"),
				downcast: c.Bool("downcast-fp64"), shapesDir: c.String("input-shapes"),
				objective: c.String("objective"),
			}
			if err := plan.CheckObjective(cfg.objective); err != nil {
				return toolrun.Usagef("--objective: %v", err)
			}
			p, err := arch.Lookup(c.String("arch"))
			if err != nil {
				return toolrun.Usagef("--arch: %w", err)
			}
			cfg.arch = p
			if cfg.dims, err = parseDims(c.StringSlice("dim")); err != nil {
				return err
			}
			if cfg.tiles < 0 || cfg.tiles > p.Tiles {
				return toolrun.Usagef("--tiles %d out of range [1, %d] of %s", cfg.tiles, p.Tiles, p.Name)
			}
			if cfg.tiles == 0 {
				cfg.tiles = p.Tiles
			}
			if cfg.attempts < 0 {
				return toolrun.Usagef("--max-attempts %d is negative", cfg.attempts)
			}
			if c.IsSet("shard") {
				if cfg.shard, cfg.shards, err = parseShard(c.String("shard")); err != nil {
					return err
				}
				if cfg.state == "" {
					toolrun.Logger(c).Warn("--shard without --state: the shard's search state is not saved, so ipu-plan --merge cannot join it", slog.String("shard", c.String("shard")))
				}
			}
			if err := progress.Check(c.String("progress")); err != nil {
				return toolrun.Usagef("%v", err)
			}
			cfg.progress, cfg.progressOut = c.String("progress"), c.App.ErrWriter
			return planModel(toolrun.Logger(c), cfg)
		},
	}
	// The search churns through programs over a large live heap (its
	// step caches): at GOGC=400 the heap's growth costs more in fresh
	// pages than the collections it saves. BERT-base FP16 layer on 2
	// cores, same minutes: 8.05-8.85 s and 2.1-2.3 GB at 400, 6.1-6.4 s
	// and 1.1-1.2 GB at 150, 6.5-7.5 s at 100; the 12-layer encoder
	// 61.0 s at 400, 55.5 s at 150. Later, with the start pricing every
	// product of a class (the encoder's heap at the 4 GiB limit): the
	// encoder 49.4-50.9 s and 1.33-1.36 M page faults at 150, 40.8-44.8
	// s and 1.16-1.25 M at 100 (three runs each, alternating); the layer
	// 5.68-6.09 s at 150, 5.87-6.04 s at 100; qk-early 0.37-0.41 s both.
	// Now, GOGC=200 until the live heap reaches 256 MiB, then 100:
	// qk-early 261-263 ms against 277-285 (best of 12, twice), the layer
	// 6.03-6.15 s and 0.73-0.76 GB against 6.43-6.45 s and 0.69 GB, the
	// encoder 34.1 s against 36.1 (one run each). At 200 throughout the
	// layer took 5.7-5.8 s and 1.0 GB; with the switch at 512 MiB, 6.0 s
	// and 1.0 GB.
	app.Metadata = map[string]any{toolrun.GCPercentKey: 100, toolrun.SmallHeapGCPercentKey: 200, toolrun.HeapPerInputKey: int64(heapPerModelByte)}
	return toolrun.Main(app, args, stdout, stderr)
}

// config is one run's command line.
type config struct {
	model, out, state string
	arch              *arch.Preset
	runtime           *link.Runtime // compiled by the compile_runtime phase
	tiles, attempts   int
	shard, shards     int    // --shard I/N (0/0: unsharded)
	objective         string // --objective (plan.ObjectiveInference or plan.ObjectiveDevice)
	seed              uint64
	// merge: the state is read, not written (--merge of shards).
	merge       bool
	downcast    bool // --downcast-fp64
	dims        map[string]int64
	shapesDir   string // --input-shapes
	progress    string // --progress
	progressOut io.Writer
}

// heapPerModelByte is the search's heap a model byte, about (the
// BERT-base FP16 layer's 14 MB model: 0.7 GB).
const heapPerModelByte = 50

// planModel reads the model, builds its graph, and runs the phases:
// compile_runtime, then plan_package (load state, search, validate, write
// the plan, save state).
func planModel(log *slog.Logger, cfg config) error {
	data, err := os.ReadFile(cfg.model)
	if err != nil {
		return fmt.Errorf("read model: %w", err)
	}
	toolrun.ExpectHeap(heapPerModelByte * int64(len(data)))
	err = artdiff.NotKind(data, "ONNX model")
	var m *onnx.Model
	if err == nil {
		m, err = onnx.ReadModel(data)
	}
	if err == nil {
		err = m.LoadExternal(filepath.Dir(cfg.model))
	}
	if err != nil {
		return fmt.Errorf("%s: %w", cfg.model, err)
	}
	fingerprint := par.Background(func() string { return onnx.FingerprintModel(data, m) })
	opt := graph.BuildOptions{DowncastFP64: cfg.downcast, Dims: cfg.dims}
	if cfg.shapesDir != "" {
		if opt.InputShapes, err = inputShapes(m, cfg.shapesDir); err != nil {
			return err
		}
	}
	g, err := graph.BuildWith(m, opt)
	if err != nil {
		var unsupported *graph.UnsupportedError
		if errors.As(err, &unsupported) {
			return err
		}
		return fmt.Errorf("%s: %w", cfg.model, err)
	}

	build := trace.Span(log, trace.BuildSpan, slog.Int("tile_count", cfg.tiles), slog.Int("operations", len(g.Nodes)))
	for _, name := range g.Downcast {
		build.Warn("computing a DOUBLE tensor in FP32 (--downcast-fp64)", slog.String("tensor", name))
	}
	for _, r := range g.Redeclared {
		build.Warn("a declared shape contradicts the bound input dimensions; the plan takes the bound one",
			slog.String("value", r.Name), slog.String("declared_as", r.What), slog.String("shape", graph.ShapeString(r.Shape)), slog.String("declared", r.Declared))
	}
	for _, r := range g.Folded {
		build.Debug("folded node", slog.String("node", r.Node), slog.String("change", r.What))
	}
	for _, r := range g.Built {
		build.Debug("built node from other operators", slog.String("node", r.Node), slog.String("as", r.What))
	}
	build.Debug("folded constants", slog.Int("nodes_before", len(m.Graph.Nodes)), slog.Int("folded", len(g.Folded)), slog.Int("nodes_after", len(g.Nodes)))
	// The tile runtime (the supervisor's routines) for the architecture,
	// once: the validation links below take it.
	rph := trace.Phase(build, "compile_runtime")
	rt, err := link.CompileRuntime(cfg.arch)
	if err := rph.End(err); err != nil {
		return err
	}
	cfg.runtime = rt
	phase := trace.Phase(build, "plan_package")
	err = planPackage(phase.Logger(), cfg, g, fingerprint())
	return phase.End(err)
}

// planPackage is the plan_package phase.
func planPackage(log *slog.Logger, cfg config, g *graph.Graph, fingerprint string) error {
	opt, err := searchOptions(log, cfg, fingerprint)
	if err != nil {
		return err
	}
	bar := progress.New(cfg.progress, cfg.progressOut, cfg.attempts, "search")
	opt.Progress = func(done, total int, incumbent int64) {
		bar.Set(done, fmt.Sprintf("search: incumbent %d cycles", incumbent))
	}
	// The start prices each product's candidates before the first attempt:
	// most of a large model's search (the 12-layer encoder's 25 s of 26).
	opt.StartProgress = func(decided, products int) {
		bar.Set(0, fmt.Sprintf("search: start, %d of %d products decided", decided, products))
	}
	pl, state, st, err := planner.Plan(g, cfg.arch, opt)
	bar.Finish()
	if err != nil {
		if opt.State != nil {
			return fmt.Errorf("%s: %w", cfg.state, err)
		}
		return fmt.Errorf("%s: %w", cfg.model, err)
	}
	logSearch(log, st)
	s := searched{pl, state, st}
	linked, err := validateSearched(log, cfg, g, opt, &s)
	if err != nil {
		return err
	}
	encoded, err := recordValidation(log, cfg, s, linked)
	if err != nil {
		return err
	}
	if err := atomicfile.Write(cfg.out, encoded); err != nil {
		return fmt.Errorf("write %s: %w", cfg.out, err)
	}
	if cfg.state != "" && !cfg.merge {
		sd, err := plan.MarshalState(s.state)
		if err != nil {
			return fmt.Errorf("encode search state: %w", err)
		}
		if err := atomicfile.Write(cfg.state, sd); err != nil {
			return fmt.Errorf("write %s: %w", cfg.state, err)
		}
		log.Info("saved mid-plan search state", trace.Bare("path", cfg.state),
			slog.Int("attempts", s.state.Attempts), slog.Int("bytes", len(sd)))
	}
	return nil
}

// searchOptions returns the search's options from the command line and
// its state file, when one is read.
func searchOptions(log *slog.Logger, cfg config, fingerprint string) (planner.Options, error) {
	opt := planner.Options{
		Tiles: cfg.tiles, Seed: cfg.seed, MaxAttempts: cfg.attempts, Shard: cfg.shard, Shards: cfg.shards, Objective: cfg.objective,
		ModelPath: recordedPath(cfg.model), ModelFingerprint: fingerprint,
		// The incumbent is linked below: its exact cycles replace the
		// search's estimate, which the log line compares them with.
		SearchEstimate: true,
	}
	if cfg.state != "" {
		s, err := loadState(cfg.state)
		if err != nil {
			return opt, err
		}
		// Only a state really read is announced: a missing file is a
		// fresh search, and says nothing.
		if s != nil {
			opt.State = s
			log.Info("loaded mid-plan search state", trace.Bare("path", cfg.state), slog.Int("attempts", s.Attempts))
		}
	}
	return opt, nil
}

// logSearch logs the search's figures.
func logSearch(log *slog.Logger, st *planner.Stats) {
	for _, r := range st.Rewrites {
		log.Debug("rewrote node", slog.String("node", r.Node), slog.String("change", r.What))
	}
	for _, sb := range st.SideBySide {
		log.Debug("placed sibling products side by side", slog.String("members", strings.Join(sb.Members, ",")),
			slog.Int("groups", sb.Taken), slog.Int("of", sb.Groups), slog.Int64("cycles_before", sb.Before), slog.Int64("cycles_after", sb.After))
	}
	log.Info("screened exchange table geometry",
		slog.Int64("expansion_ms", st.Expansion.Milliseconds()),
		slog.Int64("expansion_and_footprint_ms", st.ExpansionAndFootprint.Milliseconds()),
		slog.Int64("estimated_row_bytes", st.EstimatedRowBytes),
		slog.Int64("heuristic_row_bytes", st.HeuristicRowBytes),
		slog.Int("geometry_fragments_per_tile", st.GeometryFragmentsPerTile),
		slog.Int("fragment_limit", st.FragmentLimit))
	log.Info("eliminated unread FP8 cast input padding clears", slog.Int("removed", st.PaddingClearsRemoved))
}

// searched is a search's plan, state and figures.
type searched struct {
	pl    *plan.Plan
	state *plan.State
	st    *planner.Stats
}

// validateSearched validates the incumbent by lowering it as ipu-link
// will: the exact final_cycles replace the estimate. The link's exchange
// scheduler validates its fast schedules' instruction alignment and
// repairs them; its figures are this step's lines. A plan that does not
// link is searched again (under the device objective, or with memory
// kept free), s then the new search's.
func validateSearched(log *slog.Logger, cfg config, g *graph.Graph, opt planner.Options, s *searched) (*link.Stats, error) {
	var saved []plan.Exchange
	if opt.State != nil {
		saved = opt.State.Exchanges
	}
	linked, err := validateLink(log, cfg, s.pl, saved)
	first := opt
	if err != nil && plan.ObjectiveOf(s.state.Objective) == plan.ObjectiveInference && !cfg.merge {
		// The search's memory check counts a tile's bytes, not the free
		// ranges the linker places in: a point it takes may not link. The
		// device objective's search is the one before the host link's
		// cycles counted (its plans link where they did then); its
		// state is that objective's.
		why, _, _ := strings.Cut(err.Error(), "\n")
		log.Warn("the inference objective's plan does not link: planning under the device objective", slog.String("reason", why))
		opt.Objective, opt.State, opt.Progress, opt.StartProgress = plan.ObjectiveDevice, nil, nil, nil
		if s.pl, s.state, s.st, err = planner.Plan(g, cfg.arch, opt); err != nil {
			return nil, fmt.Errorf("%s: %w", cfg.model, err)
		}
		linked, err = validateLink(log, cfg, s.pl, nil)
	}
	// A plan whose buffers find no room searches again with part of
	// every tile kept free: its placement has more room than its search.
	for _, frac := range reserveFractions {
		var me *link.MemoryError
		if err == nil || cfg.merge || !errors.As(err, &me) {
			break
		}
		reserve := int64(cfg.arch.UsableMemory().Size()) / frac
		if reserve <= s.state.Reserve { // a resumed state's reserve is the search's
			continue
		}
		opt.MemoryReserve = reserve
		r := retry{"the plan does not place: searching again with memory kept free on every tile", "no plan keeps that memory free", slog.Int64("reserve_bytes", reserve)}
		found, l2, e2 := searchAgain(log, cfg, g, opt, s, r, err)
		if !found {
			break
		}
		linked, err = l2, e2
	}
	return limitVariables(log, cfg, g, first, s, linked, err)
}

// retry names a search again of a plan that does not place: its
// warning, the warning when it finds no plan, and the attribute both
// carry.
type retry struct {
	again, none string
	attr        slog.Attr
}

// searchAgain warns why (placeErr, the placement's error: its first
// line) and searches again with opt, afresh (no state, no progress
// bars). When that search finds no plan, it warns so (with its error's
// first line) and returns false: the model does not fit so, and the
// placement's error, not that search's, is the user's. Otherwise s
// becomes the new search, and found is true with its validation link's
// figures and error.
func searchAgain(log *slog.Logger, cfg config, g *graph.Graph, opt planner.Options, s *searched, r retry, placeErr error) (found bool, linked *link.Stats, err error) {
	why, _, _ := strings.Cut(placeErr.Error(), "\n")
	log.Warn(r.again, r.attr, slog.String("reason", why))
	opt.State, opt.Progress, opt.StartProgress = nil, nil, nil
	pl, state, st, err := planner.Plan(g, cfg.arch, opt)
	if err != nil {
		why, _, _ := strings.Cut(err.Error(), "\n")
		log.Warn(r.none, r.attr, slog.String("reason", why))
		return false, nil, nil
	}
	s.pl, s.state, s.st = pl, state, st
	linked, err = validateLink(log, cfg, s.pl, nil)
	return true, linked, err
}

// maxVariableRounds bounds the searches limitVariables makes.
const maxVariableRounds = 3

// limitVariables searches again a plan whose variable did not place in
// memory that was free, but in pieces (the bytes a search counts are
// there; the linker places a buffer in one range while the others live
// around it): as the first search (opt: its objective), with no memory
// kept free (keeping it leaves the search fewer ways to split the large
// variables) and no variable as large as that one on any tile. A variable of the new plan that does not place so is the
// next round's limit; a search that finds no plan ends them, the
// placement's error the user's.
func limitVariables(log *slog.Logger, cfg config, g *graph.Graph, opt planner.Options, s *searched, linked *link.Stats, err error) (*link.Stats, error) {
	for range maxVariableRounds {
		var me *link.MemoryError
		if err == nil || cfg.merge || !errors.As(err, &me) || !me.Variable || me.FreeAll < me.Size || me.Size < 2 {
			break // (a limit of 0 is none)
		}
		opt.MemoryReserve, opt.MaxVariable = 0, int64(me.Size)-1
		r := retry{"the plan does not place: searching again with every variable smaller on a tile", "no plan keeps its variables that small", slog.Int64("max_variable_bytes", opt.MaxVariable)}
		found, l2, e2 := searchAgain(log, cfg, g, opt, s, r, err)
		if !found {
			break
		}
		linked, err = l2, e2
	}
	return linked, err
}

// recordValidation puts the validation link's figures and schedules in
// the plan and the state, and returns the plan's encoding.
func recordValidation(log *slog.Logger, cfg config, s searched, linked *link.Stats) ([]byte, error) {
	pl, state := s.pl, s.state
	logAlignment(log, linked)
	if linked.StagedPacks {
		pl.Packs = plan.StagedPacks // what the validation link did: ipu-link need not try again
	}
	host := linked.HostLinkCycles(cfg.arch)
	state.Exchanges, state.Validated = linked.Saved, linked.FinalCycles
	if plan.ObjectiveOf(state.Objective) == plan.ObjectiveInference {
		state.Validated += host // the shards' merge compares what the search minimised
	}
	pl.Cost.HostLinkCycles = host
	log.Info("costed search incumbent", slog.Int64("estimated_cycles", pl.Cost.FinalCycles), slog.Int64("linked_cycles", linked.FinalCycles))
	pl.Cost.FinalCycles, pl.Cost.FinalExchange, pl.Cost.Estimated = linked.FinalCycles, linked.FinalExchange, false
	pl.Search.IncumbentCycles = linked.FinalCycles
	// The validated schedules go with the plan: ipu-link relocates and
	// validates them instead of scheduling the same supersteps again.
	pl.Schedules = plan.PackSchedules(linked.Saved)
	encoded, err := plan.Marshal(pl)
	if err != nil {
		return nil, fmt.Errorf("encode plan: %w", err)
	}
	log.Info("validated search incumbent", slog.Int64("cycles", pl.Cost.FinalCycles), slog.Bool("resuming", s.st.Resuming))
	return encoded, nil
}

// loadState reads the search state file; a file that does not exist yet
// is a fresh search (nil).
func loadState(path string) (*plan.State, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read search state: %w", err)
	}
	s, err := plan.ReadState(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// recordedPath is the model path the plan records: as given, or the base
// name when absolute, so that artifacts carry no absolute paths.
func recordedPath(path string) string {
	if filepath.IsAbs(path) {
		return filepath.Base(path)
	}
	return filepath.ToSlash(filepath.Clean(path))
}

// validate lowers the plan in process (the link phases nest in
// plan_package) and builds its tile images. A plan the linker refuses is
// an error: ipu-plan never writes a plan that ipu-link cannot link.
func validate(log *slog.Logger, cfg config, pl *plan.Plan, saved []plan.Exchange) (*link.Stats, error) {
	// The object is not kept: it records no plan file and no model.
	o, st, err := link.Link(pl, "", link.Options{Log: log, Saved: saved, Runtime: cfg.runtime, NoModel: true})
	if err != nil {
		return nil, fmt.Errorf("%s: lowering the plan: %w", cfg.model, err)
	}
	ph := trace.Phase(log, "build_tile_images")
	_, err = pack.Build(o, cfg.arch)
	if err := ph.End(err); err != nil {
		return nil, fmt.Errorf("%s: building the tile images: %w", cfg.model, err)
	}
	return st, nil
}

// reserveFractions are the parts of a tile's usable memory ipu-plan's
// searches keep free, in turn, when a plan does not place.
var reserveFractions = []int64{16, 8, 4}

// validateLink is the incumbent's validation link (a test makes it
// fail as a placement the search's checks missed would).
var validateLink = validateCompact

// validateCompact validates a plan whose supersteps are compacted; when
// it does not link (compaction lets independent steps' buffers live at
// once, and the search's memory check counts a tile's bytes, not its
// regions' free ranges), it falls back to the steps in order, saying
// why, and the plan says so (pl.Supersteps cleared, its estimate the
// steps in order's). The compacted attempt's lines are logged only when
// it is kept.
func validateCompact(log *slog.Logger, cfg config, pl *plan.Plan, saved []plan.Exchange) (*link.Stats, error) {
	if pl.Supersteps != plan.Compact {
		return validate(log, cfg, pl, saved)
	}
	hd := trace.Hold(log)
	st, err := validate(hd.Logger(), cfg, pl, saved)
	if err == nil {
		return st, hd.Flush()
	}
	why, _, _ := strings.Cut(err.Error(), "\n")
	log.Warn("compacted supersteps do not link: linking the steps in order", slog.String("reason", why))
	pl.Supersteps = ""
	// The estimate becomes the steps in order's, priced as the search
	// priced the compacted program.
	c, err := planner.BoundPrice(pl, cfg.arch)
	if err != nil {
		return nil, fmt.Errorf("%s: pricing the plan: %w", cfg.model, err)
	}
	pl.Cost.FinalCycles, pl.Cost.FinalExchange = c.FinalCycles, c.FinalExchange
	return validate(log, cfg, pl, saved)
}

// logAlignment reports the instruction-alignment validation of the
// exchange supersteps the validation link scheduled: the retry line only
// when some fast schedule failed (transfers: the failing ones), the
// finished line whenever a superstep was scheduled (none is when every
// schedule was reused from the search state).
func logAlignment(log *slog.Logger, st *link.Stats) {
	if st.AlignedPhases == 0 {
		return
	}
	a := st.Alignment
	if a.Retried() {
		log.Info("retrying exchange schedule with incremental instruction-alignment validation", slog.Int("transfers", a.Failed))
	}
	level := slog.LevelInfo
	if !a.Success {
		level = slog.LevelError
	}
	log.Debug("rescheduled exchange transfers after instruction-alignment validation", slog.Int("failed", a.Failed), slog.Int("rescheduled", a.Rescheduled),
		slog.Int("supersteps", st.AlignedPhases), slog.Int("retried_supersteps", st.RetriedPhases), slog.Int("rounds", a.Rounds))
	log.Log(context.Background(), level, "finished incremental instruction-alignment validation", slog.Int("transfers", a.Failed),
		trace.ElapsedMS(a.Elapsed), slog.Bool("success", a.Success))
}
