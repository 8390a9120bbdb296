package codegen

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/google/go-cmp/cmp"

	"ipu.local/libs/asm"
	"ipu.local/libs/numfmt"
)

// f32Values says how the random inputs of an FP32 matrix test are drawn.
type f32Values uint8

const (
	f32Normal  f32Values = iota // normally distributed, full 24-bit significands
	f32Special                  // mixed with ±0, subnormals, huge values, ±Inf and NaNs
	f32Tiny                     // normal values of about 2^-70: subnormal products and sums
)

// specialF32 are the bit patterns f32Special mixes in.
var specialF32 = []uint32{
	0x00000000, 0x80000000, // ±0
	0x00000001, 0x80000001, 0x007fffff, 0x00400000, 0x80012345, // subnormals
	0x00800000, 0x80800000, // smallest normals
	0x7f7fffff, 0xff7fffff, 0x7e800000, // huge: products overflow
	0x1f800000, 0x9f800000, // 2^-64: products underflow to subnormals or zero
	0x7f800000, 0xff800000, // ±Inf
	0x7fc00000, 0x7f800001, 0xffc12345, // NaNs, not all canonical
}

// drawF32 returns one input value of kind v.
func drawF32(r *rand.Rand, v f32Values, special float64) float32 {
	switch {
	case v == f32Special && r.Float64() < special:
		return math.Float32frombits(specialF32[r.Intn(len(specialF32))])
	case v == f32Tiny:
		return float32(math.Ldexp(r.NormFloat64(), -70))
	}
	return float32(r.NormFloat64())
}

// mmF32Inputs are dense inputs and their panel encodings.
type mmF32Inputs struct {
	a, b   []float32 // row-major
	ap, bp []byte    // A-panel and B-panel bytes
	c0     []float32 // initial C (dense M x N) or nil
}

// encodeF32 returns the panel bytes of dense A (M x K) and B (K x N).
func encodeF32(m, k, n int, a, b []float32) (ap, bp []byte) {
	ap = make([]byte, 4*m*k)
	bp = make([]byte, 4*k*n)
	for i := 0; i < m; i++ {
		for x := 0; x < k; x++ {
			binary.LittleEndian.PutUint32(ap[4*APanelIndex(i, x, k):], math.Float32bits(a[i*k+x]))
		}
	}
	for x := 0; x < k; x++ {
		for j := 0; j < n; j++ {
			binary.LittleEndian.PutUint32(bp[4*BPanelIndex(x, j, k):], math.Float32bits(b[x*n+j]))
		}
	}
	return ap, bp
}

func makeMMF32(r *rand.Rand, p MatMul, v f32Values) mmF32Inputs {
	var in mmF32Inputs
	// Keep special values rare enough that most outputs stay finite.
	special := 2.0 / float64(p.K+4)
	in.a = make([]float32, p.M*p.K)
	in.b = make([]float32, p.K*p.N)
	for i := range in.a {
		in.a[i] = drawF32(r, v, special)
	}
	for i := range in.b {
		in.b[i] = drawF32(r, v, special)
	}
	in.ap, in.bp = encodeF32(p.M, p.K, p.N, in.a, in.b)
	if p.Accumulate {
		in.c0 = make([]float32, p.M*p.N)
		for i := range in.c0 {
			in.c0[i] = drawF32(r, v, 0.2)
			if v == f32Tiny { // on the scale of the products
				in.c0[i] = float32(math.Ldexp(r.NormFloat64(), -138))
			}
		}
	}
	return in
}

