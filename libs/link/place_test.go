package link

import (
	"errors"
	"log/slog"
	"strings"
	"testing"

	"ipu.local/libs/arch"
	"ipu.local/libs/prog"
)

// A buffer that finds no place names the largest free range of the
// memory it may take and, when that memory is in pieces, the bytes free
// there in all: an interleaved buffer's is the interleaved region's,
// however large a free range the non-interleaved region has; and when
// that range is large enough, what kept the buffer out of it. A buffer
// of either region that needs 80 KiB finds them, but 64 in one region
// and 16 in the other.
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
		{prog.Interleaved, 16 << 10, 16, "does not fit in interleaved memory (largest free range 12288 bytes of 16384 free while it lives)"},
		{prog.Interleaved, 8 << 10, 16, ""},
		{prog.Interleaved, 12 << 10, 8 << 10, "does not fit in interleaved memory (largest free range 12288 bytes of 16384 free while it lives, but no start aligned to 8192 bytes there)"},
		{prog.AnyRegion, 16 << 10, 16, ""},
		{prog.AnyRegion, 80 << 10, 16, "does not fit (largest free range 65536 bytes of 81920 free while it lives)"},
		{prog.NonInterleaved, 80 << 10, 16, "does not fit (largest free range 65536 bytes of 81920 free while it lives)"},
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

// TestPlacePolicies: a placement that fails with the buffers of no
// region in interleaved memory first places them in non-interleaved
// memory first, the constants before the others, and says so; one that
// fails every way returns the first way's error with its memory report.
func TestPlacePolicies(t *testing.T) {
	p := arch.MustLookup("ipu21")
	const k = 1 << 10
	// b is the AMP's interleaved operand of 300 KiB, live at supersteps
	// 2 and 3; a buffer of no region of 150 KiB placed before it (it
	// lives from superstep 0) leaves it too little of the 415 KiB of
	// interleaved memory below the reserve.
	for _, tc := range []struct {
		name     string
		anyConst bool   // the buffer of no region is a constant
		anySize  uint32 // its bytes
		policy   string // the policy that places them; "": none does
	}{
		{"constant", true, 150 * k, "constants non-interleaved first"},
		{"variable", false, 150 * k, "non-interleaved first"},
		{"too large", true, 250 * k, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &prog.Buffer{ID: 0, Name: "a", Tiles: []int{0}, Size: tc.anySize, Align: 16, Region: prog.AnyRegion, First: 0, Last: 9}
			if tc.anyConst {
				a.Permanent = true
			}
			b := &prog.Buffer{ID: 1, Name: "b", Tiles: []int{0}, Size: 300 * k, Align: 32, Region: prog.Interleaved, First: 2, Last: 3}
			l := &linker{p: p, prog: &prog.Program{Buffers: []*prog.Buffer{a, b}}, tiles: map[int]*tile{}}
			var logs strings.Builder
			pl, err := l.placeBuffers(slog.New(slog.NewTextHandler(&logs, nil)))
			if tc.policy == "" {
				var me *MemoryError
				if !errors.As(err, &me) || me.Buffer != "b" || !strings.Contains(err.Error(), "\n  tile 0: ") {
					t.Fatalf("err %v, want b's MemoryError with the memory report", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !b.Placed || b.Addr < p.Interleaved.Lo || !a.Placed || a.Addr >= p.Interleaved.Lo {
				t.Errorf("a at %#x, b at %#x: want a in non-interleaved memory, b in interleaved", a.Addr, b.Addr)
			}
			if len(pl.tiles[0]) != 2 {
				t.Errorf("tile 0 has %d spans, want 2", len(pl.tiles[0]))
			}
			want := `msg="placed the buffers of no region another way" policy="` + tc.policy + `" reason="tile 0: buffer b of 307200 bytes does not fit in interleaved memory`
			if !strings.Contains(logs.String(), want) {
				t.Errorf("log:\n%s\nwant %s", logs.String(), want)
			}
		})
	}
}
