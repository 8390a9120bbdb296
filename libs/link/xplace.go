package link

// optimize_exchange_placement: where each tile's exchange patch tables
// go. A repeat loop of the exchange code (sched.Compress) loads its
// per-iteration operand values from a run of patch-table words through
// a pointer it sets with one li of the run's address, so the run may
// lie anywhere in the tile's data. Runs of equal values (the same
// irregular gather or scatter in two supersteps, a loop whose values
// are part of another's) are stored once: a run already stored is not
// stored again, and a run whose start equals the end of what is stored
// adds only its rest. The li loads another address of the same length
// (every tile address takes one li), so code length and cycles do not
// change; only the tables shrink: by 1.51 of 2.26 MB on the 12-layer
// BERT-base FP16 encoder (1472 tiles), whose repeated layers move rows
// between the same tiles at the same addresses.
//
// Why not buffers: measured on qk-early, mlp-small, the torch_ cases and
// the BERT and GPT-2 cases, every tile sends from one buffer and
// receives into one buffer per exchange superstep (qk-early's receivers
// excepted, into two), and no two transfers between one pair of tiles
// in a superstep meet end to start on either side, so moving buffers
// would merge no send/recv pair and make no address run regular; and
// the placer already keeps every AMP A operand out of its B operand's
// element pair, so no memory-element conflict costs a cycle.

import (
	"fmt"
	"log/slog"
	"sort"

	"ipu.local/libs/codegen"
	"ipu.local/libs/sched"
)

// patchLayout is one tile's stored patch tables.
type patchLayout struct {
	words []uint32
	// at maps a superstep's table word (a loop's first value) to its
	// index in words.
	at map[[2]int]int
	// runs are the loops' value runs laid out, shared those that reuse
	// stored words (all of them, or their start), tableBytes the tables
	// before sharing.
	runs, shared, tableBytes int
}

// PatchPlacement is what optimize_exchange_placement did: the loops'
// value runs it placed, those it placed onto values already stored
// (SharedRuns), and the patch-table bytes that saved, in all and on the
// tile that saved most.
type PatchPlacement struct {
	Runs, SharedRuns     int
	TableBytes           int // before sharing, all tiles
	SavedBytes, MaxSaved int
}

// optimizeExchangePlacement lays out every tile's patch tables (sharing
// equal runs unless Options.NoPatchSharing), takes the bytes saved off
// its exchange code, and checks that each tile's code fits below its
// lowest non-interleaved buffer.
func (l *linker) optimizeExchangePlacement(log *slog.Logger) error {
	ts := l.sortedTiles()
	lays := make([]*patchLayout, len(ts))
	pos := map[int]int{}
	for k, t := range ts {
		pos[t] = k
	}
	if err := l.eachTile(func(t int) error {
		lays[pos[t]] = l.layoutPatches(t, !l.noShare)
		return nil
	}); err != nil {
		return err
	}
	pp := &l.st.PatchPlacement
	for k, t := range ts {
		lay, tl := lays[k], l.tiles[t]
		tl.patches = lay
		saved := lay.tableBytes - 4*len(lay.words)
		tl.exCode -= saved
		pp.Runs += lay.runs
		pp.SharedRuns += lay.shared
		pp.TableBytes += lay.tableBytes
		pp.SavedBytes += saved
		pp.MaxSaved = max(pp.MaxSaved, saved)
	}
	for i := range l.st.Memory {
		if tl := l.tiles[l.st.Memory[i].Tile]; tl != nil {
			l.st.Memory[i].ExchangeCode = int64(tl.exCode)
		}
	}
	log.Info("placed exchange patch tables sharing equal loop values", slog.Int("moved_runs", pp.SharedRuns),
		slog.Int("saved_bytes", pp.SavedBytes), slog.Int("maximum_tile_saved_bytes", pp.MaxSaved))
	log.Debug("exchange patch table placement", slog.Int("runs", pp.Runs), slog.Int("table_bytes", pp.TableBytes),
		slog.Int("stored_bytes", pp.TableBytes-pp.SavedBytes))
	for _, t := range ts {
		tl := l.tiles[t]
		end := uint64(l.p.Executable.Lo) + uint64(tl.codeBytes())
		if lo := l.lowestNI(t); end > uint64(lo) {
			return l.codeSpaceError(t, end-uint64(l.p.Executable.Lo), lo)
		}
	}
	return nil
}