// runMMF32 runs p on in at the given launch phase and returns the result
// (dense), the kernel and the measured cycles.
func runMMF32(t *testing.T, tl *tile, p MatMul, in mmF32Inputs, phase int) ([]float32, Kernel, int64) {
	t.Helper()
	for i := range tl.mem {
		tl.mem[i] = 0
	}
	tl.put(p.A, in.ap)
	tl.put(p.B, in.bp)
	// Poison C's padding and unused stride: the kernel must not depend
	// on it (without Accumulate) and must leave the stride gap alone.
	for i := 0; i < p.M; i++ {
		row := make([]float32, p.CStride)
		for j := range row {
			row[j] = math.Float32frombits(0x7fa5a5a5)
		}
		if in.c0 != nil {
			copy(row, in.c0[i*p.N:(i+1)*p.N])
		}
		if i == p.M-1 {
			row = row[:p.N]
		}
		tl.putF32(p.C+uint32(4*i*p.CStride), row)
	}
	k, cycles := tl.runKernel(t, phase, func(b *Builder) (Kernel, error) { return EmitMatMul(b, p) })
	c := make([]float32, p.M*p.N)
	for i := 0; i < p.M; i++ {
		bits := tl.getBits(p.C+uint32(4*i*p.CStride), p.CStride)
		for j, w := range bits[:p.N] {
			c[i*p.N+j] = math.Float32frombits(w)
		}
		if i < p.M-1 {
			for j, w := range bits[p.N:] {
				if w != 0x7fa5a5a5 {
					t.Fatalf("C stride gap [%d][%d] overwritten with %#x", i, p.N+j, w)
				}
			}
		}
	}
	return c, k, cycles
}

// hostrefDeviceMMF32 is hostref's Device matrix product (libs/hostref
// deviceMM: acc = float32(SumRTO(a*b, acc)) in k order) on FP32 inputs.
func hostrefDeviceMMF32(m, k, n int, a, b, c0 []float32) []float32 {
	return matMulChain(m, k, n, a, b, c0, func(acc, x, y float32) float32 {
		return float32(numfmt.SumRTO(float64(x)*float64(y), float64(acc)))
	}, false)
}

// canonBits returns the bits with every NaN made canonical.
func canonBits(v []float32) []uint32 {
	out := make([]uint32, len(v))
	for i, x := range v {
		out[i] = canon(x)
	}
	return out
}

