package artdiff

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"ipu.local/formats/ipuexe"
	"ipu.local/formats/plan"
	"ipu.local/libs/layout"
)

// tensorRoles gives each tensor its rank among its value's tensors of
// its source, in ID order: the k of its label `"x" host#k`. The planner
// numbers tensors as it makes them, in program order, so a value a step
// computes has its home layout (the tensor its producer writes) as
// step#0 and its re-layouts as step#1, step#2... in the order of their
// first readers; a graph input's or constant's layouts are host#k or
// const#k in the order of their first readers.
func tensorRoles(ts []plan.Tensor) []role {
	return roles(len(ts), func(i int) string { return ts[i].Name + "\x00" + ts[i].Source })
}

// tensorLabels names each tensor (by index, which Validate makes its
// ID) by value, source and rank: `"x" host#0`.
func tensorLabels(ts []plan.Tensor) []string {
	rs := tensorRoles(ts)
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = fmt.Sprintf("%q %s#%d", t.Name, t.Source, rs[i].nth)
	}
	return out
}

// tensorPairs pairs the tensors of two plans: ab[i] is the index in b
// of a's tensor i, ba the converse, -1 for a tensor the other plan
// lacks.
type tensorPairs struct{ ab, ba []int }

// pairTensors pairs the tensors of a and b by what they are for, never
// by ID (one more tensor anywhere renumbers every later one):
//
//  1. by value, source and defining operand: a tensor a step writes by
//     that step (its name and occurrence, as steps are paired) and
//     output position; a host or const tensor by its first reader (step
//     and input position). This keeps a value's home layout paired with
//     its home layout, a re-layout with the re-layout its step makes,
//     and a graph input's layout with the layout its first reader reads,
//     however many other layouts of the value come and go;
//  2. the tensors left over (no step defines or reads them, or their
//     defining operand is gone) by value, source and rank among the
//     leftovers in ID order.
//
// The pairing depends only on each plan's own tensors and steps: the
// same two plans always pair alike.
func pairTensors(a, b *plan.Plan) tensorPairs {
	p := tensorPairs{ab: make([]int, len(a.Tensors)), ba: make([]int, len(b.Tensors))}
	for i := range p.ab {
		p.ab[i] = -1
	}
	for j := range p.ba {
		p.ba[j] = -1
	}
	da, db := tensorDefiners(a), tensorDefiners(b)
	byKey := make(map[string]int, len(db))
	for j, k := range db {
		if k != "" {
			byKey[k] = j
		}
	}
	for i, k := range da {
		if j, ok := byKey[k]; ok && k != "" && p.ba[j] < 0 {
			p.ab[i], p.ba[j] = j, i
		}
	}
	left := func(ts []plan.Tensor, paired []int) ([]role, []int) {
		var idx []int
		for i, q := range paired {
			if q < 0 {
				idx = append(idx, i)
			}
		}
		return roles(len(idx), func(k int) string { return ts[idx[k]].Name + "\x00" + ts[idx[k]].Source }), idx
	}
	ra, ia := left(a.Tensors, p.ab)
	rb, ib := left(b.Tensors, p.ba)
	for _, q := range pairRoles(ra, rb) {
		if q[0] >= 0 && q[1] >= 0 {
			i, j := ia[q[0]], ib[q[1]]
			p.ab[i], p.ba[j] = j, i
		}
	}
	return p
}

// tensorDefiners keys each tensor by value, source and the operand that
// defines it (pairTensors); "" when there is none.
func tensorDefiners(p *plan.Plan) []string {
	def := make([]string, len(p.Tensors))
	rs := roles(len(p.Steps), func(i int) string { return p.Steps[i].Name })
	set := func(id int, what string) {
		if id >= 0 && id < len(def) && def[id] == "" {
			t := &p.Tensors[id]
			def[id] = t.Name + "\x00" + t.Source + "\x00" + what
		}
	}
	for i, s := range p.Steps {
		for k, id := range s.Outputs {
			if id >= 0 && id < len(def) && p.Tensors[id].Source == plan.FromStep {
				set(id, fmt.Sprintf("%s\x00%d out %d", rs[i].name, rs[i].nth, k))
			}
		}
		for k, id := range s.Inputs {
			if id >= 0 && id < len(def) && p.Tensors[id].Source != plan.FromStep {
				set(id, fmt.Sprintf("%s\x00%d in %d", rs[i].name, rs[i].nth, k))
			}
		}
	}
	return def
}

// diffPlanTensors pairs the tensors of two plans (pairTensors) and
// writes one line per tensor that differs, in a's ID order, then the
// tensors only b has in b's order. A paired tensor is named by its label
// in a, and by both when its rank differs ("tensor "x" host#2 -> host#1:
// ..."):
//
//	tensor "z" step#0: pad 2 -> 16, storage: bytes per tile max 128 -> 256, total bytes 256 -> 512
//	tensor "y" step#0: moved: 4 tiles changed, bytes per tile max 128 -> 64, total bytes 256 -> 256, tiles 0-1 -> 0-3
//	tensor "y" step#1 added: rowmajor pad 2, tiles 4-7, bytes per tile max 64, total bytes 256
//
// A line lists the changed fields (dtype, shape, transposed, layout,
// pad) and then, when the pieces differ, "moved:" with the number of
// tiles whose pieces differ, the largest storage on one tile, the
// storage summed over the tiles (a replicated piece counts on each tile
// holding it) and the tiles holding pieces before and after; when only
// the storage differs (a new layout or pad over the same pieces),
// "storage:" with the bytes. Bytes follow the layout rules (libs/layout:
// each piece padded and 8-byte aligned); "?" where they do not apply (a
// panel of a rank-1 value).
func diffPlanTensors(a, b *plan.Plan, pairs tensorPairs) []string {
	la, lb := tensorLabels(a.Tensors), tensorLabels(b.Tensors)
	var lines []string
	for i, j := range pairs.ab {
		x := &a.Tensors[i]
		if j < 0 {
			lines = append(lines, fmt.Sprintf("tensor %s removed: %s", la[i], planTensorDesc(x)))
			continue
		}
		d := diffTensor(x, &b.Tensors[j])
		if len(d) == 0 {
			continue
		}
		label := la[i]
		if la[i] != lb[j] {
			label += " -> " + lb[j][strings.LastIndexByte(lb[j], ' ')+1:]
		}
		lines = append(lines, fmt.Sprintf("tensor %s: %s", label, strings.Join(d, ", ")))
	}
	for j, i := range pairs.ba {
		if i < 0 {
			lines = append(lines, fmt.Sprintf("tensor %s added: %s", lb[j], planTensorDesc(&b.Tensors[j])))
		}
	}
	return lines
}

