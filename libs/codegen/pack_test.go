package codegen

import (
	"fmt"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"

	"ipu.local/libs/numfmt"
)

// TestPack runs Pack on the simulator: results bit-exact with
// EmulatePack (and with the panel formulas), padding zero, the bytes
// after the panel untouched, cycles equal to Cost at every launch phase.
func TestPack(t *testing.T) {
	const xAddr, yAddr = 0x80000, 0xA0000
	fp8 := FP8Config{FormatA: numfmt.E4M3FNUZ}
	fp8nan := FP8Config{FormatA: numfmt.E5M2, NaNOnOverflow: true}
	cases := []Pack{
		{Kind: APanel, R: 8, C: 16, XStride: 16, KP: 16, Out: VecFP32, Workers: 6},
		{Kind: APanel, R: 7, C: 13, XStride: 14, KP: 15, Out: VecFP32, Workers: 2},
		{Kind: APanel, R: 12, C: 10, XStride: 10, KP: 10, Out: AMPFP16, Workers: 6},
		{Kind: APanel, R: 5, C: 9, XStride: 12, KP: 10, Out: AMPFP8, FP8: fp8, Workers: 3},
		{Kind: APanel, Transpose: true, R: 9, C: 6, XStride: 6, KP: 10, Out: AMPFP8, FP8: fp8nan, Workers: 6},
		{Kind: APanel, Transpose: true, R: 16, C: 8, XStride: 8, KP: 16, Out: VecFP32, Workers: 4},
		{Kind: APanel, Transpose: true, R: 3, C: 5, XStride: 6, KP: 4, Out: AMPFP16, Workers: 1},
		{Kind: BPanel, R: 10, C: 32, XStride: 32, KP: 10, Out: AMPFP16, Workers: 6},
		{Kind: BPanel, R: 9, C: 21, XStride: 22, KP: 12, Out: VecFP32, Workers: 2},
		{Kind: BPanel, R: 6, C: 19, XStride: 20, KP: 6, Out: AMPFP8, FP8: fp8, Workers: 6},
		{Kind: BPanel, Transpose: true, R: 20, C: 7, XStride: 8, KP: 8, Out: AMPFP16, Workers: 5},
		{Kind: BPanel, Transpose: true, R: 33, C: 4, XStride: 4, KP: 4, Out: VecFP32, Workers: 6},
		{Kind: BPanel, Transpose: true, R: 16, C: 5, XStride: 6, KP: 6, Out: AMPFP8, FP8: fp8nan, Workers: 2},
		{Kind: APanel, R: 32, C: 300, XStride: 300, KP: 300, Out: AMPFP16, Workers: 6},
		{Kind: BPanel, R: 64, C: 48, XStride: 48, KP: 64, Out: AMPFP8, FP8: fp8, Workers: 6},
	}
	r := rng(7)
	tl := newTile()
	for ci, p := range cases {
		p.X, p.Y = xAddr, yAddr
		name := fmt.Sprintf("%d-%v-T%v-%dx%d-s%d-kp%d-%v-w%d", ci, p.Kind, p.Transpose, p.R, p.C, p.XStride, p.KP, p.Out, p.Workers)
		t.Run(name, func(t *testing.T) {
			x := randF32(r, p.R*p.XStride, -600, 600)
			for i := range x {
				switch i % 37 {
				case 3:
					x[i] = float32(math.NaN())
				case 5:
					x[i] = float32(math.Copysign(0, -1))
				case 7:
					x[i] = 70000 // overflows FP16 and FP8
				case 11:
					x[i] = 1e-30
				}
			}
			phase := ci % Slots
			guard := make([]byte, p.Bytes()+16)
			for i := range guard {
				guard[i] = 0xA5
			}
			tl.put(p.Y, guard)
			tl.putF32(p.X, x)
			k, cycles := tl.runKernel(t, phase, func(b *Builder) (Kernel, error) { return EmitPack(b, p) })
			got := tl.get(p.Y, p.Bytes()+16)
			want := append(EmulatePack(p, x), guard[p.Bytes():]...)
			if d := cmp.Diff(want, got); d != "" {
				t.Fatalf("result mismatch (-want +got):\n%s", d)
			}
			checkCycles(t, k, cycles, phase)
		})
	}
}

// TestPackFormulas checks EmulatePack against the documented panel
// positions.
func TestPackFormulas(t *testing.T) {
	p := Pack{Kind: BPanel, Transpose: true, R: 20, C: 3, XStride: 4, KP: 5, Out: VecFP32, Workers: 1}
	x := make([]float32, p.R*p.XStride)
	for i := range x {
		x[i] = float32(i + 1)
	}
	out := EmulatePack(p, x)
	// Operand = X^T: 3 x 20 (k = 3 rows, 20 columns in 2 panels).
	for k := 0; k < p.KP; k++ {
		for j := 0; j < 32; j++ {
			pos := (j/16)*16*p.KP + 16*k + j%16
			got := math.Float32frombits(uint32(out[4*pos]) | uint32(out[4*pos+1])<<8 | uint32(out[4*pos+2])<<16 | uint32(out[4*pos+3])<<24)
			want := float32(0)
			if k < p.C && j < p.R {
				want = x[j*p.XStride+k]
			}
			if got != want {
				t.Fatalf("(k %d, j %d): %g, want %g", k, j, got, want)
			}
		}
	}
}