func TestMatMulF32(t *testing.T) {
	tl := newTile()
	mk := func(m, k, n, stride, w int) MatMul {
		return MatMul{Type: AMPFP32, M: m, K: k, N: n, A: nonIlBuf, B: ilBuf, C: ilBuf + 0x30000, CStride: stride, Workers: w}
	}
	acc := func(p MatMul) MatMul { p.Accumulate = true; return p }
	bigStride := mk(8, 4, 16, 8196, 6) // row stride and group jump beyond imm16
	bigStride.C = ilBuf + 0x8000
	wide := mk(8, 1, 3072, 3072, 6) // group jump beyond imm16
	wide.C = ilBuf + 0x10000
	longK := mk(4, 4100, 16, 16, 3) // rpt instead of rpti
	longK.C = ilBuf + 0x48000
	ilA := mk(8, 6, 32, 32, 6) // A in interleaved memory, another element pair than B
	ilA.A = ilBuf + 0x40008
	ilA.C = ilBuf + 0x1000
	odd := mk(12, 7, 48, 52, 4)
	odd.A, odd.B, odd.C = nonIlBuf+8, ilBuf+32, ilBuf+0x20010 // minimum alignments
	tests := []struct {
		name  string
		p     MatMul
		v     f32Values
		phase int
	}{
		{"4x1x16", mk(4, 1, 16, 16, 6), f32Normal, 0},
		{"4x2x16-w1", mk(4, 2, 16, 16, 1), f32Normal, 0},
		{"8x3x32-w1", mk(8, 3, 32, 32, 1), f32Normal, 0},
		{"8x3x32-w2", mk(8, 3, 32, 36, 2), f32Normal, 0},
		{"12x5x48-w5", mk(12, 5, 48, 52, 5), f32Normal, 1},
		{"16x17x64-w3", mk(16, 17, 64, 64, 3), f32Normal, 2},
		{"20x33x16-p1", mk(20, 33, 16, 16, 6), f32Normal, 3},
		{"24x64x128-w4", mk(24, 64, 128, 128, 4), f32Normal, 4},
		{"64x31x32", mk(64, 31, 32, 32, 6), f32Normal, 5},
		{"32x300x16", mk(32, 300, 16, 16, 6), f32Normal, 0},
		{"8x299x48-w6", mk(8, 299, 48, 48, 6), f32Normal, 0},
		{"64x300x128", mk(64, 300, 128, 128, 6), f32Normal, 0},
		{"min-align", odd, f32Normal, 0},
		{"a-interleaved", ilA, f32Normal, 0},
		{"big-stride", bigStride, f32Normal, 0},
		{"wide", wide, f32Normal, 0},
		{"long-k", longK, f32Normal, 0},
		{"acc-4x1x16", acc(mk(4, 1, 16, 16, 6)), f32Normal, 0},
		{"acc-12x9x32-w2", acc(mk(12, 9, 32, 36, 2)), f32Normal, 1},
		{"acc-16x100x64", acc(mk(16, 100, 64, 68, 6)), f32Normal, 0},
		{"acc-big-stride", acc(bigStride), f32Normal, 0},
		{"special-8x1x32", mk(8, 1, 32, 32, 6), f32Special, 0},
		{"special-8x5x32", mk(8, 5, 32, 32, 6), f32Special, 0},
		{"special-16x40x48-w5", mk(16, 40, 48, 48, 5), f32Special, 0},
		{"special-acc-8x3x32", acc(mk(8, 3, 32, 32, 6)), f32Special, 0},
		{"special-acc-12x21x16-w1", acc(mk(12, 21, 16, 20, 1)), f32Special, 0},
		{"tiny-8x9x32", mk(8, 9, 32, 32, 6), f32Tiny, 0},
		{"tiny-acc-4x40x16", acc(mk(4, 40, 16, 16, 6)), f32Tiny, 0},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.p
			in := makeMMF32(rng(int64(i)), p, tc.v)
			got, k, cycles := runMMF32(t, tl, p, in, tc.phase)
			want := EmulateMatMulF32(p.M, p.K, p.N, in.a, in.b, in.c0)
			if diff := cmp.Diff(f32bits(want), f32bits(got)); diff != "" {
				t.Errorf("result mismatch (-want +got):\n%s", diff)
			}
			// hostref's Device precision computes the same values (its
			// NaNs need not be canonical).
			if diff := cmp.Diff(canonBits(want), canonBits(hostrefDeviceMMF32(p.M, p.K, p.N, in.a, in.b, in.c0))); diff != "" {
				t.Errorf("hostref device recipe mismatch (-kernel +hostref):\n%s", diff)
			}
			checkMMBound(t, p, in.a, in.b, in.c0, 0, 0x1p-150, got)
			switch tc.v {
			case f32Special:
				checkSpecialMix(t, got)
			case f32Tiny:
				for i, v := range got {
					if math.Abs(float64(v)) >= 0x1p-126 {
						t.Fatalf("C[%d] = %g: want a subnormal (tiny inputs)", i, v)
					}
				}
			}
			if diff := cmp.Diff(k.CyclesAt(tc.phase), cycles); diff != "" {
				t.Errorf("cycles mismatch (-formula +measured):\n%s", diff)
			}
			f, _ := p.Cost()
			if diff := cmp.Diff(k.Cost, f); diff != "" {
				t.Errorf("Cost() mismatch (-emitted +Cost):\n%s", diff)
			}
			t.Logf("%d cycles, %.2f MACs/cycle", cycles, float64(p.M)*float64(p.K)*float64(p.N)/float64(cycles))
		})
	}
}

