package sim

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"

	"ipu.local/libs/isa"
	"ipu.local/libs/numfmt"
)

func setM(r uint8, v uint32) []any {
	return []any{li(r, int32(v&0xFFFF)), lih(r, int32(v>>16))}
}

func setA(r uint8, v uint32) []any {
	return []any{I(isa.ALI, r, 0, 0, int32(v&0xFFFF)), I(isa.ALIH, r, 0, 0, int32(v>>16))}
}

func fb(f float32) uint32 { return math.Float32bits(f) }

// TestSemantics runs one instruction on the supervisor after setting
// registers, and checks the registers it writes.
func TestSemantics(t *testing.T) {
	negZero := uint32(0x80000000)
	type reg struct {
		a    bool // $a (else $m)
		n    uint8
		want uint32
	}
	tests := []struct {
		name string
		m, a map[uint8]uint32
		in   isa.Inst
		want []reg
	}{
		{"add wraps", map[uint8]uint32{1: 0xFFFFFFFF, 2: 2}, nil, I(isa.ADD, 3, 1, 2, 0), []reg{{false, 3, 1}}},
		{"sub", map[uint8]uint32{1: 1, 2: 2}, nil, I(isa.SUB, 3, 1, 2, 0), []reg{{false, 3, 0xFFFFFFFF}}},
		{"mul low bits", map[uint8]uint32{1: 0x10001, 2: 0x10001}, nil, I(isa.MUL, 3, 1, 2, 0), []reg{{false, 3, 0x20001}}},
		{"shl masks the count", map[uint8]uint32{1: 1, 2: 33}, nil, I(isa.SHL, 3, 1, 2, 0), []reg{{false, 3, 2}}},
		{"shr logical", map[uint8]uint32{1: 0x80000000, 2: 4}, nil, I(isa.SHR, 3, 1, 2, 0), []reg{{false, 3, 0x08000000}}},
		{"sar arithmetic", map[uint8]uint32{1: 0x80000000, 2: 4}, nil, I(isa.SAR, 3, 1, 2, 0), []reg{{false, 3, 0xF8000000}}},
		{"cmplt signed", map[uint8]uint32{1: 0xFFFFFFFF, 2: 1}, nil, I(isa.CMPLT, 3, 1, 2, 0), []reg{{false, 3, 1}}},
		{"cmpult unsigned", map[uint8]uint32{1: 0xFFFFFFFF, 2: 1}, nil, I(isa.CMPULT, 3, 1, 2, 0), []reg{{false, 3, 0}}},
		{"min signed", map[uint8]uint32{1: 0xFFFFFFFF, 2: 1}, nil, I(isa.MIN, 3, 1, 2, 0), []reg{{false, 3, 0xFFFFFFFF}}},
		{"max signed", map[uint8]uint32{1: 0xFFFFFFFF, 2: 1}, nil, I(isa.MAX, 3, 1, 2, 0), []reg{{false, 3, 1}}},
		{"addi negative", map[uint8]uint32{1: 5}, nil, addi(3, 1, -7), []reg{{false, 3, 0xFFFFFFFE}}},
		{"andi zero-extends", map[uint8]uint32{1: 0xFFFFFFFF}, nil, I(isa.ANDI, 3, 1, 0, 0xFFFF), []reg{{false, 3, 0xFFFF}}},
		{"muli negative", map[uint8]uint32{1: 3}, nil, I(isa.MULI, 3, 1, 0, -2), []reg{{false, 3, 0xFFFFFFFA}}},
		{"cmplti", map[uint8]uint32{1: 0xFFFFFFFE}, nil, I(isa.CMPLTI, 3, 1, 0, -1), []reg{{false, 3, 1}}},
		{"cmpeqi sign-extends", map[uint8]uint32{1: 0xFFFFFFFF}, nil, I(isa.CMPEQI, 3, 1, 0, -1), []reg{{false, 3, 1}}},
		{"lih keeps the low half", map[uint8]uint32{3: 0x12345678}, nil, lih(3, 0xABCD), []reg{{false, 3, 0xABCD5678}}},
		{"writes to m15 are ignored", map[uint8]uint32{1: 7}, nil, addi(15, 1, 1), []reg{{false, 15, 0}}},
		{"ldm post-increment into its base", map[uint8]uint32{1: dataBase}, nil, I(isa.LDMP, 1, 1, 0, 4), []reg{{false, 1, dataBase + 4}}},
		{"call links", nil, nil, I(isa.CALL, 3, 0, 0, 0), []reg{{false, 3, 0}}}, // patched below
		{"f32add", nil, map[uint8]uint32{1: fb(1.5), 2: fb(2.25)}, I(isa.FADD, 3, 1, 2, 0), []reg{{true, 3, fb(3.75)}}},
		{"f32add nan is canonical", nil, map[uint8]uint32{1: 0xFFC00001, 2: fb(1)}, I(isa.FADD, 3, 1, 2, 0), []reg{{true, 3, qnan32}}},
		{"f32max of zeros", nil, map[uint8]uint32{1: negZero, 2: 0}, I(isa.FMAX, 3, 1, 2, 0), []reg{{true, 3, 0}}},
		{"f32min of zeros", nil, map[uint8]uint32{1: 0, 2: negZero}, I(isa.FMIN, 3, 1, 2, 0), []reg{{true, 3, negZero}}},
		{"f32max nan", nil, map[uint8]uint32{1: fb(1), 2: 0x7F800001}, I(isa.FMAX, 3, 1, 2, 0), []reg{{true, 3, qnan32}}},
		{"f32cmplt", nil, map[uint8]uint32{1: fb(1), 2: fb(2)}, I(isa.FCMPLT, 3, 1, 2, 0), []reg{{true, 3, 0xFFFFFFFF}}},
		{"f32cmplt nan", nil, map[uint8]uint32{1: qnan32, 2: fb(2)}, I(isa.FCMPLT, 3, 1, 2, 0), []reg{{true, 3, 0}}},
		{"f32sel of -0 takes b", nil, map[uint8]uint32{1: negZero, 2: 7, 4: 9}, isa.Inst{Op: isa.FSEL, D: 3, A: 1, B: 2, C: 4}, []reg{{true, 3, 7}}},
		{"f32sel of 0 takes c", nil, map[uint8]uint32{1: 0, 2: 7, 4: 9}, isa.Inst{Op: isa.FSEL, D: 3, A: 1, B: 2, C: 4}, []reg{{true, 3, 9}}},
		{"f32fma", nil, map[uint8]uint32{1: fb(3), 2: fb(0.5), 3: fb(10)}, I(isa.FMA, 3, 1, 2, 0), []reg{{true, 3, fb(11.5)}}},
		// 1 + 2^-24 + 2^-60 exactly: one rounding gives 1+2^-23, rounding
		// through FP64 first would give 1.
		{"f32fma rounds once", nil, map[uint8]uint32{1: 0x33800800, 2: 0x3f7ff001, 3: 0x3f800000}, I(isa.FMA, 3, 1, 2, 0), []reg{{true, 3, 0x3f800001}}},
		{"f32v2add", nil, map[uint8]uint32{2: fb(1), 3: fb(2), 4: fb(10), 5: fb(20)}, I(isa.V2ADD, 0, 2, 4, 0),
			[]reg{{true, 0, fb(11)}, {true, 1, fb(22)}}},
		{"f32v2 into a14:15", nil, map[uint8]uint32{2: fb(1), 3: fb(2), 4: fb(10), 5: fb(20)}, I(isa.V2ADD, 14, 2, 4, 0),
			[]reg{{true, 14, fb(11)}, {true, 15, 0}}},
		{"f16v4add", nil, map[uint8]uint32{2: 0x3C003C00, 3: 0x7BFF3C00, 4: 0x40004000, 5: 0x7BFF4000}, I(isa.H4ADD, 0, 2, 4, 0),
			[]reg{{true, 0, 0x42004200}, {true, 1, 0x7C004200}}},
		{"f16v4fma one rounding", nil, map[uint8]uint32{0: 0x3C00, 2: 0x3C01, 4: 0x3C01}, I(isa.H4FMA, 0, 2, 4, 0),
			[]reg{{true, 0, uint32(numfmt.F64ToF16(1 + (1+1.0/1024)*(1+1.0/1024)))}}},
		{"f16v4max of zeros", nil, map[uint8]uint32{2: 0x8000, 4: 0x0000}, I(isa.H4MAX, 0, 2, 4, 0), []reg{{true, 0, 0}}},
		{"f16v4cmplt", nil, map[uint8]uint32{2: 0x3C004000, 4: 0x40003C00}, I(isa.H4CMPLT, 0, 2, 4, 0), []reg{{true, 0, 0xFFFF0000}}},
		{"f16v4sum", nil, map[uint8]uint32{2: 0x40003C00, 3: 0x44004200}, I(isa.H4SUMF, 0, 2, 0, 0), []reg{{true, 0, fb(10)}}},
		{"f32v2sum", nil, map[uint8]uint32{2: fb(1.5), 3: fb(2)}, I(isa.FSUM2, 0, 2, 0, 0), []reg{{true, 0, fb(3.5)}}},
		{"f32toi32 saturates", nil, map[uint8]uint32{1: fb(3e9)}, I(isa.CVTFI, 0, 1, 0, 0), []reg{{true, 0, 0x7FFFFFFF}}},
		{"f32toi32 saturates low", nil, map[uint8]uint32{1: fb(-3e9)}, I(isa.CVTFI, 0, 1, 0, 0), []reg{{true, 0, 0x80000000}}},
		{"f32toi32 truncates", nil, map[uint8]uint32{1: fb(-3.7)}, I(isa.CVTFI, 0, 1, 0, 0), []reg{{true, 0, 0xFFFFFFFD}}},
		{"f32toi32 nan", nil, map[uint8]uint32{1: qnan32}, I(isa.CVTFI, 0, 1, 0, 0), []reg{{true, 0, 0}}},
		{"i32tof32", nil, map[uint8]uint32{1: 0xFFFFFFFB}, I(isa.CVTIF, 0, 1, 0, 0), []reg{{true, 0, fb(-5)}}},
		{"f32v2tof16", nil, map[uint8]uint32{2: fb(1), 3: fb(-2)}, I(isa.CVTFH, 0, 2, 0, 0), []reg{{true, 0, 0xC0003C00}}},
		{"f16v2tof32", nil, map[uint8]uint32{1: 0xC0003C00}, I(isa.CVTHF, 2, 1, 0, 0), []reg{{true, 2, fb(1)}, {true, 3, fb(-2)}}},
		{"f32v2tof8", nil, map[uint8]uint32{2: fb(1), 3: fb(1000)}, I(isa.CVTF8, 0, 2, 0, 0),
			[]reg{{true, 0, uint32(numfmt.F32ToF8(fb(1), numfmt.E4M3FNUZ, 0, numfmt.Saturate)) | uint32(numfmt.F32ToF8(fb(1000), numfmt.E4M3FNUZ, 0, numfmt.Saturate))<<8}}},
		{"f8tof32v2", nil, map[uint8]uint32{1: 0x4048}, I(isa.CVT8F, 2, 1, 0, 0),
			[]reg{{true, 2, numfmt.F8ToF32(0x48, numfmt.E4M3FNUZ, 0)}, {true, 3, numfmt.F8ToF32(0x40, numfmt.E4M3FNUZ, 0)}}},
		{"f32exp", nil, map[uint8]uint32{1: fb(0.5)}, I(isa.FEXP, 0, 1, 0, 0), []reg{{true, 0, fb(float32(math.Exp(0.5)))}}},
		{"f32sin", nil, map[uint8]uint32{1: fb(0.5)}, I(isa.FSIN, 0, 1, 0, 0), []reg{{true, 0, fb(float32(math.Sin(0.5)))}}},
		{"f32cos", nil, map[uint8]uint32{1: fb(-3)}, I(isa.FCOS, 0, 1, 0, 0), []reg{{true, 0, fb(float32(math.Cos(-3)))}}},
		{"f32sin of Inf", nil, map[uint8]uint32{1: 0x7F800000}, I(isa.FSIN, 0, 1, 0, 0), []reg{{true, 0, 0x7FC00000}}},
		{"f32rsqrt", nil, map[uint8]uint32{1: fb(2)}, I(isa.FRSQRT, 0, 1, 0, 0), []reg{{true, 0, fb(float32(1 / math.Sqrt(2)))}}},
		{"f32rcp", nil, map[uint8]uint32{1: fb(3)}, I(isa.FRCP, 0, 1, 0, 0), []reg{{true, 0, fb(1 / float32(3))}}},
		{"f32abs", nil, map[uint8]uint32{1: 0xFFC00001}, I(isa.FABS, 0, 1, 0, 0), []reg{{true, 0, 0x7FC00001}}},
		{"get tiles", nil, nil, get(3, isa.CSRTiles), []reg{{false, 3, 4}}},
		{"get context", nil, nil, get(3, isa.CSRContext), []reg{{false, 3, 6}}},
		{"put fp8 keeps defined bits", map[uint8]uint32{1: 0xFFFFFFFF}, nil, I(isa.PUT, 0, 1, 0, isa.CSRFP8), nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var items []any
			for r := uint8(0); r < 16; r++ {
				if v, ok := tc.m[r]; ok {
					items = append(items, setM(r, v)...)
				}
				if v, ok := tc.a[r]; ok {
					items = append(items, setA(r, v)...)
				}
			}
			at := len(items)
			items = append(items, tc.in, sync_(), halt())
			r := newRig(t, "ipu21-tiny", Options{})
			r.load(0, assemble(items...), words(dataBase, 0x5555))
			if _, err := r.m.Run(nil, 0); err != nil {
				t.Fatal(err)
			}
			s := r.m.Snapshot(0).Ctx[supCtx]
			want := tc.want
			switch tc.name {
			case "call links":
				want = []reg{{false, 3, pcOf(at + 1)}}
			case "put fp8 keeps defined bits":
				if s.FP8 != fp8Mask {
					t.Errorf("fp8 = %#x, want %#x", s.FP8, fp8Mask)
				}
			}
			for _, w := range want {
				got := s.M[w.n]
				if w.a {
					got = s.A[w.n]
				}
				if got != w.want {
					t.Errorf("register %s%d = %#x, want %#x", map[bool]string{false: "$m", true: "$a"}[w.a], w.n, got, w.want)
				}
			}
		})
	}
}

