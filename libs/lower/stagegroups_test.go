package lower

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"ipu.local/libs/layout"
	"ipu.local/libs/prog"
)

// plainStagedGroups is stagedGroups' rule applied to every (destination,
// source, buffer) group, each found through one map: the reference the
// bucketed version must match.
func plainStagedGroups(src, dst *layout.Tensor, srcRefs, dstRefs []prog.Ref, runs []layout.Run) map[wordKey][][2]uint32 {
	groups := map[wordKey][][2]uint32{}
	for _, r := range runs {
		s, t, from, to, bytes := runAt(src, dst, srcRefs, dstRefs, r)
		if s == t || !wholeWords(from, to, bytes) {
			continue
		}
		k := wordKey{t, s, from.Buf}
		groups[k] = append(groups[k], [2]uint32{from.Off, from.Off + uint32(bytes)})
	}
	var staged map[wordKey][][2]uint32
	for k, rs := range groups {
		if spans, ok := stageSpans(rs); ok {
			if staged == nil {
				staged = map[wordKey][][2]uint32{}
			}
			staged[k] = spans
		}
	}
	return staged
}

// TestStagedGroupsRandom checks stagedGroups against the plain grouping
// on random runs: short and long, word-aligned and not, over few tiles
// and buffers (so groups mix sources, buffers and local runs) and over
// many tiles (so most groups are one run).
func TestStagedGroupsRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	stagedSeen := 0
	for trial := range 400 {
		tiles := 2 + r.IntN(6)
		if trial%4 == 0 {
			tiles = 50 + r.IntN(200)
		}
		size := []int{4, 2, 4}[r.IntN(3)]
		bufs := make([]*prog.Buffer, 1+r.IntN(3))
		for i := range bufs {
			bufs[i] = &prog.Buffer{ID: i % 2, Name: fmt.Sprint("b", i)} // IDs repeat: grouping is by buffer, not ID
		}
		src := &layout.Tensor{Size: size}
		dst := &layout.Tensor{Size: size}
		var srcRefs, dstRefs []prog.Ref
		for range 4 + r.IntN(30) {
			src.Pieces = append(src.Pieces, layout.Piece{Tile: r.IntN(tiles)})
			srcRefs = append(srcRefs, prog.Ref{Buf: bufs[r.IntN(len(bufs))], Off: uint32(r.IntN(8) * 4)})
		}
		for range 2 + r.IntN(10) {
			dst.Pieces = append(dst.Pieces, layout.Piece{Tile: r.IntN(tiles)})
			dstRefs = append(dstRefs, prog.Ref{Buf: bufs[0], Off: uint32(r.IntN(4) * 4)})
		}
		runs := make([]layout.Run, r.IntN(600))
		for i := range runs {
			n := 1 + r.IntN(4)
			if r.IntN(8) == 0 {
				n = 1 + r.IntN(64)
			}
			runs[i] = layout.Run{Src: r.IntN(len(src.Pieces)), Dst: r.IntN(len(dst.Pieces)), SrcOff: r.IntN(200), DstOff: r.IntN(200), N: n}
			if r.IntN(3) > 0 { // mostly whole words
				runs[i].SrcOff &^= 3
				runs[i].DstOff &^= 3
				runs[i].N = (runs[i].N + 3) &^ 3
			}
		}
		got := stagedGroups(src, dst, srcRefs, dstRefs, runs)
		want := plainStagedGroups(src, dst, srcRefs, dstRefs, runs)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("trial %d: %d staged groups, want %d: got %v, want %v", trial, len(got), len(want), got, want)
		}
		stagedSeen += len(want)
	}
	if stagedSeen < 50 {
		t.Fatalf("only %d staged groups over all trials: the test does not exercise staging", stagedSeen)
	}
}
