package obj

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
)

// TileMemory is what one tile's segments hold, in bytes, by category:
// Code (code segments), Constants (data segments: initialised data the
// image carries) and Variables (bss segments: zeroed at load).
type TileMemory struct {
	Tile                       int
	Code, Constants, Variables int64
}

// Used is the tile's bytes in segments.
func (m TileMemory) Used() int64 { return m.Code + m.Constants + m.Variables }

// Memory returns the memory each tile of o uses, in o's tile order.
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
		out[i] = m
	}
	return out
}

// WorstTiles is how many tiles the memory report lists by use.
const WorstTiles = 8

// DumpMemory writes the memory report of o's tiles against usable bytes
// of memory per tile (the architecture preset's, which this package does
// not know), each line starting with indent:
//
//	memory tiles 2 usable 637872 bytes per tile
//	  tile 0: code 24 constants 4096 variables 65536 used 69656 free 568216
//	  tile 2: code 4 constants 0 variables 0 used 4 free 637868
//	  worst tile 0: used 69656 (10.9%) free 568216
//	  worst tile 2: used 4 (0.0%) free 637868
//	  total: code 28 constants 4096 variables 65536 used 69660 of 1275744 (5.4%)
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
	categories := func(m TileMemory) string {
		return fmt.Sprintf("code %d constants %d variables %d", m.Code, m.Constants, m.Variables)
	}

	type group struct {
		tiles []int
		m     TileMemory
	}
	var groups []*group
	byFigures := map[[3]int64]*group{}
	for _, m := range mem {
		key := [3]int64{m.Code, m.Constants, m.Variables}
		g := byFigures[key]
		if g == nil {
			g = &group{m: m}
			byFigures[key] = g
			groups = append(groups, g)
		}
		g.tiles = append(g.tiles, m.Tile)
	}
	for _, g := range groups {
		fmt.Fprintf(w, "%s  %s: %s used %d %s\n", indent, tilesLabel(g.tiles), categories(g.m), g.m.Used(), free(g.m.Used()))
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
		total.Code += m.Code
		total.Constants += m.Constants
		total.Variables += m.Variables
	}
	capacity := usable * int64(len(mem))
	fmt.Fprintf(w, "%s  total: %s used %d of %d (%s)\n", indent, categories(total), total.Used(), capacity, percent(total.Used(), capacity))
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
//	  tile 0: code 1060 constants 0 variables 65536 used 66596 (10.4%) free 571276
//	  tiles 1-63: code 964 constants 0 variables 8192 used 9156 (1.4%) free 628716
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
	byFigures := map[[3]int64]*group{}
	for _, m := range mem {
		key := [3]int64{m.Code, m.Constants, m.Variables}
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
		fmt.Fprintf(w, "  %s: code %d constants %d variables %d used %d (%s) %s\n", tilesLabel(g.tiles), g.m.Code, g.m.Constants, g.m.Variables, used, percent(used, usable), rest)
	}
}
