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
	// Interleaved, when not 0, is the interleaved region's usable bytes,
	// and Worst the tiles whose buffers bound to it (the AMP's B operands
	// and C blocks) exceed them: their constants and the peak of their
	// variables.
	Interleaved int64
	// Over is the bytes the tiles need beyond Usable, summed over the
	// tiles (the start's measure of how far a point is from fitting).
	Over int64
	// MaxVariable, when not 0, is Options.MaxVariable: Largest names the
	// variables larger than it, Worst[0] the largest one's first tile
	// and size, and Over is their bytes beyond it on all their tiles.
	MaxVariable int64
}

// interleavedError is the message of an interleaved region's overflow.
func (e *MemoryError) interleavedError() string {
	var b strings.Builder
	fmt.Fprintf(&b, "out of interleaved memory on %d tiles of %s (%d bytes per tile for the AMP's B operands and C blocks): ", e.Tiles, e.Arch, e.Interleaved)
	for i, t := range e.Worst {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "tile %d needs %d (constants %d, variables %d at their peak)", t.Tile, t.Constants+t.Variables, t.Constants, t.Variables)
	}
	if len(e.Largest) > 0 {
		fmt.Fprintf(&b, "; largest on tile %d: %s", e.Worst[0].Tile, strings.Join(e.Largest, ", "))
	}
	return b.String()
}

// TileBytes is one tile's data by category.
type TileBytes struct {
	Tile                 int
	Constants, Variables int64
}

