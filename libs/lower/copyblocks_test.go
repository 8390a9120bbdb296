package lower

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"

	"ipu.local/libs/codegen"
	"ipu.local/libs/prog"
)

// wordMove is one word copied: from a buffer's byte offset to another's.
type wordMove struct {
	from, to *prog.Buffer
	x, y     uint32
}

// copiedWords expands Copy kernels into the words they copy, by Copy's
// definition (rows, then Outer's blocks).
func copiedWords(t *testing.T, ks []*prog.Kernel) []wordMove {
	var out []wordMove
	for _, k := range ks {
		p := k.Params.(*codegen.Copy)
		if _, err := p.Cost(); err != nil {
			t.Fatalf("%+v: %v", *p, err)
		}
		from, to := k.Fixes[0].Ref, k.Fixes[1].Ref
		for _, b := range codegen.BlockOffsets(p.Outer) {
			for r := range p.R {
				for c := range p.W {
					out = append(out, wordMove{from.Buf, to.Buf,
						from.Off + uint32(4*(b[0]+r*p.XStride+c)), to.Off + uint32(4*(b[1]+r*p.YStride+c))})
				}
			}
		}
	}
	return out
}

func runWords(ls []localRun) []wordMove {
	var out []wordMove
	for _, r := range ls {
		for i := 0; i < r.bytes; i += 4 {
			out = append(out, wordMove{r.from.Buf, r.to.Buf, r.from.Off + uint32(i), r.to.Off + uint32(i)})
		}
	}
	return out
}

func sortMoves(ms []wordMove) {
	slices.SortFunc(ms, func(a, b wordMove) int {
		if a.from != b.from {
			return a.from.ID - b.from.ID
		}
		if a.to != b.to {
			return a.to.ID - b.to.ID
		}
		if a.y != b.y {
			return int(a.y) - int(b.y)
		}
		return int(a.x) - int(b.x)
	})
}

// checkCopies checks that the kernels copyKernels makes of ls copy
// exactly ls's words, and returns them.
func checkCopies(t *testing.T, ls []localRun) []*prog.Kernel {
	t.Helper()
	m := newMoves()
	copyKernels(m, "copy", map[int][]localRun{3: ls})
	got, want := copiedWords(t, m.copies[3]), runWords(ls)
	sortMoves(got)
	sortMoves(want)
	if !slices.Equal(got, want) {
		t.Fatalf("kernels copy %d words, not the runs' %d (or other ones)", len(got), len(want))
	}
	return m.copies[3]
}

// TestCopyBlocks: a stride-2 window gather along the last axis of a
// padded image (rows of 70 words, 7 window offsets, 32 outputs each),
// whose last offset of one row continues into the first of the next,
// is one Copy with two outer dimensions; without the cut at the common
// length it is 35 kernels.
func TestCopyBlocks(t *testing.T) {
	src, dst := &prog.Buffer{ID: 1}, &prog.Buffer{ID: 2}
	const rows, k, out, pitch = 18, 7, 32, 70
	var ls []localRun
	for h := range rows {
		for j := range k {
			for o := range out {
				ls = append(ls, localRun{prog.Ref{Buf: src, Off: uint32(4 * (h*pitch + j + 2*o))},
					prog.Ref{Buf: dst, Off: uint32(4 * ((h*k+j)*out + o))}, 4})
			}
		}
	}
	ks := checkCopies(t, ls)
	if len(ks) != 1 {
		t.Fatalf("%d kernels, want 1", len(ks))
	}
	p := ks[0].Params.(*codegen.Copy)
	want := codegen.Copy{R: out, W: 1, XStride: 2, YStride: 1, Workers: codegen.Slots,
		Outer: [2]codegen.BlockDim{{N: k, XStride: 1, YStride: out}, {N: rows, XStride: pitch, YStride: k * out}}}
	if *p != want {
		t.Errorf("kernel %+v, want %+v", *p, want)
	}
}

// TestGatherBlocksHalfRows: a stride-2 FP16 window gather (ResNet's
// 3x3 max pool: 5 padded input rows of 116 elements, 3 window offsets,
// 56 outputs of one element each) is one Gather whose rows step by
// halves of Y inside word-aligned blocks; when the rule also asked the
// rows for whole words it was 15 kernels (one per offset and row).
func TestGatherBlocksHalfRows(t *testing.T) {
	src, dst := &prog.Buffer{ID: 1}, &prog.Buffer{ID: 2}
	const rows, k, out, pitch = 5, 3, 56, 116
	var es []elemRun
	for h := range rows {
		for j := range k {
			for o := range out {
				es = append(es, elemRun{prog.Ref{Buf: src, Off: uint32(2 * (h*pitch + j + 2*o))},
					prog.Ref{Buf: dst, Off: uint32(2 * ((h*k+j)*out + o))}, 1, -1})
			}
		}
	}
	m := newMoves()
	gatherKernels(m, "gather", 2, map[int][]elemRun{0: es})
	if len(m.copies[0]) != 1 {
		t.Fatalf("%d kernels, want 1", len(m.copies[0]))
	}
	g := m.copies[0][0].Params.(*codegen.Gather)
	want := codegen.Gather{Size: 2, R: out, C: 1, YStride: 1, RStride: 2, CStride: 1, Workers: codegen.Slots,
		Outer: [2]codegen.BlockDim{{N: k, XStride: 1, YStride: out}, {N: rows, XStride: pitch, YStride: k * out}}}
	if *g != want {
		t.Fatalf("kernel %+v, want %+v", *g, want)
	}
	if _, err := g.Cost(); err != nil {
		t.Fatal(err)
	}
	i := 0
	for _, b := range codegen.BlockOffsets(g.Outer) {
		for r := range g.R {
			x, y := uint32(2*(b[0]+r*g.RStride)), uint32(2*(b[1]+r*g.YStride))
			if e := es[i]; e.from.Off != x || e.to.Off != y {
				t.Fatalf("element %d: gathers %d -> %d, want %d -> %d", i, x, y, e.from.Off, e.to.Off)
			}
			i++
		}
	}
}

