package artdiff

import (
	"bytes"
	"fmt"
	"sort"

	"ipu.local/formats/plan"
)

var planKind = &Kind{
	Name: "plan",
	Match: func(data []byte) bool {
		head := data[:min(len(data), 256)]
		return bytes.HasPrefix(bytes.TrimLeft(head, " \t\r\n"), []byte("{")) &&
			bytes.Contains(head, []byte(`"ipu-plan/`))
	},
	Decode: func(data []byte) (any, error) { return plan.Read(data) },
	Diff:   func(a, b any) []string { return Plans(a.(*plan.Plan), b.(*plan.Plan)) },
}

// Plans lists the differences between two plans: header fields
// ("header: "), the graph ("graph: "), tensors that moved or changed layout
// by name ("tensor NAME: "), steps by node name ("step NAME: "), the cost
// ("cost: ") and the search ("search: ").
func Plans(a, b *plan.Plan) []string {
	type header struct {
		Format, Arch string
		Model        plan.Model
		Tiles        int
		Seed         uint64
	}
	lines := prefixed("header: ", fieldDiffs(
		header{a.Format, a.Arch, a.Model, a.Tiles, a.Seed},
		header{b.Format, b.Arch, b.Model, b.Tiles, b.Seed}))
	lines = append(lines, prefixed("graph: ", fieldDiffs(a.Graph, b.Graph))...)

	ta, tb := map[string]plan.Tensor{}, map[string]plan.Tensor{}
	for _, t := range a.Tensors {
		ta[t.Name] = t
	}
	for _, t := range b.Tensors {
		tb[t.Name] = t
	}
	for _, name := range unionKeys(ta, tb) {
		x, inA := ta[name]
		y, inB := tb[name]
		switch {
		case !inB:
			lines = append(lines, fmt.Sprintf("tensor %q: removed", name))
		case !inA:
			lines = append(lines, fmt.Sprintf("tensor %q: added", name))
		default:
			if x.Layout != y.Layout {
				lines = append(lines, fmt.Sprintf("tensor %q: layout %s -> %s", name, x.Layout, y.Layout))
			}
			if tx, ty := pieceTiles(x), pieceTiles(y); tx != ty {
				lines = append(lines, fmt.Sprintf("tensor %q: moved: tiles %s -> %s", name, tx, ty))
			} else {
				x.Layout, y.Layout = "", ""
				lines = append(lines, prefixed(fmt.Sprintf("tensor %q: ", name), fieldDiffs(x, y))...)
			}
		}
	}

	sa, sb := map[string]plan.Step{}, map[string]plan.Step{}
	for _, s := range a.Steps {
		sa[s.Name] = s
	}
	for _, s := range b.Steps {
		sb[s.Name] = s
	}
	for _, name := range unionKeys(sa, sb) {
		x, inA := sa[name]
		y, inB := sb[name]
		switch {
		case !inB:
			lines = append(lines, fmt.Sprintf("step %q: removed", name))
		case !inA:
			lines = append(lines, fmt.Sprintf("step %q: added", name))
		default:
			lines = append(lines, prefixed(fmt.Sprintf("step %q: ", name), fieldDiffs(x, y))...)
		}
	}
	lines = append(lines, prefixed("cost: ", fieldDiffs(a.Cost, b.Cost))...)
	lines = append(lines, prefixed("search: ", fieldDiffs(a.Search, b.Search))...)
	return lines
}

// pieceTiles is the set of tiles holding pieces of t, as ranges.
func pieceTiles(t plan.Tensor) string {
	var tiles []int
	seen := map[int]bool{}
	for _, p := range t.Pieces {
		if !seen[p.Tile] {
			seen[p.Tile] = true
			tiles = append(tiles, p.Tile)
		}
	}
	sort.Ints(tiles)
	if len(tiles) == 0 {
		return "none"
	}
	var buf bytes.Buffer
	for i := 0; i < len(tiles); {
		j := i
		for j+1 < len(tiles) && tiles[j+1] == tiles[j]+1 {
			j++
		}
		if buf.Len() > 0 {
			buf.WriteByte(',')
		}
		if i == j {
			fmt.Fprintf(&buf, "%d", tiles[i])
		} else {
			fmt.Fprintf(&buf, "%d-%d", tiles[i], tiles[j])
		}
		i = j + 1
	}
	return buf.String()
}

func unionKeys[V any](a, b map[string]V) []string {
	var keys []string
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}
