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
//
// Most re-layouts have no such group: their remote runs are long, or each
// from its own source (qk-early's: 16,384 runs, 16,384 groups). So the
// runs are bucketed by destination tile first (a counting sort), and
// only a tile receiving at least stageMinRuns runs is grouped further.
func stagedGroups(src, dst *layout.Tensor, srcRefs, dstRefs []prog.Ref, runs []layout.Run) map[wordKey][][2]uint32 {
	var recs []stageRec
	maxDst := -1
	for _, r := range runs {
		s, t, from, to, bytes := runAt(src, dst, srcRefs, dstRefs, r)
		if s == t || !wholeWords(from, to, bytes) {
			continue
		}
		if recs == nil {
			recs = make([]stageRec, 0, len(runs))
		}
		recs = append(recs, stageRec{dst: t, src: s, buf: from.Buf, r: [2]uint32{from.Off, from.Off + uint32(bytes)}})
		maxDst = max(maxDst, t)
	}
	if len(recs) < stageMinRuns {
		return nil
	}
	byDst, at := bucketByDst(recs, maxDst)
	var staged map[wordKey][][2]uint32
	for t := 0; t <= maxDst; t++ {
		tr := byDst[at[t]:at[t+1]]
		if len(tr) < stageMinRuns {
			continue
		}
		slices.SortStableFunc(tr, func(a, b stageRec) int { return a.src - b.src })
		for len(tr) > 0 {
			n := 1
			for n < len(tr) && tr[n].src == tr[0].src {
				n++
			}
			if n < stageMinRuns {
				tr = tr[n:]
				continue
			}
			for _, g := range groupByBuffer(tr[:n]) {
				if spans, ok := stageSpans(g.rs); ok {
					if staged == nil {
						staged = map[wordKey][][2]uint32{}
					}
					staged[wordKey{t, tr[0].src, g.buf}] = spans
				}
			}
			tr = tr[n:]
		}
	}
	return staged
}

// stageRec is one remote whole-word run: its tiles, its source buffer
// and its source byte range.
type stageRec struct {
	dst, src int
	buf      *prog.Buffer
	r        [2]uint32
}

// bucketByDst returns recs ordered by destination tile (stably) and
// where each tile's records start: tile t's are out[at[t]:at[t+1]].
func bucketByDst(recs []stageRec, maxDst int) (out []stageRec, at []int) {
	at = make([]int, maxDst+2)
	for _, rc := range recs {
		at[rc.dst+1]++
	}
	for t := 1; t < len(at); t++ {
		at[t] += at[t-1]
	}
	next := slices.Clone(at[:maxDst+1])
	out = make([]stageRec, len(recs))
	for _, rc := range recs {
		out[next[rc.dst]] = rc
		next[rc.dst]++
	}
	return out, at
}

// bufRanges is one source buffer's ranges in a group.
type bufRanges struct {
	buf *prog.Buffer
	rs  [][2]uint32
}

// groupByBuffer returns the source ranges of recs (one destination and
// one source tile) by source buffer, in the records' order; a tile pair
// reads few buffers, so each is found by a scan.
func groupByBuffer(recs []stageRec) []bufRanges {
	var out []bufRanges
	for _, rc := range recs {
		i := slices.IndexFunc(out, func(g bufRanges) bool { return g.buf == rc.buf })
		if i < 0 {
			i = len(out)
			out = append(out, bufRanges{buf: rc.buf})
		}
		out[i].rs = append(out[i].rs, rc.r)
	}
	return out
}

// stageSpans returns a group's merged source ranges, and whether the
// group goes through staging (the rules of stagedGroups).
func stageSpans(rs [][2]uint32) ([][2]uint32, bool) {
	if len(rs) < stageMinRuns {
		return nil, false
	}
	spans, covered, need := mergeGaps(rs, stageGap)
	saved := len(rs) - len(spans)
	return spans, need <= stageShort*len(rs) && saved >= len(spans) && covered-need <= stageExtra*saved
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
