package codegen

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"ipu.local/libs/numfmt"
)

// packInputs are special values mixed into the random inputs: NaN, Inf,
// signed zeros, FP16 and FP8 overflow (and the onnxruntime edges of
// E4M3FN and E5M2), tiny values.
var packInputs = []float32{
	float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.Copysign(0, -1)),
	70000, -1e6, 470, -490, 500, 60000, -63000, 65520, 1e-30, -3e-8, 448, 240,
}

// TestPack runs Pack on the simulator at every launch phase: results
// bit-exact with EmulatePack, the bytes around the panel untouched,
// cycles equal to Cost.
func TestPack(t *testing.T) {
	const xAddr, yAddr = 0x60000, 0xC0000
	e4 := FP8Config{FormatA: numfmt.E4M3FN}
	e4nan := FP8Config{FormatA: numfmt.E4M3FN, NaNOnOverflow: true}
	e5 := FP8Config{FormatA: numfmt.E5M2, ScaleA: 1}
	e5nan := FP8Config{FormatA: numfmt.E5M2, NaNOnOverflow: true}
	uz := FP8Config{FormatA: numfmt.E4M3FNUZ, ScaleA: -3}
	uz5 := FP8Config{FormatA: numfmt.E5M2FNUZ, ScaleA: 2, NaNOnOverflow: true}
	cases := []Pack{
		// A panel: lanes along X's rows.
		{Kind: APanel, R: 8, C: 16, XStride: 16, KP: 16, Out: AMPFP32, Workers: 6},
		{Kind: APanel, R: 7, C: 13, XStride: 13, KP: 15, Out: AMPFP32, Workers: 2},
		{Kind: APanel, R: 12, C: 10, XStride: 10, KP: 10, Out: AMPFP16, Workers: 6},
		{Kind: APanel, R: 5, C: 9, XStride: 12, KP: 10, Out: AMPFP8, FP8: e4, Workers: 3},
		{Kind: APanel, R: 9, C: 7, XStride: 7, KP: 8, Out: AMPFP8, FP8: uz, Workers: 4},
		{Kind: APanel, R: 3, C: 11, XStride: 11, KP: 12, Out: AMPFP16, Workers: 6},
		{Kind: APanel, R: 32, C: 300, XStride: 300, KP: 300, Out: AMPFP16, Workers: 6},
		{Kind: APanel, R: 6, C: 5, XStride: 8193, KP: 6, Out: AMPFP8, FP8: e5nan, Workers: 2},
		// A panel of X^T: lanes along X's columns.
		{Kind: APanel, Transpose: true, R: 9, C: 6, XStride: 6, KP: 10, Out: AMPFP8, FP8: e4nan, Workers: 6},
		{Kind: APanel, Transpose: true, R: 16, C: 8, XStride: 8, KP: 16, Out: AMPFP32, Workers: 4},
		{Kind: APanel, Transpose: true, R: 3, C: 5, XStride: 6, KP: 4, Out: AMPFP16, Workers: 1},
		{Kind: APanel, Transpose: true, R: 13, C: 14, XStride: 14, KP: 13, Out: AMPFP16, Workers: 5},
		{Kind: APanel, Transpose: true, R: 5, C: 6, XStride: 8200, KP: 6, Out: AMPFP32, Workers: 2},
		{Kind: APanel, Transpose: true, R: 7, C: 7, XStride: 8, KP: 8, Out: AMPFP8, FP8: uz5, Workers: 2},
		// B panel: lanes along X's columns.
		{Kind: BPanel, R: 10, C: 32, XStride: 32, KP: 10, Out: AMPFP16, Workers: 6},
		{Kind: BPanel, R: 9, C: 21, XStride: 22, KP: 12, Out: AMPFP32, Workers: 2},
		{Kind: BPanel, R: 6, C: 19, XStride: 20, KP: 6, Out: AMPFP8, FP8: e5, Workers: 6},
		{Kind: BPanel, R: 4, C: 45, XStride: 46, KP: 4, Out: AMPFP8, FP8: e4nan, Workers: 3},
		{Kind: BPanel, R: 64, C: 48, XStride: 48, KP: 64, Out: AMPFP8, FP8: e4, Workers: 6},
		{Kind: BPanel, R: 5, C: 20, XStride: 8200, KP: 7, Out: AMPFP16, Workers: 2},
		{Kind: BPanel, R: 3, C: 7, XStride: 8, KP: 3, Out: AMPFP32, Workers: 1},
		// B panel of X^T: lanes along X's rows.
		{Kind: BPanel, Transpose: true, R: 20, C: 7, XStride: 7, KP: 8, Out: AMPFP16, Workers: 5},
		{Kind: BPanel, Transpose: true, R: 33, C: 4, XStride: 4, KP: 4, Out: AMPFP32, Workers: 6},
		{Kind: BPanel, Transpose: true, R: 16, C: 5, XStride: 6, KP: 6, Out: AMPFP8, FP8: e5nan, Workers: 2},
		{Kind: BPanel, Transpose: true, R: 37, C: 9, XStride: 9, KP: 10, Out: AMPFP8, FP8: uz, Workers: 4},
		{Kind: BPanel, Transpose: true, R: 20, C: 3, XStride: 3001, KP: 5, Out: AMPFP32, Workers: 2},
		{Kind: BPanel, Transpose: true, R: 18, C: 2, XStride: 700, KP: 2, Out: AMPFP16, Workers: 3},
		// Counts past rpti: the k loop, the padding.
		{Kind: APanel, R: 3, C: 4100, XStride: 4100, KP: 4102, Out: AMPFP16, Workers: 1},
		{Kind: BPanel, R: 2, C: 16, XStride: 16, KP: 4100, Out: AMPFP8, FP8: e4, Workers: 1},
	}
	r := rng(7)
	tl := newTile()
	for ci, p := range cases {
		p.X, p.Y = xAddr, yAddr
		name := fmt.Sprintf("%s-t%v-%dx%d-s%d-kp%d-%v-w%d", p.Kind, p.Transpose, p.R, p.C, p.XStride, p.KP, p.Out, p.Workers)
		t.Run(name, func(t *testing.T) {
			x := randF32(r, (p.R-1)*p.XStride+p.C, -600, 600)
			for i := ci % 5; i < len(x); i += 5 {
				x[i] = packInputs[(i/5)%len(packInputs)]
			}
			want := EmulatePack(p, x)
			if len(want) != p.Bytes() || len(want) == 0 {
				t.Fatalf("EmulatePack gave %d bytes, want Bytes() = %d", len(want), p.Bytes())
			}
			const guard = 16
			around := make([]byte, p.Bytes()+2*guard)
			for i := range around {
				around[i] = 0xA5
			}
			want = append(append(around[:guard:guard], want...), around[guard+p.Bytes():]...)
			for phase := 0; phase < Slots; phase++ {
				tl.put(p.Y-guard, around)
				tl.putF32(p.X, x)
				k, cycles := tl.runKernel(t, phase, func(b *Builder) (Kernel, error) { return EmitPack(b, p) })
				got := tl.get(p.Y-guard, len(want))
				if d := cmp.Diff(want, got); d != "" {
					t.Fatalf("phase %d: result mismatch (-want +got):\n%s", phase, d)
				}
				checkCycles(t, k, cycles, phase)
			}
		})
	}
}

