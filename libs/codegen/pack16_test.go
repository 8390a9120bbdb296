package codegen

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"ipu.local/libs/numfmt"
)

// TestPack16 runs Pack from FP16 input on the simulator: results
// bit-exact with EmulatePackBytes, the bytes around the panel untouched,
// cycles equal to Cost.
func TestPack16(t *testing.T) {
	const xAddr, yAddr = 0x60000, 0xC0000
	e4 := FP8Config{FormatA: numfmt.E4M3FN}
	e5nan := FP8Config{FormatA: numfmt.E5M2, NaNOnOverflow: true}
	uz := FP8Config{FormatA: numfmt.E4M3FNUZ, ScaleA: -3}
	cases := []Pack{
		// A panel: lanes along X's rows.
		{Kind: APanel, R: 8, C: 16, XStride: 16, KP: 16, Out: AMPFP16, Workers: 6},
		{Kind: APanel, R: 7, C: 13, XStride: 14, KP: 15, Out: AMPFP32, Workers: 2},
		{Kind: APanel, R: 5, C: 9, XStride: 12, KP: 10, Out: AMPFP8, FP8: e4, Workers: 3},
		{Kind: APanel, R: 6, C: 5, XStride: 8194, KP: 6, Out: AMPFP16, Workers: 2},
		{Kind: APanel, R: 3, C: 1, XStride: 2, KP: 2, Out: AMPFP8, FP8: uz, Workers: 6},
		{Kind: APanel, R: 32, C: 130, XStride: 130, KP: 130, Out: AMPFP16, Workers: 6},
		// A panel of X^T: lanes along X's columns.
		{Kind: APanel, Transpose: true, R: 9, C: 6, XStride: 8, KP: 10, Out: AMPFP8, FP8: e5nan, Workers: 6},
		{Kind: APanel, Transpose: true, R: 16, C: 8, XStride: 8, KP: 16, Out: AMPFP32, Workers: 4},
		{Kind: APanel, Transpose: true, R: 3, C: 5, XStride: 8, KP: 4, Out: AMPFP16, Workers: 1},
		{Kind: APanel, Transpose: true, R: 13, C: 15, XStride: 16, KP: 13, Out: AMPFP16, Workers: 5},
		{Kind: APanel, Transpose: true, R: 5, C: 7, XStride: 16400, KP: 6, Out: AMPFP32, Workers: 2},
		// B panel: lanes along X's columns.
		{Kind: BPanel, R: 10, C: 32, XStride: 32, KP: 10, Out: AMPFP16, Workers: 6},
		{Kind: BPanel, R: 9, C: 21, XStride: 24, KP: 12, Out: AMPFP32, Workers: 2},
		{Kind: BPanel, R: 6, C: 19, XStride: 20, KP: 6, Out: AMPFP8, FP8: e4, Workers: 6},
		{Kind: BPanel, R: 4, C: 45, XStride: 48, KP: 4, Out: AMPFP8, FP8: uz, Workers: 3},
		{Kind: BPanel, R: 5, C: 13, XStride: 16400, KP: 7, Out: AMPFP16, Workers: 2},
		{Kind: BPanel, R: 3, C: 2, XStride: 4, KP: 3, Out: AMPFP32, Workers: 1},
		// B panel of X^T: lanes along X's rows.
		{Kind: BPanel, Transpose: true, R: 20, C: 7, XStride: 8, KP: 8, Out: AMPFP16, Workers: 5},
		{Kind: BPanel, Transpose: true, R: 33, C: 4, XStride: 4, KP: 4, Out: AMPFP32, Workers: 6},
		{Kind: BPanel, Transpose: true, R: 16, C: 5, XStride: 6, KP: 6, Out: AMPFP8, FP8: e5nan, Workers: 2},
		{Kind: BPanel, Transpose: true, R: 37, C: 9, XStride: 10, KP: 10, Out: AMPFP8, FP8: uz, Workers: 4},
		{Kind: BPanel, Transpose: true, R: 21, C: 3, XStride: 3002, KP: 5, Out: AMPFP32, Workers: 2},
		{Kind: BPanel, Transpose: true, R: 18, C: 2, XStride: 700, KP: 2, Out: AMPFP16, Workers: 3},
		{Kind: BPanel, Transpose: true, R: 3, C: 1, XStride: 2, KP: 1, Out: AMPFP16, Workers: 1},
		// Counts past rpti: the k loop, the padding.
		{Kind: APanel, R: 3, C: 8200, XStride: 8200, KP: 8202, Out: AMPFP16, Workers: 1},
		{Kind: APanel, Transpose: true, R: 4100, C: 3, XStride: 4, KP: 4100, Out: AMPFP8, FP8: e4, Workers: 1},
		{Kind: BPanel, R: 2, C: 16, XStride: 16, KP: 4100, Out: AMPFP16, Workers: 1},
	}
	tl := newTile()
	for ci, p := range cases {
		p.X, p.Y, p.InF16 = xAddr, yAddr, true
		name := fmt.Sprintf("%s-t%v-%dx%d-s%d-kp%d-%v-w%d", p.Kind, p.Transpose, p.R, p.C, p.XStride, p.KP, p.Out, p.Workers)
		t.Run(name, func(t *testing.T) {
			r := rng(int64(ci))
			n := (p.R-1)*p.XStride + p.C
			x := rowBytes(r, n+1, true, -600, 600, true) // one more: the word of the last
			want := EmulatePackBytes(p, x)
			if len(want) != p.Bytes() || len(want) == 0 {
				t.Fatalf("EmulatePackBytes gave %d bytes, want Bytes() = %d", len(want), p.Bytes())
			}
			const guard = 16
			around := randBytes(r, p.Bytes()+2*guard)
			want = append(append(append([]byte(nil), around[:guard]...), want...), around[guard+p.Bytes():]...)
			phases := []int{ci % Slots}
			if ci%6 == 0 {
				phases = []int{0, 1, 2, 3, 4, 5}
			}
			for _, phase := range phases {
				tl.put(p.Y-guard, around)
				tl.put(p.X, x)
				k, cycles := tl.runKernel(t, phase, func(b *Builder) (Kernel, error) { return EmitPack(b, p) })
				if d := cmp.Diff(want, tl.get(p.Y-guard, len(want))); d != "" {
					t.Fatalf("phase %d: result mismatch (-want +got):\n%s", phase, d)
				}
				checkCycles(t, k, cycles, phase)
				if c, err := p.Cost(); err != nil || c.CyclesAt(phase) != cycles {
					t.Errorf("Cost() = %v, %v; measured %d", c.CyclesAt(phase), err, cycles)
				}
			}
		})
	}
}