func (e *MemoryError) Error() string {
	if e.Interleaved > 0 {
		return e.interleavedError()
	}
	if e.MaxVariable > 0 {
		return fmt.Sprintf("variables larger than %d bytes (the largest this search lets a tile hold) on %d tiles of %s: %s",
			e.MaxVariable, e.Tiles, e.Arch, strings.Join(e.Largest, ", "))
	}
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
// many tiles at a time as keep the sweep's array within entries. keep
// (nil: every one) picks the buffers counted.
func livePeaks(pr *prog.Program, n, entries int, keep func(*prog.Buffer) bool) []int64 {
	peaks := make([]int64, n)
	S := len(pr.Steps) + 2
	chunk := max(1, min(n, entries/S))
	diff := make([]int64, chunk*S)
	for lo := 0; lo < n; lo += chunk {
		hi := min(n, lo+chunk)
		clear(diff)
		for _, b := range pr.Buffers {
			if b.Data != nil || b.Permanent || keep != nil && !keep(b) {
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
// the code allowance. The linker's placement decides exactly. When they
// fit, il is what the buffers bound to the interleaved region need
// beyond it (fitsInterleaved): the search ranks such a point after every
// point that fits (result.cost), since no placement can link it.
func fits(p *arch.Preset, tiles int, usable int64, pr *prog.Program) (il overflow, err error) {
	per, used, ilConst := tileBytes(pr)
	var over []TileBytes
	var sum int64
	for t := range per {
		per[t].Tile = t
		if need := per[t].Constants + per[t].Variables + codeAllowance; used[t] && need > usable {
			over = append(over, per[t])
			sum += need - usable
		}
	}
	if len(over) == 0 {
		// The bytes fit; a buffer larger than its region does not, nor
		// the interleaved buffers of a tile larger than that region.
		if err := fitsRegions(p, pr); err != nil {
			return overflow{}, err
		}
		return fitsInterleaved(p, tiles, pr, per, ilConst), nil
	}
	sortOver(over)
	e := &MemoryError{Arch: p.Name, Tiles: tiles, Usable: usable, Worst: over[:min(len(over), 3)], Over: sum}
	e.Largest = largestOn(pr, over[0].Tile, nil)
	return overflow{}, e
}

// fitsLargest checks that no variable (a buffer with no data, not
// permanent) of a program is larger than maxVariable bytes: the search
// of a plan whose variable found memory free only in pieces (the
// linker places a buffer in one range while the others live around
// it). The error names the largest ones over (up to 4, largest first,
// the first found on a tie) and Over is their bytes beyond the limit on
// all their tiles.
func fitsLargest(p *arch.Preset, tiles int, maxVariable int64, pr *prog.Program) error {
	var over []*prog.Buffer
	var sum int64
	for _, b := range pr.Buffers {
		if b.Data != nil || b.Permanent || int64(b.Size) <= maxVariable || len(b.Tiles) == 0 {
			continue
		}
		over = append(over, b)
		sum += (int64(b.Size) - maxVariable) * int64(len(b.Tiles))
	}
	if len(over) == 0 {
		return nil
	}
	sort.SliceStable(over, func(i, j int) bool { return over[i].Size > over[j].Size })
	e := &MemoryError{Arch: p.Name, Tiles: tiles, MaxVariable: maxVariable, Over: sum,
		Worst: []TileBytes{{Tile: over[0].Tiles[0], Variables: int64(over[0].Size)}}}
	for _, b := range over[:min(4, len(over))] {
		e.Largest = append(e.Largest, fmt.Sprintf("%s %d bytes on tile %d", b.Name, b.Size, b.Tiles[0]))
	}
	return e
}

// tileBytes returns, by tile up to the last a buffer takes, its
// constants' bytes and its variables' peak (per), whether a buffer
// takes it, and its constants bound to the interleaved region. By tile,
// dense (buffers' tiles are the plan's, never negative): maps by tile
// were a tenth of pricing a candidate on a full chip.
func tileBytes(pr *prog.Program) (per []TileBytes, used []bool, ilConst []int64) {
	pr.Liveness()
	n := 0
	for _, b := range pr.Buffers {
		for _, t := range b.Tiles {
			n = max(n, t+1)
		}
	}
	per = make([]TileBytes, n)
	used = make([]bool, n)
	ilConst = make([]int64, n)
	for _, b := range pr.Buffers {
		for _, t := range b.Tiles {
			used[t] = true
			if b.Data != nil || b.Permanent {
				per[t].Constants += int64(b.Size)
				if b.Region == prog.Interleaved {
					ilConst[t] += int64(b.Size)
				}
			}
		}
	}
	for t, v := range livePeaks(pr, n, liveChunk, nil) {
		per[t].Variables = v
	}
	return per, used, ilConst
}

// overflow is what a point's buffers bound to the interleaved region
// need beyond it: Bytes summed over the tiles (0: they fit), and the
// error that says so.
type overflow struct {
	Bytes int64
	Err   *MemoryError
}

// fitsInterleaved checks, on every tile, the buffers bound to the
// interleaved region (the constants among them ilConst) against the
// region below the runtime's reserve: no placement holds more. A tile
// whose interleaved constants and every variable's peak (per) fit needs
// no closer look; the others get the peak of their interleaved
// variables.
func fitsInterleaved(p *arch.Preset, tiles int, pr *prog.Program, per []TileBytes, ilConst []int64) overflow {
	limit := int64(p.UsableMemory().Hi) - int64(p.Interleaved.Lo)
	check := false
	for t := range per {
		if ilConst[t]+per[t].Variables > limit {
			check = true
			break
		}
	}
	if !check {
		return overflow{}
	}
	il := func(b *prog.Buffer) bool { return b.Region == prog.Interleaved }
	var over []TileBytes
	var sum int64
	for t, v := range livePeaks(pr, len(per), liveChunk, il) {
		if need := ilConst[t] + v; need > limit {
			over = append(over, TileBytes{Tile: t, Constants: ilConst[t], Variables: v})
			sum += need - limit
		}
	}
	if len(over) == 0 {
		return overflow{}
	}
	sortOver(over)
	return overflow{Bytes: sum, Err: &MemoryError{Arch: p.Name, Tiles: tiles, Usable: limit, Worst: over[:min(len(over), 3)], Interleaved: limit,
		Largest: largestOn(pr, over[0].Tile, il)}}
}

// sortOver orders the tiles over their memory, the fullest first.
func sortOver(over []TileBytes) {
	sort.Slice(over, func(i, j int) bool {
		a, b := over[i].Constants+over[i].Variables, over[j].Constants+over[j].Variables
		if a != b {
			return a > b
		}
		return over[i].Tile < over[j].Tile
	})
}

// largestOn names the four largest buffers on tile (of those keep
// picks; nil: all), with their bytes and kind.
func largestOn(pr *prog.Program, tile int, keep func(*prog.Buffer) bool) []string {
	var on []*prog.Buffer
	for _, b := range pr.Buffers {
		if keep != nil && !keep(b) {
			continue
		}
		for _, t := range b.Tiles {
			if t == tile {
				on = append(on, b)
			}
		}
	}
	sort.SliceStable(on, func(i, j int) bool { return on[i].Size > on[j].Size })
	var out []string
	for _, b := range on[:min(4, len(on))] {
		kind := "variable"
		if b.Data != nil || b.Permanent {
			kind = "constant"
		}
		out = append(out, fmt.Sprintf("%s %d bytes (%s)", b.Name, b.Size, kind))
	}
	return out
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
