package planner

import (
	"errors"
	"strings"
	"testing"

	"ipu.local/libs/arch"
	"ipu.local/libs/lower"
	"ipu.local/libs/prog"
)

// largestVariable returns the size of the largest variable (no data, not
// permanent) of the plan's lowering, and its name.
func largestVariable(t *testing.T, name string, opt Options) (int64, string) {
	t.Helper()
	g, p := load(t, name), arch.MustLookup("ipu21")
	pl, _, _, err := Plan(g, p, opt)
	if err != nil {
		t.Fatal(err)
	}
	pr, err := lower.LowerWith(pl, g, p, lower.Options{NoData: true})
	if err != nil {
		t.Fatal(err)
	}
	var most int64
	var at string
	for _, b := range pr.Buffers {
		if b.Data == nil && !b.Permanent && int64(b.Size) > most {
			most, at = int64(b.Size), b.Name
		}
	}
	return most, at
}

// TestMaxVariable: a search with a largest variable below the one its
// plan had without makes a plan whose variables all fit the limit (a
// different one), records the limit in its state, and a resumed search
// keeps it; a limit no plan meets is out of memory, naming the
// variables over it; a negative limit is refused.
func TestMaxVariable(t *testing.T) {
	opt := Options{Tiles: 64, Seed: 1, MaxAttempts: 2, ModelFingerprint: "fp"}
	free, name := largestVariable(t, "mlp-small", opt)
	if free < 64 {
		t.Fatalf("largest variable %d bytes (%s): too small to limit", free, name)
	}
	limited := opt
	limited.MaxVariable = free - 1
	if most, at := largestVariable(t, "mlp-small", limited); most > limited.MaxVariable {
		t.Fatalf("limit %d: variable %s of %d bytes", limited.MaxVariable, at, most)
	}
	g, p := load(t, "mlp-small"), arch.MustLookup("ipu21")
	_, s, _, err := Plan(g, p, limited)
	if err != nil {
		t.Fatal(err)
	}
	if s.MaxVariable != free-1 {
		t.Fatalf("state's largest variable %d, want %d", s.MaxVariable, free-1)
	}
	resumed := opt
	resumed.State = s
	if _, s2, _, err := Plan(g, p, resumed); err != nil || s2.MaxVariable != free-1 {
		t.Fatalf("resumed: state %v, err %v; want the limit %d kept", s2, err, free-1)
	}

	tiny := opt
	tiny.MaxVariable = 2
	_, _, _, err = Plan(g, p, tiny)
	var me *MemoryError
	if !errors.As(err, &me) || me.MaxVariable != 2 || me.Over <= 0 ||
		!strings.HasPrefix(err.Error(), "variables larger than 2 bytes (the largest this search lets a tile hold) on 64 tiles of ipu21: ") {
		t.Fatalf("error %v, want the variables over 2 bytes named", err)
	}

	neg := opt
	neg.MaxVariable = -1
	if _, _, _, err := Plan(g, p, neg); err == nil || !strings.Contains(err.Error(), "largest variable -1 bytes") {
		t.Fatalf("error %v, want the negative limit refused", err)
	}
}

// TestFitsLargest: the variables over the limit are named largest first
// (up to four), constants and permanent buffers never, and Over is
// their bytes beyond it on all their tiles.
func TestFitsLargest(t *testing.T) {
	p := arch.MustLookup("ipu21")
	pr := &prog.Program{Buffers: []*prog.Buffer{
		{Name: "small", Size: 100, Tiles: []int{0}},
		{Name: "big", Size: 300, Tiles: []int{1, 2}},
		{Name: "bigger", Size: 400, Tiles: []int{3}},
		{Name: "weights", Size: 900, Tiles: []int{0}, Data: map[int][]byte{0: {1}}},
		{Name: "state", Size: 900, Tiles: []int{0}, Permanent: true},
	}}
	if err := fitsLargest(p, 4, 400, pr); err != nil {
		t.Fatalf("limit 400: %v", err)
	}
	err := fitsLargest(p, 4, 200, pr)
	var me *MemoryError
	if !errors.As(err, &me) {
		t.Fatalf("error %v, want a MemoryError", err)
	}
	if want := int64(200 + 2*100); me.Over != want {
		t.Errorf("over %d bytes, want %d", me.Over, want)
	}
	if want := "variables larger than 200 bytes (the largest this search lets a tile hold) on 4 tiles of ipu21: bigger 400 bytes on tile 3, big 300 bytes on tile 1"; err.Error() != want {
		t.Errorf("error\n%s\nwant\n%s", err, want)
	}
}

// TestUnderLimit: a split is a candidate of a limited search only when
// its variable operand block and its FP32 C block each fit the limit;
// a constant operand's block does not count, and no limit takes every
// split.
func TestUnderLimit(t *testing.T) {
	g, p := load(t, "mlp-small"), arch.MustLookup("ipu21")
	pl, err := newPlanner(g, p, 64)
	if err != nil {
		t.Fatal(err)
	}
	pr := pl.products[0]
	if isConst(pr.a.w) || !isConst(pr.b.w) {
		t.Fatal("mlp-small's first product: want a variable A and a constant B")
	}
	e := int64(pr.typ.Size())
	bl := block{bb: 1, gk: 1, mb: 8, kb: 64, nb: 16} // A 8x64, C 8x16 FP32, B 64x16
	a, c := 8*64*e, int64(8*16*4)
	for _, tc := range []struct {
		limit int64
		want  bool
	}{
		{0, true},
		{max(a, c), true},
		{max(a, c) - 1, false},
	} {
		pl.maxVariable = tc.limit
		if got := pl.underLimit(pr, bl); got != tc.want {
			t.Errorf("limit %d (A block %d bytes, C block %d): %v, want %v", tc.limit, a, c, got, tc.want)
		}
	}
	wide := block{bb: 1, gk: 1, mb: 4, kb: 64, nb: 256} // A 4x64, C 4x256 FP32, B 64x256 (constant)
	pl.maxVariable = max(4*64*e, 4*256*4)
	if b := 64 * 256 * e; b <= pl.maxVariable || !pl.underLimit(pr, wide) {
		t.Errorf("a constant B block of %d bytes counted against the limit %d", b, pl.maxVariable)
	}
	pl.maxVariable--
	if pl.underLimit(pr, wide) {
		t.Errorf("a C block of %d bytes under the limit %d", 4*256*4, pl.maxVariable)
	}
}
