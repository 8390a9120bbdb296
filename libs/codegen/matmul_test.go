package codegen

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"ipu.local/libs/numfmt"
)

// u is the unit roundoff of FP32.
const u = 1.0 / (1 << 24)

// gamma is the classic bound n*u/(1-n*u) of n FP32 roundings in a sum.
func gamma(n int) float64 { return float64(n) * u / (1 - float64(n)*u) }

// mmInputs are random matrix inputs as device values and encodings.
type mmInputs struct {
	a, b   []float32 // values, row-major
	ap, bp []byte    // A-panel and B-panel bytes
	c0     []float32 // initial C (dense M x N) or nil
}

func makeMM(r *rand.Rand, p MatMul) mmInputs {
	var in mmInputs
	e := int(p.Type.size())
	in.a = make([]float32, p.M*p.K)
	in.b = make([]float32, p.K*p.N)
	in.ap = make([]byte, p.M*p.K*e)
	in.bp = make([]byte, p.K*p.N*e)
	enc := func(v float64, f numfmt.Format) (float32, []byte) {
		if p.Type == AMPFP32 {
			x := float32(v)
			return x, binary.LittleEndian.AppendUint32(nil, math.Float32bits(x))
		}
		if p.Type == AMPFP8 {
			c := numfmt.F64ToF8(v, f, 0, numfmt.Saturate)
			return math.Float32frombits(numfmt.F8ToF32(c, f, 0)), []byte{c}
		}
		h := numfmt.F64ToF16(v)
		return math.Float32frombits(numfmt.F16ToF32(h)), []byte{byte(h), byte(h >> 8)}
	}
	for i := 0; i < p.M; i++ {
		for k := 0; k < p.K; k++ {
			v, raw := enc(r.NormFloat64(), p.FP8.FormatA)
			in.a[i*p.K+k] = v
			copy(in.ap[e*APanelIndex(i, k, p.K):], raw)
		}
	}
	for k := 0; k < p.K; k++ {
		for j := 0; j < p.N; j++ {
			v, raw := enc(r.NormFloat64(), p.FP8.FormatB)
			in.b[k*p.N+j] = v
			copy(in.bp[e*BPanelIndex(k, j, p.K):], raw)
		}
	}
	if p.Accumulate {
		in.c0 = randF32(r, p.M*p.N, -4, 4)
	}
	return in
}

// runMM runs p on fresh inputs and returns inputs, result (dense) and the
// measured cycles.
func runMM(t *testing.T, tl *tile, p MatMul, seed int64) (mmInputs, []float32, Kernel, int64) {
	in := makeMM(rng(seed), p)
	for i := range tl.mem {
		tl.mem[i] = 0
	}
	tl.put(p.A, in.ap)
	tl.put(p.B, in.bp)
	if in.c0 != nil {
		for i := 0; i < p.M; i++ {
			for j := 0; j < p.N; j += 16 {
				tl.putF32(cAt(p, i, j), in.c0[i*p.N+j:i*p.N+j+16])
			}
		}
	}
	k, got := tl.runKernel(t, 0, func(b *Builder) (Kernel, error) { return EmitMatMul(b, p) })
	c := make([]float32, p.M*p.N)
	for i := 0; i < p.M; i++ {
		for j := 0; j < p.N; j += 16 {
			for jj, w := range tl.getBits(cAt(p, i, j), 16) {
				c[i*p.N+j+jj] = math.Float32frombits(w)
			}
		}
	}
	return in, c, k, got
}

// cAt is the address of C[i][j] (the first of its panel's 16 when j is a
// multiple of 16).
func cAt(p MatMul, i, j int) uint32 {
	if p.CParts > 0 {
		before, pn := 0, j/16
		for _, w := range p.partWidths() {
			if pn < before+w {
				return p.C + uint32(4*(16*p.M*before+i*16*w+j-16*before))
			}
			before += w
		}
	}
	panel := 16
	if p.CPanel != 0 {
		panel = p.CPanel
	}
	return p.C + uint32(4*(i*p.CStride+(j/16)*panel+j%16))
}