// TestPack16Copy checks that FP16 to FP16 packing copies bits: every
// FP16 pattern survives, signalling NaNs included.
func TestPack16Copy(t *testing.T) {
	for _, p := range []Pack{
		{Kind: APanel, R: 4, C: 16, XStride: 16, KP: 16, Out: AMPFP16, Workers: 1},
		{Kind: BPanel, R: 4, C: 16, XStride: 16, KP: 4, Out: AMPFP16, Workers: 1},
	} {
		p.InF16 = true
		x := make([]byte, 2*64)
		for i := 0; i < 64; i++ {
			binary.LittleEndian.PutUint16(x[2*i:], uint16(0x7C01+i*0x203))
		}
		got := EmulatePackBytes(p, x)
		var in, out []uint16
		for i := 0; i < 64; i++ {
			in = append(in, binary.LittleEndian.Uint16(x[2*i:]))
			out = append(out, binary.LittleEndian.Uint16(got[2*i:]))
		}
		if d := cmp.Diff(sortedU16(in), sortedU16(out)); d != "" {
			t.Errorf("%s: values mismatch (-x +panel):\n%s", p.Kind, d)
		}
	}
}

func sortedU16(v []uint16) []uint16 {
	out := slices.Clone(v)
	slices.Sort(out)
	return out
}

