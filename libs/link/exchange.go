package link

import (
	"fmt"
	"log/slog"
	"time"

	"ipu.local/libs/codegen"
	"ipu.local/libs/sched"
)

// Exchange code storage: the scheduled code of every exchange superstep
// compressed with repeat loops (sched.Compress), the patch tables those
// loops load, and their figures.

// ExchangeStorage are the figures of the compressed exchange code, each
// the largest over tiles of the tile's total over its exchange
// supersteps; Loops is the total of all tiles.
type ExchangeStorage struct {
	StraightBytes int // the exchange code without repeat loops
	CodeBytes     int // the exchange code with them, patch tables aside
	TableBytes    int // code and patch tables: what the tile stores
	PatchBytes    int // patch tables: per-iteration values stored
	ElidedBytes   int // per-iteration values computed by the loops, not stored
	Loops         int
	// TotalStraight and TotalStored are the exchange code of all tiles
	// without loops, and with them and their patch tables.
	TotalStraight, TotalStored int
}

// packExchanges compresses every exchange superstep's code, sets each
// tile's exchange code bytes to what it stores, and logs the storage.
func (l *linker) packExchanges(log *slog.Logger) {
	began := time.Now()
	l.packed = make([]*sched.Plan, len(l.exch))
	stats := make([][]sched.CompressStats, len(l.exch))
	var steps []int
	for i, sp := range l.exch {
		if sp != nil {
			steps = append(steps, i)
		}
	}
	l.parallel(steps, func(i int) {
		if l.noLoops {
			l.packed[i], stats[i] = l.exch[i], sched.Straight(l.exch[i])
			return
		}
		l.packed[i], stats[i] = sched.Compress(l.p, l.exch[i])
	})
	per := map[int]*sched.CompressStats{}
	for _, i := range steps {
		for k, tc := range l.exch[i].Tiles {
			s := per[tc.Tile]
			if s == nil {
				s = &sched.CompressStats{}
				per[tc.Tile] = s
			}
			s.Add(stats[i][k])
		}
	}
	st := &l.st.ExchangeStorage
	for _, t := range l.sortedTiles() {
		s := per[t]
		if s == nil {
			continue
		}
		l.tiles[t].exCode = s.PackedBytes + s.PatchBytes
		st.StraightBytes = max(st.StraightBytes, s.CodeBytes)
		st.CodeBytes = max(st.CodeBytes, s.PackedBytes)
		st.TableBytes = max(st.TableBytes, s.PackedBytes+s.PatchBytes)
		st.PatchBytes = max(st.PatchBytes, s.PatchBytes)
		st.ElidedBytes = max(st.ElidedBytes, s.ElidedBytes)
		st.Loops += s.Loops
		st.TotalStraight += s.CodeBytes
		st.TotalStored += s.PackedBytes + s.PatchBytes
	}
	l.st.ExchangeTableBytes = st.TableBytes
	// The memory figures had the bound of size_tile_code: now the code.
	for i := range l.st.Memory {
		if tl := l.tiles[l.st.Memory[i].Tile]; tl != nil {
			l.st.Memory[i].ExchangeCode = int64(tl.exCode)
		}
	}
	log.Info("exchange table and repeat patch storage", slog.Int("exchange_table_bytes", st.TableBytes),
		slog.Int("maximum_uncompressed_repeat_patch_bytes", st.PatchBytes), slog.Int("maximum_elided_arithmetic_patch_bytes", st.ElidedBytes))
	log.Debug("compressed exchange code with repeat loops", slog.Int("loops", st.Loops),
		slog.Int("straight_code_bytes", st.StraightBytes), slog.Int("compressed_code_bytes", st.CodeBytes),
		slog.Int("all_tiles_straight_bytes", st.TotalStraight), slog.Int("all_tiles_stored_bytes", st.TotalStored),
		slog.Int64("elapsed_ms", time.Since(began).Milliseconds()))
}

// pendingTable is a patch table to emit after a tile's program, with
// the labels its code loads (by word).
type pendingTable struct {
	tc     *sched.TileCode
	labels map[int]codegen.Label
}

// patchTable returns the function that gives tile t's exchange code tc
// the label of its patch table's word i, which emitTables binds after
// the program.
func (l *linker) patchTable(t int, tc *sched.TileCode) func(i int) codegen.Label {
	tl := l.tiles[t]
	pt := pendingTable{tc, map[int]codegen.Label{}}
	if tc.Table != nil {
		tl.tables = append(tl.tables, pt)
	}
	return func(i int) codegen.Label {
		at, ok := pt.labels[i]
		if !ok {
			at = tl.b.Label()
			pt.labels[i] = at
		}
		return at
	}
}

// emitTables emits tile t's patch tables, one after the other, as one
// piece of exchange storage.
func (l *linker) emitTables(t int) {
	tl := l.tiles[t]
	if len(tl.tables) == 0 {
		return
	}
	lo := tl.b.Here()
	for _, pt := range tl.tables {
		pt.tc.EmitTable(tl.b, func(i int) codegen.Label {
			if at, ok := pt.labels[i]; ok {
				return at
			}
			return -1
		})
	}
	tl.exPieces = append(tl.exPieces, [2]codegen.Label{lo, tl.b.Here()})
}

// optimizeExchangePlacement checks that each tile's code with its
// scheduled exchange code fits below its lowest non-interleaved buffer.
func (l *linker) optimizeExchangePlacement(*slog.Logger) error {
	for _, t := range l.sortedTiles() {
		tl := l.tiles[t]
		end := uint64(l.p.Executable.Lo) + uint64(tl.codeBytes())
		if lo := l.lowestNI(t); end > uint64(lo) {
			return fmt.Errorf("tile %d: code of %d bytes overlaps its non-interleaved buffers from %#x", t, end-uint64(l.p.Executable.Lo), lo)
		}
	}
	return nil
}

// lowestNI is the lowest non-interleaved buffer address of tile t.
func (l *linker) lowestNI(t int) uint32 {
	lo := l.p.NonInterleaved.Hi
	for _, b := range l.prog.Buffers {
		if b.Placed && b.Addr < l.p.NonInterleaved.Hi && containsTile(b.Tiles, t) {
			lo = min(lo, b.Addr)
		}
	}
	return lo
}
