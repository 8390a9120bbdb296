package obj

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
)

// ExchangeCodeSymbol names a piece of a tile's exchange code among its
// symbols: a data symbol (Code false, so that SymbolAt still names the
// supervisor program for a PC in it) over the instructions of one
// exchange superstep, which the linker emits inline in the supervisor
// program. Objects of older linkers have none.
const ExchangeCodeSymbol = "__exchange_code"

// HostCommandsSymbol names a tile's host command tables (the tile and
// host addresses of its host transfers) among its code symbols.
const HostCommandsSymbol = "host_commands"

// TileMemory is what one tile's segments hold, in bytes, by category:
//   - Code: the code segments less the exchange code and tables: the
//     kernels, the runtime routines and the supervisor program;
//   - ExchangeCode: the exchange code (ExchangeCodeSymbol) and the host
//     command tables (HostCommandsSymbol);
//   - Constants: data segments (initialised data the image carries);
//   - Variables: bss segments (zeroed at load);
//   - Profile: the profile buffer (ProfileSymbol), out of the data or bss
//     segment holding it;
//   - Stacks: worker and supervisor stacks. The architecture's workers
//     and supervisor run without a stack (kernels keep everything in
//     registers and buffers the linker places), so it is 0 for every
//     object today.
type TileMemory struct {
	Tile                                                      int
	Code, ExchangeCode, Constants, Variables, Profile, Stacks int64
}

// Used is the tile's bytes in segments.
func (m TileMemory) Used() int64 {
	return m.Code + m.ExchangeCode + m.Constants + m.Variables + m.Profile + m.Stacks
}

// add adds n's categories to m's.
func (m *TileMemory) add(n TileMemory) {
	m.Code += n.Code
	m.ExchangeCode += n.ExchangeCode
	m.Constants += n.Constants
	m.Variables += n.Variables
	m.Profile += n.Profile
	m.Stacks += n.Stacks
}

// figures is m's categories, without the tile.
func (m TileMemory) figures() [6]int64 {
	return [6]int64{m.Code, m.ExchangeCode, m.Constants, m.Variables, m.Profile, m.Stacks}
}

// categories is m's categories as text.
func (m TileMemory) categories() string {
	return fmt.Sprintf("code %d exchange %d constants %d variables %d profile %d stacks %d",
		m.Code, m.ExchangeCode, m.Constants, m.Variables, m.Profile, m.Stacks)
}

// Memory returns the memory each tile of o uses, in o's tile order.
// Symbols only move bytes between categories: each category is clamped
// to the bytes of the segments it comes from.
func Memory(o *Object) []TileMemory {
	out := make([]TileMemory, len(o.Tiles))
	for i := range o.Tiles {
		t := &o.Tiles[i]
		m := TileMemory{Tile: t.Index}
		for _, s := range t.Segments {
			switch s.Kind {
			case Code:
				m.Code += int64(s.Size)
			case Data:
				m.Constants += int64(s.Size)
			case BSS:
				m.Variables += int64(s.Size)
			}
		}
		for _, sym := range t.Symbols {
			size := int64(sym.Size)
			switch {
			case sym.Name == ExchangeCodeSymbol && !sym.Code, sym.Name == HostCommandsSymbol && sym.Code:
				size = min(size, m.Code)
				m.Code -= size
				m.ExchangeCode += size
			case sym.Name == ProfileSymbol && !sym.Code:
				seg := segmentAt(t.Segments, sym.Addr)
				switch {
				case seg == nil:
				case seg.Kind == Data:
					size = min(size, m.Constants)
					m.Constants -= size
					m.Profile += size
				case seg.Kind == BSS:
					size = min(size, m.Variables)
					m.Variables -= size
					m.Profile += size
				}
			}
		}
		out[i] = m
	}
	return out
}

// segmentAt is the segment of segs holding addr, or nil.
func segmentAt(segs []Segment, addr uint32) *Segment {
	for i := range segs {
		if addr >= segs[i].Addr && addr-segs[i].Addr < segs[i].Size {
			return &segs[i]
		}
	}
	return nil
}

// WorstTiles is how many tiles the memory report lists by use.
const WorstTiles = 8

