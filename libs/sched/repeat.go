package sched

import (
	"fmt"

	"ipu.local/libs/arch"
	"ipu.local/libs/isa"
)

// Exchange code compressed with repeat loops.
//
// A run of regular events on a tile (k sends, send2s or recvs one after
// the other at a constant period G, their operands constant or varying:
// a gather from other tiles into consecutive buffers, a scatter of equal
// slices) takes the straight-line code a few instructions per event,
// with registers the scheduler's cache picked. Compress rewrites such a
// run as a repeat loop of one event: per iteration, each varying operand
// is computed into a register of its own, by addi of a constant stride
// (the value is elided: arithmetic) or by ldm with post-increment from a
// patch table (the value is stored: a patch), then a delay makes the
// iteration last G cycles, then the event. Constant operands stay in the
// registers that hold them (or $mzero), or one li before the loop loads
// them. Every event keeps its issue cycle; the loop's setup (the li of
// strided registers, of the table's address and of constants, and the
// rpti) issues in the gap before the run's first event, so a run is
// compressed only where that gap has the issue slots to spare. The
// registers the loop writes are ones no later instruction reads before
// writing, and the run's old code may not leave a value that later code
// reads. Compress replays both codes and keeps the compressed one only
// when every send, recv and sync issues at the same cycle with the same
// operand values.

// maxCount is rpti's largest count.
const maxCount = 1<<12 - 1

// minRun is the fewest events a loop takes.
const minRun = 3

// CompressStats are one tile's figures.
type CompressStats struct {
	Loops       int // repeat loops
	CodeBytes   int // straight-line code
	PackedBytes int // compressed code, its patch table aside
	PatchBytes  int // the patch table: per-iteration values stored
	ElidedBytes int // per-iteration values computed by addi, not stored
}

// Add accumulates s into c.
func (c *CompressStats) Add(s CompressStats) {
	c.Loops += s.Loops
	c.CodeBytes += s.CodeBytes
	c.PackedBytes += s.PackedBytes
	c.PatchBytes += s.PatchBytes
	c.ElidedBytes += s.ElidedBytes
}

// Compress returns the plan with every tile's code compressed with
// repeat loops where that makes it smaller and keeps its timing, and the
// figures of each tile (in the order of pl.Tiles). The plan's events
// and cycles are unchanged. A tile's patch table is placed at address 0
// (TableAt): the code's user places it (TileCode.Emit).
func Compress(p *arch.Preset, pl *Plan) (*Plan, []CompressStats) {
	out := *pl
	out.Tiles = make([]TileCode, len(pl.Tiles))
	stats := make([]CompressStats, len(pl.Tiles))
	for i, tc := range pl.Tiles {
		out.Tiles[i], stats[i] = compressTile(p, tc, pl.Options.regs())
	}
	return &out, stats
}

// Straight returns the figures of pl's code left straight-line.
func Straight(pl *Plan) []CompressStats {
	out := make([]CompressStats, len(pl.Tiles))
	for i, tc := range pl.Tiles {
		out[i] = CompressStats{CodeBytes: 4 * len(tc.Code), PackedBytes: 4 * len(tc.Code), PatchBytes: 4 * len(tc.Table)}
	}
	return out
}

// compressTile compresses one tile's code, or returns it as it is when
// no loop pays or the replay of the result differs.
func compressTile(p *arch.Preset, tc TileCode, regs uint16) (TileCode, CompressStats) {
	st := CompressStats{CodeBytes: 4 * len(tc.Code), PackedBytes: 4 * len(tc.Code)}
	if tc.Table != nil {
		return tc, st
	}
	events := 0
	for _, in := range tc.Code {
		if in.Op == isa.SEND || in.Op == isa.SEND2 || in.Op == isa.RECV {
			events++
		}
	}
	if events < minRun {
		return tc, st
	}
	c, err := newCompressor(p, tc, regs)
	if err != nil {
		return tc, st
	}
	c.scan()
	if c.st.Loops == 0 {
		return tc, st
	}
	out := TileCode{Tile: tc.Tile, Cycles: tc.Cycles, Code: c.out, Table: c.table, TableLoads: c.loads}
	if err := sameIssue(tc, out); err != nil {
		return tc, st // a bug, not a user error: keep the straight-line code
	}
	c.st.CodeBytes, c.st.PackedBytes = st.CodeBytes, 4*len(out.Code)
	return out, c.st
}

// sameIssue issues a tile's straight-line and compressed code alone and
// checks that every send, send2 and recv issues at the same cycle with
// the same operands, and the sync at the same cycle with the port free
// at the same cycle.
func sameIssue(a, b TileCode) error {
	var ea []issued
	ca, pa, err := issueCode(&a, false, func(e issued) error {
		e.pc = 0
		ea = append(ea, e)
		return nil
	})
	if err != nil {
		return err
	}
	i := 0
	cb, pb, err := issueCode(&b, true, func(e issued) error {
		e.pc = 0
		if i >= len(ea) || e != ea[i] {
			return fmt.Errorf("sched: compress: tile %d: event %d issues otherwise", a.Tile, i)
		}
		i++
		return nil
	})
	if err != nil {
		return err
	}
	if ca != cb || pa != pb || i != len(ea) {
		return fmt.Errorf("sched: compress: tile %d: %d cycles and %d events, compressed %d and %d", a.Tile, ca, len(ea), cb, i)
	}
	return nil
}
