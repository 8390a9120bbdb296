package link

// Placement of the program's buffers in tile memory, by liveness: a
// buffer occupies its address range on its tiles from the superstep that
// first writes it to the one that last reads it (libs/prog Liveness);
// another buffer whose lifetime does not overlap may reuse the range.
// Every buffer has one address on all its tiles (a multicast lands at one
// address). Buffers with constant data live for the whole program.
//
// Regions: interleaved buffers (the AMP's B operands and C blocks, and
// by preference everything else) go lowest first from the interleaved
// region's start; non-interleaved buffers (A operands) highest first
// from the non-interleaved region's end, leaving its bottom to the code,
// which grows up from the executable range's start. A buffer that must
// not share memory elements with another (an A operand with its B) and
// lands in interleaved memory avoids the other's 32 KiB element pairs.
// When a buffer finds no room so, placement starts again with the
// constants of no region, then every buffer of no region, in
// non-interleaved memory first (lowPolicy, placeBuffers).

import (
	"fmt"
	"sort"
	"strings"

	"ipu.local/libs/arch"
	"ipu.local/libs/prog"
)

// span is a placed buffer on one tile: its address range and lifetime.
type span struct {
	lo, hi      uint32
	first, last int
	buf         *prog.Buffer
}

// placer holds the spans of every tile.
type placer struct {
	p     *arch.Preset
	tiles map[int][]span
	// codeTop is the lowest address a non-interleaved buffer may take on
	// each tile (its code's end).
	codeTop map[int]uint32
	// seen marks the buffers busy has collected in its current call
	// (seen[b] == call): a buffer has one address on all its tiles, so
	// its spans on its other tiles add nothing.
	seen map[*prog.Buffer]int
	call int
	// low is the placement's policy for buffers of no region: which of
	// them try the non-interleaved region first (placeLow).
	low lowPolicy
}

// lowPolicy says which buffers of no region (prog.AnyRegion) a placement
// puts in the non-interleaved region first, highest first below the A
// operands, instead of at the interleaved region's bottom.
type lowPolicy uint8

const (
	lowNone      lowPolicy = iota // none: every one interleaved first
	lowConstants                  // the constants (data or permanent)
	lowAll                        // every one
	numLowPolicies
)

// lowPolicyNames name the policies in the placement's log line.
var lowPolicyNames = [numLowPolicies]string{"interleaved first", "constants non-interleaved first", "non-interleaved first"}

func (p lowPolicy) String() string { return lowPolicyNames[p] }

// placeLow reports whether b, of no region, tries the non-interleaved
// region first under the placer's policy.
func (pl *placer) placeLow(b *prog.Buffer) bool {
	switch pl.low {
	case lowConstants:
		return b.Data != nil || b.Permanent
	case lowAll:
		return true
	}
	return false
}

// MemoryError is a buffer that does not fit.
type MemoryError struct {
	Tile   int
	Buffer string
	Size   uint32
	// Free is the largest free range on the tile during the buffer's
	// lifetime in the memory it may take (Region; "": either region),
	// and FreeAll the bytes free there in all: more than Free, the
	// memory is there but in pieces.
	Free, FreeAll uint32
	Region        string
	// Variable says the buffer holds no data and is not permanent: it
	// lives only between the supersteps that write and read it.
	Variable bool
	// Why says what kept the buffer out of a free range as large as it
	// (its alignment, the windows of its AMP operands); "" when none is.
	Why    string
	Report string // the tile's memory by category
}

func (e *MemoryError) Error() string {
	where, why := "", ""
	if e.Region != "" {
		where = " in " + e.Region
	}
	if e.Why != "" {
		why = ", but " + e.Why
	}
	all := ""
	if e.FreeAll > e.Free {
		all = fmt.Sprintf(" of %d free", e.FreeAll)
	}
	return fmt.Sprintf("tile %d: buffer %s of %d bytes does not fit%s (largest free range %d bytes%s while it lives%s)%s", e.Tile, e.Buffer, e.Size, where, e.Free, all, why, e.Report)
}