func TestMatMul(t *testing.T) {
	tl := newTile()
	fp16 := func(m, k, n, stride, w int) MatMul {
		return MatMul{Type: AMPFP16, M: m, K: k, N: n, A: nonIlBuf, B: ilBuf, C: ilBuf + 0x30000, CStride: stride, Workers: w}
	}
	fp8 := func(m, k, n int, c FP8Config) MatMul {
		return MatMul{Type: AMPFP8, M: m, K: k, N: n, A: nonIlBuf, B: ilBuf, C: ilBuf + 0x20000, CStride: n, FP8: c, Workers: 6}
	}
	acc := func(p MatMul) MatMul { p.Accumulate = true; return p }
	panels := func(p MatMul, stride, cp int) MatMul { p.CStride, p.CPanel = stride, cp; return p }
	// n column parts.
	parts := func(p MatMul, n int) MatMul {
		p.CStride, p.CParts = 0, n
		return p
	}
	fp32 := func(m, k, n, stride, w int) MatMul {
		return MatMul{Type: AMPFP32, M: m, K: k, N: n, A: nonIlBuf, B: ilBuf, C: ilBuf + 0x30000, CStride: stride, Workers: w}
	}
	longKParts := parts(fp16(4, 4100, 32, 0, 6), 2)
	longKParts32 := parts(fp32(4, 2050, 32, 0, 6), 2)
	longKParts32.C = ilBuf + 0x44000
	longKParts.C = ilBuf + 0x44000
	bigStride := fp16(8, 4, 16, 8196, 6)
	bigStride.C = ilBuf + 0x8000
	tests := []struct {
		name string
		p    MatMul
	}{
		{"fp16-4x1x16", fp16(4, 1, 16, 16, 6)},
		{"fp16-8x3x32-w1", fp16(8, 3, 32, 32, 1)},
		{"fp16-12x5x48-w5", fp16(12, 5, 48, 52, 5)},
		{"fp16-16x17x64", fp16(16, 17, 64, 64, 6)},
		{"fp16-64x256x64", fp16(64, 256, 64, 64, 6)},
		{"fp16-20x33x16-p1", fp16(20, 33, 16, 16, 6)},
		{"fp16-acc-12x9x32", acc(fp16(12, 9, 32, 36, 6))},
		{"fp16-long-k", fp16(4, 4100, 16, 16, 6)},
		{"fp16-big-stride", bigStride},
		{"fp8-e4m3fnuz", fp8(8, 6, 32, FP8Config{FormatA: numfmt.E4M3FNUZ, FormatB: numfmt.E4M3FNUZ})},
		{"fp8-e5m2-mixed", fp8(12, 10, 48, FP8Config{FormatA: numfmt.E5M2, FormatB: numfmt.E4M3FN, ScaleA: -3, ScaleB: 5})},
		{"fp8-e5m2fnuz", fp8(16, 64, 32, FP8Config{FormatA: numfmt.E5M2FNUZ, FormatB: numfmt.E4M3FNUZ, ScaleA: 2})},
		{"fp8-acc", acc(fp8(8, 4, 16, FP8Config{FormatA: numfmt.E4M3FN, FormatB: numfmt.E5M2, ScaleB: -1}))},
		// Items not a multiple of the workers: the fractional split.
		{"fp16-split-44x128x64", fp16(44, 128, 64, 64, 6)},
		{"fp16-split-acc-44x64x64", acc(fp16(44, 64, 64, 64, 6))},
		{"fp8-split", fp8(28, 96, 32, FP8Config{FormatA: numfmt.E4M3FNUZ, FormatB: numfmt.E5M2FNUZ, ScaleA: 1})},
		// C panels apart (CPanel): M x 16 blocks one after the other, or
		// farther.
		{"fp16-panels-16x17x64", panels(fp16(16, 17, 64, 64, 6), 16, 16*16)},
		{"fp16-panels-gap-12x5x48", panels(fp16(12, 5, 48, 48, 5), 20, 12*20+8)},
		{"fp16-panels-split-44x128x64", panels(fp16(44, 128, 64, 64, 6), 16, 44*16)},
		{"fp16-panels-split-acc-44x64x64", acc(panels(fp16(44, 64, 64, 64, 6), 16, 44*16))},
		{"fp8-panels", panels(fp8(28, 96, 32, FP8Config{FormatA: numfmt.E4M3FNUZ, FormatB: numfmt.E5M2FNUZ}), 16, 28*16)},
		// C in column parts (CParts): a k split's parts of equal or two
		// widths in one launch, over fewer items than workers, several
		// row groups, segments that start and end inside a row group,
		// with an initial C, past an rpti count, and FP8.
		{"fp16-parts-4x192x96", parts(fp16(4, 192, 96, 0, 6), 3)},
		{"fp16-parts-8x192x144", parts(fp16(8, 192, 144, 0, 6), 2)},
		{"fp16-parts-12x7x96-w4", parts(fp16(12, 7, 96, 0, 4), 2)},
		{"fp16-parts-20x5x112-w5", parts(fp16(20, 5, 112, 0, 5), 3)},
		{"fp16-parts-acc-8x9x80", acc(parts(fp16(8, 9, 80, 0, 6), 2))},
		{"fp16-parts-8x6x112-4", parts(fp16(8, 6, 112, 0, 6), 4)},
		{"fp16-parts-all-8x4x64", parts(fp16(8, 4, 64, 0, 6), 4)},
		{"fp16-parts-one-8x3x32", parts(fp16(8, 3, 32, 0, 6), 1)},
		{"fp16-parts-w1-12x3x48", parts(fp16(12, 3, 48, 0, 1), 2)},
		{"fp16-parts-long-k", longKParts},
		{"fp8-parts", parts(fp8(8, 12, 96, FP8Config{FormatA: numfmt.E4M3FNUZ, FormatB: numfmt.E5M2FNUZ}), 2)},
		{"fp8-parts-uneven", parts(fp8(12, 20, 112, FP8Config{FormatA: numfmt.E5M2, FormatB: numfmt.E4M3FN, ScaleA: 2}), 3)},
		// FP32 (ampf, 4 cycles a step) through every variant: whole
		// items, the fractional split, panels apart, column parts.
		{"fp32-12x5x48-w5", fp32(12, 5, 48, 52, 5)},
		{"fp32-acc-12x9x32", acc(fp32(12, 9, 32, 36, 6))},
		{"fp32-split-44x128x64", fp32(44, 128, 64, 64, 6)},
		{"fp32-split-acc-44x64x64", acc(fp32(44, 64, 64, 64, 6))},
		{"fp32-split-20x7x16", fp32(20, 7, 16, 16, 6)},
		{"fp32-panels-16x17x64", panels(fp32(16, 17, 64, 64, 6), 16, 16*16)},
		{"fp32-panels-split-44x128x64", panels(fp32(44, 128, 64, 64, 6), 16, 44*16)},
		{"fp32-parts-4x192x96", parts(fp32(4, 192, 96, 0, 6), 3)},
		{"fp32-parts-20x5x112-w5", parts(fp32(20, 5, 112, 0, 5), 3)},
		{"fp32-parts-acc-8x9x80", acc(parts(fp32(8, 9, 80, 0, 6), 2))},
		{"fp32-parts-long-k", longKParts32},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.p
			in, got, k, cycles := runMM(t, tl, p, int64(i))
			scale := 0
			if p.Type == AMPFP8 {
				scale = p.FP8.ScaleA + p.FP8.ScaleB
			}
			want := emulateMM(p, in, scale)
			if diff := cmp.Diff(f32bits(want), f32bits(got)); diff != "" {
				t.Errorf("result mismatch (-want +got):\n%s", diff)
			}
			// hostref's Device precision (deviceMM: one float64 fma per k,
			// rounded to FP32, from the scaled inputs; FP32 products
			// summed with round-to-odd) gives the same bits.
			ref := hostrefDeviceMM(p, in, scale)
			if p.Type == AMPFP32 {
				ref = hostrefDeviceMMF32(p.M, p.K, p.N, in.a, in.b, in.c0)
			}
			if diff := cmp.Diff(f32bits(want), f32bits(ref)); diff != "" {
				t.Errorf("hostref device recipe mismatch (-kernel +hostref):\n%s", diff)
			}
			tiny := 0.0
			if p.Type == AMPFP32 {
				tiny = 0x1p-150
			}
			checkMMBound(t, p, in.a, in.b, in.c0, scale, tiny, got)
			if diff := cmp.Diff(k.Cycles(), cycles); diff != "" {
				t.Errorf("cycles mismatch (-formula +measured):\n%s", diff)
			}
			f, _ := p.Cost()
			if f.Cycles() != k.Cycles() {
				t.Errorf("Cost() %d != emitted kernel's %d", f.Cycles(), k.Cycles())
			}
			macs := float64(p.M) * float64(p.K) * float64(p.N)
			t.Logf("%s: %d cycles, %.1f MACs/cycle", p.Type, cycles, macs/float64(cycles))
		})
	}
}