// nestedRuns makes a random run list for the block tests: 1 to 4
// nested regular patterns (up to three levels, cut short by one run at
// random), each from one of bufs' first two buffers to the third, its
// runs of 1 to most elements of unit bytes, the destination from y on,
// past each run and a unit more at random. emit gets each run.
func nestedRuns(r *rand.Rand, bufs []*prog.Buffer, unit, most int, y uint32, emit func(from, to *prog.Buffer, x, y uint32, n int)) {
	u := uint32(unit)
	for range 1 + r.Intn(4) {
		from, to := bufs[r.Intn(2)], bufs[2]
		n := 1 + r.Intn(most)
		cnt := []int{1 + r.Intn(4), 1 + r.Intn(4), 1 + r.Intn(4)}
		dx := []int{r.Intn(3) * unit, r.Intn(40) * unit, r.Intn(200) * unit}
		cut := r.Intn(cnt[0] * cnt[1] * cnt[2] * 2)
		x0 := uint32(r.Intn(64)) * u
		for a := range cnt[2] {
			for b := range cnt[1] {
				for c := range cnt[0] {
					if cut--; cut == 0 {
						continue
					}
					emit(from, to, x0+uint32(a*dx[2]+b*dx[1]+c*dx[0]), y, n)
					y += uint32(n)*u + u*uint32(r.Intn(2))
				}
			}
		}
	}
}

// TestCopyBlocksRandom: random run lists (nested regular patterns cut
// short, runs of several lengths, two buffers) become kernels that copy
// exactly their words.
func TestCopyBlocksRandom(t *testing.T) {
	r := rand.New(rand.NewSource(5))
	bufs := []*prog.Buffer{{ID: 1}, {ID: 2}, {ID: 3}}
	for i := range 200 {
		var ls []localRun
		nestedRuns(r, bufs, 4, 3, 0, func(from, to *prog.Buffer, x, y uint32, n int) {
			ls = append(ls, localRun{prog.Ref{Buf: from, Off: x}, prog.Ref{Buf: to, Off: y}, 4 * n})
		})
		t.Run(fmt.Sprint(i), func(t *testing.T) { checkCopies(t, ls) })
	}
}

// TestGatherBlocksRandom: random runs of 2-byte elements (nested
// patterns cut short, odd lengths and offsets) become Gathers that copy
// exactly their elements, blocks only from word starts of Y.
func TestGatherBlocksRandom(t *testing.T) {
	r := rand.New(rand.NewSource(9))
	bufs := []*prog.Buffer{{ID: 1}, {ID: 2}, {ID: 3}}
	type move struct {
		from, to *prog.Buffer
		x, y     uint32
	}
	for i := range 200 {
		var es []elemRun
		var want []move
		nestedRuns(r, bufs, 2, 4, uint32(2*r.Intn(3)), func(from, to *prog.Buffer, x, y uint32, n int) {
			es = append(es, elemRun{prog.Ref{Buf: from, Off: x}, prog.Ref{Buf: to, Off: y}, n, -1})
			for e := range n {
				want = append(want, move{from, to, x + uint32(2*e), y + uint32(2*e)})
			}
		})
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			m := newMoves()
			gatherKernels(m, "gather", 2, map[int][]elemRun{4: es})
			var got []move
			for _, k := range m.copies[4] {
				g := k.Params.(*codegen.Gather)
				if _, err := g.Cost(); err != nil {
					t.Fatalf("%+v: %v", *g, err)
				}
				from, to := k.Fixes[0].Ref, k.Fixes[1].Ref
				if (g.Outer[0].N > 1 || g.Outer[1].N > 1) && to.Off%4 != 0 {
					t.Fatalf("%+v: blocks from Y offset %d, not whole words", *g, to.Off)
				}
				for _, b := range codegen.BlockOffsets(g.Outer) {
					for r := range g.R {
						for c := range g.C {
							got = append(got, move{from.Buf, to.Buf, from.Off + uint32(2*(b[0]+r*g.RStride+c*g.CStride)), to.Off + uint32(2*(b[1]+r*g.YStride+c))})
						}
					}
				}
			}
			key := func(a, b move) int {
				if a.from != b.from {
					return a.from.ID - b.from.ID
				}
				if a.y != b.y {
					return int(a.y) - int(b.y)
				}
				return int(a.x) - int(b.x)
			}
			slices.SortFunc(got, key)
			slices.SortFunc(want, key)
			if !slices.Equal(got, want) {
				t.Fatalf("kernels gather %d elements, not the runs' %d (or other ones)", len(got), len(want))
			}
		})
	}
}
