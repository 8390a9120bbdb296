package codegen

import (
	"fmt"
	"testing"

	"ipu.local/libs/numfmt"
)

// TestPackLanePadUnread runs FP8 A panels with a partial last group with
// LanePadUnread: every byte but the padded lanes' is what the clearing
// kernel writes (the k padding still zero), the code issues fewer
// instructions (Cost's work lower, none longer), and Cost is the simulated cycles.
func TestPackLanePadUnread(t *testing.T) {
	const xAddr, yAddr = 0x60000, 0xC0000
	e4 := FP8Config{FormatA: numfmt.E4M3FN}
	cases := []Pack{
		{Kind: APanel, R: 5, C: 9, XStride: 12, KP: 10, Out: AMPFP8, FP8: e4, Workers: 3},
		{Kind: APanel, R: 6, C: 24, XStride: 24, KP: 24, Out: AMPFP8, FP8: e4, Workers: 6},
		{Kind: APanel, R: 6, C: 24, XStride: 24, KP: 24, Out: AMPFP8, FP8: e4, Workers: 6, InF16: true},
		{Kind: APanel, Transpose: true, R: 9, C: 6, XStride: 6, KP: 10, Out: AMPFP8, FP8: e4, Workers: 6},
		{Kind: APanel, R: 3, C: 4100, XStride: 4100, KP: 4100, Out: AMPFP8, FP8: e4, Workers: 1},
	}
	tl := newTile()
	for ci, p := range cases {
		p.X, p.Y = xAddr, yAddr
		t.Run(fmt.Sprintf("t%v-%dx%d-kp%d-f16%v", p.Transpose, p.R, p.C, p.KP, p.InF16), func(t *testing.T) {
			r := rng(int64(ci))
			n := (p.R-1)*p.XStride + p.C
			var x []byte
			if p.InF16 {
				x = rowBytes(r, n+1, true, -600, 600, true)
			} else {
				x = rowBytes(r, n, false, -600, 600, true)
			}
			want := EmulatePackBytes(p, x)
			q := p
			q.LanePadUnread = true
			c, err := p.Cost()
			if err != nil {
				t.Fatal(err)
			}
			cq, err := q.Cost()
			if err != nil {
				t.Fatal(err)
			}
			sum := func(c Cost) (n int64) {
				for _, w := range c.Work {
					n += w
				}
				return n
			}
			if sum(cq) >= sum(c) || cq.Cycles() > c.Cycles() {
				t.Errorf("workers' issue cycles %v with LanePadUnread, %v clearing", cq.Work, c.Work)
			}
			lanes := q.R
			if q.Transpose {
				lanes = q.C
			}
			garbage := randBytes(r, q.Bytes())
			tl.put(q.Y, garbage)
			tl.put(q.X, x)
			k, cycles := tl.runKernel(t, ci%Slots, func(b *Builder) (Kernel, error) { return EmitPack(b, q) })
			checkCycles(t, k, cycles, ci%Slots)
			if cq.CyclesAt(ci%Slots) != cycles {
				t.Errorf("Cost %d, measured %d", cq.CyclesAt(ci%Slots), cycles)
			}
			got := tl.get(q.Y, q.Bytes())
			last := (lanes - 1) / 4 // the partial group
			for i, b := range got {
				g, lane := i/(4*q.KP), i%4
				if g == last && 4*g+lane >= lanes {
					continue // a padded lane: anything
				}
				if b != want[i] {
					t.Fatalf("byte %d (group %d, k %d, lane %d): %#x, want %#x", i, g, (i%(4*q.KP))/4, lane, b, want[i])
				}
			}
		})
	}
}
