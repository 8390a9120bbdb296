// Package cost prices a device program (libs/prog) without placing it:
// every compute superstep exactly (each tile's launches back to back with
// codegen's cost formulas and the issue phase carried, then its sync), and
// every exchange superstep as the makespan of its schedule (libs/sched)
// over made-up addresses (each buffer its own range, as placement would
// give it). final_cycles sums the supersteps between the host's fetch and
// result, each with the preset's sync, as the linker counts the placed
// program (of a branch, the longer side's); the two differ only where the placed addresses change how many
// register loads an exchange needs.
package cost

import (
	"fmt"

	"ipu.local/formats/obj"
	"ipu.local/libs/arch"
	"ipu.local/libs/codegen"
	"ipu.local/libs/prog"
	"ipu.local/libs/sched"
)

// Result is a program's cost.
type Result struct {
	FinalCycles   int64
	FinalExchange int64
	Supersteps    []int64 // each superstep's cycles without the sync
	// Sides are each branch's (prog.Program.Branches) then and else
	// sides' cycles, syncs included; FinalCycles counts the longer.
	Sides     [][2]int64
	Transfers int
	// ReusedExchanges counts the exchange supersteps priced by an
	// earlier one's schedule: the same pattern, relocatable to their
	// addresses (sched.Relocatable), hence the same makespan.
	ReusedExchanges int
}

// ComputeCycles is a compute superstep's cycles: the longest tile's
// launches (each with the runtime's call and return,
// prog.LaunchCallCycles), after and before the supervisor's own cycles (a branch's
// test and jump: Pre, Post), the profile counter's store
// (prog.ProfileStoreCycles), plus the sync's issue.
func ComputeCycles(s *prog.Superstep) (int64, error) {
	worst := s.Pre
	for t, ks := range s.Work {
		at := s.Pre
		for _, k := range ks {
			c, err := k.CyclesAt(int(at % codegen.Slots))
			if err != nil {
				return 0, fmt.Errorf("tile %d: %w", t, err)
			}
			at += c + prog.LaunchCallCycles
		}
		worst = max(worst, at)
	}
	return worst + prog.ProfileStoreCycles + s.Post + 1, nil
}

// Launches returns the cycles of each launch on tile t of compute
// superstep s, its call included, as ComputeCycles counts them (each at
// its phase after the ones before it), and the tile's end: s.Pre plus
// their sum. ComputeCycles is the tiles' latest end plus the
// superstep's own tail.
func Launches(s *prog.Superstep, t int) ([]int64, int64, error) {
	ks := s.Work[t]
	out := make([]int64, len(ks))
	at := s.Pre
	for i, k := range ks {
		c, err := k.CyclesAt(int(at % codegen.Slots))
		if err != nil {
			return nil, 0, fmt.Errorf("tile %d: %w", t, err)
		}
		out[i] = c + prog.LaunchCallCycles
		at += out[i]
	}
	return out, at, nil
}

// Synthetic is synthetic, exported for tests.
func Synthetic(p *arch.Preset, bufs []*prog.Buffer) func(r prog.Ref) uint32 {
	return synthetic(p, bufs)
}

// synthetic gives every buffer of a program a made-up address: the
// buffers one after the other over the usable memory, wrapping.
func synthetic(p *arch.Preset, bufs []*prog.Buffer) func(r prog.Ref) uint32 {
	base := make(map[*prog.Buffer]uint32, len(bufs))
	lo, hi := p.Interleaved.Lo, p.UsableMemory().Hi
	at := lo
	for _, b := range bufs {
		if at+b.Size > hi {
			at = lo
		}
		base[b] = at
		at += (b.Size + 7) &^ 7
	}
	return func(r prog.Ref) uint32 {
		if r.Buf != nil && r.Buf.Placed {
			return r.Addr()
		}
		if a, ok := base[r.Buf]; ok {
			return a + r.Off
		}
		return lo + r.Off
	}
}

// ExchangeCycles is an exchange superstep's makespan under addr.
func ExchangeCycles(p *arch.Preset, s *prog.Superstep, addr func(prog.Ref) uint32) (int64, error) {
	if len(s.Xfers) == 0 {
		return 0, nil
	}
	sp, err := sched.Schedule(p, transfers(s, addr), sched.Options{})
	if err != nil {
		return 0, err
	}
	return sp.Makespan, nil
}