// TestPackFormulas checks EmulatePack against MatMul's panel indexes.
func TestPackFormulas(t *testing.T) {
	cases := []Pack{
		{Kind: APanel, R: 7, C: 5, XStride: 6, KP: 6},
		{Kind: APanel, Transpose: true, R: 5, C: 6, XStride: 6, KP: 7},
		{Kind: BPanel, R: 3, C: 20, XStride: 22, KP: 4},
		{Kind: BPanel, Transpose: true, R: 20, C: 3, XStride: 4, KP: 5},
	}
	for _, p := range cases {
		p.Out, p.Workers = AMPFP32, 1
		t.Run(fmt.Sprintf("%s-t%v", p.Kind, p.Transpose), func(t *testing.T) {
			x := make([]float32, p.R*p.XStride)
			for i := range x {
				x[i] = float32(i + 1)
			}
			rows, cols := p.R, p.C // the operand
			at := func(i, j int) float32 { return x[i*p.XStride+j] }
			if p.Transpose {
				rows, cols = cols, rows
				at = func(i, j int) float32 { return x[j*p.XStride+i] }
			}
			want := make([]float32, p.Bytes()/4)
			for i := 0; i < rows; i++ {
				for j := 0; j < cols; j++ {
					if p.Kind == APanel {
						want[APanelIndex(i, j, p.KP)] = at(i, j)
					} else {
						want[BPanelIndex(i, j, p.KP)] = at(i, j)
					}
				}
			}
			out := EmulatePack(p, x)
			got := make([]float32, len(out)/4)
			for i := range got {
				got[i] = math.Float32frombits(uint32(out[4*i]) | uint32(out[4*i+1])<<8 | uint32(out[4*i+2])<<16 | uint32(out[4*i+3])<<24)
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Fatalf("panel mismatch (-want +got):\n%s", d)
			}
		})
	}
}

