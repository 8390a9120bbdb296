package link

// The per-tile memory report: bytes by category, on failure and in
// ipu-dump of an object.

import (
	"fmt"
	"sort"
	"strings"
)

// TileMemory is one tile's memory by category: code (kernels and the
// supervisor, exchange code apart), constants (in the tile image), and
// the peak of the variables live at one time.
type TileMemory struct {
	Tile         int
	Code         int64
	ExchangeCode int64
	Constants    int64
	Variables    int64 // peak over the supersteps
}

// Total is the tile's bytes.
func (m TileMemory) Total() int64 { return m.Code + m.ExchangeCode + m.Constants + m.Variables }

// tileMemory computes every tile's categories from a placement.
func (l *linker) tileMemory(pl *placer) []TileMemory {
	var out []TileMemory
	ts := make([]int, 0, len(pl.tiles))
	for t := range pl.tiles {
		ts = append(ts, t)
	}
	for t := range l.tiles {
		if _, ok := pl.tiles[t]; !ok {
			ts = append(ts, t)
		}
	}
	sort.Ints(ts)
	for _, t := range ts {
		m := TileMemory{Tile: t}
		if tl := l.tiles[t]; tl != nil {
			m.Code = int64(tl.gen + tl.launch + tl.hostCode)
			m.ExchangeCode = int64(tl.exCode)
		}
		live := map[int]int64{}
		for _, s := range pl.tiles[t] {
			if s.buf.Data != nil || s.buf.Permanent {
				m.Constants += int64(s.hi - s.lo)
				continue
			}
			for i := s.first; i <= s.last; i++ {
				live[i] += int64(s.hi - s.lo)
			}
		}
		for _, b := range live {
			m.Variables = max(m.Variables, b)
		}
		out = append(out, m)
	}
	return out
}

// memoryReport is the worst n tiles' memory by category, one line each.
func (l *linker) memoryReport(pl *placer, n int) string {
	ms := l.tileMemory(pl)
	sort.SliceStable(ms, func(i, j int) bool { return ms[i].Total() > ms[j].Total() })
	var b strings.Builder
	usable := int64(l.p.UsableMemory().Size())
	for i := 0; i < len(ms) && i < n; i++ {
		m := ms[i]
		fmt.Fprintf(&b, "  tile %d: %d of %d bytes: code %d, exchange code %d, constants %d, variables %d (peak)\n",
			m.Tile, m.Total(), usable, m.Code, m.ExchangeCode, m.Constants, m.Variables)
	}
	return strings.TrimSuffix(b.String(), "\n")
}
