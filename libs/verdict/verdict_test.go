package verdict

import (
	"encoding/binary"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func f32s(v ...float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func f32bits(v ...uint32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], x)
	}
	return b
}

func f16bits(v ...uint16) []byte {
	b := make([]byte, 2*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint16(b[2*i:], x)
	}
	return b
}

func i32s(v ...int32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(x))
	}
	return b
}

// summary is what the tests check of a Result.
type summary struct {
	Pass        bool
	Exact       bool
	MaxAbsError float64
	Bad         int
	FirstBad    int
	Got, Want   string
}

func TestCompare(t *testing.T) {
	// K=64 float: atol = (64u/(1-64u) + 2u) * max|want| with u = 2^-24.
	u := 0x1p-24
	gamma64 := 64 * u / (1 - 64*u)
	atol64 := (gamma64 + 2*u) * 4
	for _, tc := range []struct {
		name       string
		dtype      string
		accumulate int64
		got, want  []byte
		wantSum    summary
	}{
		{
			name: "float exact equal", dtype: "float",
			got: f32s(1, 2, -0.5), want: f32s(1, 2, -0.5),
			wantSum: summary{Pass: true, Exact: true, FirstBad: -1},
		},
		{
			name: "float exact one ulp off", dtype: "float",
			got: f32bits(0x3f800000, 0x40000001), want: f32bits(0x3f800000, 0x40000000),
			wantSum: summary{Exact: true, MaxAbsError: 0x1p-22, Bad: 1, FirstBad: 1,
				Got: "2.0000002 (0x40000001)", Want: "2 (0x40000000)"},
		},
		{
			name: "float exact signed zero differs", dtype: "float",
			got: f32bits(0x80000000), want: f32bits(0),
			wantSum: summary{Exact: true, Bad: 1, FirstBad: 0, Got: "-0 (0x80000000)", Want: "0 (0x00000000)"},
		},
		{
			name: "float NaN matches any NaN", dtype: "float",
			got: f32bits(0x7fc00000, 0x7f800000), want: f32bits(0xffc00001, 0x7f800000),
			wantSum: summary{Pass: true, Exact: true, FirstBad: -1},
		},
		{
			name: "float NaN against number", dtype: "float",
			got: f32bits(0x7fc00000), want: f32s(1),
			wantSum: summary{Exact: true, MaxAbsError: math.Inf(1), Bad: 1, FirstBad: 0, Got: "NaN (0x7fc00000)", Want: "1 (0x3f800000)"},
		},
		{
			name: "float accumulated within bound", dtype: "float", accumulate: 64,
			got: f32s(4, float32(1+atol64*0.9)), want: f32s(4, 1),
			wantSum: summary{Pass: true, MaxAbsError: float64(float32(1+atol64*0.9)) - 1, FirstBad: -1},
		},
		{
			name: "float accumulated beyond bound", dtype: "float", accumulate: 64,
			got: f32s(4, float32(1+atol64*1.5)), want: f32s(4, 1),
			wantSum: summary{MaxAbsError: float64(float32(1+atol64*1.5)) - 1, Bad: 1, FirstBad: 1,
				Got: "1.0000236 (0x3f8000c6)", Want: "1 (0x3f800000)"},
		},
		{
			name: "float accumulated NaN matches NaN", dtype: "float", accumulate: 8,
			got: f32bits(0x7fc00000), want: f32bits(0x7fc00000),
			wantSum: summary{Pass: true, FirstBad: -1},
		},
		{
			name: "float accumulated infinity against finite", dtype: "float", accumulate: 8,
			got: f32bits(0x7f800000, 0), want: f32s(1, 0),
			wantSum: summary{MaxAbsError: math.Inf(1), Bad: 1, FirstBad: 0, Got: "+Inf (0x7f800000)", Want: "1 (0x3f800000)"},
		},
		{
			// One float16 ulp at 1024 is 1 = 2 u_out * 1024: the rounding
			// term alone must allow it.
			name: "float16 accumulated one ulp at the top", dtype: "float16", accumulate: 1,
			got: f16bits(0x6401), want: f16bits(0x6400),
			wantSum: summary{Pass: true, MaxAbsError: 1, FirstBad: -1},
		},
		{
			name: "float16 accumulated two ulps", dtype: "float16", accumulate: 1,
			got: f16bits(0x6402), want: f16bits(0x6400),
			wantSum: summary{MaxAbsError: 2, Bad: 1, FirstBad: 0, Got: "1026 (0x6402)", Want: "1024 (0x6400)"},
		},
		{
			name: "fp8 exact codes", dtype: "float8e4m3fnuz",
			got: []byte{0x38, 0x80}, want: []byte{0x38, 0x80},
			wantSum: summary{Pass: true, Exact: true, FirstBad: -1},
		},
		{
			name: "fp8 OCP NaNs of different sign differ", dtype: "float8e4m3fn",
			got: []byte{0x7f}, want: []byte{0xff},
			wantSum: summary{Exact: true, Bad: 1, FirstBad: 0, Got: "NaN (0x7f)", Want: "NaN (0xff)"},
		},
		{
			name: "fp8 one code off", dtype: "float8e4m3fnuz",
			got: []byte{0x41}, want: []byte{0x40},
			wantSum: summary{Exact: true, MaxAbsError: 0.125, Bad: 1, FirstBad: 0, Got: "1.125 (0x41)", Want: "1 (0x40)"},
		},
		{
			name: "int32 exact", dtype: "int32", accumulate: 5,
			got: i32s(1, -7, 3), want: i32s(1, -7, 4),
			wantSum: summary{Exact: true, MaxAbsError: 1, Bad: 1, FirstBad: 2, Got: "3", Want: "4"},
		},
		{
			name: "bool", dtype: "bool",
			got: []byte{1, 0}, want: []byte{1, 0},
			wantSum: summary{Pass: true, Exact: true, FirstBad: -1},
		},
		{
			name: "empty", dtype: "float", accumulate: 3,
			wantSum: summary{Pass: true, FirstBad: -1},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Compare("y", tc.dtype, tc.accumulate, tc.got, tc.want)
			if err != nil {
				t.Fatal(err)
			}
			got := summary{Pass: r.Pass, Exact: r.Tolerance.Exact, MaxAbsError: r.MaxAbsError,
				Bad: r.Bad, FirstBad: r.FirstBad, Got: r.Got, Want: r.Want}
			if diff := cmp.Diff(tc.wantSum, got); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
			if strings.Contains(r.Tolerance.Derivation, "\n") || r.Tolerance.Derivation == "" {
				t.Errorf("derivation %q is not one line", r.Tolerance.Derivation)
			}
		})
	}
}