func transfers(s *prog.Superstep, addr func(prog.Ref) uint32) []sched.Transfer {
	xs := make([]sched.Transfer, len(s.Xfers))
	for i, x := range s.Xfers {
		xs[i] = x.SchedAt(addr(x.From), addr(x.To))
	}
	return xs
}

// exchanges prices a program's exchange supersteps, scheduling each
// pattern once per structure of its addresses: a superstep that an
// earlier one's schedule relocates to (the repeated layers of a model)
// has that schedule's makespan.
type exchanges struct {
	p      *arch.Preset
	opt    sched.Options
	priced map[string][]priced // by sched.PatternKey
	reused int
}

type priced struct {
	xs     []sched.Transfer
	cycles int64
}

func (e *exchanges) cycles(s *prog.Superstep, addr func(prog.Ref) uint32) (int64, error) {
	if len(s.Xfers) == 0 {
		return 0, nil
	}
	xs := transfers(s, addr)
	key := sched.PatternKey(xs)
	for _, d := range e.priced[key] {
		if sched.Relocatable(d.xs, xs) == nil {
			if err := sched.Check(e.p, xs, e.opt); err != nil {
				return 0, err
			}
			e.reused++
			return d.cycles, nil
		}
	}
	sp, err := sched.Schedule(e.p, xs, e.opt)
	if err != nil {
		return 0, err
	}
	e.priced[key] = append(e.priced[key], priced{xs, sp.Makespan})
	return sp.Makespan, nil
}

// Options tune Program.
type Options struct {
	// Bound prices exchanges by sched's lower bound instead of a
	// schedule: much faster, a little optimistic (the search ranks
	// points with it; the plan's estimate schedules).
	Bound bool
}

// ExchangeBound is sched's lower bound on an exchange superstep.
func ExchangeBound(p *arch.Preset, s *prog.Superstep, addr func(prog.Ref) uint32) (int64, error) {
	return exchangeBound(p, s, addr, sched.Options{})
}

func exchangeBound(p *arch.Preset, s *prog.Superstep, addr func(prog.Ref) uint32, opt sched.Options) (int64, error) {
	if len(s.Xfers) == 0 {
		return 0, nil
	}
	xs := make([]sched.Transfer, len(s.Xfers))
	for i, x := range s.Xfers {
		xs[i] = x.SchedAt(addr(x.From), addr(x.To))
	}
	return sched.Bound(p, xs, opt)
}

// Program prices pr.
func Program(pr *prog.Program) (*Result, error) { return ProgramWith(pr, Options{}) }

// ProgramWith is Program with options.
func ProgramWith(pr *prog.Program, opt Options) (*Result, error) {
	p := pr.Arch
	addr := synthetic(p, pr.Buffers)
	// Made-up addresses wrap round the memory: two buffers that one
	// superstep writes on one tile may share one (placement never gives
	// them one).
	so := sched.Options{MayAlias: !placed(pr.Buffers)}
	ex := &exchanges{p: p, opt: so, priced: map[string][]priced{}}
	r := &Result{}
	sync := make([]int64, len(pr.Steps))
	for i, s := range pr.Steps {
		var c int64
		var err error
		switch s.Kind {
		case obj.Compute:
			c, err = ComputeCycles(s)
		case obj.Exchange:
			if opt.Bound {
				if s.Bound != nil && *s.Bound >= 0 {
					c = *s.Bound
				} else if c, err = exchangeBound(p, s, addr, so); err == nil {
					if s.Bound == nil {
						s.Bound = new(int64)
					}
					*s.Bound = c
				}
			} else {
				c, err = ex.cycles(s, addr)
			}
			r.Transfers += len(s.Xfers)
		default:
			r.Supersteps = append(r.Supersteps, 0)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("superstep %d (%s): %w", i, s.Name, err)
		}
		r.Supersteps = append(r.Supersteps, c)
		sync[i] = int64(p.SyncCycles)
	}
	r.ReusedExchanges = ex.reused
	// A branch counts its longer side.
	r.FinalCycles, r.Sides = pr.Longest(r.Supersteps, func(i int) int64 { return sync[i] })
	path := prog.LongerThen(r.Sides)
	for i, s := range pr.Steps {
		if s.Kind == obj.Exchange && pr.OnPath(i, path) {
			r.FinalExchange += r.Supersteps[i] + sync[i]
		}
	}
	return r, nil
}

// placed reports whether every buffer has its address.
func placed(bufs []*prog.Buffer) bool {
	for _, b := range bufs {
		if !b.Placed {
			return false
		}
	}
	return true
}