// DumpMemory writes the memory report of o's tiles against usable bytes
// of memory per tile (the architecture preset's, which this package does
// not know), each line starting with indent:
//
//	memory tiles 2 usable 637872 bytes per tile
//	  tile 0: code 24 exchange 0 constants 4096 variables 65536 profile 0 stacks 0 used 69656 free 568216
//	  tile 2: code 4 exchange 0 constants 0 variables 0 profile 0 stacks 0 used 4 free 637868
//	  worst tile 0: used 69656 (10.9%) free 568216
//	  worst tile 2: used 4 (0.0%) free 637868
//	  total: code 28 exchange 0 constants 4096 variables 65536 profile 0 stacks 0 used 69660 of 1275744 (5.4%)
//	  largest: tile 0 used 69656 of 637872 (10.9%)
//
// Tiles with the same figures share a line ("tiles 0-63,65: ..."), in
// order of their first tile. The worst tiles are the WorstTiles that use
// the most bytes (ties by tile number). Percentages are rounded down to
// a tenth; a tile over its memory shows "over N" instead of "free N".
// Tiles with no program are not counted.
func DumpMemory(w io.Writer, indent string, o *Object, usable int64) {
	mem := Memory(o)
	fmt.Fprintf(w, "%smemory tiles %d usable %d bytes per tile\n", indent, len(mem), usable)
	if len(mem) == 0 {
		return
	}
	free := func(used int64) string {
		if used > usable {
			return fmt.Sprintf("over %d", used-usable)
		}
		return fmt.Sprintf("free %d", usable-used)
	}

	type group struct {
		tiles []int
		m     TileMemory
	}
	var groups []*group
	byFigures := map[[6]int64]*group{}
	for _, m := range mem {
		key := m.figures()
		g := byFigures[key]
		if g == nil {
			g = &group{m: m}
			byFigures[key] = g
			groups = append(groups, g)
		}
		g.tiles = append(g.tiles, m.Tile)
	}
	for _, g := range groups {
		fmt.Fprintf(w, "%s  %s: %s used %d %s\n", indent, tilesLabel(g.tiles), g.m.categories(), g.m.Used(), free(g.m.Used()))
	}

	worst := slices.Clone(mem)
	slices.SortStableFunc(worst, func(x, y TileMemory) int {
		if c := cmp.Compare(y.Used(), x.Used()); c != 0 {
			return c
		}
		return cmp.Compare(x.Tile, y.Tile)
	})
	for _, m := range worst[:min(len(worst), WorstTiles)] {
		fmt.Fprintf(w, "%s  worst tile %d: used %d (%s) %s\n", indent, m.Tile, m.Used(), percent(m.Used(), usable), free(m.Used()))
	}

	var total TileMemory
	for _, m := range mem {
		total.add(m)
	}
	capacity := usable * int64(len(mem))
	fmt.Fprintf(w, "%s  total: %s used %d of %d (%s)\n", indent, total.categories(), total.Used(), capacity, percent(total.Used(), capacity))
	top := worst[0]
	fmt.Fprintf(w, "%s  largest: tile %d used %d of %d (%s)", indent, top.Tile, top.Used(), usable, percent(top.Used(), usable))
	if top.Used() > usable {
		fmt.Fprintf(w, " over %d", top.Used()-usable)
	}
	fmt.Fprintln(w)
}

// percent is part of whole in percent, rounded down to a tenth, in
// integers so that it is the same everywhere.
func percent(part, whole int64) string {
	if whole <= 0 {
		return "-%"
	}
	p := part * 1000 / whole
	return fmt.Sprintf("%d.%d%%", p/10, p%10)
}

// tilesLabel names increasing tile numbers: "tile 3", "tiles 0-63,65".
func tilesLabel(tiles []int) string {
	if len(tiles) == 1 {
		return fmt.Sprintf("tile %d", tiles[0])
	}
	var b strings.Builder
	b.WriteString("tiles ")
	for i := 0; i < len(tiles); {
		j := i + 1
		for j < len(tiles) && tiles[j] == tiles[j-1]+1 {
			j++
		}
		if i > 0 {
			b.WriteByte(',')
		}
		if j-1 == i {
			fmt.Fprintf(&b, "%d", tiles[i])
		} else {
			fmt.Fprintf(&b, "%d-%d", tiles[i], tiles[j-1])
		}
		i = j
	}
	return b.String()
}

// DumpMemoryByTile writes the per-tile memory breakdown, the fullest
// tiles first (ties by tile number); tiles with the same figures share a
// line, at the place of the first of them:
//
//	memory tiles 64 usable 637872 bytes per tile, fullest first
//	  tile 0: code 1000 exchange 60 constants 0 variables 65532 profile 4 stacks 0 used 66596 (10.4%) free 571276
//	  tiles 1-63: code 900 exchange 64 constants 0 variables 8188 profile 4 stacks 0 used 9156 (1.4%) free 628716
func DumpMemoryByTile(w io.Writer, o *Object, usable int64) {
	mem := Memory(o)
	fmt.Fprintf(w, "memory tiles %d usable %d bytes per tile, fullest first\n", len(mem), usable)
	slices.SortStableFunc(mem, func(x, y TileMemory) int {
		if c := cmp.Compare(y.Used(), x.Used()); c != 0 {
			return c
		}
		return cmp.Compare(x.Tile, y.Tile)
	})
	type group struct {
		tiles []int
		m     TileMemory
	}
	var groups []*group
	byFigures := map[[6]int64]*group{}
	for _, m := range mem {
		key := m.figures()
		g := byFigures[key]
		if g == nil {
			g = &group{m: m}
			byFigures[key] = g
			groups = append(groups, g)
		}
		g.tiles = append(g.tiles, m.Tile)
	}
	for _, g := range groups {
		slices.Sort(g.tiles)
		used := g.m.Used()
		rest := fmt.Sprintf("free %d", usable-used)
		if used > usable {
			rest = fmt.Sprintf("over %d", used-usable)
		}
		fmt.Fprintf(w, "  %s: %s used %d (%s) %s\n", tilesLabel(g.tiles), g.m.categories(), used, percent(used, usable), rest)
	}
}
