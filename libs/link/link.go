package link

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"

	"ipu.local/formats/obj"
	"ipu.local/formats/plan"
	"ipu.local/libs/arch"
	"ipu.local/libs/codegen"
	"ipu.local/libs/cost"
	"ipu.local/libs/graph"
	"ipu.local/libs/planner"
	"ipu.local/libs/sched"
	"ipu.local/libs/trace"
)

// Compiler is the toolchain version the object records.
const Compiler = "0.1.0"

// NotLoweredError is a plan node the linker does not generate code for.
type NotLoweredError struct {
	Node, Op string
	Why      string
}

func (e *NotLoweredError) Error() string {
	return fmt.Sprintf("node %q: operator %s is not lowered: %s", e.Node, e.Op, e.Why)
}

func notLowered(n *graph.Node, format string, args ...any) error {
	return &NotLoweredError{Node: n.Name, Op: n.Op, Why: fmt.Sprintf(format, args...)}
}

// Superstep is one superstep of the program with its cost.
type Superstep struct {
	Name   string
	Kind   obj.PhaseKind
	Cycles int64 // the longest tile's cycles, without the sync
}

// Stats are the linker's figures for its log lines and the bench.
type Stats struct {
	// FinalCycles is the device program's cycles from its first compute
	// or exchange superstep to its last, syncs included; FinalExchange
	// the part spent in exchange supersteps.
	FinalCycles, FinalExchange int64
	Supersteps                 []Superstep
	// HostInBytes and HostOutBytes are the bytes the host supersteps move.
	HostInBytes, HostOutBytes int64
	Transfers                 int // exchange transfers (multicasts count once)
	Tiles                     int // tiles with a program
	// Figures of the tile with the most code.
	LinkedEnd          uint32 // end of its code
	CodeAddress        uint32 // its supervisor entry
	GeneratedCodeBytes int    // worker kernels (code and tables)
	HostCodeBytes      int    // the supervisor's host supersteps
	ExchangeTableBytes int    // the supervisor's exchange code (largest over tiles)
	HostDataBytes      int    // host-delivered buffers (hin targets) on that tile
	Executable         arch.Range
	Available          []arch.Range // its free memory after placement
}

// Options tune Link.
type Options struct {
	// Log receives the phase lines (nil: discard).
	Log *slog.Logger
}