// TestPackRate checks the issues per 4 elements of the k loops (the
// figures in Pack's doc) from Cost: the change of one group's cost per k.
func TestPackRate(t *testing.T) {
	outs := []AMPType{AMPFP32, AMPFP16, AMPFP8}
	cases := []struct {
		kind      PanelKind
		transpose bool
		want      [3]float64 // per output type, as outs
	}{
		{APanel, false, [3]float64{6, 7, 7}},
		{BPanel, true, [3]float64{6, 7, 7}},
		{APanel, true, [3]float64{4, 5, 5}},
		{BPanel, false, [3]float64{4.25, 5.25, 5.25}},
	}
	for _, c := range cases {
		for oi, out := range outs {
			t.Run(fmt.Sprintf("%s-t%v-%v", c.kind, c.transpose, out), func(t *testing.T) {
				w := 4
				if c.kind == BPanel {
					w = 16
				}
				work := func(k int) int64 {
					p := Pack{Kind: c.kind, Transpose: c.transpose, R: w, C: k, XStride: k, KP: k, Out: out, Workers: 1}
					if c.kind == BPanel != c.transpose {
						p.R, p.C, p.XStride = k, w, w
					}
					cost, err := p.Cost()
					if err != nil {
						t.Fatal(err)
					}
					return cost.Work[0]
				}
				got := float64(work(12)-work(10)) / 2 / Slots / float64(w/4)
				if d := cmp.Diff(c.want[oi], got); d != "" {
					t.Errorf("issues per 4 elements mismatch (-want +got):\n%s", d)
				}
			})
		}
	}
}

