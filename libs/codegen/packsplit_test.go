package codegen

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/google/go-cmp/cmp"

	"ipu.local/libs/numfmt"
)

// Addresses of the split tests: room for about 300 KB of X and of Y.
const (
	splitX = 0x54000
	splitY = 0xA0000
)

var splitFP8 = []FP8Config{
	{FormatA: numfmt.E4M3FN},
	{FormatA: numfmt.E5M2, ScaleA: 1, NaNOnOverflow: true},
	{FormatA: numfmt.E4M3FNUZ, ScaleA: -3},
	{FormatA: numfmt.E5M2FNUZ, ScaleA: 2, NaNOnOverflow: true},
}

// packRows reports whether p's group lanes run along X's rows.
func packRows(p Pack) bool { return (p.Kind == APanel) != p.Transpose }

// packLanes returns the lanes of p's groups.
func packLanes(p Pack) int {
	if p.Kind == BPanel {
		return 16
	}
	return 4
}

// setPackShape sets p's R, C and a valid XStride (extra more than the
// row, rounded up to the alignment X's reads need) for g lanes and k
// extent kx.
func setPackShape(p *Pack, g, kx, extra int) {
	p.R, p.C = kx, g
	if packRows(*p) {
		p.R, p.C = g, kx
	}
	m := 1
	switch {
	case p.InF16 && !packRows(*p):
		m = 4
	case p.InF16 || !packRows(*p):
		m = 2
	}
	p.XStride = (p.C + extra + m - 1) / m * m
}

// runPackCase runs p on the simulator at each phase: the panel bit-exact
// with EmulatePackBytes, the bytes around it and X untouched, cycles
// equal to Cost.
func runPackCase(t *testing.T, tl *tile, r *rand.Rand, p Pack, phases []int) {
	t.Helper()
	n := (p.R-1)*p.XStride + p.C
	x := rowBytes(r, n+1, p.InF16, -600, 600, true) // one more: the word of the last
	if !p.InF16 {
		for i := r.Intn(5); i < n; i += 5 {
			binary.LittleEndian.PutUint32(x[4*i:], math.Float32bits(packInputs[r.Intn(len(packInputs))]))
		}
	}
	want := EmulatePackBytes(p, x)
	if len(want) != p.Bytes() || len(want) == 0 {
		t.Fatalf("EmulatePackBytes gave %d bytes, want Bytes() = %d", len(want), p.Bytes())
	}
	const guard = 24
	around := randBytes(r, p.Bytes()+2*guard)
	want = append(append(append([]byte(nil), around[:guard]...), want...), around[guard+p.Bytes():]...)
	cost, err := p.Cost()
	if err != nil {
		t.Fatal(err)
	}
	for _, phase := range phases {
		tl.put(p.Y-guard, around)
		tl.put(p.X, x)
		k, cycles := tl.runKernel(t, phase, func(b *Builder) (Kernel, error) { return EmitPack(b, p) })
		// cmp.Diff only on a mismatch: it is slow on large panels.
		if got := tl.get(p.Y-guard, len(want)); !bytes.Equal(want, got) {
			t.Fatalf("phase %d: result mismatch (-want +got):\n%s", phase, cmp.Diff(want, got))
		}
		if !bytes.Equal(x, tl.get(p.X, len(x))) {
			t.Fatalf("phase %d: X changed", phase)
		}
		checkCycles(t, k, cycles, phase)
		if d := cmp.Diff(cost.CyclesAt(phase), cycles); d != "" {
			t.Fatalf("phase %d: Cost() cycles mismatch (-cost +measured):\n%s", phase, d)
		}
	}
}

func packName(p Pack) string {
	in := "f32"
	if p.InF16 {
		in = "f16"
	}
	return fmt.Sprintf("%s-t%v-%s-%v-%dx%d-s%d-kp%d-w%d", p.Kind, p.Transpose, in, p.Out, p.R, p.C, p.XStride, p.KP, p.Workers)
}

