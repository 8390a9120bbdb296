package planner

import (
	"fmt"
	"sort"
	"strings"

	"ipu.local/libs/arch"
	"ipu.local/libs/prog"
)

// codeAllowance is the tile memory the planner leaves for code: the
// linker's placement decides exactly.
const codeAllowance = 32 << 10

// MemoryError is a point whose data does not fit the tiles: the worst
// tiles' bytes by category.
type MemoryError struct {
	Arch   string
	Tiles  int
	Usable int64
	Worst  []TileBytes
	// Largest names the worst tile's largest buffers.
	Largest []string
}

// TileBytes is one tile's data by category.
type TileBytes struct {
	Tile                 int
	Constants, Variables int64
}

func (e *MemoryError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "out of memory on %d tiles of %s (usable %d bytes per tile, %d of them for code): ", e.Tiles, e.Arch, e.Usable, codeAllowance)
	for i, t := range e.Worst {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "tile %d total %d (constants %d, variables %d at their peak, code %d)", t.Tile, t.Constants+t.Variables+codeAllowance, t.Constants, t.Variables, codeAllowance)
	}
	if len(e.Largest) > 0 {
		fmt.Fprintf(&b, "; largest on tile %d: %s", e.Worst[0].Tile, strings.Join(e.Largest, ", "))
	}
	return b.String()
}

// liveChunk bounds fits' sweep array (tiles times supersteps): 8 MB, a
// full chip of about 700 supersteps at a time (the 12-layer encoder's
// 1472 tiles take one sweep).
const liveChunk = 1 << 20

// livePeaks returns, for tiles [0, n), the largest bytes of variables
// (buffers without data, not permanent) live at once, from their First
// and Last supersteps: a sweep over the supersteps with each tile's bytes
// starting and stopping to live (a buffer lives from First to Last; one
// freed at a superstep another starts at is not live with it), over as
// many tiles at a time as keep the sweep's array within entries.
func livePeaks(pr *prog.Program, n, entries int) []int64 {
	peaks := make([]int64, n)
	S := len(pr.Steps) + 2
	chunk := max(1, min(n, entries/S))
	diff := make([]int64, chunk*S)
	for lo := 0; lo < n; lo += chunk {
		hi := min(n, lo+chunk)
		clear(diff)
		for _, b := range pr.Buffers {
			if b.Data != nil || b.Permanent {
				continue
			}
			for _, t := range b.Tiles {
				if t >= lo && t < hi {
					diff[(t-lo)*S+b.First] += int64(b.Size)
					diff[(t-lo)*S+b.Last+1] -= int64(b.Size)
				}
			}
		}
		for t := lo; t < hi; t++ {
			var cur, peak int64
			for _, d := range diff[(t-lo)*S : (t-lo+1)*S] {
				cur += d
				peak = max(peak, cur)
			}
			peaks[t] = peak
		}
	}
	return peaks
}

// fits checks a program's memory: on every tile, the constants and the
// largest set of variables live at once within the usable memory less
// the code allowance. The linker's placement decides exactly.
func fits(p *arch.Preset, tiles int, usable int64, pr *prog.Program) error {
	pr.Liveness()
	// By tile, dense (buffers' tiles are the plan's, never negative): maps
	// by tile were a tenth of pricing a candidate on a full chip.
	n := 0
	for _, b := range pr.Buffers {
		for _, t := range b.Tiles {
			n = max(n, t+1)
		}
	}
	per := make([]TileBytes, n)
	used := make([]bool, n)
	for _, b := range pr.Buffers {
		for _, t := range b.Tiles {
			used[t] = true
			if b.Data != nil || b.Permanent {
				per[t].Constants += int64(b.Size)
			}
		}
	}
	for t, v := range livePeaks(pr, n, liveChunk) {
		per[t].Variables = v
	}
	var over []TileBytes
	for t := range per {
		per[t].Tile = t
		if used[t] && per[t].Constants+per[t].Variables+codeAllowance > usable {
			over = append(over, per[t])
		}
	}
	if len(over) == 0 {
		// The bytes fit; a buffer larger than its region does not.
		return fitsRegions(p, pr)
	}
	sort.Slice(over, func(i, j int) bool {
		a, b := over[i].Constants+over[i].Variables, over[j].Constants+over[j].Variables
		if a != b {
			return a > b
		}
		return over[i].Tile < over[j].Tile
	})
	e := &MemoryError{Arch: p.Name, Tiles: tiles, Usable: usable, Worst: over[:min(len(over), 3)]}
	var onWorst []*prog.Buffer
	for _, b := range pr.Buffers {
		for _, t := range b.Tiles {
			if t == over[0].Tile {
				onWorst = append(onWorst, b)
			}
		}
	}
	sort.SliceStable(onWorst, func(i, j int) bool { return onWorst[i].Size > onWorst[j].Size })
	for _, b := range onWorst[:min(4, len(onWorst))] {
		kind := "variable"
		if b.Data != nil || b.Permanent {
			kind = "constant"
		}
		e.Largest = append(e.Largest, fmt.Sprintf("%s %d bytes (%s)", b.Name, b.Size, kind))
	}
	return e
}

// RegionError is a point with a buffer larger than the memory region its
// kernels need it in (a product's A blocks in non-interleaved memory):
// no placement could hold it.
type RegionError struct {
	Buffer       string
	Bytes, Limit int
	Region       string
}

func (e *RegionError) Error() string {
	return fmt.Sprintf("buffer %s of %d bytes does not fit in the %d bytes of %s memory", e.Buffer, e.Bytes, e.Limit, e.Region)
}

// fitsRegions checks every buffer bound to one memory region against
// that region's size, as the linker's placement would.
func fitsRegions(p *arch.Preset, pr *prog.Program) error {
	for _, b := range pr.Buffers {
		var limit int
		var name string
		switch b.Region {
		case prog.NonInterleaved:
			limit, name = int(p.NonInterleaved.Size()), "non-interleaved"
		case prog.Interleaved:
			limit, name = int(p.Interleaved.Size()), "interleaved"
		default:
			continue
		}
		if int(b.Size) > limit {
			return &RegionError{Buffer: b.Name, Bytes: int(b.Size), Limit: limit, Region: name}
		}
	}
	return nil
}