// planTensorDesc summarises a tensor added or removed.
func planTensorDesc(t *plan.Tensor) string {
	s := storageOf(t)
	return fmt.Sprintf("%s, tiles %s, bytes per tile max %s, total bytes %s",
		layoutDesc(t), ipuexe.Ranges(s.tiles), s.maxBytes(), s.totalBytes())
}

func layoutDesc(t *plan.Tensor) string {
	d := t.Layout
	if t.Pad != 0 {
		d += fmt.Sprintf(" pad %d", t.Pad)
	}
	if t.Transposed {
		d += " transposed"
	}
	return d
}

// diffTensor lists the differences of two paired tensors. ID and value
// index are left out: they are positions, and the graph lines show a
// renumbering of values.
func diffTensor(x, y *plan.Tensor) []string {
	var out []string
	change := func(what string, u, v any) {
		if su, sv := fmt.Sprint(u), fmt.Sprint(v); su != sv {
			out = append(out, fmt.Sprintf("%s %s -> %s", what, su, sv))
		}
	}
	change("dtype", x.DType, y.DType)
	change("shape", x.Shape, y.Shape)
	change("transposed", x.Transposed, y.Transposed)
	change("layout", x.Layout, y.Layout)
	change("pad", x.Pad, y.Pad)

	sx, sy := storageOf(x), storageOf(y)
	changed := 0
	for _, t := range mergeTiles(sx.tiles, sy.tiles) {
		if sx.boxes[t] != sy.boxes[t] {
			changed++
		}
	}
	bytes := fmt.Sprintf("bytes per tile max %s -> %s, total bytes %s -> %s", sx.maxBytes(), sy.maxBytes(), sx.totalBytes(), sy.totalBytes())
	switch {
	case changed > 0:
		out = append(out, fmt.Sprintf("moved: %d tiles changed, %s, tiles %s -> %s", changed, bytes, ipuexe.Ranges(sx.tiles), ipuexe.Ranges(sy.tiles)))
	case (sx.bytes == nil) != (sy.bytes == nil) || !maps.Equal(sx.bytes, sy.bytes):
		out = append(out, "storage: "+bytes)
	}
	return out
}

// storage is how a tensor occupies its tiles.
type storage struct {
	tiles []int          // tiles holding a piece, increasing
	boxes map[int]string // per tile, the regions it holds, in piece order
	bytes map[int]int    // per tile, its storage; nil where the rules do not apply
}

func storageOf(t *plan.Tensor) storage {
	s := storage{boxes: map[int]string{}}
	for _, p := range t.Pieces {
		if _, ok := s.boxes[p.Tile]; !ok {
			s.tiles = append(s.tiles, p.Tile)
		}
		s.boxes[p.Tile] += fmt.Sprint(p.Region) + ";"
	}
	slices.Sort(s.tiles)
	s.bytes = tileBytes(t)
	return s
}

// tileBytes is the storage of t on each tile by the layout rules, nil
// when they do not apply: an unknown layout or element type, a panel of
// a value of rank below 2, an empty region (Validate allows the first
// two; Plans may also be given a plan that was never validated).
func tileBytes(t *plan.Tensor) map[int]int {
	kind, ok := layout.ParseKind(t.Layout)
	size := plan.DTypeSize(t.DType)
	if !ok || size == 0 {
		return nil
	}
	lt := layout.Tensor{Name: t.Name, Size: size, Transposed: t.Transposed, Kind: kind, Pad: t.Pad}
	for _, d := range t.Shape {
		lt.Shape = append(lt.Shape, int(d))
	}
	for _, p := range t.Pieces {
		if kind != layout.RowMajor && len(p.Region) < 2 {
			return nil
		}
		box := make(layout.Box, len(p.Region))
		for d, r := range p.Region {
			if r[0] < 0 || r[0] >= r[1] || r[1] > plan.MaxElements {
				return nil
			}
			box[d] = layout.Range{Lo: int(r[0]), Hi: int(r[1])}
		}
		lt.Pieces = append(lt.Pieces, layout.Piece{Tile: p.Tile, Box: box})
	}
	_, per := lt.PieceOffsets()
	return per
}

func (s storage) maxBytes() string {
	if s.bytes == nil {
		return "?"
	}
	m := 0
	for _, b := range s.bytes {
		m = max(m, b)
	}
	return fmt.Sprint(m)
}

func (s storage) totalBytes() string {
	if s.bytes == nil {
		return "?"
	}
	n := 0
	for _, b := range s.bytes {
		n += b
	}
	return fmt.Sprint(n)
}

// mergeTiles is the union of two increasing tile lists, increasing.
func mergeTiles(a, b []int) []int {
	out := slices.Concat(a, b)
	slices.Sort(out)
	return slices.Compact(out)
}
