package sched

import (
	"fmt"
	"sort"

	"ipu.local/libs/isa"
)

// code emits the tile's instructions: per event, the loads placed in its
// gap, the delay that brings the event to its cycle, the event; then the
// sync.
func (s *tileState) code() ([]isa.Inst, error) {
	loads := append([]load(nil), s.loads...)
	sort.SliceStable(loads, func(i, j int) bool { return loads[i].gap < loads[j].gap })
	var out []isa.Inst
	li := 0
	for gi, ev := range s.events {
		g := s.gaps[gi]
		m := 0
		for ; li < len(loads) && loads[li].gap == gi; li++ {
			l := loads[li]
			if l.val < 1<<20 {
				out = append(out, isa.Inst{Op: isa.LI, D: l.reg, Imm: int32(l.val)})
				m++
				continue
			}
			out = append(out, isa.Inst{Op: isa.LI, D: l.reg, Imm: int32(l.val & 0xFFFF)},
				isa.Inst{Op: isa.LIH, D: l.reg, Imm: int32(l.val >> 16)})
			m += 2
		}
		if m != g.used {
			return nil, fmt.Errorf("internal error: gap %d holds %d loads, planned %d", gi, m, g.used)
		}
		var err error
		if out, err = pad(out, g.end-g.start, m, g.stall); err != nil {
			return nil, fmt.Errorf("event %d at cycle %d: %w", gi, ev.t, err)
		}
		out = append(out, isa.Inst{Op: ev.op, D: ev.regs[0], A: ev.regs[1], B: ev.regs[2]})
	}
	var err error
	if out, err = pad(out, s.sync-s.last, 0, false); err != nil {
		return nil, fmt.Errorf("sync at cycle %d: %w", s.sync, err)
	}
	return append(out, isa.Inst{Op: isa.SYNC}), nil
}

// pad appends the delays that make the next instruction issue g cycles
// after the event before the m instructions just emitted. A stalled
// send needs none when it is reached before its port frees.
func pad(out []isa.Inst, g int64, m int, stall bool) ([]isa.Inst, error) {
	rem := g - issue*int64(m+1)
	switch {
	case rem == 0:
		return out, nil
	case rem < 0 || (rem < issue && !stall):
		return nil, fmt.Errorf("internal error: %d instructions in a gap of %d cycles", m, g)
	case rem < issue:
		return out, nil
	}
	// Each delay n costs 6+n; the last takes what is left.
	for rem > issue+maxDelay {
		d := int64(maxDelay)
		if rem-(issue+d) < issue {
			d = rem - 2*issue
		}
		out = append(out, isa.Inst{Op: isa.DELAY, Imm: int32(d)})
		rem -= issue + d
	}
	return append(out, isa.Inst{Op: isa.DELAY, Imm: int32(rem - issue)}), nil
}
