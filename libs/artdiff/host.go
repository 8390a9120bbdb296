package artdiff

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"fmt"
	"slices"
	"strings"

	"ipu.local/formats/obj"
)

// diffHost lists the host program's differences, each line starting
// "host: ": phases (as an edit script), pages by ID, inputs and outputs
// by name, branches by position.
func diffHost(a, b *obj.HostProgram) []string {
	var lines []string
	lines = append(lines, diffPhases(a.Phases, b.Phases)...)
	lines = append(lines, diffPages(a.Pages, b.Pages)...)
	lines = append(lines, diffTensors("input", a.Inputs, b.Inputs)...)
	lines = append(lines, diffTensors("output", a.Outputs, b.Outputs)...)
	if !bytes.Equal(a.Model, b.Model) {
		lines = append(lines, fmt.Sprintf("model: %s -> %s", modelDesc(a.Model), modelDesc(b.Model)))
	}
	for i := 0; i < max(len(a.Branches), len(b.Branches)); i++ {
		desc := func(bs []obj.Branch) string {
			if i >= len(bs) {
				return "none"
			}
			x := bs[i]
			return fmt.Sprintf("If %q condition %d bytes on tile %d at %#x, then phases [%d, %d) else [%d, %d)",
				x.If, x.CondBytes, x.CondTile, x.CondAddr, x.Then[0], x.Then[1], x.Else[0], x.Else[1])
		}
		if da, db := desc(a.Branches), desc(b.Branches); da != db {
			lines = append(lines, fmt.Sprintf("branch %d: %s -> %s", i, da, db))
		}
	}
	for i := range lines {
		lines[i] = "host: " + lines[i]
	}
	return lines
}

func phaseDesc(p obj.Phase) string { return fmt.Sprintf("%s %q", p.Kind, p.Name) }

// maxEditCells bounds the table of the phase edit script; longer lists
// are compared position by position.
const maxEditCells = 1 << 22

// diffPhases reports phases removed (numbered as in a) and added
// (numbered as in b) along a shortest edit script, so that one inserted
// phase is one line.
func diffPhases(a, b []obj.Phase) []string {
	var lines []string
	removed := func(i int) { lines = append(lines, fmt.Sprintf("phase %d removed: %s", i, phaseDesc(a[i]))) }
	added := func(j int) { lines = append(lines, fmt.Sprintf("phase %d added: %s", j, phaseDesc(b[j]))) }
	if int64(len(a)+1)*int64(len(b)+1) > maxEditCells {
		for i := 0; i < max(len(a), len(b)); i++ {
			switch {
			case i >= len(b):
				removed(i)
			case i >= len(a):
				added(i)
			case a[i] != b[i]:
				lines = append(lines, fmt.Sprintf("phase %d: %s -> %s", i, phaseDesc(a[i]), phaseDesc(b[i])))
			}
		}
		return lines
	}
	// lcs[i][j] is the longest common subsequence of a[i:] and b[j:].
	w := len(b) + 1
	lcs := make([]int32, (len(a)+1)*w)
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i*w+j] = lcs[(i+1)*w+j+1] + 1
			} else {
				lcs[i*w+j] = max(lcs[(i+1)*w+j], lcs[i*w+j+1])
			}
		}
	}
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			i++
			j++
		case j == len(b) || (i < len(a) && lcs[(i+1)*w+j] >= lcs[i*w+j+1]):
			removed(i)
			i++
		default:
			added(j)
			j++
		}
	}
	return lines
}

func diffPages(a, b []obj.Page) []string {
	key := func(p *obj.Page) string { return fmt.Sprint(p.ID) }
	var lines []string
	for _, p := range matchByName(a, b, key) {
		switch {
		case p[1] == nil:
			lines = append(lines, fmt.Sprintf("page %d removed: bytes %d", p[0].ID, p[0].Bytes))
		case p[0] == nil:
			lines = append(lines, fmt.Sprintf("page %d added: bytes %d", p[1].ID, p[1].Bytes))
		case p[0].Bytes != p[1].Bytes:
			lines = append(lines, fmt.Sprintf("page %d: bytes %d -> %d", p[0].ID, p[0].Bytes, p[1].Bytes))
		}
	}
	return lines
}

func tensorDesc(t *obj.Tensor) string {
	s := fmt.Sprintf("%s %v page %d offset 0x%x", t.DType, t.Shape, t.Page, t.Offset)
	if t.Accumulate > 0 {
		s += fmt.Sprintf(" accumulate %d", t.Accumulate)
	}
	return s
}

