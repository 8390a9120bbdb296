package codegen

import (
	"errors"
	"fmt"
	"sync"
)

// This file holds rows spread over tiles: TileSplit's launches, the
// choice of their chunk length and the partials the tiles exchange.

// TileSplit returns the launches of p on one tile of rows spread over
// tiles, and the bytes of scratch they use at scratch. Each of the R rows
// has p.C columns in all; this tile holds columns [c0, c0+n) of each,
// at X, Y, Scale and Bias (p's addresses are those of column c0; the
// strides are the tile's). The rows are cut into chunks of L columns
// (the last one 1..L): c0 is a multiple of L, and so is n unless the
// tile holds the rows' ends. The launches are RowsSplit's with Chunks
// ceil(C/L) over the whole rows, each tile running the units of its own
// chunks: the arithmetic is that of RowsSplit with those chunks, so
// EmulateRowSplit gives the results. Between launches 1 and 2 and
// between 2 and 3 every tile of the rows must receive the partials the
// others' launches wrote (TilePartials) at the same place in its
// scratch. Softmax, LogSoftmax and LayerNorm only.
func TileSplit(p Rows, L, c0, n int, scratch uint32) ([]Rows, int, error) {
	if p.Phase != 0 || p.Chunks != 0 || p.ChunkLen != 0 || p.Scratch != 0 || p.FirstChunk != 0 || p.TileChunks != 0 {
		return nil, 0, fmt.Errorf("%s: tile split of launch %d of a split sequence", p.Op, p.Phase)
	}
	if p.Op.reduces() {
		return nil, 0, fmt.Errorf("%s: not spread over tiles (one launch combines its rows)", p.Op)
	}
	if scratch%8 != 0 {
		return nil, 0, fmt.Errorf("%s: scratch at %#x is not 8-byte aligned", p.Op, scratch)
	}
	g := p.granule()
	if L < 1 || L%g != 0 || c0 < 0 || c0%L != 0 || n < 1 || c0+n > p.C || c0+n < p.C && n%L != 0 {
		return nil, 0, fmt.Errorf("%s: columns [%d, %d) of %d in chunks of %d: want chunks of a multiple of %d columns, the tile's columns whole chunks but at the rows' end", p.Op, c0, c0+n, p.C, L, g)
	}
	K := (p.C + L - 1) / L
	if K < 2 {
		return nil, 0, fmt.Errorf("%s: rows of %d columns in chunks of %d: a row spread over tiles needs two chunks or more", p.Op, p.C, L)
	}
	seq := p.splitSeq(K, L, scratch)
	for i := range seq {
		seq[i].FirstChunk, seq[i].TileChunks = c0/L, (n+L-1)/L
		if err := seq[i].check(nil); err != nil {
			return nil, 0, fmt.Errorf("%s: %w", p.Op, err)
		}
	}
	return seq, seq[0].ScratchBytes(), nil
}

// TileChunkLen returns the chunk length for TileSplit of rows spread
// over tiles holding width columns each (the last one possibly fewer):
// of the lengths that divide width into at most 2*Workers chunks, are
// multiples of the granule and cut the rows into two chunks or more,
// the one whose launches on a tile holding width columns of p's R rows
// take the fewest cycles back to back (the shorter on a tie); 0 when
// there is none.
func TileChunkLen(p Rows, width int) int {
	key := tileChoice{p.choiceKey(), width}
	if L, ok := tileChoices.Load(key); ok {
		return L.(int)
	}
	L, _ := tileChoices.LoadOrStore(key, p.tileChunkLen(width))
	return L.(int)
}

// tileChoice is what TileChunkLen's choice depends on.
type tileChoice struct {
	p     Rows
	width int
}

// tileChoices caches TileChunkLen's choices.
var tileChoices sync.Map

func (p Rows) tileChunkLen(width int) int {
	best, bestCycles := 0, int64(0)
	for k := 2 * p.Workers; k >= 1; k-- {
		L := width / k
		if L < 1 || width%k != 0 || L%p.granule() != 0 || (p.C+L-1)/L < 2 || width > p.C {
			continue
		}
		seq := p.splitSeq((p.C+L-1)/L, L, 0)
		var costs []Cost
		for i := range seq {
			seq[i].FirstChunk, seq[i].TileChunks = 0, k
			if seq[i].check(nil) != nil {
				costs = nil
				break
			}
			costs = append(costs, seq[i].splitCost())
		}
		if costs == nil {
			continue
		}
		if c := sequenceCycles(costs); best == 0 || c < bestCycles {
			best, bestCycles = L, c
		}
	}
	return best
}

// TilePartials returns the byte ranges, from Scratch, of the partials
// launch 1 or 2 of a tile split writes on its tile (one range per row):
// what the tile sends to the rows' other tiles before the next launch.
func (p Rows) TilePartials() ([][2]uint32, error) {
	if p.TileChunks == 0 || p.Phase < 1 || p.Phase > 2 {
		return nil, errors.New("partials of a tile split's launch 1 or 2 only")
	}
	base := uint32(0)
	if p.Phase == 2 {
		base = p.area2()
	}
	out := make([][2]uint32, p.R)
	for i := range out {
		lo := base + uint32(4*(i*p.Chunks+p.FirstChunk))
		out[i] = [2]uint32{lo, lo + uint32(4*p.TileChunks)}
	}
	return out, nil
}