// TestMatMulF32Semantics checks hand-computed results of one C element:
// the sign of zero sums, subnormals, the single rounding of the fused
// multiply-add, overflow and NaN propagation.
func TestMatMulF32Semantics(t *testing.T) {
	tl := newTile()
	f := math.Float32frombits
	one := float32(1)
	eps := f(0x3f800001) // 1 + 2^-23
	tests := []struct {
		name string
		a, b []float32 // A[0][k], B[k][0]
		c0   *float32  // initial C[0][0] (Accumulate)
		want uint32
	}{
		{"-0 products sum to +0", []float32{f(0x80000000), f(0x80000000)}, []float32{one, one}, nil, 0x00000000},
		{"-0 products onto -0", []float32{f(0x80000000)}, []float32{one}, ptr(f(0x80000000)), 0x80000000},
		{"+0 product onto -0", []float32{0}, []float32{one}, ptr(f(0x80000000)), 0x00000000},
		{"smallest subnormal kept", []float32{f(1)}, []float32{one}, nil, 0x00000001},
		{"subnormal product", []float32{f(0x1f800000)}, []float32{f(0x1f800000)}, nil, 0x00200000}, // 2^-64 * 2^-64 = 2^-128
		{"underflow rounds to zero", []float32{f(0x00000001)}, []float32{0.25}, nil, 0x00000000},
		{"underflow rounds to nearest", []float32{f(0x00000003)}, []float32{0.5}, nil, 0x00000002},
		{"fused single rounding", []float32{eps, -eps}, []float32{eps, eps}, nil, math.Float32bits(-float32(math.Ldexp(1, -46)))},
		{"overflow to Inf", []float32{f(0x7f7fffff)}, []float32{2}, nil, 0x7f800000},
		{"product beyond range cancelled", []float32{f(0x7f7fffff), f(0x7f7fffff)}, []float32{2, -2}, nil, 0x7f800000},
		{"Inf times 0", []float32{f(0x7f800000)}, []float32{0}, nil, 0x7fc00000},
		{"Inf minus Inf", []float32{f(0x7f800000), f(0x7f800000)}, []float32{one, -1}, nil, 0x7fc00000},
		{"Inf survives finite", []float32{f(0xff800000), 3}, []float32{one, one}, nil, 0xff800000},
		{"NaN payload made canonical", []float32{f(0x7f800001), one}, []float32{one, one}, nil, 0x7fc00000},
		{"negative NaN made canonical", []float32{one}, []float32{f(0xffc12345)}, nil, 0x7fc00000},
		{"NaN initial C", []float32{one}, []float32{one}, ptr(f(0xff812345)), 0x7fc00000},
		{"Inf initial C", []float32{one}, []float32{-1}, ptr(f(0x7f800000)), 0x7f800000},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			K := len(tc.a)
			p := MatMul{Type: AMPFP32, M: 4, K: K, N: 16, A: nonIlBuf, B: ilBuf, C: ilBuf + 0x1000, CStride: 16, Workers: 1, Accumulate: tc.c0 != nil}
			var in mmF32Inputs
			in.a = make([]float32, 4*K)
			in.b = make([]float32, K*16)
			for x := 0; x < K; x++ {
				in.a[x] = tc.a[x]
				in.b[x*16] = tc.b[x]
			}
			in.ap, in.bp = encodeF32(4, K, 16, in.a, in.b)
			if tc.c0 != nil {
				in.c0 = make([]float32, 4*16)
				in.c0[0] = *tc.c0
			}
			got, _, _ := runMMF32(t, tl, p, in, 0)
			if got := math.Float32bits(got[0]); got != tc.want {
				t.Errorf("C[0][0] = %#08x, want %#08x", got, tc.want)
			}
			if e := math.Float32bits(EmulateMatMulF32(4, K, 16, in.a, in.b, in.c0)[0]); e != tc.want {
				t.Errorf("EmulateMatMulF32 C[0][0] = %#08x, want %#08x", e, tc.want)
			}
		})
	}
}

// checkSpecialMix fails unless a special-values result holds NaNs,
// infinities, zeros, subnormals and other finite values: the inputs must
// exercise every propagation path.
func checkSpecialMix(t *testing.T, c []float32) {
	t.Helper()
	var nan, inf, zero, sub, finite int
	for _, v := range c {
		switch a := math.Abs(float64(v)); {
		case v != v:
			nan++
		case math.IsInf(a, 0):
			inf++
		case a == 0:
			zero++
		case a < 0x1p-126:
			sub++
		default:
			finite++
		}
	}
	t.Logf("outputs: %d NaN, %d Inf, %d zero, %d subnormal, %d other", nan, inf, zero, sub, finite)
	if nan == 0 || inf == 0 || finite == 0 {
		t.Errorf("special inputs gave %d NaN, %d Inf, %d finite outputs: want some of each", nan, inf, finite)
	}
}

func ptr(f float32) *float32 { return &f }

