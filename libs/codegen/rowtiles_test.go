package codegen

import (
	"fmt"
	"strings"
	"testing"
)

// tileSeq returns the launches of p's rows spread over tiles of width
// columns (each tile's pieces at its columns of p's arrays), in the order
// the tiles run them: every tile's launch 1, then 2, then 3.
func tileSeq(t *testing.T, p Rows, width int) []Rows {
	t.Helper()
	L := TileChunkLen(p, width)
	if L == 0 {
		t.Fatalf("no chunk length for tiles of %d columns", width)
	}
	var seqs [][]Rows
	vs := 4
	if p.ScaleF16 {
		vs = 2
	}
	for c0 := 0; c0 < p.C; c0 += width {
		q := p
		q.X += uint32(int(p.xSize()) * c0)
		q.Y += uint32(int(p.ySize()) * c0)
		if p.Scale != 0 {
			q.Scale += uint32(vs * c0)
		}
		if p.Bias != 0 {
			q.Bias += uint32(vs * c0)
		}
		seq, bytes, err := TileSplit(q, L, c0, min(width, p.C-c0), scratchOf(p))
		if err != nil {
			t.Fatal(err)
		}
		if bytes != seq[0].ScratchBytes() {
			t.Errorf("TileSplit gave %d scratch bytes, its launches use %d", bytes, seq[0].ScratchBytes())
		}
		seqs = append(seqs, seq)
	}
	var out []Rows
	for l := range seqs[0] {
		for _, s := range seqs {
			out = append(out, s[l])
		}
	}
	return out
}

// TestTileSplit runs rows spread over tiles on one simulated tile (each
// "tile" its columns of the same arrays, the scratch shared, as the
// exchange leaves it): Y, Mean and InvStdDev as EmulateRowBytes says of
// the whole rows, the cycles those of the launches' costs.
func TestTileSplit(t *testing.T) {
	tl := newTile()
	cases := []rowsCase{
		{op: LayerNorm, in: true, out: true, scale: true, bias: true, sf16: true},
		{op: LayerNorm, scale: true, bias: true, mean: true, inv: true},
		{op: LayerNorm, in: true, out: true, bias: true, sf16: true, inv: true},
		{op: Softmax, in: true, out: true},
		{op: Softmax},
		{op: LogSoftmax, in: true},
	}
	n := 0
	for ci, rc := range cases {
		for _, r := range []int{1, 3, 7} {
			for _, cw := range [][2]int{{768, 96}, {768, 192}, {130, 48}, {200, 64}, {9, 4}} {
				rc.r, rc.c = r, cw[0]
				n++
				rc.quad = n%2 == 0 // partials four at a time
				t.Run(fmt.Sprintf("%s/w%d", rc, cw[1]), func(t *testing.T) {
					p := rc.rows()
					seq := tileSeq(t, p, cw[1])
					d := rc.data(p, int64(1000*ci+10*r+n))
					tl.runSplit(t, seq, d, n%Slots)
				})
			}
		}
	}
}

func TestTileSplitErrors(t *testing.T) {
	p := Rows{Op: LayerNorm, R: 2, C: 100, X: 0x80000, XStride: 52, Y: 0x90000, YStride: 52, Workers: 6, InF16: true, OutF16: true}
	for _, c := range []struct {
		p        Rows
		L, c0, n int
		want     string
	}{
		{p, 6, 0, 48, "chunks of a multiple of 4"},
		{p, 8, 4, 48, "want chunks"},
		{p, 8, 0, 44, "want chunks"},
		{p, 8, 96, 8, "want chunks"},
		{p, 128, 0, 100, "two chunks or more"},
		{p, 8, 0, 56, "row strides"},
		{func() Rows { q := p; q.Op = ReduceSum; return q }(), 8, 0, 48, "not spread over tiles"},
	} {
		if _, _, err := TileSplit(c.p, c.L, c.c0, c.n, 0x70000); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("TileSplit(L %d, [%d, +%d)) = %v, want an error containing %q", c.L, c.c0, c.n, err, c.want)
		}
	}
	seq, _, err := TileSplit(p, 8, 48, 48, 0x70000)
	if err != nil {
		t.Fatal(err)
	}
	got, err := seq[1].TilePartials()
	if err != nil {
		t.Fatal(err)
	}
	// 13 chunks, this tile's 6..11: launch 2's partials after launch 1's 2*13 words.
	if want := [][2]uint32{{4 * (26 + 6), 4 * (26 + 12)}, {4 * (26 + 13 + 6), 4 * (26 + 13 + 12)}}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("TilePartials = %v, want %v", got, want)
	}
	if _, err := seq[2].TilePartials(); err == nil {
		t.Error("TilePartials of launch 3 gave no error")
	}
}
