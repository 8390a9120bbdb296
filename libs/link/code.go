package link

import (
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"

	"ipu.local/formats/obj"
	"ipu.local/libs/arch"
	"ipu.local/libs/codegen"
	"ipu.local/libs/isa"
	"ipu.local/libs/prog"
	"ipu.local/libs/sched"
	"ipu.local/libs/trace"
)

func hsync() isa.Inst    { return isa.Inst{Op: isa.HSYNC, D: uint8(codegen.M0)} }
func syncInst() isa.Inst { return isa.Inst{Op: isa.SYNC} }

// hostInst is hin $m1, $m2, $m3 (tile address, host address, bytes) or
// hout $m2, $m1, $m3.
func hostInst(in bool) isa.Inst {
	if in {
		return isa.Inst{Op: isa.HIN, D: uint8(codegen.M1), A: uint8(codegen.M2), B: uint8(codegen.M3)}
	}
	return isa.Inst{Op: isa.HOUT, D: uint8(codegen.M2), A: uint8(codegen.M1), B: uint8(codegen.M3)}
}

// placeStorage places every buffer by liveness above each tile's code
// bound and reports the placement of the tile with the most code.
func (l *linker) placeStorage(log *slog.Logger) error {
	l.addProfileBuffer()
	pl, err := l.placeBuffers(log)
	if err != nil {
		return err
	}
	l.st.Memory = l.tileMemory(pl)
	var worst *tile
	for _, t := range l.sortedTiles() {
		tl := l.tiles[t]
		if worst == nil || tl.gen+tl.hostCode > worst.gen+worst.hostCode {
			worst = tl
		}
	}
	code := l.p.Executable.Lo + uint32(worst.gen)
	lowest := l.p.NonInterleaved.Hi
	for _, s := range pl.tiles[worst.id] {
		if s.lo < l.p.NonInterleaved.Hi {
			lowest = min(lowest, s.lo)
		}
	}
	log.Info("placing generated tile programs", slog.Uint64("linked_end", uint64(code)),
		slog.Uint64("host_code_base", uint64(code)), slog.Int("host_code_bytes", worst.hostCode),
		slog.Int("generated_code_bytes", worst.gen), slog.Int("exchange_table_bytes", worst.exCode),
		trace.Bare("executable_ranges", rangesString([]arch.Range{{Lo: code, Hi: lowest}})))
	l.st.LinkedEnd, l.st.CodeAddress = code, code
	l.st.GeneratedCodeBytes, l.st.HostCodeBytes, l.st.HostDataBytes = worst.gen, worst.hostCode, worst.hostData
	l.st.Executable = arch.Range{Lo: code, Hi: lowest}
	l.st.Available = l.free(pl)
	if l.prof != nil {
		l.st.ProfileBytes, l.st.ProfileAddr = int(l.prof.Size), l.prof.Addr
	}
	log.Info("allocated package support memory", slog.Uint64("linked_end", uint64(code)),
		slog.Int("profile_bytes", l.st.ProfileBytes), slog.Int("exchange_table_bytes", worst.exCode),
		slog.Int("host_code_bytes", worst.hostCode), slog.Int("host_data_bytes", worst.hostData),
		slog.Int("generated_code_bytes", worst.gen), slog.Uint64("code_address", uint64(code)),
		trace.Bare("available_ranges", rangesString(l.st.Available)))
	return nil
}