// diffTensors matches host tensors by name; a changed one lists its
// changed fields, its position among the inputs (outputs) included.
func diffTensors(what string, a, b []obj.Tensor) []string {
	pos := func(l []obj.Tensor, t *obj.Tensor) int {
		for i := range l {
			if &l[i] == t {
				return i
			}
		}
		return -1
	}
	// The fields compared, named as in the dump.
	type placed struct {
		Position   int
		DType      string
		Shape      []int64
		Page       uint8
		Offset     uint32
		Accumulate int64
	}
	view := func(l []obj.Tensor, t *obj.Tensor) placed {
		return placed{pos(l, t), t.DType, t.Shape, t.Page, t.Offset, t.Accumulate}
	}
	var lines []string
	for _, p := range matchByName(a, b, func(t *obj.Tensor) string { return t.Name }) {
		ta, tb := p[0], p[1]
		switch {
		case tb == nil:
			lines = append(lines, fmt.Sprintf("%s %q removed: %s", what, ta.Name, tensorDesc(ta)))
		case ta == nil:
			lines = append(lines, fmt.Sprintf("%s %q added: %s", what, tb.Name, tensorDesc(tb)))
		default:
			changes := fieldDiffs(view(a, ta), view(b, tb))
			changes = append(changes, diffBlocks(ta.Blocks, tb.Blocks)...)
			if len(changes) > 0 {
				lines = append(lines, fmt.Sprintf("%s %q: %s", what, ta.Name, strings.Join(changes, ", ")))
			}
		}
	}
	return lines
}

func modelDesc(m []byte) string {
	if len(m) == 0 {
		return "none"
	}
	sum := sha256.Sum256(m)
	return fmt.Sprintf("%d bytes sha256 %x", len(m), sum[:8])
}

func blockDesc(b obj.Block) string {
	t := ""
	if b.Transpose {
		t = " T"
	}
	return fmt.Sprintf("rows [%d,%d) cols [%d,%d)%s %s %dx%d at 0x%x", b.R0, b.R1, b.C0, b.C1, t, b.Order, b.Rows, b.Cols, b.Offset)
}

// maxBlockLines bounds the block changes listed for one tensor.
const maxBlockLines = 8

// diffBlocks lists the host blocks of a tensor that one side has and the
// other does not (blocks compare as a whole), at most maxBlockLines of
// them, then a count.
func diffBlocks(a, b []obj.Block) []string {
	in := func(l []obj.Block) map[obj.Block]int {
		m := map[obj.Block]int{}
		for _, x := range l {
			m[x]++
		}
		return m
	}
	ma, mb := in(a), in(b)
	var out []string
	more := 0
	note := func(s string) {
		if len(out) < maxBlockLines {
			out = append(out, s)
		} else {
			more++
		}
	}
	for _, x := range a {
		if mb[x] == 0 {
			note("block removed: " + blockDesc(x))
		} else {
			mb[x]--
		}
	}
	for _, x := range b {
		if ma[x] == 0 {
			note("block added: " + blockDesc(x))
		} else {
			ma[x]--
		}
	}
	if more > 0 {
		out = append(out, fmt.Sprintf("%d more block changes", more))
	}
	return out
}

// regKey identifies a configuration register.
type regKey struct{ tile, reg uint32 }

func (k regKey) String() string {
	tile := fmt.Sprint(k.tile)
	if k.tile == obj.AllTiles {
		tile = "all"
	}
	return fmt.Sprintf("tile %s reg 0x%04x", tile, k.reg)
}

func valuesDesc(vs []uint32) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = fmt.Sprintf("0x%08x", v)
	}
	if len(s) == 1 {
		return "value " + s[0]
	}
	return "values " + strings.Join(s, ",")
}

// diffConfig compares the register writes per register: the values each
// register is written, in order. Lines start "config: " and come in
// (tile, register) order, all-tile writes last; a change of the order of
// writes to different registers is one line.
func diffConfig(a, b []obj.RegWrite) []string {
	group := func(ws []obj.RegWrite) map[regKey][]uint32 {
		m := map[regKey][]uint32{}
		for _, w := range ws {
			k := regKey{w.Tile, w.Reg}
			m[k] = append(m[k], w.Value)
		}
		return m
	}
	ga, gb := group(a), group(b)
	keys := make([]regKey, 0, len(ga)+len(gb))
	for k := range ga {
		keys = append(keys, k)
	}
	for k := range gb {
		if _, ok := ga[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(x, y regKey) int { return cmp.Or(cmp.Compare(x.tile, y.tile), cmp.Compare(x.reg, y.reg)) })
	var lines []string
	for _, k := range keys {
		va, inA := ga[k]
		vb, inB := gb[k]
		switch {
		case !inB:
			lines = append(lines, fmt.Sprintf("config: %s removed: %s", k, valuesDesc(va)))
		case !inA:
			lines = append(lines, fmt.Sprintf("config: %s added: %s", k, valuesDesc(vb)))
		case !slices.Equal(va, vb):
			lines = append(lines, fmt.Sprintf("config: %s: %s -> %s", k, valuesDesc(va), valuesDesc(vb)))
		}
	}
	if len(lines) == 0 && !slices.Equal(a, b) {
		lines = append(lines, "config: order of writes changed")
	}
	return lines
}
