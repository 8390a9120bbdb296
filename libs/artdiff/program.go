package artdiff

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"
	"strings"

	"ipu.local/formats/ipuexe"
	"ipu.local/formats/obj"
)

// program is what one tile runs: an object's tile or a package's image.
type program struct {
	idle     bool // a package's image of tiles without a program
	entry    uint32
	segments []obj.Segment
	symbols  []obj.Symbol
	xfers    []obj.Transfer
}

// diffProgram lists the differences between two tile programs: entry,
// segments, symbols, transfers, in that order.
func diffProgram(a, b *program) []string {
	var lines []string
	if a.idle != b.idle {
		lines = append(lines, fmt.Sprintf("image %s -> %s", idleName(a.idle), idleName(b.idle)))
	}
	if a.entry != b.entry {
		lines = append(lines, fmt.Sprintf("entry 0x%08x -> 0x%08x", a.entry, b.entry))
	}
	lines = append(lines, diffSegments(a.segments, b.segments)...)
	lines = append(lines, diffSymbols(a.symbols, b.symbols)...)
	return append(lines, diffTransfers(a.xfers, b.xfers)...)
}

func idleName(idle bool) string {
	if idle {
		return "idle"
	}
	return "program"
}

// keyed is an element of a list matched by name: the n-th element called
// name in one list matches the n-th called name in the other.
type keyed[T any] struct {
	name string
	nth  int
	v    *T
}

// matchByName pairs the elements of a and b by name (and occurrence).
// The pairs come in a's order, then b's unmatched elements in b's order;
// a nil side is an element the other list lacks.
func matchByName[T any](a, b []T, name func(*T) string) [][2]*T {
	index := func(l []T) ([]keyed[T], map[string]map[int]*T) {
		seen := map[string]int{}
		out := make([]keyed[T], len(l))
		m := map[string]map[int]*T{}
		for i := range l {
			n := name(&l[i])
			out[i] = keyed[T]{n, seen[n], &l[i]}
			if m[n] == nil {
				m[n] = map[int]*T{}
			}
			m[n][seen[n]] = &l[i]
			seen[n]++
		}
		return out, m
	}
	ka, ma := index(a)
	kb, mb := index(b)
	var pairs [][2]*T
	for _, k := range ka {
		pairs = append(pairs, [2]*T{k.v, mb[k.name][k.nth]})
	}
	for _, k := range kb {
		if ma[k.name][k.nth] == nil {
			pairs = append(pairs, [2]*T{nil, k.v})
		}
	}
	return pairs
}

// addrLine is a line to be sorted by address.
type addrLine struct {
	addr uint32
	line string
}

func sortedLines(ls []addrLine) []string {
	slices.SortStableFunc(ls, func(x, y addrLine) int { return cmp.Compare(x.addr, y.addr) })
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = l.line
	}
	return out
}

func segmentDesc(s *obj.Segment) string {
	return fmt.Sprintf("%s 0x%08x size %d", s.Kind, s.Addr, s.Size)
}

// diffSegments matches segments by name and reports, in address order,
// those added or removed and, for the others, kind, address and size
// changes and where the contents first differ.
func diffSegments(a, b []obj.Segment) []string {
	var out []addrLine
	for _, p := range matchByName(a, b, func(s *obj.Segment) string { return s.Name }) {
		sa, sb := p[0], p[1]
		switch {
		case sb == nil:
			out = append(out, addrLine{sa.Addr, fmt.Sprintf("segment %q removed: %s", sa.Name, segmentDesc(sa))})
			continue
		case sa == nil:
			out = append(out, addrLine{sb.Addr, fmt.Sprintf("segment %q added: %s", sb.Name, segmentDesc(sb))})
			continue
		}
		var changes []string
		if sa.Kind != sb.Kind {
			changes = append(changes, fmt.Sprintf("kind %s -> %s", sa.Kind, sb.Kind))
		}
		if sa.Addr != sb.Addr {
			changes = append(changes, fmt.Sprintf("moved 0x%08x -> 0x%08x", sa.Addr, sb.Addr))
		}
		if sa.Size != sb.Size {
			changes = append(changes, fmt.Sprintf("size %d -> %d", sa.Size, sb.Size))
		}
		if sa.Kind != obj.BSS && sb.Kind != obj.BSS {
			if c := contentChange(sa, sb); c != "" {
				changes = append(changes, c)
			}
		}
		if len(changes) > 0 {
			out = append(out, addrLine{sa.Addr, fmt.Sprintf("segment %q: %s", sa.Name, strings.Join(changes, ", "))})
		}
	}
	return sortedLines(out)
}