// placeBuffers places the program's buffers by the first policy that
// fits them all (lowPolicy's order): the buffers of no region go to the
// interleaved region first; when a buffer finds no room that way, the
// constants and then all of them go to the non-interleaved region
// first, leaving the interleaved region to the buffers that need it
// (the AMP's B operands and C blocks). A placement that fails every way
// returns the first policy's error, with its memory report.
func (l *linker) placeBuffers(log *slog.Logger) (*placer, error) {
	var first *MemoryError
	for low := lowNone; low < numLowPolicies; low++ {
		for _, b := range l.prog.Buffers {
			b.Addr, b.Placed = 0, false
		}
		pl := &placer{p: l.p, tiles: map[int][]span{}, codeTop: map[int]uint32{}, low: low}
		for t, tl := range l.tiles {
			pl.codeTop[t] = l.p.Executable.Lo + uint32(tl.codeBytes())
		}
		err := pl.placeAll(l.prog.Buffers)
		if err == nil {
			if first != nil {
				why, _, _ := strings.Cut(first.Error(), "\n")
				log.Info("placed the buffers of no region another way", slog.String("policy", low.String()), slog.String("reason", why))
			}
			return pl, nil
		}
		me, ok := err.(*MemoryError)
		if !ok {
			return nil, err
		}
		if first == nil {
			me.Report = "\n" + l.memoryReport(pl, 5)
			first = me
		}
	}
	return nil, first
}

