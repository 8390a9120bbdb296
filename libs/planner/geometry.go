package planner

// Exchange table geometry: a candidate's exchange supersteps expanded
// into the fragments each tile runs (a send or a reception: one end of a
// stream) and the bytes of their code, next to a cheap heuristic. A
// candidate whose busiest tile holds more fragments than its executable
// range can (sched.FragmentLimit) cannot be linked: the search rejects it
// as it rejects one whose buffers do not fit, and the linker refuses it
// too.

import (
	"fmt"

	"ipu.local/libs/arch"
	"ipu.local/libs/codegen"
	"ipu.local/libs/isa"
	"ipu.local/libs/prog"
)

// geometry is a program's exchange tables expanded.
type geometry struct {
	fragments int   // most fragments on one tile, over the program
	tile      int   // the tile with them
	rowBytes  int64 // the largest tile's exchange code expanded: each fragment's operand loads and its send or recv
	heuristic int64 // the same at 5 instructions a fragment
}

// expandGeometry expands every exchange superstep of pr at the addresses
// addr gives (the search's synthetic ones, in tile memory): per fragment, the loads of its
// three operands (the register cache of the scheduler can only shorten
// them) and the send or recv; and by tile, its exchange code bytes.
func expandGeometry(p *arch.Preset, pr *prog.Program, addr func(prog.Ref) uint32) (geometry, []int64) {
	frags := make([]int, p.Tiles)
	bytes := make([]int64, p.Tiles)
	// An address loads in ConstLen of it; when the memory's highest
	// address loads in one instruction, so does every address of it
	// (ConstLen grows with the value), and addr need not be asked.
	alen := func(r prog.Ref) int { return codegen.ConstLen(addr(r)) }
	if codegen.ConstLen(p.Memory.Hi-1) == 1 {
		alen = func(prog.Ref) int { return 1 }
	}
	// A multicast to consecutive tiles (most receptions: an operand
	// copied to every block of a split) adds to a range of tiles: it
	// marks the range's ends in difference arrays, summed once at the
	// end, instead of visiting each receiver.
	dfrags := make([]int, p.Tiles+1)
	dbytes := make([]int64, p.Tiles+1)
	for _, s := range pr.Steps {
		for _, x := range s.Xfers {
			n, step := x.Dests(), x.Step()
			d := uint32(x.Dst)
			if n > 1 {
				d |= uint32(n) << 16
			}
			w := codegen.ConstLen(uint32(x.Words))
			sw := codegen.ConstLen(isa.SendCount(x.Words, step))
			frags[x.Src]++
			bytes[x.Src] += 4 * int64(codegen.ConstLen(d)+alen(x.From)+sw+1)
			recv := 4 * int64(codegen.ConstLen(uint32(x.Src))+alen(x.To)+w+1)
			if step == 1 {
				end := x.Dst + n
				dfrags[x.Dst]++
				dfrags[end]--
				dbytes[x.Dst] += recv
				dbytes[end] -= recv
				continue
			}
			for k, u := 0, x.Dst; k < n; k, u = k+1, u+step {
				frags[u]++
				bytes[u] += recv
			}
		}
	}
	var runFrags int
	var runBytes int64
	for t := range frags {
		runFrags += dfrags[t]
		runBytes += dbytes[t]
		frags[t] += runFrags
		bytes[t] += runBytes
	}
	var g geometry
	for t := range frags {
		if frags[t] > g.fragments {
			g.fragments, g.tile = frags[t], t
		}
		g.rowBytes = max(g.rowBytes, bytes[t])
	}
	g.heuristic = 4 * 5 * int64(g.fragments)
	return g, bytes
}

// check refuses a geometry beyond the limit.
func (g geometry) check(limit int) error {
	if g.fragments > limit {
		return fmt.Errorf("tile %d: %d exchange fragments (sends and receptions), more than the %d its executable range holds", g.tile, g.fragments, limit)
	}
	return nil
}