// layoutPatches lays out tile t's patch tables, superstep by superstep
// in program order and loop by loop, each run of values where it is
// already stored (share), or appended, overlapping the stored words'
// end by as much of its start as equals it (share).
func (l *linker) layoutPatches(t int, share bool) *patchLayout {
	lay := &patchLayout{at: map[[2]int]int{}}
	for i, sp := range l.packed {
		if sp == nil {
			continue
		}
		tc := sp.Tile(t)
		if tc == nil || len(tc.Table) == 0 {
			continue
		}
		lay.tableBytes += 4 * len(tc.Table)
		bounds := runStarts(tc)
		for k := 0; k+1 < len(bounds); k++ {
			lo, hi := bounds[k], bounds[k+1]
			at, shared := lay.place(tc.Table[lo:hi], share)
			lay.at[[2]int{i, lo}] = at
			lay.runs++
			if shared {
				lay.shared++
			}
		}
	}
	return lay
}

// runStarts returns the table words where tc's loops' runs start, with 0
// and the table's end: run k is [bounds[k], bounds[k+1]).
func runStarts(tc *sched.TileCode) []int {
	seen := map[int]bool{0: true, len(tc.Table): true}
	bounds := []int{0, len(tc.Table)}
	for _, k := range tc.TableLoads {
		w := int((uint32(tc.Code[k].Imm) - tc.TableAt) / 4)
		if w >= 0 && w < len(tc.Table) && !seen[w] {
			seen[w] = true
			bounds = append(bounds, w)
		}
	}
	sort.Ints(bounds)
	return bounds
}

// place stores run (when share, onto equal stored words where it can)
// and returns its index and whether it reuses stored words.
func (lay *patchLayout) place(run []uint32, share bool) (int, bool) {
	n := len(lay.words)
	if share {
		if at := index(lay.words, run); at >= 0 {
			return at, true
		}
		for o := min(n, len(run)-1); o > 0; o-- {
			if equalWords(lay.words[n-o:], run[:o]) {
				lay.words = append(lay.words, run[o:]...)
				return n - o, true
			}
		}
	}
	lay.words = append(lay.words, run...)
	return n, false
}

// index returns the first index of run in words, or -1.
func index(words, run []uint32) int {
	for at := 0; at+len(run) <= len(words); at++ {
		if equalWords(words[at:at+len(run)], run) {
			return at
		}
	}
	return -1
}

func equalWords(a, b []uint32) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return len(a) == len(b)
}

// patchLabel returns the function that gives superstep i's exchange code
// on tile t the label of its patch table's word w (a loop's first value),
// which emitTables binds where the layout stored it.
func (l *linker) patchLabel(t, i int) func(w int) codegen.Label {
	tl := l.tiles[t]
	return func(w int) codegen.Label {
		at, ok := tl.patches.at[[2]int{i, w}]
		if !ok {
			tl.b.Fail(fmt.Errorf("tile %d: superstep %d loads patch-table word %d, which starts no loop's values", t, i, w))
			return tl.b.Label()
		}
		if tl.patchLabels == nil {
			tl.patchLabels = map[int]codegen.Label{}
		}
		lb, ok := tl.patchLabels[at]
		if !ok {
			lb = tl.b.Label()
			tl.patchLabels[at] = lb
		}
		return lb
	}
}

// emitTables emits tile t's stored patch tables after its program, as
// one piece of exchange storage, binding the labels its loops load.
func (l *linker) emitTables(t int) {
	tl := l.tiles[t]
	if tl.patches == nil || len(tl.patches.words) == 0 {
		return
	}
	lo := tl.b.Here()
	for k, w := range tl.patches.words {
		if lb, ok := tl.patchLabels[k]; ok {
			tl.b.Bind(lb)
		}
		tl.b.Word(w)
	}
	tl.exPieces = append(tl.exPieces, [2]codegen.Label{lo, tl.b.Here()})
}