// splitCases returns TestPackSplit's packs: every panel kind, transpose,
// input and output type, with 1..5 groups (the last partial in a third of
// them) of k extents 1, 2, 3, 7, 64 and 768, KP past the extent in a
// quarter, Workers 6 in half of them and 1..5 in turn otherwise.
func splitCases() []Pack {
	var out []Pack
	i := 0
	for _, kind := range []PanelKind{APanel, BPanel} {
		for _, tr := range []bool{false, true} {
			for _, f16 := range []bool{false, true} {
				for _, o := range []AMPType{AMPFP32, AMPFP16, AMPFP8} {
					for groups := 1; groups <= 5; groups++ {
						for _, kx := range []int{1, 2, 3, 7, 64, 768} {
							i++
							p := Pack{Kind: kind, Transpose: tr, InF16: f16, Out: o, X: splitX, Y: splitY}
							if o == AMPFP8 {
								p.FP8 = splitFP8[i%len(splitFP8)]
							}
							w := packLanes(p)
							g := groups * w
							if i%3 == 0 {
								g -= 1 + i%(w-1) // 1..w-1 lanes in the last group
							}
							p.KP = kx
							if i%4 == 1 {
								p.KP += 1 + i%5
							}
							if o == AMPFP8 && p.KP%2 == 1 {
								p.KP++
							}
							p.Workers = 6
							if i%2 == 1 {
								p.Workers = 1 + (i/2)%5
							}
							setPackShape(&p, g, kx, i%5)
							if packRows(p) && i%7 == 0 {
								p.X += 4 // ld32 loads only: 4-byte aligned X
							}
							out = append(out, p)
						}
					}
				}
			}
		}
	}
	// Row strides past an imm16 in bytes (the stride in a register).
	e4 := FP8Config{FormatA: numfmt.E4M3FN}
	for _, p := range []Pack{
		{Kind: APanel, R: 4, C: 300, XStride: 9000, KP: 300, Out: AMPFP16},
		{Kind: BPanel, Transpose: true, R: 6, C: 101, XStride: 8200, KP: 102, Out: AMPFP8, FP8: e4},
		{Kind: APanel, R: 3, C: 201, XStride: 16400, KP: 202, Out: AMPFP32, InF16: true},
		{Kind: BPanel, Transpose: true, R: 5, C: 99, XStride: 16400, KP: 100, Out: AMPFP16, InF16: true},
		{Kind: BPanel, Transpose: true, R: 4, C: 99, XStride: 16400, KP: 100, Out: AMPFP8, FP8: e4, InF16: true},
		{Kind: APanel, Transpose: true, R: 8, C: 4, XStride: 8200, KP: 8, Out: AMPFP32},
		{Kind: BPanel, R: 7, C: 16, XStride: 16400, KP: 8, Out: AMPFP8, FP8: e4, InF16: true},
		{Kind: BPanel, R: 7, C: 13, XStride: 16400, KP: 7, Out: AMPFP32, InF16: true},
	} {
		p.X, p.Y, p.Workers = splitX, splitY, 6
		out = append(out, p)
	}
	return out
}

// TestPackSplit runs Pack on the simulator for few groups of short and
// long k extents (the split kernel's cases, and the whole-group kernel's
// where it wins), at one phase each and at every phase for one case in
// three.
func TestPackSplit(t *testing.T) {
	tl := newTile()
	var covered [6]int
	for ci, p := range splitCases() {
		if p.splitChoice() != nil {
			s := p.shape()
			for i, ok := range []bool{s.tails(), s.both(), s.full == 0, p.segAdv(s), !fitsImm16(s.sb), p.Out == AMPFP8} {
				if ok {
					covered[i]++
				}
			}
		}
		t.Run(packName(p), func(t *testing.T) {
			phases := []int{ci % Slots}
			if ci%3 == 0 {
				phases = []int{0, 1, 2, 3, 4, 5}
			}
			runPackCase(t, tl, rng(int64(ci)), p, phases)
		})
	}
	// Split kernels with an odd last k, both kinds of segment, only a
	// partial group, blocks of lanes, a stride register, FP8.
	for i, n := range covered {
		if n == 0 {
			t.Errorf("no split kernel with feature %d", i)
		}
	}
	t.Logf("split kernels with each feature: %v", covered)
}