// Link lowers pl. fingerprint is the plan file's fingerprint, recorded
// as the object's source.
func Link(pl *plan.Plan, fingerprint string, opt Options) (*obj.Object, *Stats, error) {
	log := opt.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p, err := arch.Lookup(pl.Arch)
	if err != nil {
		return nil, nil, fmt.Errorf("plan: arch: %w", err)
	}
	if pl.Tiles < 1 || pl.Tiles > p.Tiles {
		return nil, nil, fmt.Errorf("plan: tiles: %d outside [1, %d] of %s", pl.Tiles, p.Tiles, p.Name)
	}
	g, err := planner.DecodeGraph(&pl.Graph)
	if err != nil {
		return nil, nil, fmt.Errorf("plan: %w", err)
	}
	l := &linker{p: p, pl: pl, g: g, log: log, tiles: map[int]*tile{}}

	// compile_runtime: the superstep skeleton and the host program.
	if err := l.phase("compile_runtime", l.compileRuntime); err != nil {
		return nil, nil, err
	}
	if err := l.phase("plan_kernels", l.planKernels); err != nil {
		return nil, nil, err
	}
	if err := l.phase("compile_kernels", l.compileKernels); err != nil {
		return nil, nil, err
	}
	if err := l.phase("link_runtime", l.linkRuntime); err != nil {
		return nil, nil, err
	}
	if err := l.phase("size_tile_code", l.sizeTileCode); err != nil {
		return nil, nil, err
	}
	if err := l.phase("place_storage", l.placeStorage); err != nil {
		return nil, nil, err
	}
	if err := l.phase("lower_exchanges", l.lowerExchanges); err != nil {
		return nil, nil, err
	}
	if err := l.phase("optimize_exchange_placement", l.optimizeExchangePlacement); err != nil {
		return nil, nil, err
	}
	l.costProgram()
	l.log.Info("costed final placed program", slog.Int64("final_cycles", l.st.FinalCycles), slog.Int64("final_exchange", l.st.FinalExchange))
	// Host transfers are outside final_cycles (inputs are resident in the
	// plan's layout, as weights and earlier outputs would be).
	l.log.Info("costed host supersteps", slog.Int64("host_in_bytes", l.st.HostInBytes), slog.Int64("host_out_bytes", l.st.HostOutBytes),
		slog.Int64("host_link_cycles", (l.st.HostInBytes+l.st.HostOutBytes+int64(l.p.HostBytesPerCycle)-1)/int64(max(l.p.HostBytesPerCycle, 1))))
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

// linker holds one Link call.
type linker struct {
	p   *arch.Preset
	pl  *plan.Plan
	g   *graph.Graph
	log *slog.Logger
	st  Stats

	steps    []*superstep
	tiles    map[int]*tile
	pages    []obj.Page
	inputs   []obj.Tensor
	outputs  []obj.Tensor
	inIndex  map[*graph.Value]int // graph input -> inputs index
	outIndex map[*graph.Value]int
	exch     []*sched.Plan // by superstep (nil for others)
	model    []byte
	// later holds the result superstep's houts until it exists.
	later      []hostOp
	laterTiles []int
	// ew is the state of the nodes that are not products (elementwise.go).
	ew *nodeState
}

func (l *linker) phase(name string, fn func(*slog.Logger) error) error {
	ph := trace.Phase(l.log, name)
	return ph.End(fn(ph.Logger()))
}

// superstep is one superstep of every tile.
type superstep struct {
	kind obj.PhaseKind
	name string
	// work: compute kernels by tile, in order.
	work map[int][]*kernel
	// xfers: an exchange superstep's transfers.
	xfers []sched.Transfer
	// host: a host superstep's transfers by tile.
	host map[int][]hostOp
	// code and cycles of each tile's exchange (lower_exchanges).
	cycles int64
}

// kernel is one launch on one tile.
type kernel struct {
	what string
	mm   *codegen.MatMul
	mm32 *codegen.MatMulF32
	cast *codegen.Cast
	bin  *codegen.Binary
	un   *codegen.Unary
	rows *codegen.Rows
	pack *codegen.Pack
	// set by compile_kernels
	entry   codegen.Label
	workers int
	cost    codegen.Cost
}

func (k *kernel) key() any {
	switch {
	case k.mm != nil:
		return *k.mm
	case k.mm32 != nil:
		return *k.mm32
	case k.cast != nil:
		return *k.cast
	case k.un != nil:
		return *k.un
	case k.rows != nil:
		return *k.rows
	case k.pack != nil:
		return *k.pack
	}
	return *k.bin
}

func (k *kernel) costOf() (codegen.Cost, error) {
	switch {
	case k.mm != nil:
		return k.mm.Cost()
	case k.mm32 != nil:
		return k.mm32.Cost()
	case k.cast != nil:
		return k.cast.Cost()
	case k.un != nil:
		return k.un.Cost()
	case k.rows != nil:
		return k.rows.Cost()
	case k.pack != nil:
		return k.pack.Cost()
	}
	return k.bin.Cost()
}

// hostOp is one hin (In) or hout of a tile.
type hostOp struct {
	in    bool
	page  uint8
	off   uint32
	addr  uint32
	bytes uint32
}

// tile is one tile's program and memory.
type tile struct {
	id   int
	ni   uint32 // non-interleaved allocations grow down from here
	il   uint32 // interleaved allocations grow up from here
	bufs []buffer
	// code
	b        *codegen.Builder
	entries  map[any]kernelEntry
	kernels  []kernelSym // emitted kernels, in code order
	code     []byte
	entry    uint32
	codeEnd  uint32
	gen      int // worker code bytes
	hostCode int
	exCode   int
	hostData int
}

// kernelSym names an emitted kernel for the object's symbols.
type kernelSym struct {
	name  string
	entry codegen.Label
}

type kernelEntry struct {
	label codegen.Label
}

// buffer is an allocation on a tile.
type buffer struct {
	name string
	addr uint32
	size uint32
	data []byte // constant contents (nil: zero)
}

func (l *linker) tile(t int) *tile {
	tl := l.tiles[t]
	if tl == nil {
		tl = &tile{id: t, ni: l.p.NonInterleaved.Hi, il: l.p.Interleaved.Lo, entries: map[any]kernelEntry{}}
		l.tiles[t] = tl
	}
	return tl
}

func (l *linker) addStep(kind obj.PhaseKind, name string) *superstep {
	s := l.addStepLater(kind, name)
	l.appendLater(s)
	return s
}

// addStepLater makes a superstep that appendLater puts in the sequence.
func (l *linker) addStepLater(kind obj.PhaseKind, name string) *superstep {
	return &superstep{kind: kind, name: name, work: map[int][]*kernel{}, host: map[int][]hostOp{}}
}

func (l *linker) appendLater(s *superstep) { l.steps = append(l.steps, s) }

// compileRuntime builds the host superstep skeleton and the host pages
// of the graph's inputs and outputs.
func (l *linker) compileRuntime(*slog.Logger) error {
	l.addStep(obj.HostExchange, "fetch")
	l.inIndex = map[*graph.Value]int{}
	l.outIndex = map[*graph.Value]int{}
	for i, v := range l.g.Inputs {
		l.inIndex[v] = i
		l.inputs = append(l.inputs, obj.Tensor{Name: v.Name, DType: v.DType.String(), Shape: append([]int64{}, v.Shape...), Page: uint8(i)})
	}
	for i, v := range l.g.Outputs {
		l.outIndex[v] = i
		l.outputs = append(l.outputs, obj.Tensor{Name: v.Name, DType: v.DType.String(), Shape: append([]int64{}, v.Shape...), Page: uint8(len(l.g.Inputs) + i)})
	}
	if len(l.g.Inputs)+len(l.g.Outputs) > 256 {
		return fmt.Errorf("plan: %d graph inputs and outputs exceed the 256 host pages", len(l.g.Inputs)+len(l.g.Outputs))
	}
	m, err := plan.MarshalGraph(l.pl.Graph)
	if err != nil {
		return fmt.Errorf("plan: graph: %w", err)
	}
	l.model = m
	return nil
}

// planKernels turns every plan step into supersteps with kernels,
// transfers and host operations.
func (l *linker) planKernels(*slog.Logger) error {
	if len(l.pl.Steps) != len(l.g.Nodes) {
		return fmt.Errorf("plan: %d steps for %d nodes", len(l.pl.Steps), len(l.g.Nodes))
	}
	folded := map[int]bool{}
	products := map[int]*cost.Product{} // lowered below, in node order
	for i, st := range l.pl.Steps {
		n := l.g.Nodes[i]
		if st.Node != i || st.Name != n.Name {
			return fmt.Errorf("plan: steps[%d]: node %d %q, want %d %q", i, st.Node, st.Name, i, n.Name)
		}
		switch st.Kernel {
		case "amp-fp16", "amp-fp8", "vec-fp32":
			pr, err := cost.ProductOf(n)
			if err != nil {
				return notLowered(n, "%v", err)
			}
			products[i] = pr
			for _, c := range []cost.Chain{pr.A, pr.B} {
				for _, f := range c.Nodes {
					folded[f.Index] = true
				}
			}
			if oc := cost.OutputCast(l.g, n); oc != nil {
				folded[oc.Index] = true // the product writes its FP16 result
			}
		}
	}
	for i, st := range l.pl.Steps {
		n := l.g.Nodes[i]
		if len(st.Kernel) > 7 && st.Kernel[:7] == "folded:" {
			if !folded[i] {
				return fmt.Errorf("plan: steps[%d] (%q): folded into no product", i, n.Name)
			}
			continue
		}
		if pr := products[i]; pr != nil {
			if err := l.product(st, pr); err != nil {
				return err
			}
			continue
		}
		if err := l.lowerNode(st, n); err != nil { // elementwise.go
			return err
		}
	}
	if err := l.finishNodes(); err != nil {
		return err
	}
	// An exchange superstep whose moves all stayed on their tiles is no
	// superstep at all.
	kept := l.steps[:0]
	for _, s := range l.steps {
		if s.kind == obj.Exchange && len(s.xfers) == 0 {
			continue
		}
		kept = append(kept, s)
	}
	l.steps = kept
	res := l.addStep(obj.HostExchange, "result")
	for i, op := range l.later {
		t := l.laterTiles[i]
		res.host[t] = append(res.host[t], op)
	}
	for _, v := range l.g.Outputs {
		if len(l.outputs[l.outIndex[v]].Blocks) == 0 {
			return fmt.Errorf("plan: output %q is computed by no node", v.Name)
		}
	}
	return nil
}

// compileKernels emits every tile's kernels (worker code and tables),
// once per distinct kernel of the tile.
func (l *linker) compileKernels(*slog.Logger) error {
	return l.eachTile(func(t int) error {
		tl := l.tiles[t]
		tl.b = codegen.NewBuilder(l.p, l.p.Executable.Lo)
		for _, s := range l.steps {
			for _, k := range s.work[t] {
				key := k.key()
				if e, ok := tl.entries[key]; ok {
					k.entry = e.label
					c, err := k.costOf()
					if err != nil {
						return fmt.Errorf("tile %d: %s: %w", t, k.what, err)
					}
					k.cost, k.workers = c, c.Workers
					continue
				}
				var kk codegen.Kernel
				var err error
				switch {
				case k.mm != nil:
					kk, err = codegen.EmitMatMul(tl.b, *k.mm)
				case k.mm32 != nil:
					kk, err = codegen.EmitMatMulF32(tl.b, *k.mm32)
				case k.cast != nil:
					kk, err = codegen.EmitCast(tl.b, *k.cast)
				case k.un != nil:
					kk, err = codegen.EmitUnary(tl.b, *k.un)
				case k.rows != nil:
					kk, err = codegen.EmitRows(tl.b, *k.rows)
				case k.pack != nil:
					kk, err = codegen.EmitPack(tl.b, *k.pack)
				default:
					kk, err = codegen.EmitBinary(tl.b, *k.bin)
				}
				if err != nil {
					return fmt.Errorf("tile %d: %s: %w", t, k.what, err)
				}
				k.entry, k.cost, k.workers = kk.Entry, kk.Cost, kk.Workers
				tl.entries[key] = kernelEntry{kk.Entry}
				tl.kernels = append(tl.kernels, kernelSym{k.what, kk.Entry})
			}
		}
		tl.gen = 4 * tl.b.Len()
		return nil
	})
}

// eachTile runs fn for every tile with a program, on all host cores; the
// first error in tile order wins. fn may touch only its tile's state
// (kernels belong to one tile each).
func (l *linker) eachTile(fn func(t int) error) error {
	ts := l.sortedTiles()
	errs := make([]error, len(ts))
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < runtime.GOMAXPROCS(0); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(ts) {
					return
				}
				errs[i] = fn(ts[i])
			}
		}()
	}
	wg.Wait()
	return firstErr(errs)
}

