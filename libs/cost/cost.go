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
}

// ComputeCycles is a compute superstep's cycles: the longest tile's
// launches, after and before the supervisor's own cycles (a branch's
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
			at += c
		}
		worst = max(worst, at)
	}
	return worst + prog.ProfileStoreCycles + s.Post + 1, nil
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
	xs := make([]sched.Transfer, len(s.Xfers))
	for i, x := range s.Xfers {
		xs[i] = sched.Transfer{Src: x.Src, Dst: x.Dst, DstN: x.Dests(), Words: x.Words, SrcAddr: addr(x.From), DstAddr: addr(x.To)}
	}
	sp, err := sched.Schedule(p, xs, sched.Options{})
	if err != nil {
		return 0, err
	}
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
	if len(s.Xfers) == 0 {
		return 0, nil
	}
	xs := make([]sched.Transfer, len(s.Xfers))
	for i, x := range s.Xfers {
		xs[i] = sched.Transfer{Src: x.Src, Dst: x.Dst, DstN: x.Dests(), Words: x.Words, SrcAddr: addr(x.From), DstAddr: addr(x.To)}
	}
	return sched.Bound(p, xs, sched.Options{})
}

// Program prices pr.
func Program(pr *prog.Program) (*Result, error) { return ProgramWith(pr, Options{}) }

// ProgramWith is Program with options.
func ProgramWith(pr *prog.Program, opt Options) (*Result, error) {
	p := pr.Arch
	addr := synthetic(p, pr.Buffers)
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
				} else if c, err = ExchangeBound(p, s, addr); err == nil {
					if s.Bound == nil {
						s.Bound = new(int64)
					}
					*s.Bound = c
				}
			} else {
				c, err = ExchangeCycles(p, s, addr)
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