// TestMatMulF32Efficiency measures MACs per cycle on shapes that fill a
// tile (ceiling: the preset's MACsFP32, 16: ampf's 64 MACs every 4
// cycles on each of six workers), checking results and the cost formula
// on each, and the rate within 10% of the ceiling from K = 128 on.
func TestMatMulF32Efficiency(t *testing.T) {
	tl := newTile()
	shapes := []struct{ m, k, n int }{
		{16, 64, 16}, {24, 128, 32}, {48, 256, 64}, {96, 256, 48}, {64, 512, 64},
	}
	for i, sh := range shapes {
		p := MatMul{Type: AMPFP32, M: sh.m, K: sh.k, N: sh.n, A: nonIlBuf, B: ilBuf, C: ilBuf + 0x30000, CStride: sh.n, Workers: 6}
		t.Run(fmt.Sprintf("%dx%dx%d", sh.m, sh.k, sh.n), func(t *testing.T) {
			in := makeMMF32(rng(int64(i)), p, f32Normal)
			got, k, cycles := runMMF32(t, tl, p, in, 0)
			want := EmulateMatMulF32(p.M, p.K, p.N, in.a, in.b, nil)
			if diff := cmp.Diff(f32bits(want), f32bits(got)); diff != "" {
				t.Fatalf("result mismatch (-want +got):\n%s", diff)
			}
			checkCycles(t, k, cycles, 0)
			rate := float64(p.M) * float64(p.K) * float64(p.N) / float64(cycles)
			t.Logf("%dx%dx%d: %d cycles, %.3f MACs/cycle (preset MACsFP32 %d)", p.M, p.K, p.N, cycles, rate, tl.p.MACsFP32)
			if p.K >= 128 && rate < 0.9*float64(tl.p.MACsFP32) {
				t.Errorf("%.3f MACs/cycle: want at least 90%% of MACsFP32 (%d)", rate, tl.p.MACsFP32)
			}
		})
	}
}

// TestMatMulF32Golden compares the disassembly of a small kernel with
// testdata/matmulfp32.dis (-update rewrites it).
func TestMatMulF32Golden(t *testing.T) {
	build := func() ([]byte, []byte) {
		b := NewBuilder(newTile().p, codeBase)
		p := MatMul{Type: AMPFP32, M: 8, K: 3, N: 32, A: nonIlBuf, B: ilBuf, C: ilBuf + 0x4000, CStride: 36, Workers: 3}
		k, err := EmitMatMul(b, p)
		if err != nil {
			t.Fatal(err)
		}
		code, err := b.Finish()
		if err != nil {
			t.Fatal(err)
		}
		var dis bytes.Buffer
		fmt.Fprintf(&dis, "// matmul fp32 8x3x32 (C stride 36) on 3 workers at %#x (%d cycles)\n", mustAddr(b, k.Entry), k.Cycles())
		if err := asm.Disassemble(&dis, codeBase, code); err != nil {
			t.Fatal(err)
		}
		return code, dis.Bytes()
	}
	code, dis := build()
	checkGoldenDis(t, "matmulfp32.dis", dis)
	if again, _ := build(); !bytes.Equal(code, again) {
		t.Error("a second build differs")
	}
}

// TestMatMulF32Sequence runs C = A x B1, then C += A x B2 as two launches
// of one program: the second kernel starts at the phase the first ended
// at, and the cycles add up exactly.
func TestMatMulF32Sequence(t *testing.T) {
	tl := newTile()
	p1 := MatMul{Type: AMPFP32, M: 8, K: 13, N: 32, A: nonIlBuf, B: ilBuf, C: ilBuf + 0x10000, CStride: 32, Workers: 5}
	p2 := p1
	p2.B, p2.Accumulate, p2.Workers = ilBuf+0x4000, true, 6
	r := rng(7)
	in1 := makeMMF32(r, p1, f32Normal)
	in2 := makeMMF32(r, p1, f32Normal)
	tl.put(p1.A, in1.ap)
	tl.put(p1.B, in1.bp)
	_, bp2 := encodeF32(p1.M, p1.K, p1.N, in1.a, in2.b)
	tl.put(p2.B, bp2)

	ks, cycles := tl.runChain(t, 0,
		func(b *Builder) (Kernel, error) { return EmitMatMul(b, p1) },
		func(b *Builder) (Kernel, error) { return EmitMatMul(b, p2) })
	k1, k2 := ks[0], ks[1]
	c1 := k1.CyclesAt(0)
	want := c1 + k2.CyclesAt(int(c1%Slots))
	if diff := cmp.Diff(want, cycles); diff != "" {
		t.Errorf("cycles mismatch (-formula +measured):\n%s", diff)
	}
	mid := EmulateMatMulF32(p1.M, p1.K, p1.N, in1.a, in1.b, nil)
	wantC := EmulateMatMulF32(p1.M, p1.K, p1.N, in1.a, in2.b, mid)
	got := make([]float32, p1.M*p1.N)
	for i, w := range tl.getBits(p1.C, p1.M*p1.N) {
		got[i] = math.Float32frombits(w)
	}
	if diff := cmp.Diff(f32bits(wantC), f32bits(got)); diff != "" {
		t.Errorf("result mismatch (-want +got):\n%s", diff)
	}
}