func TestDerive(t *testing.T) {
	for _, tc := range []struct {
		dtype      string
		accumulate int64
		scale      float64
		want       Tolerance
	}{
		{"float", 0, 3, Tolerance{Exact: true,
			Derivation: "float output, no accumulation (K=0): one correctly rounded operation, bit equality (NaN matches NaN)"}},
		{"int64", 7, 3, Tolerance{Exact: true, Derivation: "int64 output: integer result, exact equality"}},
		{"float8e5m2fnuz", 0, 3, Tolerance{Exact: true, Derivation: "float8e5m2fnuz output, no accumulation (K=0): exact FP8 codes"}},
		{"float", 1, 1, Tolerance{
			Rel: 0x1p-24/(1-0x1p-24) + 0x1p-23, Scale: 1, Abs: 0x1p-24/(1-0x1p-24) + 0x1p-23,
			Derivation: "float output, K=1 FP32 accumulations: atol = (gamma_K(2^-24) + 2*2^-24) * max|want| = (5.96e-08 + 1.19e-07) * 1 = 1.79e-07 " +
				"(Higham's recursive summation bound, norm-wise with max|want| as scale; want taken as the exact result rounded once)"}},
		{"float16", 1024, 2, Tolerance{
			Rel: 1024*0x1p-24/(1-1024*0x1p-24) + 0x1p-10, Scale: 2, Abs: 2 * (1024*0x1p-24/(1-1024*0x1p-24) + 0x1p-10),
			Derivation: "float16 output, K=1024 FP32 accumulations: atol = (gamma_K(2^-24) + 2*2^-11) * max|want| = (6.1e-05 + 0.000977) * 2 = 0.00208 " +
				"(Higham's recursive summation bound, norm-wise with max|want| as scale; want taken as the exact result rounded once)"}},
		{"float8e4m3fnuz", 16, 1, Tolerance{
			Rel: 16*0x1p-24/(1-16*0x1p-24) + 0x1p-3, Scale: 1, Abs: 16*0x1p-24/(1-16*0x1p-24) + 0x1p-3,
			Derivation: "float8e4m3fnuz output, K=16 FP32 accumulations: atol = (gamma_K(2^-24) + 2*2^-4) * max|want| = (9.54e-07 + 0.125) * 1 = 0.125 " +
				"(Higham's recursive summation bound, norm-wise with max|want| as scale; want taken as the exact result rounded once)"}},
	} {
		t.Run(tc.dtype, func(t *testing.T) {
			got, err := Derive(tc.dtype, tc.accumulate, tc.scale)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestHugeAccumulation(t *testing.T) {
	tol, err := Derive("float", 1<<24, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !math.IsInf(tol.Abs, 1) || tol.Exact {
		t.Errorf("K*u >= 1 gave %+v, want an infinite tolerance", tol)
	}
}

func TestCompareErrors(t *testing.T) {
	for _, tc := range []struct {
		name       string
		dtype      string
		accumulate int64
		got, want  []byte
		wantErr    string
	}{
		{"unknown type", "string", 0, nil, nil, `output "y": element type "string" is not supported`},
		{"lengths differ", "float", 0, f32s(1), f32s(1, 2), `output "y": device gave 4 bytes, expected 8`},
		{"ragged", "float", 0, []byte{1, 2, 3}, []byte{1, 2, 3}, `output "y": 3 bytes is not a whole number of float elements`},
		{"negative accumulate", "float", -1, f32s(1), f32s(1), `output "y": accumulate -1 is negative`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Compare("y", tc.dtype, tc.accumulate, tc.got, tc.want)
			if err == nil {
				t.Fatal("no error")
			}
			if diff := cmp.Diff(tc.wantErr, err.Error()); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestBoundHolds checks the derivation on real FP32 sums: random dot
// products of FP16-representable values accumulated in FP32 in two orders
// (forward and pairwise), against the FP64 result rounded to the output
// type, must pass.
func TestBoundHolds(t *testing.T) {
	seed := uint64(0x9e3779b97f4a7c15)
	next := func() float64 {
		seed ^= seed << 13
		seed ^= seed >> 7
		seed ^= seed << 17
		return float64(int64(seed>>11)%2048-1024) / 256 // exact in FP16
	}
	for _, k := range []int{1, 16, 256, 4096} {
		const rows = 64
		want := make([]float32, rows)
		fwd := make([]float32, rows)
		pair := make([]float32, rows)
		for r := range rows {
			terms := make([]float32, k)
			var exact float64
			for i := range terms {
				p := next() * next() // exact in FP32 and FP64
				terms[i] = float32(p)
				exact += p
			}
			want[r] = float32(exact)
			var s float32
			for _, x := range terms {
				s += x
			}
			fwd[r] = s
			pair[r] = pairwise(terms)
		}
		for name, got := range map[string][]float32{"forward": fwd, "pairwise": pair} {
			res, err := Compare("y", "float", int64(k), f32s(got...), f32s(want...))
			if err != nil {
				t.Fatal(err)
			}
			if !res.Pass {
				t.Errorf("K=%d %s: max error %g > atol %g", k, name, res.MaxAbsError, res.Tolerance.Abs)
			}
		}
	}
}

func pairwise(v []float32) float32 {
	if len(v) == 1 {
		return v[0]
	}
	h := len(v) / 2
	return pairwise(v[:h]) + pairwise(v[h:])
}

func TestFormatError(t *testing.T) {
	for _, tc := range []struct {
		x    float64
		want string
	}{
		{0.000717, "0.000717"},
		{0.00071712345, "0.000717123"},
		{0, "0"},
		{1.5e-7, "1.5e-07"},
		{math.Inf(1), "+Inf"},
	} {
		if got := FormatError(tc.x); got != tc.want {
			t.Errorf("FormatError(%g) = %q, want %q", tc.x, got, tc.want)
		}
	}
}

func TestUnboundedStillChecksNonFinite(t *testing.T) {
	r, err := Compare("y", "float", 1<<25, f32s(1e30, float32(math.Inf(1))), f32s(-1e30, 1))
	if err != nil {
		t.Fatal(err)
	}
	if r.Pass || r.Bad != 1 || r.FirstBad != 1 {
		t.Errorf("got pass %v bad %d first %d; want the infinity (only) to fail", r.Pass, r.Bad, r.FirstBad)
	}
}