// TestPack16Rate checks the FP16 issue rates of Pack's doc from Cost.
func TestPack16Rate(t *testing.T) {
	outs := []AMPType{AMPFP16, AMPFP32, AMPFP8}
	cases := []struct {
		kind      PanelKind
		transpose bool
		want      [3]float64 // per output type, as outs
	}{
		{APanel, false, [3]float64{6, 8, 11}},
		{BPanel, true, [3]float64{6, 8, 11}},
		{APanel, true, [3]float64{2, 5, 3}},
		{BPanel, false, [3]float64{2, 5, 3}},
	}
	for _, c := range cases {
		for oi, out := range outs {
			t.Run(fmt.Sprintf("%s-t%v-%v", c.kind, c.transpose, out), func(t *testing.T) {
				w := 4
				if c.kind == BPanel {
					w = 16
				}
				work := func(k int) int64 {
					p := Pack{Kind: c.kind, Transpose: c.transpose, R: w, C: k, XStride: k, KP: k, Out: out, Workers: 1, InF16: true}
					if c.kind == BPanel != c.transpose {
						p.R, p.C, p.XStride = k, w, w
					}
					cost, err := p.Cost()
					if err != nil {
						t.Fatal(err)
					}
					return cost.Work[0]
				}
				got := float64(work(16)-work(12)) / 4 / Slots / float64(w/4)
				if d := cmp.Diff(c.want[oi], got); d != "" {
					t.Errorf("issues per 4 elements mismatch (-want +got):\n%s", d)
				}
			})
		}
	}
}

func TestPack16Errors(t *testing.T) {
	tl := newTile()
	cases := []struct {
		p    Pack
		want string
	}{
		{Pack{Kind: BPanel, R: 8, C: 20, XStride: 22, KP: 8, Out: AMPFP16, X: 0x60000, Y: 0x70000, Workers: 2},
			"row stride 22: want a multiple of 4"},
		{Pack{Kind: APanel, R: 8, C: 9, XStride: 9, KP: 10, Out: AMPFP16, X: 0x60000, Y: 0x70000, Workers: 2},
			"row stride 9: want an even stride (FP16"},
		{Pack{Kind: BPanel, R: 8, C: 20, XStride: 20, KP: 8, Out: AMPFP16, X: 0x60004, Y: 0x70000, Workers: 2},
			"X at 0x60004 is not 8-byte aligned"},
		{Pack{Kind: APanel, R: 8, C: 9, XStride: 10, KP: 10, Out: AMPFP16, X: 0x60002, Y: 0x70000, Workers: 2},
			"X at 0x60002 is not 4-byte aligned"},
		{Pack{Kind: APanel, R: 8, C: 9, XStride: 10, KP: 10, Out: AMPFP16, X: 0x60000, Y: 0x60080, Workers: 2},
			"overlap"},
	}
	for i, c := range cases {
		c.p.InF16 = true
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			_, err := EmitPack(NewBuilder(tl.p, codeBase), c.p)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one with %q", err, c.want)
			}
		})
	}
	ok := Pack{Kind: APanel, R: 8, C: 9, XStride: 10, KP: 10, Out: AMPFP16, X: 0x60004, Y: 0x70000, Workers: 2, InF16: true}
	if _, err := EmitPack(NewBuilder(tl.p, codeBase), ok); err != nil {
		t.Errorf("4-byte aligned X, lanes along its rows: %v", err)
	}
	if out := EmulatePack(ok, make([]float32, 100)); out != nil {
		t.Errorf("EmulatePack of FP16 input gave %d bytes, want nil", len(out))
	}
	if out := EmulatePackBytes(ok, make([]byte, 10)); out != nil {
		t.Errorf("short input: EmulatePackBytes gave %d bytes, want nil", len(out))
	}
}
