package layout

import (
	"math/rand"
	"strings"
	"testing"
)

// store is every piece's storage of a tensor, holding the value's flat
// element indices (-1 for padding).
type store [][]int

func flatOf(idx, shape []int) int {
	f := 0
	for d := range shape {
		f = f*shape[d] + idx[d]
	}
	return f
}

// eachIndex calls f for every index of box b.
func eachIndex(b Box, f func(idx []int)) {
	r := len(b)
	idx := make([]int, r)
	for d := range idx {
		idx[d] = b[d].Lo
	}
	if b.Empty() {
		return
	}
	for {
		f(idx)
		d := r - 1
		for d >= 0 {
			idx[d]++
			if idx[d] < b[d].Hi {
				break
			}
			idx[d] = b[d].Lo
			d--
		}
		if d < 0 {
			return
		}
	}
}

// fill returns t's storage with each element's identity under name.
func fill(t *Tensor, name func(idx []int) int) store {
	s := make(store, len(t.Pieces))
	for i, p := range t.Pieces {
		g := t.Geometry(i)
		s[i] = make([]int, g.Elems)
		for k := range s[i] {
			s[i][k] = -1
		}
		eachIndex(p.Box, func(idx []int) { s[i][g.Offset(idx)] = name(idx) })
	}
	return s
}

func empty(t *Tensor) store {
	s := make(store, len(t.Pieces))
	for i := range t.Pieces {
		s[i] = make([]int, t.Geometry(i).Elems)
		for k := range s[i] {
			s[i][k] = -2
		}
	}
	return s
}

// apply copies runs from src to dst storage; it fails on a run outside a
// piece.
func apply(t *testing.T, runs []Run, src, dst store) {
	t.Helper()
	for _, r := range runs {
		if r.SrcOff < 0 || r.SrcOff+r.N > len(src[r.Src]) || r.DstOff < 0 || r.DstOff+r.N > len(dst[r.Dst]) {
			t.Fatalf("run %+v outside its pieces (%d, %d elements)", r, len(src[r.Src]), len(dst[r.Dst]))
		}
		copy(dst[r.Dst][r.DstOff:r.DstOff+r.N], src[r.Src][r.SrcOff:r.SrcOff+r.N])
	}
}

func randGrid(rng *rand.Rand, shape []int, tiles int) []Piece {
	counts := make([]int, len(shape))
	for d := range counts {
		counts[d] = 1 + rng.Intn(min(shape[d], 3))
	}
	ps := Grid(shape, counts, nil, 0)
	for i := range ps {
		ps[i].Tile = rng.Intn(tiles)
	}
	// Replicate some.
	n := len(ps)
	for i := 0; i < n; i++ {
		if rng.Intn(4) == 0 {
			ps = append(ps, Piece{rng.Intn(tiles), ps[i].Box.Clone()})
		}
	}
	return ps
}

func newTensor(shape []int, pieces []Piece, pad int) *Tensor {
	t := &Tensor{Name: "v", Size: 4, Shape: shape, Kind: RowMajor, Pad: pad, Pieces: pieces}
	t.SortPieces()
	return t
}

func randShape(rng *rand.Rand) []int {
	r := 1 + rng.Intn(4)
	s := make([]int, r)
	for d := range s {
		s[d] = 1 + rng.Intn(7)
	}
	return s
}

func TestPermuteRunsMoveEveryElement(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for iter := 0; iter < 400; iter++ {
		shape := randShape(rng)
		r := len(shape)
		perm := rng.Perm(r)
		if r > 0 {
			// Keep the last axis last.
			for i, p := range perm {
				if p == r-1 {
					perm[i], perm[r-1] = perm[r-1], perm[i]
				}
			}
		}
		src := newTensor(shape, randGrid(rng, shape, 5), []int{2, 4}[rng.Intn(2)])
		oshape := make([]int, r)
		for i := range oshape {
			oshape[i] = shape[perm[i]]
		}
		dst := newTensor(oshape, randGrid(rng, oshape, 5), 2)
		if err := src.Validate(5); err != nil {
			t.Fatal(err)
		}
		runs, err := PermuteRuns(src, dst, perm)
		if err != nil {
			t.Fatal(err)
		}
		ss := fill(src, func(idx []int) int { return flatOf(idx, shape) })
		ds := empty(dst)
		apply(t, runs, ss, ds)
		want := fill(dst, func(idx []int) int {
			x := make([]int, r)
			for i := range idx {
				x[perm[i]] = idx[i]
			}
			return flatOf(x, shape)
		})
		checkStore(t, dst, ds, want)
	}
}

func checkStore(t *testing.T, dst *Tensor, got, want store) {
	t.Helper()
	for i := range want {
		for k := range want[i] {
			if want[i][k] >= 0 && got[i][k] != want[i][k] {
				t.Fatalf("shape %v piece %d (%v) element %d: got %d want %d", dst.Shape, i, dst.Pieces[i], k, got[i][k], want[i][k])
			}
		}
	}
}

