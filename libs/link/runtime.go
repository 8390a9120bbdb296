package link

import (
	"fmt"
	"log/slog"

	"ipu.local/formats/obj"
	"ipu.local/libs/arch"
	"ipu.local/libs/codegen"
	"ipu.local/libs/isa"
	"ipu.local/libs/prog"
)

// The tile runtime: the supervisor routines every tile program shares,
// compiled once for the architecture (compile_runtime) and linked into
// each tile program (link_runtime). A tile's supervisor program proper
// ("supervisor", emitted by prepare_tile_code) is then only the sequence
// of its supersteps: calls of these routines, syncs, the exchange code
// sched made and the branches' tests.
//
// Routines (the supervisor's registers they take and clobber):
//
//	rt_launch_<w>  run the kernel at $m1 on workers 0..w-1, join them,
//	               return to $m14 (clobbers nothing)
//	rt_host_in     the host-exchange command loop: $m5 commands of three
//	rt_host_out    words (tile address, host address, bytes) at $m4, one
//	               hin (hout) each; return to $m14 (clobbers $m1-$m5)
//	rt_loop        the end of an inference: hsync, then branch to the
//	               tile's supervisor program for the next
//	rt_start       the tile's entry: the startup hsync, falling through
//	               into the supervisor program, which follows it
//
// The code is position-independent (relative branches and calls); its
// references to the supervisor program are relocations, which
// link_runtime resolves when it lays out a tile's runtime: the routines
// the tile uses, rt_start last, so that the supervisor program starts
// where the runtime ends.

// linkReg is the supervisor's link register of runtime calls.
const linkReg = codegen.M14

// Runtime symbol names.
const (
	rtHostIn  = "rt_host_in"
	rtHostOut = "rt_host_out"
	rtLoop    = "rt_loop"
	rtStart   = "rt_start"
	// rtMain is the tile's supervisor program, the runtime's one
	// external symbol.
	rtMain = "supervisor"
)

func rtLaunch(workers int) string { return fmt.Sprintf("rt_launch_%d", workers) }

// rtRoutine is one compiled routine: encoded words and the relocations
// of its branches to symbols outside it.
type rtRoutine struct {
	name   string
	words  []uint32
	relocs []rtReloc
}

// rtReloc is a relative branch (rel20 or rel16) at word at whose target
// is sym.
type rtReloc struct {
	at  int
	sym string
}

// runtimeLib is the compiled runtime: its routines by name, in layout
// order.
type runtimeLib struct {
	routines []*rtRoutine
	byName   map[string]*rtRoutine
}

// tileRuntime is the runtime linked for one tile: the routines it uses,
// laid out and resolved (position-independent: it is placed anywhere,
// with the supervisor program right after it).
type tileRuntime struct {
	words []uint32
	syms  []rtSym // in address order; rt_start last
}

// rtSym is a routine in a tile's runtime: its first word and length.
type rtSym struct {
	name      string
	off, size int
}

// Runtime is a tile runtime compiled for an architecture
// (CompileRuntime), for Options.Runtime.
type Runtime struct {
	arch string
	lib  *runtimeLib
}

// CompileRuntime compiles the tile runtime for p: a caller that links
// several plans for one architecture (ipu-plan's compile_runtime phase)
// compiles it once and passes it in Options.Runtime.
func CompileRuntime(p *arch.Preset) (*Runtime, error) {
	lib, err := buildRuntime(p)
	if err != nil {
		return nil, fmt.Errorf("runtime: %w", err)
	}
	return &Runtime{arch: p.Name, lib: lib}, nil
}

// compileRuntime builds the tile runtime for the architecture (or takes
// Options.Runtime's, compiled for it), and encodes the model section the
// package carries for the host reference.
func (l *linker) compileRuntime(log *slog.Logger) error {
	if l.given != nil && l.given.arch == l.p.Name {
		l.rt = l.given.lib
		log.Debug("took the compiled tile runtime", slog.String("arch", l.p.Name))
		return l.encodeModel()
	}
	rt, err := buildRuntime(l.p)
	if err != nil {
		return fmt.Errorf("runtime: %w", err)
	}
	l.rt = rt
	words, relocs := 0, 0
	for _, r := range rt.routines {
		words += len(r.words)
		relocs += len(r.relocs)
	}
	log.Debug("compiled tile runtime", slog.Int("routines", len(rt.routines)), slog.Int("code_bytes", 4*words), slog.Int("relocations", relocs))
	return l.encodeModel()
}

