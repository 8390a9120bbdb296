package planner

import (
	"errors"
	"strings"
	"testing"

	"ipu.local/libs/arch"
	"ipu.local/libs/link"
	"ipu.local/libs/prog"
)

// TestFitsInterleaved: a tile whose buffers bound to interleaved memory
// (constants, and variables at their peak) need more than the region
// below the runtime's reserve overflows by the difference, whatever the
// tile's other bytes; such a point costs more than any that fits, and
// less the less it overflows.
func TestFitsInterleaved(t *testing.T) {
	p := arch.MustLookup("ipu21")
	limit := int64(p.UsableMemory().Hi) - int64(p.Interleaved.Lo)
	const k = 1 << 10
	buf := func(tiles []int, size int64, r prog.Region, first, last int, constant bool) *prog.Buffer {
		return &prog.Buffer{Tiles: tiles, Size: uint32(size), Region: r, First: first, Last: last, Permanent: constant}
	}
	pr := &prog.Program{Steps: make([]*prog.Superstep, 4), Buffers: []*prog.Buffer{
		buf([]int{0, 1}, 300*k, prog.Interleaved, 0, 3, true),
		// Two interleaved variables: live at once on tile 0, one after
		// the other on tile 1.
		buf([]int{0, 1}, 80*k, prog.Interleaved, 0, 1, false),
		buf([]int{0}, 80*k, prog.Interleaved, 1, 2, false),
		buf([]int{1}, 80*k, prog.Interleaved, 2, 3, false),
		// Bytes of no region do not count.
		buf([]int{0, 1}, 150*k, prog.AnyRegion, 0, 3, true),
	}}
	per := make([]TileBytes, 2)
	ilConst := []int64{300 * k, 300 * k}
	for t := range per {
		per[t].Variables = 160 * k
	}
	o := fitsInterleaved(p, 2, pr, per, ilConst)
	if want := 460*k - limit; o.Bytes != want {
		t.Fatalf("overflow %d bytes, want %d (tile 0 only)", o.Bytes, want)
	}
	if got := o.Err.Error(); !strings.HasPrefix(got, "out of interleaved memory on 2 tiles of ipu21 (424880 bytes per tile") ||
		!strings.Contains(got, "tile 0 needs 471040 (constants 307200, variables 163840 at their peak)") || strings.Contains(got, "tile 1 ") {
		t.Errorf("error %q", got)
	}
	fit := &result{obj: 1 << 40}
	small, large := &result{obj: 10, il: overflow{Bytes: 8}}, &result{obj: 5, il: overflow{Bytes: 9}}
	if !(fit.cost() < small.cost() && small.cost() < large.cost()) {
		t.Errorf("costs: fitting %d, overflowing by 8 bytes %d, by 9 %d", fit.cost(), small.cost(), large.cost())
	}
}

// TestPlanFitsInterleaved: the BERT layer's weights fill most of the
// interleaved region on few tiles. In FP32 on 8 tiles the start's
// splits over 7 and 8 tiles stack four weights on the same tiles; the
// start spreads them (spread) and the plan links. In FP16 on 4 tiles
// the weights alone need all of the region and the variables more: the
// search says so instead of handing the link a plan it cannot place.
func TestPlanFitsInterleaved(t *testing.T) {
	p := arch.MustLookup("ipu21")
	_, _, _, err := Plan(load(t, "shared/bert_layer_fp16/model"), p, Options{Tiles: 4, Seed: 1, MaxAttempts: 20})
	var me *MemoryError
	if !errors.As(err, &me) || me.Interleaved == 0 {
		t.Errorf("FP16 on 4 tiles: err %v, want an interleaved MemoryError", err)
	}
	for _, tiles := range []int{8, 9} {
		pl, _, _, err := Plan(load(t, "shared/bert_layer/model"), p, Options{Tiles: tiles, Seed: 1, MaxAttempts: 20})
		if err != nil {
			t.Fatalf("FP32 on %d tiles: %v", tiles, err)
		}
		if _, _, err := link.Link(pl, "", link.Options{NoModel: true}); err != nil {
			t.Errorf("FP32 on %d tiles: the plan does not link: %v", tiles, err)
		}
	}
}

// TestStartMakesRoom: the odd-shape GPT-2 block's attention scores fill
// 9 tiles. With the later products at their first candidates no split
// of the first product fits, so the start takes the one that comes
// closest and lets the later products' decisions make room: the block
// plans (before, the planner said it was out of memory). On 7 tiles
// none of the screened splits of its products fits either way: the
// start takes their lightest splits (lightSplits). Its plan links
// through ipu-plan's validation and its numbers check (make
// conformance-few).
func TestStartMakesRoom(t *testing.T) {
	p := arch.MustLookup("ipu21")
	g := load(t, "transformers-odd/gpt2_s129_block_fp16/model")
	for _, tiles := range []int{9, 7} {
		if _, _, _, err := Plan(g, p, Options{Tiles: tiles, Seed: 1, MaxAttempts: 20}); err != nil {
			t.Errorf("%d tiles: %v", tiles, err)
		}
	}
}