// fitError describes why b found no place: the largest free range in
// the memory it may take and, when that range is large enough, what
// kept b out of it.
func (pl *placer) fitError(b *prog.Buffer, busy [][2]uint32, il, ni arch.Range) *MemoryError {
	e := &MemoryError{Tile: b.Tiles[0], Buffer: b.Name, Size: b.Size, Variable: b.Data == nil && !b.Permanent}
	ranges := []arch.Range{il, ni}
	if b.Region == prog.Interleaved {
		ranges, e.Region = ranges[:1], "interleaved memory"
	}
	for _, r := range ranges {
		e.Free = max(e.Free, largestFree(busy, r))
		e.FreeAll += freeIn(busy, r)
	}
	if e.Free >= b.Size {
		e.Why = fmt.Sprintf("no start aligned to %d bytes", b.Align)
		if len(b.Apart) > 0 {
			names := make([]string, len(b.Apart))
			for i, o := range b.Apart {
				names[i] = o.Name
			}
			e.Why += " keeps it out of the 32 KiB interleaved windows of " + strings.Join(names, ", ")
		}
		e.Why += " there"
	}
	return e
}

// largestFree returns the largest range of [r.Lo, r.Hi) that no span of
// busy (sorted by start) covers.
func largestFree(busy [][2]uint32, r arch.Range) uint32 {
	free := uint32(0)
	prev := r.Lo
	for _, s := range busy {
		if lo := min(s[0], r.Hi); lo > prev {
			free = max(free, lo-prev)
		}
		prev = max(prev, s[1])
	}
	if r.Hi > prev {
		free = max(free, r.Hi-prev)
	}
	return free
}

// freeIn returns the bytes of [r.Lo, r.Hi) that no span of busy (sorted
// and merged) covers.
func freeIn(busy [][2]uint32, r arch.Range) uint32 {
	if r.Hi <= r.Lo {
		return 0
	}
	free := r.Hi - r.Lo
	for _, s := range busy {
		if lo, hi := max(s[0], r.Lo), min(s[1], r.Hi); hi > lo {
			free -= hi - lo
		}
	}
	return free
}

// busy returns the address ranges used on the buffer's tiles while it
// lives, sorted and merged.
func (pl *placer) busy(b *prog.Buffer) [][2]uint32 {
	if pl.seen == nil {
		pl.seen = map[*prog.Buffer]int{}
	}
	pl.call++
	var rs [][2]uint32
	for _, t := range b.Tiles {
		for _, s := range pl.tiles[t] {
			if s.last < b.First || s.first > b.Last || pl.seen[s.buf] == pl.call {
				continue
			}
			pl.seen[s.buf] = pl.call
			rs = append(rs, [2]uint32{s.lo, s.hi})
		}
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i][0] < rs[j][0] })
	var out [][2]uint32
	for _, r := range rs {
		if n := len(out); n > 0 && r[0] <= out[n-1][1] {
			out[n-1][1] = max(out[n-1][1], r[1])
			continue
		}
		out = append(out, r)
	}
	return out
}

// window is the 32 KiB interleaved element pair of an address.
func window(p *arch.Preset, a uint32) uint32 { return (a - p.Interleaved.Lo) / (2 * p.ElementBytes) }

// fitUp returns the lowest aligned address in [lo, hi) where size bytes
// avoid busy and the avoided windows.
func fitUp(busy [][2]uint32, lo, hi, size, align uint32, avoid func(a, size uint32) uint32) (uint32, bool) {
	at := (lo + align - 1) &^ (align - 1)
	for i := 0; ; {
		if at+size > hi || at+size < at {
			return 0, false
		}
		moved := false
		for ; i < len(busy) && busy[i][1] <= at; i++ {
		}
		if i < len(busy) && busy[i][0] < at+size {
			at = (busy[i][1] + align - 1) &^ (align - 1)
			moved = true
		}
		if !moved && avoid != nil {
			if next := avoid(at, size); next != at {
				at = (next + align - 1) &^ (align - 1)
				moved = true
			}
		}
		if !moved {
			return at, true
		}
	}
}