// contentChange compares the bytes two segments have at the same offsets
// and says where they first differ: an address when the segment stayed
// put, an offset when it moved. Code is compared in instruction words,
// so that the address is an instruction's.
func contentChange(a, b *obj.Segment) string {
	n := min(len(a.Data), len(b.Data))
	unit, units := 1, "bytes"
	if a.Kind == obj.Code && b.Kind == obj.Code {
		unit, units = 4, "words"
	}
	// Skip equal blocks with bytes.Equal: a tile's memory is 624 KiB and
	// a package has 1,472 tiles.
	const block = 4096
	first, count := -1, 0
	for lo := 0; lo < n; lo += block {
		hi := min(lo+block, n)
		if bytes.Equal(a.Data[lo:hi], b.Data[lo:hi]) {
			continue
		}
		for i := lo; i < hi; i += unit {
			j := min(i+unit, n)
			if !bytes.Equal(a.Data[i:j], b.Data[i:j]) {
				if first < 0 {
					first = i
				}
				count++
			}
		}
	}
	if first < 0 {
		return ""
	}
	total := (n + unit - 1) / unit
	where := fmt.Sprintf("0x%08x", a.Addr+uint32(first))
	if a.Addr != b.Addr {
		where = fmt.Sprintf("offset 0x%x", first)
	}
	return fmt.Sprintf("contents differ from %s (%d of %d %s)", where, count, total, units)
}

func symbolKind(s *obj.Symbol) string {
	if s.Code {
		return "func"
	}
	return "data"
}

// diffSymbols matches symbols by name and reports, in address order, those
// added, removed, moved or changed.
func diffSymbols(a, b []obj.Symbol) []string {
	var out []addrLine
	for _, p := range matchByName(a, b, func(s *obj.Symbol) string { return s.Name }) {
		sa, sb := p[0], p[1]
		switch {
		case sb == nil:
			out = append(out, addrLine{sa.Addr, fmt.Sprintf("symbol %q removed: %s 0x%08x size %d", sa.Name, symbolKind(sa), sa.Addr, sa.Size)})
			continue
		case sa == nil:
			out = append(out, addrLine{sb.Addr, fmt.Sprintf("symbol %q added: %s 0x%08x size %d", sb.Name, symbolKind(sb), sb.Addr, sb.Size)})
			continue
		}
		var changes []string
		if sa.Addr != sb.Addr {
			changes = append(changes, fmt.Sprintf("moved 0x%08x -> 0x%08x", sa.Addr, sb.Addr))
		}
		if sa.Size != sb.Size {
			changes = append(changes, fmt.Sprintf("size %d -> %d", sa.Size, sb.Size))
		}
		if sa.Code != sb.Code {
			changes = append(changes, fmt.Sprintf("%s -> %s", symbolKind(sa), symbolKind(sb)))
		}
		if len(changes) > 0 {
			out = append(out, addrLine{sa.Addr, fmt.Sprintf("symbol %q: %s", sa.Name, strings.Join(changes, ", "))})
		}
	}
	return sortedLines(out)
}

func compareTransfers(x, y obj.Transfer) int {
	return cmp.Or(cmp.Compare(x.Phase, y.Phase), cmp.Compare(x.Cycle, y.Cycle), cmp.Compare(x.Dst, y.Dst),
		cmp.Compare(x.DstCount, y.DstCount), cmp.Compare(x.Words, y.Words))
}

func transferDesc(x obj.Transfer) string {
	return fmt.Sprintf("phase %d cycle %d dst %d count %d words %d", x.Phase, x.Cycle, x.Dst, x.DstCount, x.Words)
}

// diffTransfers compares the transfers as sets (with repeats), in
// (phase, cycle, destination) order.
func diffTransfers(a, b []obj.Transfer) []string {
	sa := slices.SortedFunc(slices.Values(a), compareTransfers)
	sb := slices.SortedFunc(slices.Values(b), compareTransfers)
	var out []string
	i, j := 0, 0
	for i < len(sa) || j < len(sb) {
		c := 0
		switch {
		case i == len(sa):
			c = 1
		case j == len(sb):
			c = -1
		default:
			c = compareTransfers(sa[i], sb[j])
		}
		switch {
		case c == 0:
			i++
			j++
		case c < 0:
			out = append(out, "transfer removed: "+transferDesc(sa[i]))
			i++
		default:
			out = append(out, "transfer added: "+transferDesc(sb[j]))
			j++
		}
	}
	return out
}

// tileDiff is the differences of one tile.
type tileDiff struct {
	tile  int
	lines []string
}

// groupTiles writes per-tile differences as lines prefixed with the tiles
// that have them: tiles with the same list of differences share one set
// of lines, groups in order of their first tile.
func groupTiles(diffs []tileDiff) []string {
	slices.SortStableFunc(diffs, func(x, y tileDiff) int { return cmp.Compare(x.tile, y.tile) })
	type group struct {
		tiles []int
		lines []string
	}
	var groups []*group
	byKey := map[string]*group{}
	for _, d := range diffs {
		if len(d.lines) == 0 {
			continue
		}
		key := strings.Join(d.lines, "\n")
		g := byKey[key]
		if g == nil {
			g = &group{lines: d.lines}
			byKey[key] = g
			groups = append(groups, g)
		}
		g.tiles = append(g.tiles, d.tile)
	}
	var out []string
	for _, g := range groups {
		prefix := tilesLabel(g.tiles)
		for _, l := range g.lines {
			out = append(out, prefix+": "+l)
		}
	}
	return out
}

// tilesLabel names increasing tile numbers: "tile 3", "tiles 0-63,65".
func tilesLabel(tiles []int) string {
	if len(tiles) == 1 {
		return fmt.Sprintf("tile %d", tiles[0])
	}
	return "tiles " + ipuexe.Ranges(tiles)
}
