package cost

import (
	"errors"
	"strings"
	"testing"

	"ipu.local/libs/arch"
	"ipu.local/libs/graph"
	"ipu.local/libs/onnx"
)

func loadGraph(t testing.TB, name string) *graph.Graph {
	t.Helper()
	m, err := onnx.ReadModelFile("../../testdata/models/" + name + ".onnx")
	if err != nil {
		t.Fatal(err)
	}
	g, err := graph.Build(m)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func product(t testing.TB, g *graph.Graph) *Product {
	t.Helper()
	for _, n := range g.Nodes {
		if pr, err := ProductOf(n); err == nil {
			return pr
		}
	}
	t.Fatal("no product")
	return nil
}

// resident is the product with both operands resident in block layout.
func resident(pr *Product) MatMul {
	op := func(c Chain) Operand {
		return Operand{Cast: c.Cast, HasCast: c.HasCast, ResidentBytes: c.Root.DType.ElemSize(), Constant: c.Root.Const != nil}
	}
	return MatMul{M: pr.M, K: pr.K, N: pr.N, Type: pr.Type, A: op(pr.A), B: op(pr.B), FP8: pr.A.FP8}
}

func TestBlock(t *testing.T) {
	var got []int
	for b := 0; b < 3; b++ {
		lo, hi := Block(10, 3, b)
		got = append(got, lo, hi)
	}
	want := []int{0, 4, 4, 7, 7, 10}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("Block(10, 3, ...) = %v, want %v", got, want)
		}
	}
}

func TestMatMul2048(t *testing.T) {
	p := arch.MustLookup("ipu21")
	g := loadGraph(t, "matmul2048")
	pr := product(t, g)
	bound := ComputeBound(g, p, p.Tiles)
	if bound != 91181 {
		t.Errorf("ComputeBound = %d, want 91181 (2048^3 / (64 x 1472))", bound)
	}
	tests := []struct {
		s       Split
		wantErr string
	}{
		{s: Split{GM: 46, GN: 32, GK: 1}},
		{s: Split{GM: 32, GN: 46, GK: 1}},
		{s: Split{GM: 23, GN: 32, GK: 2}},
		{s: Split{GM: 8, GN: 8, GK: 1}, wantErr: "out of memory on 64 tiles"},
	}
	for _, tc := range tests {
		t.Run(tc.s.String(), func(t *testing.T) {
			est, err := EvalMatMul(p, resident(pr), tc.s, 0, `node "y_MatMul"`)
			if tc.wantErr != "" {
				var r *MemoryReport
				if !errors.As(err, &r) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want a memory report %q", err, tc.wantErr)
				}
				t.Logf("%v", err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("split %v: total %d exchange %d transfers %d ratio %.3f phases %+v", tc.s, est.Total, est.Exchange, est.Transfers, float64(est.Total)/float64(bound), est.Phases)
			if r := float64(est.Total) / float64(bound); r > 2 {
				t.Errorf("ratio to the bound %.3f > 2", r)
			}
		})
	}
}

func TestQKEarly(t *testing.T) {
	p := arch.MustLookup("ipu21")
	g := loadGraph(t, "qk-early")
	pr := product(t, g)
	if pr.Type.String() != "fp8" || !pr.A.HasCast || !pr.B.Transpose || pr.M != 256 || pr.K != 64 || pr.N != 256 {
		t.Fatalf("product %+v", pr)
	}
	mm := resident(pr)
	est, err := EvalMatMul(p, mm, Split{GM: 16, GN: 16, GK: 1}, 0, "s")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("after-exchange casts, resident: total %d phases %+v", est.Total, est.Phases)
	// Cast on home tiles, then move FP8 blocks.
	ra := RowDist(pr.M, pr.K, 4, 0, 256)
	rb := RowDist(pr.K, pr.N, 4, 0, 256)
	mm.A.Source, mm.A.CastBefore = &ra, true
	mm.B.Source, mm.B.CastBefore = &rb, true
	est2, err := EvalMatMul(p, mm, Split{GM: 16, GN: 16, GK: 1}, 0, "s")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("before-exchange casts: total %d exchange %d transfers %d phases %+v", est2.Total, est2.Exchange, est2.Transfers, est2.Phases)
	if est2.Exchange == 0 || est2.Transfers == 0 {
		t.Errorf("no exchange for moved operands")
	}
}

func TestMove(t *testing.T) {
	p := arch.MustLookup("ipu21")
	// Every tile of [0, 4) needs the whole 4x8 matrix.
	whole := Dist{Rows: 4, Cols: 8}
	for tile := 0; tile < 4; tile++ {
		whole.Pieces = append(whole.Pieces, Piece{tile, 0, 4, 0, 8})
	}
	tests := []struct {
		name          string
		src           Dist
		wantTransfers int
		wantWords     int64
	}{
		// Tile r holds row r and multicasts it to the other three, as
		// one run each side of r: 1+2+2+1 transfers.
		{"rows inside the run", RowDist(4, 8, 4, 0, 4), 6, 4 * 8 * 3},
		// Rows on tiles outside the run: one multicast per row to all four.
		{"rows outside the run", RowDist(4, 8, 4, 4, 4), 4, 4 * 8 * 4},
		{"held everywhere", whole, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x := NewExchange(p)
			if err := x.Move(tc.src, whole, 4); err != nil {
				t.Fatal(err)
			}
			if len(x.Transfers) != tc.wantTransfers || x.Words != tc.wantWords {
				t.Errorf("%d transfers moving %d words, want %d moving %d", len(x.Transfers), x.Words, tc.wantTransfers, tc.wantWords)
			}
			for _, tr := range x.Transfers {
				if tr.Src >= tr.Dst && tr.Src < tr.Dst+tr.Dests() {
					t.Errorf("transfer %+v sends to its own source", tr)
				}
			}
		})
	}
}