func TestReshapeRunsMoveEveryElement(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	for iter := 0; iter < 400; iter++ {
		shape := randShape(rng)
		n := Full(shape).Volume()
		// Another factorisation of n.
		var oshape []int
		m := n
		for m > 1 {
			f := 1 + rng.Intn(m)
			for m%f != 0 {
				f--
			}
			if f == 1 {
				f = m
			}
			oshape = append(oshape, f)
			m /= f
		}
		if len(oshape) == 0 {
			oshape = []int{1}
		}
		src := newTensor(shape, randGrid(rng, shape, 4), 2)
		dst := newTensor(oshape, randGrid(rng, oshape, 4), []int{2, 4}[rng.Intn(2)])
		runs, err := ReshapeRuns(src, dst)
		if err != nil {
			t.Fatal(err)
		}
		ss := fill(src, func(idx []int) int { return flatOf(idx, shape) })
		ds := empty(dst)
		apply(t, runs, ss, ds)
		checkStore(t, dst, ds, fill(dst, func(idx []int) int { return flatOf(idx, oshape) }))
	}
}

func TestPanelRuns(t *testing.T) {
	mm := MatMul{Batch: []int{3}, ABatch: []int{3}, BBatch: []int{1}, M: 37, K: 20, N: 50}
	for _, s := range []Split{{GB: 1, GM: 2, GN: 2, GK: 1}, {GB: 3, GM: 3, GN: 1, GK: 2}, {GB: 2, GM: 1, GN: 4, GK: 3}} {
		for _, a := range []bool{true, false} {
			kind, shape := APanel, []int{3, 37, 20}
			if !a {
				kind, shape = BPanel, []int{1, 20, 50}
			}
			dst := &Tensor{Name: "op", Size: 2, Shape: shape, Kind: kind, Pieces: s.OperandPieces(mm, 0, a)}
			dst.SortPieces()
			if err := dst.Validate(64); err != nil {
				t.Fatal(err)
			}
			// A source in whole-k panels over groups.
			counts := []int{shape[0], 1, 1}
			aligns := []int{1, 4, 1}
			if !a {
				counts, aligns = []int{1, 1, 3}, []int{1, 1, 16}
			} else {
				counts[1] = 3
			}
			src := &Tensor{Name: "op", Size: 2, Shape: shape, Kind: kind, Pieces: Grid(shape, counts, aligns, 40)}
			src.SortPieces()
			if err := src.Validate(64); err != nil {
				t.Fatal(err)
			}
			runs, err := PanelRuns(src, dst)
			if err != nil {
				t.Fatal(err)
			}
			ss := fill(src, func(idx []int) int { return flatOf(idx, shape) })
			ds := empty(dst)
			apply(t, runs, ss, ds)
			checkStore(t, dst, ds, fill(dst, func(idx []int) int { return flatOf(idx, shape) }))
		}
	}
}

func TestValidate(t *testing.T) {
	shape := []int{8, 6}
	good := newTensor(shape, Grid(shape, []int{2, 2}, nil, 0), 2)
	if err := good.Validate(4); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		pieces []Piece
		want   string
	}{
		{"gap", []Piece{{0, Box{{0, 4}, {0, 6}}}}, "cover 24 of"},
		{"overlap", []Piece{{0, Box{{0, 5}, {0, 6}}}, {1, Box{{4, 8}, {0, 6}}}}, "overlap"},
		{"outside", []Piece{{0, Box{{0, 9}, {0, 6}}}}, "outside"},
		{"tile", []Piece{{7, Box{{0, 8}, {0, 6}}}}, "tile 7 out of range"},
	} {
		tn := newTensor(shape, c.pieces, 2)
		err := tn.Validate(4)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.name, err, c.want)
		}
	}
}

func TestReshaped(t *testing.T) {
	src := newTensor([]int{32, 256}, Grid([]int{32, 256}, []int{8, 1}, nil, 0), 2)
	ps, ok := Reshaped(src, []int{32, 4, 64}, 2)
	if !ok {
		t.Fatal("rows of [32,256] should view as [32,4,64]")
	}
	if got := ps[1].Box.String(); got != "[4:8,0:4,0:64]" {
		t.Errorf("piece 1: %s", got)
	}
	cols := newTensor([]int{32, 256}, Grid([]int{32, 256}, []int{1, 4}, nil, 0), 2)
	if _, ok := Reshaped(cols, []int{32 * 256}, 2); ok {
		t.Error("column blocks are not a flat view")
	}
}

// TestGeometryRun checks that the elements Run counts from an index are
// stored one after the other, for every kind, on random boxes.
func TestGeometryRun(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	for i := 0; i < 300; i++ {
		r := 2 + rng.Intn(2)
		b := make(Box, r)
		for d := range b {
			lo := rng.Intn(20)
			b[d] = Range{Lo: lo, Hi: lo + 1 + rng.Intn(40)}
		}
		for _, k := range []Kind{RowMajor, APanel, BPanel} {
			tn := &Tensor{Kind: k, Size: 2, Pad: 1 + rng.Intn(8)}
			g := tn.GeometryOf(b)
			idx := make([]int, r)
			for d := range idx {
				idx[d] = b[d].Lo + rng.Intn(b[d].Len())
			}
			n := g.Run(idx)
			if n < 1 || idx[r-1]+n > b[r-1].Hi {
				t.Fatalf("%v %v at %v: run %d", k, b, idx, n)
			}
			at := g.Offset(idx)
			for j := 1; j < n; j++ {
				next := append([]int(nil), idx...)
				next[r-1] += j
				if got := g.Offset(next); got != at+j {
					t.Fatalf("%v %v: run %d from %v, but element %d is at %d, not %d", k, b, n, idx, j, got, at+j)
				}
			}
		}
	}
}