// TestPackSplitRandom runs random shapes: R and C up to about 800, up to
// 40 groups (past the split kernel's 32), any workers.
func TestPackSplitRandom(t *testing.T) {
	tl := newTile()
	r := rng(11)
	for ci := 0; ci < 500; ci++ {
		p := Pack{Kind: PanelKind(r.Intn(2)), Transpose: r.Intn(2) == 1, InF16: r.Intn(2) == 1,
			Out: []AMPType{AMPFP32, AMPFP16, AMPFP8}[r.Intn(3)], Workers: 1 + r.Intn(6), X: splitX, Y: splitY}
		if p.Out == AMPFP8 {
			p.FP8 = splitFP8[r.Intn(len(splitFP8))]
		}
		w := packLanes(p)
		g := 1 + r.Intn(min(40*w, 800))
		kx := 1 + r.Intn(800)
		p.KP = kx + max(r.Intn(8)-4, 0)
		if p.Out == AMPFP8 && p.KP%2 == 1 {
			p.KP++
		}
		setPackShape(&p, g, kx, r.Intn(6))
		xBytes := (p.R*p.XStride + 2) * 4
		if !p.InF16 {
			xBytes *= 2
		}
		if xBytes > splitY-splitX || p.Bytes()+64 > 0xE8000-splitY {
			ci--
			continue
		}
		t.Run(packName(p), func(t *testing.T) {
			runPackCase(t, tl, rng(int64(100+ci)), p, []int{ci % Slots})
		})
	}
}

// TestPackSplitCuts checks the split kernel's plans: each group's k
// range [0, KP) covered once, in order, by segments cut at multiples of
// the granule; at most Workers ranges; a split only below the whole-group
// kernel's cycles less 1/32, with at most 32 groups; Cost as the plan
// says; the same code for the same Pack.
func TestPackSplitCuts(t *testing.T) {
	cases := splitCases()
	r := rng(5)
	for i := 0; i < 300; i++ {
		p := Pack{Kind: PanelKind(r.Intn(2)), Transpose: r.Intn(2) == 1, InF16: r.Intn(2) == 1,
			Out: []AMPType{AMPFP32, AMPFP16, AMPFP8}[r.Intn(3)], Workers: 1 + r.Intn(6), X: splitX, Y: splitY}
		kx := 1 + r.Intn(2000)
		p.KP = kx + r.Intn(3)
		if p.Out == AMPFP8 && p.KP%2 == 1 {
			p.KP++
		}
		setPackShape(&p, 1+r.Intn(50*packLanes(p)), kx, 0)
		if p.check() == nil {
			cases = append(cases, p)
		}
	}
	splits := 0
	for _, p := range cases {
		s := p.shape()
		split := p.splitChoice()
		whole := p.wholeCost(s)
		cost, err := p.Cost()
		if err != nil {
			t.Fatalf("%s: %v", packName(p), err)
		}
		if split == nil {
			if d := cmp.Diff(whole, cost); d != "" {
				t.Errorf("%s: whole-group cost mismatch (-want +got):\n%s", packName(p), d)
			}
			continue
		}
		splits++
		if s.groups > maxPackSplitGroups || p.Workers < 2 {
			t.Errorf("%s: split with %d groups, %d workers", packName(p), s.groups, p.Workers)
		}
		if c, w := cost.Cycles(), whole.Cycles(); c >= w-w/32 {
			t.Errorf("%s: split of %d cycles, whole-group kernel %d", packName(p), c, w)
		}
		if len(split.segs) > p.Workers || cost.Workers != len(split.segs) {
			t.Errorf("%s: %d ranges, cost of %d workers, %d allowed", packName(p), len(split.segs), cost.Workers, p.Workers)
		}
		q := p.granule(s)
		next := packSeg{}
		for _, segs := range split.segs {
			for _, sg := range segs {
				if sg.g != next.g || sg.k0 != next.k0 || sg.k1 <= sg.k0 || sg.k1 > p.KP || sg.k1 < p.KP && sg.k1%q != 0 {
					t.Fatalf("%s: segment %+v after %+v (granule %d)", packName(p), sg, next, q)
				}
				next = packSeg{g: sg.g, k0: sg.k1}
				if sg.k1 == p.KP {
					next = packSeg{g: sg.g + 1}
				}
			}
		}
		if next.g != s.groups || next.k0 != 0 {
			t.Errorf("%s: segments end at %+v, want group %d", packName(p), next, s.groups)
		}
		if d := cmp.Diff(p.splitter(s).cost(split.segs), cost); d != "" {
			t.Errorf("%s: cost mismatch (-plan +Cost):\n%s", packName(p), d)
		}
		if p.checkMemory(NewBuilder(newTile().p, codeBase)) == nil {
			a, b := emitPackCode(t, p), emitPackCode(t, p)
			if !bytes.Equal(a, b) {
				t.Errorf("%s: two emissions differ", packName(p))
			}
		}
	}
	if splits == 0 {
		t.Error("no split chosen")
	}
}

