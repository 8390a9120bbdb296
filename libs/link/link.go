package link

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"

	"ipu.local/formats/obj"
	"ipu.local/formats/plan"
	"ipu.local/libs/arch"
	"ipu.local/libs/codegen"
	"ipu.local/libs/graph"
	"ipu.local/libs/lower"
	"ipu.local/libs/par"
	"ipu.local/libs/prog"
	"ipu.local/libs/sched"
	"ipu.local/libs/trace"
)

// Compiler is the toolchain version the object records.
const Compiler = "0.2.0"

// NotLoweredError is a plan step the linker does not generate code for.
type NotLoweredError = lower.NotLoweredError

// Superstep is one superstep of the program with its cost.
type Superstep struct {
	Name   string
	Kind   obj.PhaseKind
	Cycles int64 // the longest tile's cycles, without the sync
}

// Stats are the linker's figures for its log lines and the bench.
type Stats struct {
	// StagedPacks: the plan's in-place packs did not fit, every pack
	// was staged (Link).
	StagedPacks bool
	// FinalCycles is the device program's cycles from its first compute
	// or exchange superstep to its last, syncs included; FinalExchange
	// the part spent in exchange supersteps.
	FinalCycles, FinalExchange int64
	Supersteps                 []Superstep
	// HostInBytes and HostOutBytes are the bytes the host supersteps move
	// (HostLinkCycles).
	HostInBytes, HostOutBytes int64
	Transfers                 int // exchange transfers (multicasts count once)
	// ReusedExchanges counts the exchange supersteps whose schedule is an
	// earlier superstep's relocated to their addresses; RefusedReuses
	// those of a repeated pattern scheduled again because the relocation
	// was refused or did not validate.
	ReusedExchanges, RefusedReuses int
	// FromState counts the exchange supersteps whose schedule is one of
	// Options.Saved relocated; Saved are the schedules this link made
	// (one per pattern), for a search state to keep (none with NoSave).
	FromState int
	Saved     []plan.Exchange
	// PadClearsRemoved counts the FP8 casts whose unread padding clears
	// the padding-clear pass removed (prog.Program.PadClearsRemoved).
	PadClearsRemoved int
	// AlignedPhases counts the exchange supersteps scheduled in this
	// link (not reused), RetriedPhases those whose fast schedule failed
	// instruction-alignment validation and was repaired. Alignment sums
	// their sched.AlignStats: transfers, failing and rescheduled ones and
	// the time are totals (the time added over supersteps scheduled side
	// by side), Rounds the most of one superstep, Success all of them.
	AlignedPhases, RetriedPhases int
	Alignment                    sched.AlignStats
	Tiles                        int // tiles with a program
	// Figures of the tile with the most code.
	LinkedEnd          uint32 // end of its code
	CodeAddress        uint32 // its supervisor entry
	GeneratedCodeBytes int    // worker kernels (code and tables)
	HostCodeBytes      int    // the supervisor's host supersteps
	ExchangeTableBytes int    // the supervisor's exchange code and patch tables (largest over tiles)
	// ExchangeStorage are the figures of the exchange code's repeat
	// loops and patch tables.
	ExchangeStorage ExchangeStorage
	// PatchPlacement is what optimize_exchange_placement did with the
	// patch tables; ExchangeStorage are the figures before it.
	PatchPlacement PatchPlacement
	HostDataBytes  int // host-delivered buffers (hin targets) on that tile
	Executable     arch.Range
	Available      []arch.Range // memory free on every tile after placement
	// ProfileBytes and ProfileAddr are the per-tile profile buffer
	// (ProfileSymbol): one word per compute superstep, where each tile's
	// supervisor stores the cycle counter (CSR cycles) just before the
	// superstep's sync. ProfileBytes is 0 when the program has no compute
	// superstep.
	ProfileBytes int
	ProfileAddr  uint32
	// Memory is every tile's peak memory by category.
	Memory []TileMemory
	// Branches are the Ifs the device branches on with their sides'
	// cycles (syncs included); FinalCycles counts the longer side.
	Branches []BranchCost
	sync     int64
}

// BranchCost is one branch's sides: their cycles and superstep ranges
// [lo, hi) in Supersteps.
type BranchCost struct {
	If                   string
	Then, Else           int64
	ThenSteps, ElseSteps [2]int
}

