package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"ipu.local/formats/profile"
)

// Trace-event processes.
const (
	pidTiles      = 1
	pidNodes      = 2
	pidSupersteps = 3
)

// event is one trace event of the Chrome trace-event format: "X" a
// complete slice (ts and dur in microseconds), "M" metadata naming a
// process or thread.
type event struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat,omitempty"`
	Ph   string         `json:"ph"`
	Ts   float64        `json:"ts"`
	Dur  *float64       `json:"dur,omitempty"`
	Pid  int            `json:"pid"`
	Tid  int            `json:"tid"`
	Args map[string]any `json:"args,omitempty"`
}

// tileGroup is tiles with the same cycles in every superstep.
type tileGroup struct {
	tiles []int
	idle  bool
}

// maxTileSlices bounds the slices of the tile tracks, which keeps a
// 1472-tile trace of many supersteps well under 20 MB.
const maxTileSlices = 60000

// tileGroups groups the profile's tiles: those that ran, identical ones
// together, in order of their first tile; the idle tiles last. When
// that gives more slices than maxTileSlices, tiles whose cycles agree to
// within 1%, then 5%, 20% and 100% of each superstep's longest tile are
// grouped instead (the track names say so, and the slices' args give
// the group's longest cycles); when even 20% gives too many, the tiles
// are split into bands of about equal size by their total cycles.
func (r *report) tileGroups() (groups []tileGroup, within int) {
	perGroup := 0
	for _, ph := range r.phases {
		perGroup++
		if ph.SyncCycles > 0 {
			perGroup++
		}
	}
	for _, pct := range []int{0, 1, 5, 20} {
		groups = r.groupTiles(pct)
		if len(groups)*perGroup <= maxTileSlices {
			return groups, pct
		}
	}
	return r.bandTiles(max(1, maxTileSlices/max(perGroup, 1)-1)), -1
}

// bandTiles groups the tiles that ran into k bands of about equal size
// by their total cycles, the idle tiles last.
func (r *report) bandTiles(k int) []tileGroup {
	total := r.tileCycles()
	var ran, idle []int
	for t, c := range total {
		if c > 0 {
			ran = append(ran, t)
		} else {
			idle = append(idle, t)
		}
	}
	sort.SliceStable(ran, func(i, j int) bool { return total[ran[i]] < total[ran[j]] })
	var groups []tileGroup
	k = min(k, len(ran))
	for b := 0; b < k; b++ {
		band := slices.Clone(ran[b*len(ran)/k : (b+1)*len(ran)/k])
		sort.Ints(band)
		groups = append(groups, tileGroup{tiles: band})
	}
	if len(idle) > 0 {
		groups = append(groups, tileGroup{tiles: idle, idle: true})
	}
	return groups
}

// groupTiles groups tiles whose cycles in every superstep fall in the
// same pct% bucket of the superstep's longest tile (pct 0: equal).
func (r *report) groupTiles(pct int) []tileGroup {
	var groups []tileGroup
	bySig := map[string]int{}
	var idle []int
	var sig strings.Builder
	for t := 0; t < r.in.prof.Tiles; t++ {
		sig.Reset()
		ran := false
		for _, ph := range r.phases {
			c := ph.TileCycles[t]
			ran = ran || c > 0
			if pct > 0 && c > 0 && ph.Cycles > 0 {
				// Buckets 1.. (0 stays apart); the longest tile in the top one.
				c = 1 + min(c*100/(ph.Cycles*int64(pct)), int64(99/pct))
			}
			fmt.Fprintf(&sig, "%d,", c)
		}
		if !ran {
			idle = append(idle, t)
			continue
		}
		k := sig.String()
		if i, ok := bySig[k]; ok {
			groups[i].tiles = append(groups[i].tiles, t)
			continue
		}
		bySig[k] = len(groups)
		groups = append(groups, tileGroup{tiles: []int{t}})
	}
	if len(idle) > 0 {
		groups = append(groups, tileGroup{tiles: idle, idle: true})
	}
	return groups
}

// traceJSON is the trace of the profile: tile groups, plan nodes and
// supersteps.
func (r *report) traceJSON() ([]byte, error) {
	us := 1e6 / r.in.preset.ClockHz // microseconds per cycle
	if r.in.preset.ClockHz <= 0 {
		us = 1e6 / r.in.prof.ClockHz
	}
	t := &traceEvents{us: us}
	t.meta(pidTiles, 0, "process_name", "tiles", 0)
	t.meta(pidNodes, 0, "process_name", "nodes", 1)
	t.meta(pidSupersteps, 0, "process_name", "supersteps", 2)
	r.tileTracks(t)
	r.nodeTracks(t)
	r.superstepTrack(t)
	other, err := json.Marshal(map[string]any{
		"arch": r.in.preset.Name, "clock_hz": r.in.preset.ClockHz, "tiles": r.in.prof.Tiles,
		"total_cycles": r.totalCycles(), "fingerprint": r.in.prof.Fingerprint,
	})
	if err != nil {
		return nil, fmt.Errorf("trace.json: %w", err)
	}
	return encodeTrace(other, t.evs)
}

// traceEvents collects a trace's events, cycles turned to microseconds.
type traceEvents struct {
	us  float64 // microseconds per cycle
	evs []event
}

func (t *traceEvents) at(c int64) float64 { return float64(c) * t.us }