func emitPackCode(t *testing.T, p Pack) []byte {
	t.Helper()
	b := NewBuilder(newTile().p, codeBase)
	if _, err := EmitPack(b, p); err != nil {
		t.Fatalf("%s: %v", packName(p), err)
	}
	code, err := b.Finish()
	if err != nil {
		t.Fatalf("%s: %v", packName(p), err)
	}
	return code
}

// TestPackSplitGain measures the transformer-sized packs with FP16 input
// and output, 6 workers: the split kernel's cycles on the simulator
// against the whole-group kernel's Cost, and the gain Pack must reach.
func TestPackSplitGain(t *testing.T) {
	cases := []struct {
		name  string
		p     Pack
		ratio float64 // at most this fraction of the whole-group cycles
	}{
		{"A 4x768 lanes along rows", Pack{Kind: APanel, R: 4, C: 768, XStride: 768, KP: 768}, 0.18},
		{"A 4x768 lanes along columns", Pack{Kind: APanel, Transpose: true, R: 768, C: 4, XStride: 4, KP: 768}, 0.19},
		{"B 768x16", Pack{Kind: BPanel, R: 768, C: 16, XStride: 16, KP: 768}, 0.18},
		{"B 768x16 transposed", Pack{Kind: BPanel, Transpose: true, R: 16, C: 768, XStride: 768, KP: 768}, 0.18},
		{"A 8x768", Pack{Kind: APanel, R: 8, C: 768, XStride: 768, KP: 768}, 0.35},
		{"A 16x64", Pack{Kind: APanel, R: 16, C: 64, XStride: 64, KP: 64}, 0.75},
		{"B 64x16", Pack{Kind: BPanel, R: 64, C: 16, XStride: 16, KP: 64}, 0.25},
	}
	tl := newTile()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := c.p
			p.Out, p.InF16, p.Workers, p.X, p.Y = AMPFP16, true, 6, splitX, splitY
			whole := p.wholeCost(p.shape()).Cycles()
			k, cycles := tl.runKernel(t, 0, func(b *Builder) (Kernel, error) { return EmitPack(b, p) })
			checkCycles(t, k, cycles, 0)
			t.Logf("%s: %d cycles on %d workers (whole-group kernel %d)", c.name, cycles, k.Workers, whole)
			if float64(cycles) > c.ratio*float64(whole) {
				t.Errorf("%d cycles, want at most %.2f x %d", cycles, c.ratio, whole)
			}
		})
	}
}
