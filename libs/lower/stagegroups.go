package lower

import (
	"slices"

	"ipu.local/libs/layout"
	"ipu.local/libs/prog"
)

// Short remote word runs through a staging buffer. A stride-2 FP32
// window gather reads one word in two: every word from another tile was
// a transfer of its own (ResNet-18's FP32 stem: 265,650 transfers in one
// exchange superstep, 50 s of exchange scheduling, 180 sends a tile on
// average). When a destination tile's runs from one source
// buffer on one tile are many and close together, the words around them
// (gaps included) go in a few transfers to a staging buffer on the
// destination tile (stageWords), and a Copy puts each run in place
// there.
const (
	// stageMinRuns is the fewest runs a group needs to be staged.
	stageMinRuns = 8
	// stageGap is the widest gap (bytes) between two runs' source words
	// that one staged transfer spans.
	stageGap = 16
	// stageExtra is the most bytes of gaps a staged group may send for
	// each transfer it saves: a transfer's own cost (its operand loads,
	// the send and the recv, on both tiles, and their code) is more than
	// the cycles of four words more in a stream.
	stageExtra = 16
	// stageShort is the longest mean run (bytes) a staged group has: a
	// long run's transfer costs little next to its words, and staging
	// it would hold its words twice (the staging buffer beside the
	// destination) and copy them again.
	stageShort = 16
)

// stagedGroups returns the groups (destination tile, source tile, source
// buffer) of remote whole-word runs that go through staging, each with
// its source byte ranges merged across gaps of at most stageGap: a group
// of at least stageMinRuns runs of at most stageShort bytes on average
// whose merged ranges are at most half as many transfers as its runs,
// sending at most stageExtra bytes of gaps for each transfer saved (a
// stride-4 gather's three words in four).
func stagedGroups(src, dst *layout.Tensor, srcRefs, dstRefs []prog.Ref, runs []layout.Run) map[wordKey][][2]uint32 {
	groups := map[wordKey][][2]uint32{}
	for _, r := range runs {
		s, t, from, to, bytes := runAt(src, dst, srcRefs, dstRefs, r)
		if s == t || !wholeWords(from, to, bytes) {
			continue
		}
		k := wordKey{t, s, from.Buf}
		groups[k] = append(groups[k], [2]uint32{from.Off, from.Off + uint32(bytes)})
	}
	staged := map[wordKey][][2]uint32{}
	for k, rs := range groups {
		if len(rs) < stageMinRuns {
			continue
		}
		spans, covered, need := mergeGaps(rs, stageGap)
		if saved := len(rs) - len(spans); need <= stageShort*len(rs) && saved >= len(spans) && covered-need <= stageExtra*saved {
			staged[k] = spans
		}
	}
	return staged
}

// mergeGaps sorts byte ranges and merges those whose gap is at most gap
// bytes; it returns the merged ranges, the bytes they cover and the
// bytes of the ranges themselves.
func mergeGaps(rs [][2]uint32, gap uint32) (spans [][2]uint32, covered, need int) {
	rs = slices.Clone(rs)
	slices.SortFunc(rs, func(a, b [2]uint32) int { return int(a[0]) - int(b[0]) })
	for _, r := range rs {
		need += int(r[1] - r[0])
		if n := len(spans); n > 0 && r[0] <= spans[n-1][1]+gap {
			spans[n-1][1] = max(spans[n-1][1], r[1])
			continue
		}
		spans = append(spans, r)
	}
	for _, sp := range spans {
		covered += int(sp[1] - sp[0])
	}
	return spans, covered, need
}