// TestMatMulSplitChoice checks when the kernel splits items' steps over
// workers: only when the items are no multiple of the workers and the
// split lowers the busiest worker's cycles below whole items'.
func TestMatMulSplitChoice(t *testing.T) {
	for _, tc := range []struct {
		m, k, n, w int
		split      bool
	}{
		{48, 2048, 64, 6, false}, // 48 items over 6: 8 each already
		{44, 2048, 64, 6, true},  // 44 items: 7.33 each instead of 8
		{92, 2048, 32, 6, true},  // 46 items
		{8, 64, 16, 6, false},    // 2 items: fewer than the workers
		{20, 2, 16, 6, false},    // 5 items of 2 steps: chunks cost more than they save
		{44, 2048, 64, 1, false}, // one worker
	} {
		p := MatMul{Type: AMPFP16, M: tc.m, K: tc.k, N: tc.n, CStride: tc.n, Workers: tc.w}
		s, pro, item := p.plan()
		if (s.split != nil) != tc.split {
			t.Errorf("%dx%dx%d over %d workers: split %v, want %v", tc.m, tc.k, tc.n, tc.w, s.split != nil, tc.split)
		}
		whole := p.shape()
		most := int64(0)
		for w := range whole.workers {
			most = max(most, pro+int64(whole.count[w])*item)
		}
		c, err := p.Cost()
		if err != nil {
			t.Fatal(err)
		}
		if s.split != nil && slices.Max(c.Work) >= Slots*most {
			t.Errorf("%dx%dx%d: split busiest %d cycles, whole items' at least %d", tc.m, tc.k, tc.n, slices.Max(c.Work), Slots*most)
		}
	}
}