// TestPackErrors checks the rejected parameters and addresses.
func TestPackErrors(t *testing.T) {
	ok := Pack{Kind: BPanel, R: 8, C: 20, X: 0x60000, XStride: 20, Y: 0x70000, KP: 8, Out: AMPFP16, Workers: 6}
	cases := []struct {
		name string
		edit func(p *Pack)
		want string
	}{
		{"workers", func(p *Pack) { p.Workers = 0 }, "workers 0 out of range"},
		{"kind", func(p *Pack) { p.Kind = 2 }, "unknown panel kind 2"},
		{"out", func(p *Pack) { p.Out = 7 }, "unknown output type 7"},
		{"rows", func(p *Pack) { p.R = 0 }, "want positive sizes"},
		{"stride", func(p *Pack) { p.XStride = 19 }, "a stride of at least C"},
		{"big", func(p *Pack) { p.R, p.XStride, p.C = 4096, 300, 300 }, "does not fit a tile"},
		{"huge", func(p *Pack) { p.R, p.XStride, p.C = 1<<40, 1<<40, 20 }, "does not fit a tile"},
		{"huge-kp", func(p *Pack) { p.KP = 1 << 62 }, "does not fit a tile"},
		{"kp", func(p *Pack) { p.KP = 7 }, "k extent 7: want at least 8"},
		{"kp-fp8", func(p *Pack) { p.KP, p.Out = 9, AMPFP8 }, "k extent 9: want at least 8 (FP8: even)"},
		{"odd-stride", func(p *Pack) { p.XStride = 21 }, "row stride 21: want an even stride"},
		{"fp8-format", func(p *Pack) { p.Out, p.FP8.FormatA = AMPFP8, 9 }, "fp8 formats 9"},
		{"fp8-scale", func(p *Pack) { p.Out, p.FP8.ScaleA = AMPFP8, 99 }, "fp8 scale 99 out of range"},
		{"x-align", func(p *Pack) { p.X += 4 }, "X at 0x60004 is not 8-byte aligned"},
		{"y-align", func(p *Pack) { p.Y += 2 }, "Y at 0x70002 is not 8-byte aligned"},
		{"y-outside", func(p *Pack) { p.Y = 0xE7F00 }, "is outside tile memory"},
		{"overlap", func(p *Pack) { p.Y = 0x60100 }, "overlap"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := ok
			c.edit(&p)
			_, err := EmitPack(NewBuilder(newTile().p, codeBase), p)
			if err == nil || !strings.HasPrefix(err.Error(), "pack: ") || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one with %q", err, c.want)
			}
		})
	}
	if _, err := EmitPack(NewBuilder(newTile().p, codeBase), ok); err != nil {
		t.Fatalf("valid pack: %v", err)
	}
	bad := ok
	bad.KP = 1
	if n, out := bad.Bytes(), EmulatePack(bad, make([]float32, 200)); n != 0 || out != nil {
		t.Errorf("invalid pack: Bytes %d, EmulatePack %d bytes; want 0 and nil", n, len(out))
	}
	if out := EmulatePack(ok, make([]float32, 7*20+19)); out != nil {
		t.Errorf("short input: EmulatePack gave %d bytes, want nil", len(out))
	}
}

// TestPackWordAlignedX packs from an X that is only 4-byte aligned, as
// the linker does for a sub-rectangle starting at an odd column, with
// the lanes along X's rows (ld32 loads only).
func TestPackWordAlignedX(t *testing.T) {
	tl := newTile()
	for _, p := range []Pack{
		{Kind: APanel, R: 6, C: 7, XStride: 9, KP: 8, Out: AMPFP16, Workers: 6, X: 0x80004, Y: 0xA0000},
		{Kind: BPanel, Transpose: true, R: 20, C: 3, XStride: 5, KP: 4, Out: AMPFP8, FP8: FP8Config{FormatA: numfmt.E4M3FN}, Workers: 2, X: 0x80014, Y: 0xA0000},
	} {
		x := randF32(rng(3), p.R*p.XStride, -100, 100)
		tl.putF32(p.X, x)
		k, cycles := tl.runKernel(t, 0, func(b *Builder) (Kernel, error) { return EmitPack(b, p) })
		if d := cmp.Diff(EmulatePack(p, x), tl.get(p.Y, p.Bytes())); d != "" {
			t.Fatalf("%+v: mismatch (-want +got):\n%s", p, d)
		}
		checkCycles(t, k, cycles, 0)
	}
	p := Pack{Kind: BPanel, R: 4, C: 16, XStride: 16, KP: 4, Out: AMPFP32, Workers: 1, X: 0x80004, Y: 0xA0000}
	if _, err := EmitPack(NewBuilder(tl.p, codeBase), p); err == nil {
		t.Error("a B panel (lanes along X's columns) from a 4-byte aligned X was accepted")
	}
}