func firstErr(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// linkRuntime is the seed's link_runtime phase, which has nothing to do
// here: the supervisor program that calls the kernels is emitted by
// prepare_tile_code, once lower_exchanges has scheduled the exchange
// code it contains. The phase is logged so that the log has the seed's
// sequence.
func (l *linker) linkRuntime(*slog.Logger) error { return nil }

func (l *linker) sortedTiles() []int {
	ts := make([]int, 0, len(l.tiles))
	for t := range l.tiles {
		ts = append(ts, t)
	}
	sort.Ints(ts)
	return ts
}

// sizeTileCode bounds each tile's supervisor code: host operations and
// launches (the exchange code is sized by lower_exchanges).
func (l *linker) sizeTileCode(log *slog.Logger) error {
	worstX := 0
	for _, t := range l.sortedTiles() {
		tl := l.tiles[t]
		for _, s := range l.steps {
			for _, op := range s.host[t] {
				tl.hostCode += 4 * (codegen.ConstLen(op.addr) + codegen.ConstLen(uint32(op.page)<<24|op.off) + codegen.ConstLen(op.bytes) + 1)
				if op.in {
					tl.hostData += int(op.bytes)
				}
			}
		}
		tl.hostCode += 4 * 4 // hsyncs, sync and the loop branch
	}
	for _, s := range l.steps {
		if s.kind == obj.Exchange {
			per := map[int]int{}
			for _, x := range s.xfers {
				per[x.Src]++
				for u := x.Dst; u < x.Dst+x.Dests(); u++ {
					per[u]++
				}
			}
			for t, n := range per {
				b := 4 * (n*cost.ExchangeInstrsPerTransfer + 1)
				l.tile(t).exCode += b
				worstX = max(worstX, b)
			}
		}
	}
	log.Info("exchange table and repeat patch storage", slog.Int("exchange_table_bytes", worstX),
		slog.Int("maximum_uncompressed_repeat_patch_bytes", 0), slog.Int("maximum_elided_arithmetic_patch_bytes", 0))
	return nil
}

// placeStorage checks every tile's code against its data and reports
// the placement of the tile with the most code.
func (l *linker) placeStorage(log *slog.Logger) error {
	var worst *tile
	for _, t := range l.sortedTiles() {
		tl := l.tiles[t]
		// Code: the kernels, then the supervisor (host code, launches,
		// exchange code), bounded by the lowest non-interleaved buffer.
		if worst == nil || tl.gen+tl.hostCode > worst.gen+worst.hostCode {
			worst = tl
		}
	}
	if worst == nil {
		return errors.New("plan: no tile has work")
	}
	code := l.p.Executable.Lo + uint32(worst.gen)
	log.Info("placing generated tile programs", slog.Uint64("linked_end", uint64(code)),
		slog.Uint64("host_code_base", uint64(code)), slog.Int("host_code_bytes", worst.hostCode),
		slog.Int("generated_code_bytes", worst.gen), slog.Int("exchange_table_bytes", worst.exCode),
		trace.Bare("executable_ranges", rangesString([]arch.Range{{Lo: code, Hi: worst.ni}})))
	l.st.LinkedEnd, l.st.CodeAddress = code, code
	l.st.GeneratedCodeBytes, l.st.HostCodeBytes, l.st.HostDataBytes = worst.gen, worst.hostCode, worst.hostData
	l.st.Executable = arch.Range{Lo: code, Hi: worst.ni}
	l.st.Available = free(l.p, worst, code+uint32(worst.hostCode))
	log.Info("allocated package support memory", slog.Uint64("linked_end", uint64(code)),
		slog.Int("profile_bytes", 0), slog.Int("exchange_table_bytes", worst.exCode),
		slog.Int("host_code_bytes", worst.hostCode), slog.Int("host_data_bytes", worst.hostData),
		slog.Int("generated_code_bytes", worst.gen), slog.Uint64("code_address", uint64(code)),
		trace.Bare("available_ranges", rangesString(l.st.Available)))
	return nil
}

// free lists the tile memory no buffer or code uses.
func free(p *arch.Preset, tl *tile, codeEnd uint32) []arch.Range {
	used := []arch.Range{{Lo: p.Memory.Lo, Hi: codeEnd}}
	for _, b := range tl.bufs {
		used = append(used, arch.Range{Lo: b.addr, Hi: b.addr + b.size})
	}
	sort.Slice(used, func(i, j int) bool { return used[i].Lo < used[j].Lo })
	var out []arch.Range
	at := p.Memory.Lo
	hi := p.UsableMemory().Hi
	for _, u := range used {
		if u.Lo > at {
			out = append(out, arch.Range{Lo: at, Hi: min(u.Lo, hi)})
		}
		at = max(at, u.Hi)
	}
	if at < hi {
		out = append(out, arch.Range{Lo: at, Hi: hi})
	}
	return out
}

func rangesString(rs []arch.Range) string {
	s := "["
	for i, r := range rs {
		if i > 0 {
			s += ", "
		}
		s += r.String()
	}
	return s + "]"
}

// lowerExchanges schedules every exchange superstep and validates the
// schedule against the simulator's rules.
func (l *linker) lowerExchanges(log *slog.Logger) error {
	l.exch = make([]*sched.Plan, len(l.steps))
	for _, tl := range l.tiles {
		tl.exCode = 0 // the estimate of size_tile_code gives way to the code
	}
	for i, s := range l.steps {
		if s.kind != obj.Exchange {
			continue
		}
		sp, err := sched.Schedule(l.p, s.xfers, sched.Options{})
		if err != nil {
			return fmt.Errorf("superstep %d (%s): %w", i, s.name, err)
		}
		if err := sched.Validate(l.p, s.xfers, sp); err != nil {
			return fmt.Errorf("superstep %d (%s): %w", i, s.name, err)
		}
		log.Info("reused exchange optimization after validating relocated rows", slog.Int("phase", i))
		l.exch[i] = sp
		s.cycles = sp.Makespan
		l.st.Transfers += len(s.xfers)
		for _, tc := range sp.Tiles {
			tl := l.tile(tc.Tile)
			tl.exCode += 4 * len(tc.Code)
			l.st.ExchangeTableBytes = max(l.st.ExchangeTableBytes, 4*len(tc.Code))
		}
	}
	return nil
}

// optimizeExchangePlacement checks that each tile's code (kernels,
// supervisor with its exchange code) fits below its lowest
// non-interleaved buffer.
func (l *linker) optimizeExchangePlacement(*slog.Logger) error {
	for _, t := range l.sortedTiles() {
		tl := l.tiles[t]
		end := uint64(l.p.Executable.Lo) + uint64(tl.gen+tl.hostCode+tl.exCode) + 4*uint64(l.launchInstrs(t))
		if end > uint64(tl.ni) {
			return fmt.Errorf("tile %d: code of %d bytes overlaps its non-interleaved buffers from %#x", t, end-uint64(l.p.Executable.Lo), tl.ni)
		}
	}
	return nil
}

// launchInstrs bounds a tile's launch code: li+lih, a run per worker and
// a join per kernel, and a sync per superstep.
func (l *linker) launchInstrs(t int) int {
	n := len(l.steps)
	for _, s := range l.steps {
		n += len(s.work[t]) * (3 + codegen.Slots)
	}
	return n
}

// costProgram sums the supersteps' cycles.
func (l *linker) costProgram() {
	for i, s := range l.steps {
		switch s.kind {
		case obj.Compute:
			var worst int64
			for _, ks := range s.work {
				var at int64
				for _, k := range ks {
					at += k.cost.CyclesAt(int(at % codegen.Slots))
				}
				worst = max(worst, at)
			}
			s.cycles = worst + 1 // the sync issues at the tile's last cycle
		case obj.Exchange:
			if l.exch[i] != nil {
				s.cycles = l.exch[i].Makespan
			}
		}
		l.st.Supersteps = append(l.st.Supersteps, Superstep{Name: s.name, Kind: s.kind, Cycles: s.cycles})
		if s.kind == obj.HostExchange {
			for _, ops := range s.host {
				for _, op := range ops {
					if op.in {
						l.st.HostInBytes += int64(op.bytes)
					} else {
						l.st.HostOutBytes += int64(op.bytes)
					}
				}
			}
			continue
		}
		l.st.FinalCycles += s.cycles + int64(l.p.SyncCycles)
		if s.kind == obj.Exchange {
			l.st.FinalExchange += s.cycles + int64(l.p.SyncCycles)
		}
	}
	l.st.Tiles = len(l.tiles)
}

// prepareTileCode emits each tile's supervisor: startup hsync, then the
// supersteps, then the loop back.
func (l *linker) prepareTileCode(*slog.Logger) error {
	return l.eachTile(func(t int) error {
		tl := l.tiles[t]
		b := tl.b
		sup := b.Here()
		b.Emit(hsync())
		loop := b.Here()
		for i, s := range l.steps {
			switch s.kind {
			case obj.HostExchange:
				for _, op := range s.host[t] {
					b.LoadConst(codegen.M1, op.addr)
					b.LoadConst(codegen.M2, uint32(op.page)<<24|op.off)
					b.LoadConst(codegen.M3, op.bytes)
					if op.in {
						b.Emit(hostInst(true))
					} else {
						b.Emit(hostInst(false))
					}
				}
				if i == len(l.steps)-1 {
					b.Emit(hsync())
					b.Br(loop)
				} else {
					b.Emit(syncInst())
				}
			case obj.Compute:
				for _, k := range s.work[t] {
					codegen.EmitLaunch(b, k.entry, k.workers)
					b.Join()
				}
				b.Emit(syncInst())
			case obj.Exchange:
				if tc := l.exch[i].Tile(t); tc != nil {
					tc.Emit(b)
				} else {
					b.Emit(syncInst())
				}
			}
		}
		code, err := b.Finish()
		if err != nil {
			return fmt.Errorf("tile %d: %w", t, err)
		}
		a, _ := b.Addr(sup)
		tl.code, tl.entry = code, a
		tl.codeEnd = l.p.Executable.Lo + uint32(len(code))
		if tl.codeEnd > tl.ni {
			return fmt.Errorf("tile %d: code [%#x, %#x) overlaps its non-interleaved buffers from %#x", t, l.p.Executable.Lo, tl.codeEnd, tl.ni)
		}
		return nil
	})
}

// emit builds the object.
func (l *linker) emit(fingerprint string) (*obj.Object, error) {
	o := &obj.Object{Arch: l.p.Name, Compiler: Compiler, Source: fingerprint}
	for _, t := range l.sortedTiles() {
		tl := l.tiles[t]
		ot := obj.Tile{Index: t, Entry: tl.entry}
		ot.Segments = append(ot.Segments, obj.Segment{Name: "text", Kind: obj.Code, Addr: l.p.Executable.Lo, Size: uint32(len(tl.code)), Data: tl.code})
		ot.Symbols = append(ot.Symbols, obj.Symbol{Name: "supervisor", Addr: tl.entry, Size: l.p.Executable.Lo + uint32(len(tl.code)) - tl.entry, Code: true})
		// Each kernel (code and table) runs to the next kernel or the
		// supervisor.
		for i, ks := range tl.kernels {
			a, _ := tl.b.Addr(ks.entry)
			end := tl.entry
			if i+1 < len(tl.kernels) {
				end, _ = tl.b.Addr(tl.kernels[i+1].entry)
			}
			ot.Symbols = append(ot.Symbols, obj.Symbol{Name: ks.name, Addr: a, Size: end - a, Code: true})
		}
		bufs := append([]buffer(nil), tl.bufs...)
		sort.Slice(bufs, func(i, j int) bool { return bufs[i].addr < bufs[j].addr })
		for _, bf := range bufs {
			seg := obj.Segment{Name: bf.name, Kind: obj.BSS, Addr: bf.addr, Size: bf.size}
			if bf.data != nil {
				seg.Kind, seg.Data = obj.Data, bf.data
			}
			ot.Segments = append(ot.Segments, seg)
			ot.Symbols = append(ot.Symbols, obj.Symbol{Name: bf.name, Addr: bf.addr, Size: bf.size})
		}
		sort.Slice(ot.Symbols, func(i, j int) bool { return ot.Symbols[i].Addr < ot.Symbols[j].Addr })
		for i, sp := range l.exch {
			if sp == nil {
				continue
			}
			for k, x := range l.steps[i].xfers {
				if x.Src == t {
					ev := sp.Events[k]
					ot.Exchange = append(ot.Exchange, obj.Transfer{Phase: i, Cycle: ev.Send, Dst: x.Dst, DstCount: x.Dests(), Words: x.Words})
				}
			}
		}
		o.Tiles = append(o.Tiles, ot)
	}
	for _, s := range l.steps {
		o.Host.Phases = append(o.Host.Phases, obj.Phase{Kind: s.kind, Name: s.name})
	}
	o.Host.Pages = l.pages
	o.Host.Inputs = l.inputs
	o.Host.Outputs = l.outputs
	o.Host.Model = l.model
	if err := obj.Validate(o); err != nil {
		return nil, fmt.Errorf("internal error: linked %w", err)
	}
	return o, nil
}

// setDataAt writes constant bytes at addr, inside one of tile t's
// buffers (the rest of the buffer stays zero).
func (l *linker) setDataAt(t int, addr uint32, data []byte) {
	tl := l.tile(t)
	for i := range tl.bufs {
		b := &tl.bufs[i]
		if addr >= b.addr && uint64(addr)+uint64(len(data)) <= uint64(b.addr)+uint64(b.size) {
			if b.data == nil {
				b.data = make([]byte, b.size)
			}
			copy(b.data[addr-b.addr:], data)
			return
		}
	}
}

// arrange lays a constant's elements out as one host block would.
func arrange(v *graph.Value, b obj.Block, bytes uint32) ([]byte, error) {
	t := obj.Tensor{Name: v.Name, DType: v.DType.String(), Shape: v.Shape, Blocks: []obj.Block{b}}
	out := make([]byte, bytes)
	if err := t.Scatter(out, v.Const.Raw); err != nil {
		return nil, err
	}
	return out, nil
}
