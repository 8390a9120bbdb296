package device

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// TestZeroDirtyRuns: power-on clears each run of dirty tiles (one hole
// per run) and only those: a clean tile between two runs keeps its
// memory, which a clean tile never has in use.
func TestZeroDirtyRuns(t *testing.T) {
	_, open, _ := loadedDevice(t)
	d := open()
	defer d.Close()
	n := min(d.g.tiles, 6)
	clean := map[int]bool{2: true, 5: true}
	for u := 0; u < n; u++ {
		copy(d.tileMem(u), "junk")
		if clean[u] {
			d.m[offDirty+u/8] &^= 1 << (u % 8)
		} else {
			d.setDirty(u)
		}
	}
	d.zeroDirty(nil)
	for u := 0; u < n; u++ {
		zero := bytes.Equal(d.tileMem(u), make([]byte, len(d.tileMem(u))))
		if zero == clean[u] || d.dirty(u) {
			t.Errorf("tile %d (clean %v): memory zero %v, dirty %v after zeroDirty", u, clean[u], zero, d.dirty(u))
		}
	}
}

// TestZeroDirtyKeep: a run of dirty tiles whose data all lies in the
// spans the coming load keeps is cleared in place (its pages keep their
// disk blocks); a run with data elsewhere is one hole punched (no data
// left). Every byte ends zero either way.
func TestZeroDirtyKeep(t *testing.T) {
	_, open, _ := loadedDevice(t)
	d := open()
	defer d.Close()
	n := min(d.g.tiles, 4)
	base := func(u int) int64 { return int64(d.g.memOffset + uint64(u)*d.g.tileStride) }
	lo, hi := base(0), base(n)
	d.zeroAll()
	exts, ok := d.dataExtents(lo, hi)
	seeks := ok && len(exts) == 0 // the file system tells holes from data
	// The load keeps pages 0-1 and 3-6 of every tile.
	var keep []fileSpan
	for u := 0; u < n; u++ {
		keep = append(keep, fileSpan{off: base(u), n: 2 * pageSize, first: u, last: u},
			fileSpan{off: base(u) + 3*pageSize, n: 4 * pageSize, first: u, last: u})
	}
	for _, tc := range []struct {
		name  string
		pages []int64
		kept  bool
	}{
		{"inside", []int64{0, 1, 3, 6}, true},
		{"one page outside", []int64{0, 2, 3}, false},
	} {
		for u := 0; u < n; u++ {
			for _, pg := range tc.pages {
				copy(d.m[base(u)+pg*pageSize:], "junk")
			}
			d.setDirty(u)
		}
		d.zeroDirty(keep)
		for u := 0; u < n; u++ {
			if !bytes.Equal(d.tileMem(u), make([]byte, len(d.tileMem(u)))) || d.dirty(u) {
				t.Errorf("%s: tile %d: memory not zero or still dirty after zeroDirty", tc.name, u)
			}
		}
		if !seeks {
			continue
		}
		got, ok := d.dataExtents(lo, hi)
		var want [][2]int64
		if tc.kept {
			for u := 0; u < n; u++ {
				want = append(want, [2]int64{base(u), base(u) + 2*pageSize},
					[2]int64{base(u) + 3*pageSize, base(u) + 4*pageSize},
					[2]int64{base(u) + 6*pageSize, base(u) + 7*pageSize})
			}
		}
		if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); !ok || diff != "" {
			t.Errorf("%s: data extents after zeroDirty (ok %v; -want +got):\n%s", tc.name, ok, diff)
		}
	}
	if !seeks {
		t.Skip("the file system does not report holes: disk blocks not checked")
	}
}

func TestCovered(t *testing.T) {
	spans := []fileSpan{{off: 0, n: 10}, {off: 10, n: 5}, {off: 20, n: 10}}
	for _, tc := range []struct {
		exts [][2]int64
		want bool
	}{
		{nil, true},
		{[][2]int64{{0, 15}}, true}, // across two adjacent spans
		{[][2]int64{{2, 4}, {21, 30}}, true},
		{[][2]int64{{0, 16}}, false}, // one byte past
		{[][2]int64{{14, 21}}, false},
		{[][2]int64{{30, 31}}, false},
		{[][2]int64{{19, 20}}, false},
	} {
		if got := covered(tc.exts, spans); got != tc.want {
			t.Errorf("covered(%v) = %v, want %v", tc.exts, got, tc.want)
		}
	}
}
