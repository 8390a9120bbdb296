package planner

import (
	"testing"

	"ipu.local/libs/arch"
	"ipu.local/libs/graph"
	"ipu.local/libs/layout"
	"ipu.local/libs/onnx"
)

// weightGraph is y = MatMul(x, w) of an FP32 input x [m, k] and constant
// weights w [k, n], or MatMul(w, x) of w [m, k] and x [k, n] when
// constA.
func weightGraph(t *testing.T, m, k, n int64, constA bool) *graph.Graph {
	t.Helper()
	b := onnx.NewModel(21)
	xd, wd, ins := []int64{m, k}, []int64{k, n}, []string{"x", "w"}
	if constA {
		xd, wd, ins = []int64{k, n}, []int64{m, k}, []string{"w", "x"}
	}
	b.AddNode("MatMul", "y_MatMul", ins, []string{"y"})
	b.AddInput("x", onnx.Float, xd)
	b.AddInitializer(onnx.NewFloat32("w", wd, make([]float32, wd[0]*wd[1])))
	b.AddOutput("y", onnx.Float, []int64{m, n})
	return canonical(t, b)
}

// TestFilledCandidates: on shapes and tile counts of every kind, with
// the constant operand on either side, each split addFilled adds to the
// screen's best splits of a smaller budget (which leave tiles idle)
// raises the block count of the axis that copies the constant in one of
// the first fillKeep of them, fits the tiles, shortens that axis's
// longest block, and is the fewest blocks for that length; and some
// split of every case gets one.
func TestFilledCandidates(t *testing.T) {
	for _, tc := range []struct {
		m, k, n int64
		tiles   int
	}{
		{128, 3072, 768, 1472},
		{128, 768, 3072, 1472},
		{100, 1000, 300, 1472},
		{33, 517, 65, 61},
		{300, 700, 1000, 1472},
		{512, 64, 4096, 97},
		{64, 2, 4000, 1000},
		{4000, 2, 64, 1000},
	} {
		for _, constA := range []bool{false, true} {
			g := weightGraph(t, tc.m, tc.k, tc.n, constA)
			pl, err := newPlanner(g, arch.MustLookup("ipu21"), tc.tiles)
			if err != nil {
				t.Fatal(err)
			}
			pr := pl.products[0]
			mu, nu := layout.Units(int(tc.m), layout.AGroup), layout.Units(int(tc.n), layout.BGroup)
			fills := 0
			for _, budget := range pl.budgets()[1:] {
				seen := map[layout.Split]bool{}
				base, _ := pl.screenN(pr, budget, 0, startCopies)
				for _, s := range base {
					seen[s] = true
				}
				grids := pl.addFilled(pr, append([]layout.Split(nil), base...), seen)
				added := grids[len(base):]
				fills += len(added)
				for _, v := range added {
					if v.Cut() || v.Tiles() > tc.tiles {
						t.Fatalf("filled %v: cut %v, %d tiles of %d", v, v.Cut(), v.Tiles(), tc.tiles)
					}
					if !fromOne(v, base[:min(fillKeep, len(base))], mu, nu, constA) {
						t.Fatalf("%dx%dx%d const A %v: filled %v: not one shorter axis of %v", tc.m, tc.k, tc.n, constA, v, base[:min(fillKeep, len(base))])
					}
				}
			}
			t.Logf("%dx%dx%d on %d tiles, const A %v: %d filled", tc.m, tc.k, tc.n, tc.tiles, constA, fills)
			if fills == 0 {
				t.Errorf("%dx%dx%d on %d tiles, const A %v: no filled split", tc.m, tc.k, tc.n, tc.tiles, constA)
			}
		}
	}
}

// fromOne reports whether v is one of srcs with the block count of the
// axis copying the constant (columns when constA, else rows) raised so
// that its longest block is shorter, the fewest blocks giving that
// length.
func fromOne(v layout.Split, srcs []layout.Split, mu, nu int, constA bool) bool {
	for _, s := range srcs {
		if v.GB != s.GB || v.GK != s.GK {
			continue
		}
		fv, fs, u := v.GM, s.GM, mu
		if constA {
			if v.GM != s.GM {
				continue
			}
			fv, fs, u = v.GN, s.GN, nu
		} else if v.GN != s.GN {
			continue
		}
		l := (u + fv - 1) / fv
		if fv > fs && l < (u+fs-1)/fs && (u+fv-2)/(fv-1) > l {
			return true
		}
	}
	return false
}

// TestFilledAxes: a split leaving most tiles idle gets the filled
// variant of the axis that copies the constant, the fewest blocks for
// the shortest block the tiles allow.
func TestFilledAxes(t *testing.T) {
	for _, tc := range []struct {
		constA bool
		want   layout.Split
	}{
		{false, layout.Split{GB: 1, GM: 16, GN: 24, GK: 2}}, // 30 room, 32 row groups: blocks of 2, as 16 give
		{true, layout.Split{GB: 1, GM: 8, GN: 64, GK: 2}},   // 92 room, 192 panels: blocks of 3, as 64 give
	} {
		pl, err := newPlanner(weightGraph(t, 128, 768, 3072, tc.constA), arch.MustLookup("ipu21"), 1472)
		if err != nil {
			t.Fatal(err)
		}
		src := withOrder(layout.Split{GB: 1, GM: 8, GN: 24, GK: 2})
		got := pl.addFilled(pl.products[0], []layout.Split{src}, map[layout.Split]bool{src: true})[1:]
		if want := withOrder(tc.want); len(got) != 1 || got[0] != want {
			t.Errorf("const A %v: filled %v, want [%v]", tc.constA, got, want)
		}
	}
}