// Options tune Link.
type Options struct {
	// Log receives the phase lines (nil: discard).
	Log *slog.Logger
	// NoExchangeReuse schedules every exchange superstep from scratch,
	// also those that could relocate an earlier one's schedule (a debug
	// switch: the object is the same either way).
	NoExchangeReuse bool
	// Saved are exchange schedules an earlier link made (a search
	// state's): a superstep moving the pattern of one of them relocates
	// and validates it instead of scheduling.
	Saved []plan.Exchange
	// NoExchangeLoops keeps every exchange superstep's code straight-line
	// (a debug switch: the same cycles and results, more code).
	NoExchangeLoops bool
	// NoPatchSharing stores every exchange superstep's patch table
	// whole, one after the other, also runs of values another loop has
	// stored already (a debug switch: the same code and cycles, larger
	// tables).
	NoPatchSharing bool
	// KeepPadClears skips the padding-clear pass (lower.Options): every
	// FP8 cast clears its padding (a debug switch).
	KeepPadClears bool
	// NoSave leaves Stats.Saved empty: for a caller that keeps no search
	// state (ipu-link), the schedules are not encoded for one.
	NoSave bool
	// NoModel leaves the object's model section (the graph the host
	// reference runs) empty: for a caller that discards the object
	// (ipu-plan's validation link), the graph is not encoded again.
	NoModel bool
	// Runtime is the tile runtime compiled for the plan's architecture
	// (CompileRuntime): compile_runtime takes it instead of compiling
	// (nil, or another architecture's: compile).
	Runtime *Runtime
}

// linker holds one Link call.
type linker struct {
	p     *arch.Preset
	pl    *plan.Plan
	g     *graph.Graph
	log   *slog.Logger
	st    Stats
	prog  *prog.Program
	model []byte
	tiles map[int]*tile
	exch  []*sched.Plan // by superstep (nil for others)
	// packed is exch with every tile's code compressed (packExchanges):
	// the code the tiles run.
	packed []*sched.Plan
	prof   *prog.Buffer // the profile buffer (nil: none)
	// profWord is each superstep's word in the profile buffer (-1: none).
	profWord []int
	// noReuse is Options.NoExchangeReuse, noSave Options.NoSave, noModel
	// Options.NoModel; saved, Options.Saved.
	noReuse, keepPad, noLoops, noShare, noSave, noModel bool
	// modelDone reports the end of encodeModel's encoding (nil: none
	// pending).
	modelDone chan error
	saved     []plan.Exchange
	rt        *runtimeLib // the tile runtime (compile_runtime)
	given     *Runtime    // Options.Runtime
	// kcode is the kernels' code by key (prepare_tile_code).
	kcode   map[any]*kernelCode
	kcodeMu sync.Mutex
}

// tile is one tile's code.
type tile struct {
	id       int
	b        *codegen.Builder
	kernels  []kernelSym // emitted kernels, in code order
	layout   []kernelSym // what follows them: host command tables, runtime routines, the supervisor program
	code     []byte
	entry    uint32
	gen      int                // worker code bytes (compile_kernels)
	rt       *tileRuntime       // the linked runtime (link_runtime)
	launch   int                // runtime and supervisor program bytes (link_runtime), host transfers aside
	hostCode int                // host transfer code bytes
	exCode   int                // exchange code bytes
	exPieces [][2]codegen.Label // the exchange code emitted, per exchange superstep, and its patch tables: [start, end)
	patches  *patchLayout       // its stored patch tables (optimize_exchange_placement)
	// patchLabels are the labels of patches' words the code loads.
	patchLabels map[int]codegen.Label
	hostData    int
}

// kernelSym names an emitted kernel for the object's symbols.
type kernelSym struct {
	name  string
	entry codegen.Label
}

// Link lowers pl. fingerprint is the plan file's fingerprint, recorded
// as the object's source.
//
// When the plan packs in place (pl.Packs "") and a buffer then finds no
// room, it links again with every pack staged (plan.StagedPacks: the
// program the search priced; the operand blocks live from the exchange
// on), saying so; Stats.StagedPacks reports it. When that does not link
// either, its error is returned.
func Link(pl *plan.Plan, fingerprint string, opt Options) (*obj.Object, *Stats, error) {
	return stagingWhenFull(pl, opt.Log, func(p *plan.Plan) (*obj.Object, *Stats, error) { return link(p, fingerprint, opt) })
}