// TestF16Conversions checks the package's own FP16 conversions against
// numfmt: every FP16 value, and many float64s.
func TestF16Conversions(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		if got, want := f16to32(uint16(h)), numfmt.F16ToF32(uint16(h)); got != want {
			t.Fatalf("f16to32(%#04x) = %#08x, want %#08x", h, got, want)
		}
	}
	for h := 0; h < 1<<16; h++ {
		want := f32(f16to32(uint16(h)))
		if got := h16f(uint16(h)); got != want && (got == got || want == want) {
			t.Fatalf("h16f(%#04x) = %g, want %g", h, got, want)
		}
	}
	seed := uint64(1)
	check := func(x float64) {
		got, want := f64to16(x), numfmt.F64ToF16(x)
		if x != x {
			want = qnan16
		}
		if got != want {
			t.Fatalf("f64to16(%g = %#x) = %#04x, want %#04x", x, math.Float64bits(x), got, want)
		}
	}
	for i := 0; i < 200000; i++ {
		seed = seed*6364136223846793005 + 1442695040888963407
		// Exponents around FP16's range, random mantissas, both signs.
		e := int(seed>>58) - 36
		x := math.Ldexp(1+float64(seed>>12&(1<<40-1))/(1<<40), e)
		if seed&1 != 0 {
			x = -x
		}
		check(x)
		// Halfway cases: an FP16 value plus half an ulp.
		h := uint16(seed >> 20)
		v := float64(h16f(h))
		if v == v && !math.IsInf(v, 0) {
			check(v + math.Copysign(math.Ldexp(1, -25), v))
			check(v * (1 + 1.0/2048))
		}
	}
	for _, x := range []float64{0, math.Copysign(0, -1), math.Inf(1), math.Inf(-1), math.NaN(), 65504, 65519.99, 65520, 1e-300, 5.96e-8, 2.98e-8, 2.9802322387695312e-08} {
		check(x)
	}
}

// TestCSRFP8 decodes the scales and formats.
func TestCSRFP8(t *testing.T) {
	v := uint32(1) | 2<<2 | uint32(0x3F)<<4 | 5<<10 | isa.FP8NaNOnOverflow
	got := decodeFP8(v)
	want := fp8cfg{fa: numfmt.E5M2FNUZ, fb: numfmt.E4M3FN, sa: -1, sb: 5, mode: numfmt.NaNOnOverflow}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(fp8cfg{})); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}
