package link

import (
	"errors"
	"strings"
	"testing"

	"ipu.local/libs/arch"
	"ipu.local/libs/prog"
)

// A buffer that finds no place names the largest free range of the
// memory it may take: an interleaved buffer's is the interleaved
// region's, however large a free range the non-interleaved region has;
// and when that range is large enough, what kept the buffer out of it.
func TestPlaceError(t *testing.T) {
	p := arch.MustLookup("ipu21")
	il, top := p.Interleaved.Lo, p.UsableMemory().Hi
	// Tile 0 lives with a 64 KiB hole in non-interleaved memory and, in
	// interleaved memory, holes of 4 KiB at il+1 KiB and 12 KiB at the
	// top.
	spans := []span{
		{lo: p.NonInterleaved.Lo, hi: p.NonInterleaved.Hi - 64<<10},
		{lo: il, hi: il + 1<<10},
		{lo: il + 5<<10, hi: top - 12<<10},
	}
	for i := range spans {
		spans[i].first, spans[i].last = 0, 9
		spans[i].buf = &prog.Buffer{Name: "other", First: 0, Last: 9}
	}
	for _, tc := range []struct {
		region prog.Region
		size   uint32
		align  uint32
		want   string // the error's text after the buffer's size; "": it fits
	}{
		{prog.Interleaved, 16 << 10, 16, "does not fit in interleaved memory (largest free range 12288 bytes while it lives)"},
		{prog.Interleaved, 8 << 10, 16, ""},
		{prog.Interleaved, 12 << 10, 8 << 10, "does not fit in interleaved memory (largest free range 12288 bytes while it lives, but no start aligned to 8192 bytes there)"},
		{prog.AnyRegion, 16 << 10, 16, ""},
		{prog.AnyRegion, 80 << 10, 16, "does not fit (largest free range 65536 bytes while it lives)"},
		{prog.NonInterleaved, 80 << 10, 16, "does not fit (largest free range 65536 bytes while it lives)"},
	} {
		pl := &placer{p: p, tiles: map[int][]span{0: append([]span(nil), spans...)}, codeTop: map[int]uint32{0: p.NonInterleaved.Lo}}
		b := &prog.Buffer{Name: "b", Tiles: []int{0}, Size: tc.size, Align: tc.align, Region: tc.region, First: 2, Last: 3}
		err := pl.place(b)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%v %d bytes: %v", tc.region, tc.size, err)
			}
			continue
		}
		var me *MemoryError
		if !errors.As(err, &me) {
			t.Fatalf("%v %d bytes: err %v (placed at %#x; interleaved %#x-%#x), want a MemoryError", tc.region, tc.size, err, b.Addr, il, top)
		}
		if got := err.Error(); !strings.HasSuffix(got, tc.want) {
			t.Errorf("%v %d bytes:\n got %s\nwant ...%s", tc.region, tc.size, got, tc.want)
		}
	}
}