// free lists the memory that is free on every tile with a program:
// below the usable top, outside each tile's code (its bound: kernels,
// launch and sync code, host and exchange code, from the executable
// range's start) and outside every placed buffer, the profile buffer
// included. A range any one tile uses is not free.
func (l *linker) free(pl *placer) []arch.Range {
	var used []arch.Range
	for t, tl := range l.tiles {
		used = append(used, arch.Range{Lo: l.p.Memory.Lo, Hi: l.p.Executable.Lo + uint32(tl.codeBytes())})
		for _, s := range pl.tiles[t] {
			used = append(used, arch.Range{Lo: s.lo, Hi: s.hi})
		}
	}
	sort.Slice(used, func(i, j int) bool { return used[i].Lo < used[j].Lo })
	var out []arch.Range
	at := l.p.Memory.Lo
	hi := l.p.UsableMemory().Hi
	for _, u := range used {
		if u.Lo > at && at < hi {
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

// expandLaunch emits the runtime's launch routine of w workers in place,
// without its return: the workers' runs and the join cost no call, so a
// launch costs what CyclesAt counts.
func (l *linker) expandLaunch(b *codegen.Builder, t, w int) {
	r, ok := l.rt.byName[rtLaunch(w)]
	if !ok {
		b.Fail(fmt.Errorf("tile %d: runtime routine %s is not compiled", t, rtLaunch(w)))
		return
	}
	for _, word := range r.words[:len(r.words)-1] {
		in, err := isa.Decode(word)
		if err != nil {
			b.Fail(fmt.Errorf("tile %d: runtime routine %s: %w", t, r.name, err))
			return
		}
		b.Emit(in)
	}
}

func containsTile(ts []int, t int) bool {
	i := sort.SearchInts(ts, t)
	return i < len(ts) && ts[i] == t
}

// costProgram sums the supersteps' cycles: a compute superstep's tile
// runs its launches back to back (codegen's CyclesAt with the issue phase
// carried) and issues its sync; an exchange superstep lasts its
// schedule's makespan.
//
// A branch counts its longer side (every superstep outside branches, and
// of each branch the side with more cycles), and the log names both
// sides' cycles.
func (l *linker) costProgram(log *slog.Logger) {
	cycles := make([]int64, len(l.prog.Steps))
	for i, s := range l.prog.Steps {
		switch s.Kind {
		case obj.Compute:
			worst := s.Pre
			for _, ks := range s.Work {
				at := s.Pre // a branch's test
				for _, k := range ks {
					c, _ := k.Cost()
					at += c.CyclesAt(int(at%codegen.Slots)) + prog.LaunchCallCycles
				}
				worst = max(worst, at)
			}
			if l.prof != nil {
				worst += profileCycles // the counter store before the sync
			}
			s.Cycles = worst + s.Post + 1 // the sync issues at the tile's last cycle
		case obj.Exchange:
			if l.exch[i] != nil {
				s.Cycles = l.exch[i].Makespan
			}
		}
		l.st.Supersteps = append(l.st.Supersteps, Superstep{Name: s.Name, Kind: s.Kind, Cycles: s.Cycles})
		if s.Kind == obj.HostExchange {
			for _, ops := range s.Host {
				for _, op := range ops {
					if op.In {
						l.st.HostInBytes += int64(op.Bytes)
					} else {
						l.st.HostOutBytes += int64(op.Bytes)
					}
				}
			}
			continue
		}
		cycles[i] = s.Cycles
	}
	sync := func(i int) int64 {
		if l.prog.Steps[i].Kind == obj.HostExchange {
			return 0
		}
		return int64(l.p.SyncCycles)
	}
	var sides [][2]int64
	l.st.FinalCycles, sides = l.prog.Longest(cycles, sync)
	path := prog.LongerThen(sides)
	for i, s := range l.prog.Steps {
		if s.Kind == obj.Exchange && l.prog.OnPath(i, path) {
			l.st.FinalExchange += s.Cycles + sync(i)
		}
	}
	for k, b := range l.prog.Branches {
		longer := "else"
		if path[k] {
			longer = "then"
		}
		l.st.Branches = append(l.st.Branches, BranchCost{If: b.If, Then: sides[k][0], Else: sides[k][1], ThenSteps: b.Then, ElseSteps: b.Else})
		log.Info("costed If branches: final_cycles counts the longer side", slog.String("if", b.If),
			slog.Int64("then_cycles", sides[k][0]), slog.Int64("else_cycles", sides[k][1]), slog.String("longer", longer))
	}
	l.st.Tiles = len(l.tiles)
	l.st.sync = int64(l.p.SyncCycles)
}

// PathCycles is the cycles of the program when each branch k takes its
// then side exactly when then[k] (the simulator's run of that path
// gives the same): the supersteps on that path, syncs included.
func (st *Stats) PathCycles(then []bool) int64 {
	var total int64
	for i, s := range st.Supersteps {
		if s.Kind == obj.HostExchange || !st.onPath(i, then) {
			continue
		}
		total += s.Cycles + st.sync
	}
	return total
}

func (st *Stats) onPath(i int, then []bool) bool {
	for k, b := range st.Branches {
		switch {
		case i >= b.ThenSteps[0] && i < b.ThenSteps[1]:
			return then[k]
		case i >= b.ElseSteps[0] && i < b.ElseSteps[1]:
			return !then[k]
		}
	}
	return true
}

// kernelCode is one kernel's code, emitted once for every tile that runs
// it (the code is position-independent: codegen.Builder.Splice).
type kernelCode struct {
	once sync.Once
	b    *codegen.Builder
	k    codegen.Kernel
	err  error
}

// kernelCode returns the code of the kernels with key (k is one of
// them, its addresses placed), emitting it on first use.
func (l *linker) kernelCode(key any, k *prog.Kernel) *kernelCode {
	l.kcodeMu.Lock()
	kc := l.kcode[key]
	if kc == nil {
		kc = &kernelCode{}
		l.kcode[key] = kc
	}
	l.kcodeMu.Unlock()
	kc.once.Do(func() {
		kc.b = codegen.NewBuilder(l.p, l.p.Executable.Lo)
		kc.k, kc.err = k.Emit(kc.b)
		if kc.err == nil {
			kc.err = kc.b.Err()
		}
	})
	return kc
}

// supervisorWords estimates how many words tile t's code holds after
// its kernels: its host command tables, its linked runtime and its
// supervisor program, with the exchange code and patch tables (a few
// words a superstep to spare; falling short costs one growth of the
// builder's arrays, not an error). workers gives a launch's workers.
func (l *linker) supervisorWords(t int, workers func(k *prog.Kernel) int) int {
	n := len(l.tiles[t].rt.words) + prog.BranchInstrs*len(l.prog.Branches)
	for i, s := range l.prog.Steps {
		n += 8 // the sync, the profile store, a branch's jump
		switch s.Kind {
		case obj.HostExchange:
			n += 6 * len(s.Host[t]) // the table's words, a call's loads
		case obj.Compute:
			for _, k := range s.Work[t] {
				if r := l.rt.byName[rtLaunch(workers(k))]; r != nil {
					n += 1 + len(r.words)
				}
			}
		case obj.Exchange:
			if tc := l.packed[i].Tile(t); tc != nil {
				n += len(tc.Code) + len(tc.Table)
			}
		}
	}
	return n
}

// prepareTileCode emits each tile's kernels (placed addresses) and its
// supervisor: startup hsync, then the supersteps, then the loop back.
func (l *linker) prepareTileCode(*slog.Logger) error {
	return l.eachTile(l.tileCode)
}

// tileCode emits tile t's code: its distinct kernels, its host command
// tables, the linked runtime and the supervisor program after it.
func (l *linker) tileCode(t int) error {
	tl := l.tiles[t]
	b := codegen.NewBuilder(l.p, l.p.Executable.Lo)
	tl.b = b
	launches, err := l.spliceKernels(t, b)
	if err != nil {
		return err
	}
	// The host command tables (one per run of one direction of a host
	// superstep), the linked runtime, and the supervisor program right
	// after it (rt_start falls through into it).
	tables := l.hostTables(t, b)
	rt := l.placeRuntime(t, b)
	if err := l.emitSupervisor(t, b, launches, tables, rt); err != nil {
		return err
	}
	l.emitTables(t)
	code, err := b.Finish()
	if err != nil {
		return fmt.Errorf("tile %d: %w", t, err)
	}
	a, _ := b.Addr(rt[rtStart])
	tl.code, tl.entry = code, a
	end := l.p.Executable.Lo + uint32(len(code))
	if lo := l.lowestNI(t); end > lo {
		return l.codeSpaceError(t, uint64(len(code)), lo)
	}
	return nil
}

// spliceKernels splices tile t's distinct kernels (by key; a key holding
// a NaN finds no other) into b, each compiled once, its arrays grown
// once, and returns each launch's kernel as spliced.
func (l *linker) spliceKernels(t int, b *codegen.Builder) (map[*prog.Kernel]codegen.Kernel, error) {
	tl := l.tiles[t]
	type splice struct {
		what string
		kc   *kernelCode
	}
	var order []splice
	var srcs []*codegen.Builder
	keyed := map[*prog.Kernel]int{} // each launch's splice
	spliced := map[any]int{}
	for _, s := range l.prog.Steps {
		for _, k := range s.Work[t] {
			if _, ok := keyed[k]; ok {
				continue
			}
			k.ApplyFixes()
			key := k.Key()
			if i, ok := spliced[key]; ok {
				keyed[k] = i
				continue
			}
			kc := l.kernelCode(key, k)
			if kc.err != nil {
				return nil, fmt.Errorf("tile %d: %w", t, kc.err)
			}
			spliced[key], keyed[k] = len(order), len(order)
			order = append(order, splice{k.What, kc})
			srcs = append(srcs, kc.b)
		}
	}
	// Room for everything after the kernels too (the arrays grown by
	// appending cost ipu-link seconds of copies on the 12-layer encoder,
	// whose tiles hold tens of thousands of words of exchange code).
	b.ReserveSplices(l.supervisorWords(t, func(k *prog.Kernel) int {
		return order[keyed[k]].kc.k.Workers
	}), srcs...)
	entries := make([]codegen.Kernel, len(order))
	for i, sp := range order {
		entries[i] = sp.kc.k
		entries[i].Entry = b.Splice(sp.kc.b)(sp.kc.k.Entry)
		tl.kernels = append(tl.kernels, kernelSym{sp.what, entries[i].Entry})
	}
	launches := make(map[*prog.Kernel]codegen.Kernel, len(keyed))
	for k, i := range keyed {
		launches[k] = entries[i]
	}
	return launches, nil
}

// cmdTable is a host command table: n commands of one direction at at.
type cmdTable struct {
	at codegen.Label
	n  int
	in bool
}

// hostTables emits tile t's host command tables, one per run of one
// direction of a host superstep, and returns them by superstep.
func (l *linker) hostTables(t int, b *codegen.Builder) map[int][]cmdTable {
	tl := l.tiles[t]
	tables := map[int][]cmdTable{}
	for i, s := range l.prog.Steps {
		for _, run := range hostCmdRuns(s.Host[t]) {
			at := b.Here()
			if len(tl.layout) == 0 {
				tl.layout = append(tl.layout, kernelSym{obj.HostCommandsSymbol, at})
			}
			for _, op := range run {
				b.Word(op.Ref.Addr())
				b.Word(uint32(op.Page)<<24 | op.Off)
				b.Word(op.Bytes)
			}
			tables[i] = append(tables[i], cmdTable{at, len(run), run[0].In})
		}
	}
	return tables
}

// placeRuntime emits tile t's linked runtime and returns its routines'
// labels; the supervisor program follows.
func (l *linker) placeRuntime(t int, b *codegen.Builder) map[string]codegen.Label {
	tl := l.tiles[t]
	rt := map[string]codegen.Label{}
	for _, sy := range tl.rt.syms {
		rt[sy.name] = b.Here()
		tl.layout = append(tl.layout, kernelSym{sy.name, rt[sy.name]})
		for _, w := range tl.rt.words[sy.off : sy.off+sy.size] {
			b.Word(w)
		}
	}
	tl.layout = append(tl.layout, kernelSym{rtMain, b.Here()})
	return rt
}

// emitSupervisor emits tile t's supervisor program: per superstep its
// host commands, kernel launches or exchange code and the sync, with
// the branches' tests and jumps.
func (l *linker) emitSupervisor(t int, b *codegen.Builder, launches map[*prog.Kernel]codegen.Kernel, tables map[int][]cmdTable, rt map[string]codegen.Label) error {
	tl := l.tiles[t]
	call := func(name string) {
		l, ok := rt[name]
		if !ok {
			b.Fail(fmt.Errorf("tile %d: runtime routine %s is not linked", t, name))
			return
		}
		b.Call(linkReg, l)
	}
	type labels struct{ els, end codegen.Label }
	brLabels := map[*prog.Branch]labels{}
	for _, br := range l.prog.Branches {
		brLabels[br] = labels{b.Label(), b.Label()}
	}
	for i, s := range l.prog.Steps {
		br, then := l.prog.Side(i)
		if br != nil && then && i == br.Then[0] {
			l.branchTest(b, t, br, brLabels[br].els)
		}
		if br != nil && !then && i == br.Else[0] {
			b.Bind(brLabels[br].els)
		}
		switch s.Kind {
		case obj.HostExchange:
			for _, tb := range tables[i] {
				b.LoadLabel(codegen.M4, tb.at)
				b.LoadConst(codegen.M5, uint32(tb.n))
				call(hostRoutine(tb.in))
			}
			if i == len(l.prog.Steps)-1 {
				call(rtLoop) // never returns: hsync, then the program again
			} else {
				b.Emit(syncInst())
			}
		case obj.Compute:
			for _, k := range s.Work[t] {
				e := launches[k]
				b.LoadLabel(codegen.M1, e.Entry)
				l.expandLaunch(b, t, e.Workers)
			}
			if err := l.emitProfileStore(b, i); err != nil {
				return fmt.Errorf("tile %d: %w", t, err)
			}
			switch {
			case br != nil && then && i == br.Then[1]-1:
				// The then side's last superstep jumps past the else
				// side to the sync the two share.
				b.Br(brLabels[br].end)
			case br != nil && !then && i == br.Else[1]-1:
				b.Bind(brLabels[br].end)
				b.Emit(syncInst())
			default:
				b.Emit(syncInst())
			}
		case obj.Exchange:
			if tc := l.packed[i].Tile(t); tc != nil {
				lo := b.Here()
				tc.Emit(b, l.patchLabel(t, i))
				tl.exPieces = append(tl.exPieces, [2]codegen.Label{lo, b.Here()})
			} else {
				b.Emit(syncInst())
			}
		}
	}
	return nil
}

// branchTest emits a branch's test on tile t: load the condition word
// (the tile holding the condition reads its storage, the others the
// copy the multicast left), keep the condition's bits, and branch to the
// else side when it is zero: prog.BranchInstrs instructions.
func (l *linker) branchTest(b *codegen.Builder, t int, br *prog.Branch, els codegen.Label) {
	at := br.Cond
	if t == br.CondTile {
		at = br.CondAt
	}
	b.LoadConst(codegen.M1, at.Addr())
	b.Ldm(codegen.M1, codegen.M1, 0)
	switch br.CondBytes {
	case 4:
		b.Shli(codegen.M1, codegen.M1, 1) // a bool word: 0.0 or 1.0 (-0.0 is false)
	default:
		b.Andi(codegen.M1, codegen.M1, int32(uint32(1)<<(8*br.CondBytes)-1))
	}
	b.Brz(codegen.M1, els)
}

// sendsByTile returns the object's scheduled transfers by source tile,
// in phase order and the phase's transfer order.
func (l *linker) sendsByTile() map[int][]obj.Transfer {
	sends := map[int][]obj.Transfer{}
	for i, sp := range l.exch {
		if sp == nil {
			continue
		}
		for k, x := range l.prog.Steps[i].Xfers {
			ev := sp.Events[k]
			if x.Step() == 1 {
				sends[x.Src] = append(sends[x.Src], obj.Transfer{Phase: i, Cycle: ev.Send, Dst: x.Dst, DstCount: x.Dests(), Words: x.Words})
				continue
			}
			// A strided multicast: a record per receiving tile.
			for u := x.Dst; u <= x.Last(); u += x.Step() {
				sends[x.Src] = append(sends[x.Src], obj.Transfer{Phase: i, Cycle: ev.Send, Dst: u, DstCount: 1, Words: x.Words})
			}
		}
	}
	return sends
}

// emit builds the object.
func (l *linker) emit(fingerprint string) (*obj.Object, error) {
	o := &obj.Object{Arch: l.p.Name, Compiler: Compiler, Source: fingerprint}
	byTile := map[int][]*prog.Buffer{}
	for _, b := range l.prog.Buffers {
		for _, t := range b.Tiles {
			byTile[t] = append(byTile[t], b)
		}
	}
	sends := l.sendsByTile()
	for _, t := range l.sortedTiles() {
		tl := l.tiles[t]
		ot := obj.Tile{Index: t, Entry: tl.entry, Exchange: sends[t]}
		ot.Segments = append(ot.Segments, obj.Segment{Name: "text", Kind: obj.Code, Addr: l.p.Executable.Lo, Size: uint32(len(tl.code)), Data: tl.code})
		// Code symbols in address order: the kernels, the host command
		// tables, the runtime's routines and the supervisor program,
		// each up to the next (the last to the code's end).
		syms := append(append([]kernelSym{}, tl.kernels...), tl.layout...)
		for i, ks := range syms {
			a, _ := tl.b.Addr(ks.entry)
			end := l.p.Executable.Lo + uint32(len(tl.code))
			if i+1 < len(syms) {
				end, _ = tl.b.Addr(syms[i+1].entry)
			}
			ot.Symbols = append(ot.Symbols, obj.Symbol{Name: ks.name, Addr: a, Size: end - a, Code: true})
		}
		// Buffers: one segment per address range (buffers that share a
		// range over time are one segment, named by the first), constant
		// data as data segments.
		bufs := byTile[t]
		sort.Slice(bufs, func(i, j int) bool {
			if bufs[i].Addr != bufs[j].Addr {
				return bufs[i].Addr < bufs[j].Addr
			}
			return bufs[i].ID < bufs[j].ID
		})
		var segs []obj.Segment
		for _, bf := range bufs {
			seg := obj.Segment{Name: bf.Name, Kind: obj.BSS, Addr: bf.Addr, Size: bf.Size}
			if d := bf.Data[t]; d != nil {
				seg.Kind, seg.Data = obj.Data, d
			}
			if n := len(segs); n > 0 && seg.Addr < segs[n-1].Addr+segs[n-1].Size {
				// Overlaps the previous range (reuse over time): widen it.
				last := &segs[n-1]
				if last.Kind == obj.Data || seg.Kind == obj.Data {
					return nil, fmt.Errorf("internal error: tile %d: constant buffer %s shares memory with %s", t, seg.Name, last.Name)
				}
				last.Size = max(last.Addr+last.Size, seg.Addr+seg.Size) - last.Addr
				continue
			}
			segs = append(segs, seg)
		}
		for _, seg := range segs {
			ot.Segments = append(ot.Segments, seg)
			ot.Symbols = append(ot.Symbols, obj.Symbol{Name: seg.Name, Addr: seg.Addr, Size: seg.Size})
		}
		sort.Slice(ot.Symbols, func(i, j int) bool { return ot.Symbols[i].Addr < ot.Symbols[j].Addr })
		// The exchange code, inline in the supervisor program: a data
		// symbol per exchange superstep (so that a PC in it is still
		// the supervisor program's), after the symbols at its address.
		for _, pc := range tl.exPieces {
			lo, _ := tl.b.Addr(pc[0])
			hi, _ := tl.b.Addr(pc[1])
			if hi > lo {
				ot.Symbols = append(ot.Symbols, obj.Symbol{Name: obj.ExchangeCodeSymbol, Addr: lo, Size: hi - lo})
			}
		}
		sort.SliceStable(ot.Symbols, func(i, j int) bool { return ot.Symbols[i].Addr < ot.Symbols[j].Addr })
		o.Tiles = append(o.Tiles, ot)
	}
	for _, s := range l.prog.Steps {
		o.Host.Phases = append(o.Host.Phases, obj.Phase{Kind: s.Kind, Name: s.Name})
	}
	for _, b := range l.prog.Branches {
		o.Host.Branches = append(o.Host.Branches, obj.Branch{If: b.If, CondTile: b.CondTile, CondAddr: b.CondAt.Addr(), CondBytes: uint8(b.CondBytes), Then: b.Then, Else: b.Else})
	}
	o.Host.Pages = l.prog.Pages
	o.Host.Inputs = l.prog.Inputs
	o.Host.Outputs = l.prog.Outputs
	model, err := l.modelSection()
	if err != nil {
		return nil, err
	}
	o.Host.Model = model
	if err := obj.Validate(o); err != nil {
		return nil, fmt.Errorf("internal error: linked %w", err)
	}
	return o, nil
}

// addAlign accounts for one scheduled superstep's instruction-alignment
// validation (sched.AlignStats).
func (st *Stats) addAlign(a sched.AlignStats) {
	if st.AlignedPhases == 0 {
		st.Alignment.Success = true
	}
	st.AlignedPhases++
	if a.Retried() {
		st.RetriedPhases++
	}
	st.Alignment.Transfers += a.Transfers
	st.Alignment.Failed += a.Failed
	st.Alignment.Rescheduled += a.Rescheduled
	st.Alignment.Rounds = max(st.Alignment.Rounds, a.Rounds)
	st.Alignment.Success = st.Alignment.Success && a.Success
	st.Alignment.Elapsed += a.Elapsed
}