// meta names a process or thread and sets its sort index.
func (t *traceEvents) meta(pid, tid int, what, name string, sort int) {
	t.evs = append(t.evs, event{Name: what, Ph: "M", Pid: pid, Tid: tid, Args: map[string]any{"name": name}})
	key := "sort_index"
	t.evs = append(t.evs, event{Name: strings.Replace(what, "_name", "_sort_index", 1), Ph: "M", Pid: pid, Tid: tid, Args: map[string]any{key: sort}})
}

// slice adds a complete event of cycles from start, its cycles in args.
func (t *traceEvents) slice(pid, tid int, name, cat string, start, cycles int64, args map[string]any) {
	d := t.at(cycles)
	if args == nil {
		args = map[string]any{}
	}
	args["cycles"] = cycles
	t.evs = append(t.evs, event{Name: name, Cat: cat, Ph: "X", Ts: t.at(start), Dur: &d, Pid: pid, Tid: tid, Args: args})
}

// tileTracks adds a thread per tile group: each superstep's longest tile
// of the group, then its sync.
func (r *report) tileTracks(t *traceEvents) {
	groups, within := r.tileGroups()
	for g, grp := range groups {
		tid := g + 1
		t.meta(pidTiles, tid, "thread_name", groupLabel(grp, g, within), tid)
		first := grp.tiles[0]
		for _, ph := range r.phases {
			var c int64
			for _, u := range grp.tiles {
				c = max(c, ph.TileCycles[u])
			}
			if c > 0 {
				args := map[string]any{"superstep": ph.Index, "count": len(grp.tiles), "tile": first}
				if c != ph.TileCycles[first] {
					args["tile_cycles"] = ph.TileCycles[first] // the first tile's; cycles are the group's longest
				}
				if len(ph.ExchangeBytes) > first && ph.ExchangeBytes[first] > 0 {
					args["exchange_bytes"] = ph.ExchangeBytes[first]
				}
				t.slice(pidTiles, tid, ph.Kind.String()+" "+ph.Node, ph.Kind.String(), ph.Start, c, args)
			}
			if ph.SyncCycles > 0 {
				t.slice(pidTiles, tid, "sync", "sync", ph.Start+ph.Cycles, ph.SyncCycles, map[string]any{"superstep": ph.Index, "count": len(grp.tiles)})
			}
		}
	}
}

// groupLabel names tile group g's thread: its tiles, idle or not, and
// for several how alike they are (within a percentage, or a band of
// cycles).
func groupLabel(grp tileGroup, g, within int) string {
	label := tilesLabel(grp.tiles)
	if grp.idle {
		label = fmt.Sprintf("idle %s", label)
	}
	if len(label) > 60 {
		label = label[:57] + "..."
	}
	if len(grp.tiles) > 1 {
		label = fmt.Sprintf("%s (x%d)", label, len(grp.tiles))
		switch {
		case grp.idle:
		case within > 0:
			label = fmt.Sprintf("%s within %d%%", label, within)
		case within < 0:
			label = fmt.Sprintf("%s band %d by cycles", label, g+1)
		}
	}
	return label
}

// nodeTracks adds a thread per plan node with supersteps: a node's
// consecutive supersteps make one slice.
func (r *report) nodeTracks(t *traceEvents) {
	nodeTid := map[string]int{}
	for i, n := range r.nodes {
		if n.Supersteps == 0 {
			continue
		}
		nodeTid[n.Name] = i + 1
		t.meta(pidNodes, i+1, "thread_name", n.Name, i+1)
	}
	for i := 0; i < len(r.phases); {
		j := i + 1
		for j < len(r.phases) && r.phases[j].Row == r.phases[i].Row {
			j++
		}
		var cycles int64
		kinds := []string{}
		for _, ph := range r.phases[i:j] {
			cycles += ph.Cycles + ph.SyncCycles
			if k := ph.Kind.String(); !slices.Contains(kinds, k) {
				kinds = append(kinds, k)
			}
		}
		t.slice(pidNodes, nodeTid[r.phases[i].Row], r.phases[i].Row, "node", r.phases[i].Start, cycles,
			map[string]any{"supersteps": j - i, "kinds": strings.Join(kinds, ",")})
		i = j
	}
}

// superstepTrack adds the BSP supersteps' thread: a slice per superstep,
// its sync included.
func (r *report) superstepTrack(t *traceEvents) {
	t.meta(pidSupersteps, 1, "thread_name", "BSP supersteps", 1)
	for _, ph := range r.phases {
		name := ph.Name
		if name == "" {
			name = ph.Kind.String()
		}
		active := 0
		for _, c := range ph.TileCycles {
			if c > 0 {
				active++
			}
		}
		args := map[string]any{"superstep": ph.Index, "kind": ph.Kind.String(), "sync_cycles": ph.SyncCycles,
			"active_tiles": active, "instructions": ph.Instructions}
		if ph.Kind == profile.KindHost {
			args["host_bytes"] = ph.HostBytes
		}
		t.slice(pidSupersteps, 1, name, ph.Kind.String(), ph.Start, ph.Cycles+ph.SyncCycles, args)
	}
}

// encodeTrace writes the trace file: otherData, then one event a line,
// so that the file stays diffable and small.
func encodeTrace(other []byte, evs []event) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("{\"displayTimeUnit\":\"ns\",\"otherData\":")
	b.Write(other)
	b.WriteString(",\"traceEvents\":[\n")
	for i, e := range evs {
		line, err := json.Marshal(e)
		if err != nil {
			return nil, fmt.Errorf("trace.json: %w", err)
		}
		b.Write(line)
		if i < len(evs)-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	b.WriteString("]}\n")
	return b.Bytes(), nil
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