// fitDown returns the highest aligned address in [lo, hi) where size
// bytes avoid busy.
func fitDown(busy [][2]uint32, lo, hi, size, align uint32) (uint32, bool) {
	if hi < size {
		return 0, false
	}
	at := (hi - size) &^ (align - 1)
	for i := len(busy) - 1; ; {
		if at < lo {
			return 0, false
		}
		for ; i >= 0 && busy[i][0] >= at+size; i-- {
		}
		if i >= 0 && busy[i][1] > at {
			if busy[i][0] < size {
				return 0, false
			}
			at = (busy[i][0] - size) &^ (align - 1)
			continue
		}
		return at, true
	}
}

// place puts b on its tiles.
func (pl *placer) place(b *prog.Buffer) error {
	busy := pl.busy(b)
	il := arch.Range{Lo: pl.p.Interleaved.Lo, Hi: pl.p.UsableMemory().Hi}
	codeTop := pl.p.NonInterleaved.Lo
	for _, t := range b.Tiles {
		codeTop = max(codeTop, pl.codeTop[t])
	}
	ni := arch.Range{Lo: codeTop, Hi: pl.p.NonInterleaved.Hi}
	var avoid func(a, size uint32) uint32
	if len(b.Apart) > 0 {
		avoid = func(a, size uint32) uint32 {
			for _, o := range b.Apart {
				if !o.Placed || o.Addr < pl.p.Interleaved.Lo {
					continue
				}
				w0, w1 := window(pl.p, a), window(pl.p, a+size-1)
				o0, o1 := window(pl.p, o.Addr), window(pl.p, o.Addr+o.Size-1)
				if w0 <= o1 && o0 <= w1 {
					return pl.p.Interleaved.Lo + (o1+1)*2*pl.p.ElementBytes
				}
			}
			return a
		}
	}
	var at uint32
	ok := false
	switch b.Region {
	case prog.Interleaved:
		at, ok = fitUp(busy, il.Lo, il.Hi, b.Size, b.Align, avoid)
	case prog.NonInterleaved:
		if at, ok = fitDown(busy, ni.Lo, ni.Hi, b.Size, b.Align); !ok {
			at, ok = fitUp(busy, il.Lo, il.Hi, b.Size, b.Align, avoid)
		}
	default:
		if pl.placeLow(b) {
			if at, ok = fitDown(busy, ni.Lo, ni.Hi, b.Size, b.Align); !ok {
				at, ok = fitUp(busy, il.Lo, il.Hi, b.Size, b.Align, avoid)
			}
		} else if at, ok = fitUp(busy, il.Lo, il.Hi, b.Size, b.Align, avoid); !ok {
			at, ok = fitDown(busy, ni.Lo, ni.Hi, b.Size, b.Align)
		}
	}
	if !ok {
		return pl.fitError(b, busy, il, ni)
	}
	b.Addr, b.Placed = at, true
	for _, t := range b.Tiles {
		pl.tiles[t] = append(pl.tiles[t], span{at, at + b.Size, b.First, b.Last, b})
	}
	return nil
}

// placeAll places every buffer: those that live for the whole program
// first, then by first use (the larger first on a tie).
func (pl *placer) placeAll(bufs []*prog.Buffer) error {
	order := append([]*prog.Buffer(nil), bufs...)
	sort.SliceStable(order, func(i, j int) bool {
		a, b := order[i], order[j]
		if a.First != b.First {
			return a.First < b.First
		}
		if a.Last-a.First != b.Last-b.First {
			return a.Last-a.First > b.Last-b.First
		}
		if a.Size != b.Size {
			return a.Size > b.Size
		}
		return a.ID < b.ID
	})
	for _, b := range order {
		if len(b.Tiles) == 0 {
			continue
		}
		if err := pl.place(b); err != nil {
			return err
		}
	}
	return nil
}