// stagingWhenFull runs try on pl and, when pl packs in place and a
// buffer finds no room (*MemoryError), on a copy of pl with every pack
// staged, logging why (Link).
func stagingWhenFull(pl *plan.Plan, log *slog.Logger, try func(*plan.Plan) (*obj.Object, *Stats, error)) (*obj.Object, *Stats, error) {
	o, st, err := try(pl)
	if !retriesStaged(pl, err) {
		return o, st, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var me *MemoryError
	errors.As(err, &me)
	why, _, _ := strings.Cut(me.Error(), "\n") // the memory report follows
	log.Warn("operand blocks packed in place do not fit: staging every pack", slog.String("reason", why))
	alt := *pl
	alt.Packs = plan.StagedPacks
	o, st, err = try(&alt)
	if err != nil {
		return nil, nil, err // the staged program's: the one the search priced
	}
	st.StagedPacks = true
	return o, st, nil
}

// retriesStaged reports whether stagingWhenFull links pl again, staged,
// after its link failed with err: pl packs in place and a buffer found
// no room.
func retriesStaged(pl *plan.Plan, err error) bool {
	var me *MemoryError
	return err != nil && pl.Packs == "" && errors.As(err, &me)
}

func link(pl *plan.Plan, fingerprint string, opt Options) (*obj.Object, *Stats, error) {
	log := opt.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p, err := arch.Lookup(pl.Arch)
	if err != nil {
		return nil, nil, fmt.Errorf("plan: arch: %w", err)
	}
	g, err := graph.Decode(&pl.Graph)
	if err != nil {
		return nil, nil, fmt.Errorf("plan: %w", err)
	}
	l := &linker{p: p, pl: pl, g: g, log: log, tiles: map[int]*tile{}, noReuse: opt.NoExchangeReuse, keepPad: opt.KeepPadClears, noLoops: opt.NoExchangeLoops, noShare: opt.NoPatchSharing, noSave: opt.NoSave, noModel: opt.NoModel, saved: opt.Saved, given: opt.Runtime, kcode: map[any]*kernelCode{}}
	for _, ph := range []struct {
		name string
		fn   func(*slog.Logger) error
	}{
		{"compile_runtime", l.compileRuntime},
		{"plan_kernels", l.planKernels},
		{"compile_kernels", l.compileKernels},
		{"link_runtime", l.linkRuntime},
		{"size_tile_code", l.sizeTileCode},
		{"place_storage", l.placeStorage},
		{"lower_exchanges", l.lowerExchanges},
		{"optimize_exchange_placement", l.optimizeExchangePlacement},
	} {
		if err := l.phase(ph.name, ph.fn); err != nil {
			return nil, nil, err
		}
	}
	l.costProgram(l.log)
	l.log.Info("costed final placed program", slog.Int64("final_cycles", l.st.FinalCycles), slog.Int64("final_exchange", l.st.FinalExchange))
	l.log.Info("costed host supersteps", slog.Int64("host_in_bytes", l.st.HostInBytes), slog.Int64("host_out_bytes", l.st.HostOutBytes),
		slog.Int64("host_link_cycles", l.st.HostLinkCycles(l.p)))
	if err := l.phase("prepare_tile_code", l.prepareTileCode); err != nil {
		return nil, nil, err
	}
	var o *obj.Object
	err = l.phase("emit_tile_code", func(*slog.Logger) error {
		var err error
		o, err = l.emit(fingerprint)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return o, &l.st, nil
}

func (l *linker) phase(name string, fn func(*slog.Logger) error) error {
	ph := trace.Phase(l.log, name)
	err := fn(ph.Logger())
	if retriesStaged(l.pl, err) {
		return ph.EndRecovered(err) // Link goes on with every pack staged
	}
	return ph.End(err)
}

// encodeModel starts encoding the model section the package carries for
// the host reference, beside the phases that follow (the planKernels
// lowering runs on one core; the 12-layer encoder's graph takes 4 s to
// encode); modelSection waits for it. The graph is only read.
func (l *linker) encodeModel() error {
	if l.noModel {
		return nil
	}
	done := make(chan error, 1)
	l.modelDone = done
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- fmt.Errorf("plan: graph: encoding: %v", r)
			}
		}()
		m, err := plan.MarshalGraph(l.pl.Graph)
		if err != nil {
			done <- fmt.Errorf("plan: graph: %w", err)
			return
		}
		l.model = m
		done <- nil
	}()
	return nil
}

// modelSection waits for encodeModel's encoding and returns the model
// section (nil with Options.NoModel).
func (l *linker) modelSection() ([]byte, error) {
	if l.modelDone == nil {
		return l.model, nil
	}
	err := <-l.modelDone
	l.modelDone = nil
	return l.model, err
}

// planKernels lowers the plan's steps to the program.
func (l *linker) planKernels(*slog.Logger) error {
	pr, err := lower.LowerWith(l.pl, l.g, l.p, lower.Options{KeepPadClears: l.keepPad})
	if err != nil {
		return err
	}
	l.prog = pr
	l.st.PadClearsRemoved = pr.PadClearsRemoved
	pr.Liveness()
	for _, s := range pr.Steps {
		for _, t := range s.Tiles() {
			l.tile(t)
		}
	}
	if len(l.tiles) == 0 {
		return fmt.Errorf("plan: no tile has work")
	}
	return nil
}