// buildRuntime assembles the runtime's routines.
func buildRuntime(p *arch.Preset) (*runtimeLib, error) {
	rt := &runtimeLib{byName: map[string]*rtRoutine{}}
	add := func(name string, body func(b *codegen.Builder) []rtReloc) error {
		b := codegen.NewBuilder(p, p.Executable.Lo) // any address: the code is position-independent
		relocs := body(b)
		code, err := b.Finish()
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		r := &rtRoutine{name: name, relocs: relocs, words: make([]uint32, len(code)/4)}
		for i := range r.words {
			r.words[i] = uint32(code[4*i]) | uint32(code[4*i+1])<<8 | uint32(code[4*i+2])<<16 | uint32(code[4*i+3])<<24
		}
		rt.routines = append(rt.routines, r)
		rt.byName[name] = r
		return nil
	}
	for w := 0; w <= codegen.Slots; w++ {
		err := add(rtLaunch(w), func(b *codegen.Builder) []rtReloc {
			for k := 0; k < w; k++ {
				b.Run(codegen.M1, codegen.MZero, k)
			}
			b.Join()
			b.Emit(isa.Inst{Op: isa.JR, A: uint8(linkReg)})
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	for _, in := range []bool{true, false} {
		name := rtHostOut
		if in {
			name = rtHostIn
		}
		err := add(name, func(b *codegen.Builder) []rtReloc {
			end := b.Label()
			b.Rpt(codegen.M5, end)
			b.LdmP(codegen.M1, codegen.M4, 4)
			b.LdmP(codegen.M2, codegen.M4, 4)
			b.LdmP(codegen.M3, codegen.M4, 4)
			b.Emit(hostInst(in))
			b.Bind(end)
			b.Emit(isa.Inst{Op: isa.JR, A: uint8(linkReg)})
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	err := add(rtLoop, func(b *codegen.Builder) []rtReloc {
		b.Emit(hsync())
		b.Emit(isa.Inst{Op: isa.BR})
		return []rtReloc{{at: 1, sym: rtMain}}
	})
	if err != nil {
		return nil, err
	}
	err = add(rtStart, func(b *codegen.Builder) []rtReloc {
		b.Emit(hsync())
		return nil
	})
	if err != nil {
		return nil, err
	}
	return rt, nil
}

// linkRuntime links the runtime into every tile program: each tile gets
// the routines its supervisor program calls (the launch routines of its
// kernels' worker counts, the host command loops of its transfers'
// directions, rt_loop when the program loops), laid out with rt_start
// last and their references resolved. It then sizes each tile's
// supervisor program: per launch the entry's li and the call, a sync per
// superstep (the last host superstep's branch to rt_loop instead), the
// branches' tests and jumps and the profile stores.
func (l *linker) linkRuntime(log *slog.Logger) error {
	last := len(l.prog.Steps) - 1
	loops := last >= 0 && l.prog.Steps[last].Kind == obj.HostExchange
	words := 0
	for _, t := range l.sortedTiles() {
		tl := l.tiles[t]
		use := map[string]bool{rtStart: true, rtLoop: loops}
		n := len(l.prog.Steps) + len(l.prog.Branches)*(prog.BranchInstrs+1)
		for _, s := range l.prog.Steps {
			if s.Kind == obj.Compute {
				n += profileInstrs
			}
			for _, k := range s.Work[t] {
				c, err := k.Cost()
				if err != nil {
					return fmt.Errorf("tile %d: %w", t, err)
				}
				n += 2 + c.Workers // li of the entry, the launch routine expanded: a run per worker, the join
			}
			for _, op := range s.Host[t] {
				use[hostRoutine(op.In)] = true
			}
		}
		rt, err := l.rt.link(use)
		if err != nil {
			return fmt.Errorf("tile %d: %w", t, err)
		}
		tl.rt = rt
		tl.launch = 4 * (n + len(rt.words))
		words = max(words, len(rt.words))
	}
	log.Debug("linked tile runtime", slog.Int("tiles", len(l.tiles)), slog.Int("max_runtime_bytes", 4*words))
	return nil
}

func hostRoutine(in bool) string {
	if in {
		return rtHostIn
	}
	return rtHostOut
}

// link lays out the routines of use (in the runtime's order: rt_start
// is last) and resolves their relocations: the runtime's own symbols,
// and rtMain, which is where the runtime ends.
func (rt *runtimeLib) link(use map[string]bool) (*tileRuntime, error) {
	out := &tileRuntime{}
	at := map[string]int{}
	for _, r := range rt.routines {
		if !use[r.name] {
			continue
		}
		at[r.name] = len(out.words)
		out.syms = append(out.syms, rtSym{r.name, len(out.words), len(r.words)})
		out.words = append(out.words, r.words...)
	}
	for name := range use {
		if use[name] && rt.byName[name] == nil {
			return nil, fmt.Errorf("runtime has no routine %s", name)
		}
	}
	if n := len(out.syms); n == 0 || out.syms[n-1].name != rtStart {
		return nil, fmt.Errorf("runtime: %s is not last", rtStart)
	}
	at[rtMain] = len(out.words)
	for _, s := range out.syms {
		for _, rl := range rt.byName[s.name].relocs {
			target, ok := at[rl.sym]
			if !ok {
				return nil, fmt.Errorf("runtime: %s: undefined symbol %s", s.name, rl.sym)
			}
			w := s.off + rl.at
			in, err := isa.Decode(out.words[w])
			if err != nil {
				return nil, fmt.Errorf("runtime: %s: relocation at word %d: %w", s.name, rl.at, err)
			}
			in.Imm = int32(target - (w + 1))
			enc, err := isa.Encode(in)
			if err != nil {
				return nil, fmt.Errorf("runtime: %s: relocation to %s: %w", s.name, rl.sym, err)
			}
			out.words[w] = enc
		}
	}
	return out, nil
}

// sym returns the word offset of routine name in the tile's runtime.
func (tr *tileRuntime) sym(name string) (int, bool) {
	for _, s := range tr.syms {
		if s.name == name {
			return s.off, true
		}
	}
	return 0, false
}

// hostCmdRuns splits a host superstep's transfers on one tile into runs
// of one direction, in program order (a run is one call of the host
// command loop).
func hostCmdRuns(ops []prog.HostOp) [][]prog.HostOp {
	var runs [][]prog.HostOp
	for i, op := range ops {
		if i == 0 || op.In != ops[i-1].In {
			runs = append(runs, nil)
		}
		runs[len(runs)-1] = append(runs[len(runs)-1], op)
	}
	return runs
}