func TestMatMulErrors(t *testing.T) {
	a := newTile().p
	good := MatMul{Type: AMPFP16, M: 4, K: 4, N: 16, A: nonIlBuf, B: ilBuf, C: ilBuf + 0x1000, CStride: 16, Workers: 6}
	mod := func(f func(*MatMul)) MatMul { p := good; f(&p); return p }
	tests := []struct {
		name string
		p    MatMul
		want string
	}{
		{"m", mod(func(p *MatMul) { p.M = 6 }), "matmul: M 6: want a positive multiple of 4 (pad the rows)"},
		{"n", mod(func(p *MatMul) { p.N = 8 }), "matmul: N 8: want a positive multiple of 16 (pad the columns)"},
		{"k-fp8", mod(func(p *MatMul) { p.Type = AMPFP8; p.K = 3 }), "matmul: K 3: want a positive (FP8: even) count"},
		{"stride", mod(func(p *MatMul) { p.CStride = 18 }), "matmul: C row stride 18: want a multiple of 4 of at least N=16"},
		{"panel", mod(func(p *MatMul) { p.CPanel = 60 }), "matmul: C panel stride 60 (row stride 16): want a multiple of 4 of at least M*CStride=64 and at most 2^20, 4*CPanel within an imm16, and a row stride of a multiple of 4 of at least 16"},
		{"parts-count", mod(func(p *MatMul) { p.N, p.CStride, p.CParts = 48, 0, 4 }), "matmul: C in 4 column parts: want at most N/16=3"},
		{"parts-stride", mod(func(p *MatMul) { p.N, p.CStride, p.CParts = 48, 48, 2 }), "matmul: C column parts with a row stride (48) or panel stride (0): want both 0 (each part is its own row-major block)"},
		{"workers", mod(func(p *MatMul) { p.Workers = 7 }), "matmul: workers 7 out of range [1, 6]"},
		{"b-region", mod(func(p *MatMul) { p.B = nonIlBuf + 0x1000 }), "matmul: B [0x61000, 0x61080) is outside interleaved memory [0x80000, 0xe8000)"},
		{"b-align", mod(func(p *MatMul) { p.B = ilBuf + 16 }), "matmul: B at 0x80010 is not 32-byte aligned"},
		{"c-overlap", mod(func(p *MatMul) { p.C = ilBuf + 64 }), "matmul: B [0x80000, 0x80080) overlaps C [0x80040, 0x80140)"},
		{"element", mod(func(p *MatMul) { p.A = ilBuf + 0x2000 }), "matmul: A [0x82000, 0x82020) and B [0x80000, 0x80080) share memory element 13"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := EmitMatMul(NewBuilder(a, codeBase), tc.p)
			got := fmt.Sprint(err)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("error mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestMatMulEfficiency measures MACs per cycle (peak 64 for FP16, 128 for
// FP8) on shapes that fill a tile, checking the cost formula on each.
func TestMatMulEfficiency(t *testing.T) {
	tl := newTile()
	shapes := []struct {
		typ     AMPType
		m, k, n int
	}{
		{AMPFP16, 16, 64, 16}, {AMPFP16, 32, 128, 32}, {AMPFP16, 64, 256, 64},
		{AMPFP16, 128, 256, 128}, {AMPFP16, 96, 512, 96}, {AMPFP16, 24, 1024, 48},
		{AMPFP8, 64, 256, 64}, {AMPFP8, 128, 512, 128},
	}
	for i, sh := range shapes {
		p := MatMul{Type: sh.typ, M: sh.m, K: sh.k, N: sh.n, A: nonIlBuf, B: ilBuf, C: ilBuf + 0x30000, CStride: sh.n, Workers: 6,
			FP8: FP8Config{FormatA: numfmt.E4M3FNUZ, FormatB: numfmt.E4M3FNUZ}}
		t.Run(fmt.Sprintf("%s-%dx%dx%d", sh.typ, sh.m, sh.k, sh.n), func(t *testing.T) {
			in, got, k, cycles := runMM(t, tl, p, int64(i))
			scale := p.FP8.ScaleA + p.FP8.ScaleB
			if p.Type == AMPFP16 {
				scale = 0
			}
			want := EmulateMatMul(p.M, p.K, p.N, in.a, in.b, scale, nil)
			if diff := cmp.Diff(f32bits(want), f32bits(got)); diff != "" {
				t.Fatalf("result mismatch (-want +got):\n%s", diff)
			}
			checkCycles(t, k, cycles, 0)
			peak := 64.0
			if p.Type == AMPFP8 {
				peak = 128
			}
			rate := float64(p.M) * float64(p.K) * float64(p.N) / float64(cycles)
			t.Logf("%s %dx%dx%d: %d cycles, %.1f MACs/cycle, %.1f%% of peak", p.Type, p.M, p.K, p.N, cycles, rate, 100*rate/peak)
		})
	}
}

// emulateMM is the emulator of p's type: EmulateMatMulF32 for FP32
// (fused), else EmulateMatMul (exact products).
func emulateMM(p MatMul, in mmInputs, scale int) []float32 {
	if p.Type == AMPFP32 {
		return EmulateMatMulF32(p.M, p.K, p.N, in.a, in.b, in.c0)
	}
	return EmulateMatMul(p.M, p.K, p.N, in.a, in.b, scale, in.c0)
}

// hostrefDeviceMM is hostref's Device matrix product (libs/hostref
// deviceMM) on the kernel's inputs: acc = float32(fma(a, b, acc)) in k
// order, with the FP8 scale applied to the inputs.
func hostrefDeviceMM(p MatMul, in mmInputs, scale int) []float32 {
	return matMulChain(p.M, p.K, p.N, in.a, in.b, in.c0, func(acc, x, y float32) float32 {
		return float32(math.FMA(math.Ldexp(float64(x), scale), float64(y), float64(acc)))
	}, false)
}

// checkMMBound checks |C - exact| <= gamma(K') * (sum |a b| + |c0|) +
// K' * tiny for every element whose magnitude sum is finite, the products
// scaled by 2^scale: K' = K (+1 with an initial C) FP32 roundings of a
// sum whose products are exact (or fused), each off by at most tiny more
// when it underflows (2^-150 for FP32 inputs, 0 where none can).
func checkMMBound(t *testing.T, p MatMul, a, b, c0 []float32, scale int, tiny float64, got []float32) {
	t.Helper()
	sc := math.Ldexp(1, scale)
	kk := p.K
	if c0 != nil {
		kk++
	}
	for i := 0; i < p.M; i++ {
		for j := 0; j < p.N; j++ {
			exact, mag := 0.0, 0.0
			if c0 != nil {
				exact, mag = float64(c0[i*p.N+j]), math.Abs(float64(c0[i*p.N+j]))
			}
			for x := 0; x < p.K; x++ {
				v := float64(a[i*p.K+x]) * float64(b[x*p.N+j]) * sc
				exact += v
				mag += math.Abs(v)
			}
			if math.IsNaN(mag) || math.IsInf(mag, 0) || mag > math.MaxFloat32 {
				continue
			}
			bound := gamma(kk)*mag + float64(kk)*tiny
			if e := math.Abs(float64(got[i*p.N+j]) - exact); e > bound {
				t.Fatalf("C[%d][%d] = %g, exact %g: error %g above bound %g", i, j, got[i*p.N+j], exact, e, bound)
			}
		}
	}
}

// TestMatMulPartsRandom runs column-part kernels of random shapes, part
// counts, workers, types and initial C against the emulator and the cost
// formula, and checks that nothing outside B and C is written.
func TestMatMulPartsRandom(t *testing.T) {
	tl := newTile()
	r := rng(77)
	for i := 0; i < 60; i++ {
		p := MatMul{Type: AMPFP16, M: 4 * (1 + r.Intn(6)), K: 2 * (1 + r.Intn(40)), N: 16 * (1 + r.Intn(12)),
			A: nonIlBuf, B: ilBuf, Workers: 1 + r.Intn(6), Accumulate: r.Intn(4) == 0}
		switch r.Intn(4) {
		case 0:
			p.Type, p.FP8 = AMPFP8, FP8Config{FormatA: numfmt.E4M3FNUZ, FormatB: numfmt.E5M2, ScaleA: r.Intn(5) - 2}
		case 1:
			p.Type = AMPFP32
		}
		p.CParts = 1 + r.Intn(p.N/16)
		p.C = ilBuf + uint32(roundUp(p.N*p.K*int(p.Type.size()), 0x1000))
		name := fmt.Sprintf("%s-%dx%dx%d-parts%d-w%d-acc%v", p.Type, p.M, p.K, p.N, p.CParts, p.Workers, p.Accumulate)
		in, got, k, cycles := runMM(t, tl, p, int64(1000+i))
		scale := 0
		if p.Type == AMPFP8 {
			scale = p.FP8.ScaleA
		}
		want := emulateMM(p, in, scale)
		if diff := cmp.Diff(f32bits(want), f32bits(got)); diff != "" {
			t.Fatalf("%s: result mismatch (-want +got):\n%s", name, diff)
		}
		if k.Cycles() != cycles {
			t.Fatalf("%s: formula %d cycles, measured %d", name, k.Cycles(), cycles)
		}
		// Between B and C, and 4 KiB past C: as zeroed before the run.
		bEnd, cEnd := int(p.B)+p.N*p.K*int(p.Type.size()), int(p.C)+4*p.M*p.N
		for _, r := range [][2]int{{bEnd, int(p.C)}, {cEnd, cEnd + 4096}} {
			for a := r[0]; a < r[1]; a++ {
				if tl.mem[a-int(tl.p.Memory.Lo)] != 0 {
					t.Fatalf("%s: byte %#x outside B and C [%#x, %#x) written", name, a, p.C, cEnd)
				}
			}
		}
	}
}