func (l *linker) tile(t int) *tile {
	tl := l.tiles[t]
	if tl == nil {
		tl = &tile{id: t}
		l.tiles[t] = tl
	}
	return tl
}

func (l *linker) sortedTiles() []int {
	ts := make([]int, 0, len(l.tiles))
	for t := range l.tiles {
		ts = append(ts, t)
	}
	sort.Ints(ts)
	return ts
}

// eachTile runs fn for every tile with a program, on all host cores; the
// first error in tile order wins. fn may touch only its tile's state.
func (l *linker) eachTile(fn func(t int) error) error {
	ts := l.sortedTiles()
	errs := make([]error, len(ts))
	par.For(len(ts), par.Cores(), func(_, i int) { errs[i] = fn(ts[i]) })
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// compileKernels compiles every tile's distinct kernels to size its
// code: worker code and tables.
func (l *linker) compileKernels(*slog.Logger) error {
	// Kernels of one shape have one code length: measure each shape once.
	var mu sync.Mutex
	lengths := map[any]int{}
	return l.eachTile(func(t int) error {
		tl := l.tiles[t]
		seen := map[*prog.Kernel]bool{}
		keys := map[any]bool{}
		for _, s := range l.prog.Steps {
			for _, k := range s.Work[t] {
				if seen[k] {
					continue
				}
				seen[k] = true
				if err := prog.ProbeAddrs(l.p, k); err != nil {
					return fmt.Errorf("tile %d: %s: %w", t, k.What, err)
				}
				key := k.Key()
				fk := fixKey(k, key)
				if keys[fk] {
					continue
				}
				keys[fk] = true
				mu.Lock()
				n, ok := lengths[key]
				mu.Unlock()
				if !ok {
					b := codegen.NewBuilder(l.p, l.p.Executable.Lo)
					if _, err := k.Emit(b); err != nil {
						return fmt.Errorf("tile %d: %w", t, err)
					}
					n = 4 * b.Len()
					mu.Lock()
					lengths[key] = n
					mu.Unlock()
				}
				tl.gen += n
			}
		}
		return nil
	})
}

// fixKey identifies a kernel before placement: its parameters' type and
// shape (key, its Key) with the buffers it touches (two launches with
// one fixKey are the same code at the same addresses after placement).
func fixKey(k *prog.Kernel, key any) any {
	// Each fix's buffer ID and offset as two varints (the list of them
	// is one string, a comparable key).
	refs := make([]byte, 0, 8*len(k.Fixes))
	for _, f := range k.Fixes {
		refs = binary.AppendVarint(refs, int64(f.Ref.Buf.ID))
		refs = binary.AppendUvarint(refs, uint64(f.Ref.Off))
	}
	return struct {
		key  any
		refs string
	}{key, string(refs)}
}

// maxInstrsPerExchangeEvent bounds the supervisor instructions sched
// spends on one send or receive: three register loads of two
// instructions, a delay and the event.
const maxInstrsPerExchangeEvent = 8

// sizeTileCode bounds each tile's supervisor code: host transfers (calls
// of the runtime's command loops and their command tables) and exchange
// code (straight-line, before compression: lower_exchanges replaces the
// bound with the code and logs its storage).
func (l *linker) sizeTileCode(*slog.Logger) error {
	for _, s := range l.prog.Steps {
		for t, ops := range s.Host {
			tl := l.tile(t)
			// Per run of one direction, a call of the runtime's command
			// loop: li of the table, li of the count, call; per
			// transfer, a command of three words in the table.
			for _, run := range hostCmdRuns(ops) {
				tl.hostCode += 4 * (codegen.ConstLen(l.p.Memory.Hi) + codegen.ConstLen(uint32(len(run))) + 1 + 3*len(run))
			}
			for _, op := range ops {
				if op.In {
					tl.hostData += int(op.Bytes)
				}
			}
		}
		if s.Kind == obj.Exchange {
			per := map[int]int{}
			for _, x := range s.Xfers {
				per[x.Src]++
				for u := x.Dst; u <= x.Last(); u += x.Step() {
					per[u]++
				}
			}
			for t, n := range per {
				l.tile(t).exCode += 4 * (n*maxInstrsPerExchangeEvent + 1)
			}
		}
	}
	return nil
}

// codeBytes is a tile's code bound: kernels, launches, host and exchange
// code.
func (tl *tile) codeBytes() int { return tl.gen + tl.launch + tl.hostCode + tl.exCode }

// HostLinkCycles is the host link's cycles for the host supersteps'
// bytes, in and out, at the preset's chip-wide rate.
func (s *Stats) HostLinkCycles(p *arch.Preset) int64 {
	per := int64(max(p.HostBytesPerCycle, 1))
	return (s.HostInBytes + s.HostOutBytes + per - 1) / per
}
