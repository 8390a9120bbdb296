// Package verdict compares a device's outputs with expected tensors, with
// a tolerance derived from the data types and never tuned to pass.
//
// # Exact outputs
//
// Integer and bool outputs, and every output whose Accumulate is 0 (the
// compiler's statement that each element is one correctly rounded
// operation, a cast or a copy of its inputs), must match bit for bit. The
// only exception is NaN: for the IEEE formats (float, double, float16,
// bfloat16) any NaN matches any NaN, since payloads are not specified
// across implementations. FP8 outputs compare as bytes: the formats have
// one or two NaN codes and the code is part of the result.
//
// # Accumulated outputs
//
// An output with Accumulate K > 0 is (at worst) a sum of K terms computed
// in FP32 on the device, in an order the compiler chose, then rounded once
// to the output type. K counts roundings in units of FP32's unit
// roundoff: a chain of float16 operations rounds each intermediate to
// float16, whose unit roundoff is 2^13 times FP32's, so the compiler
// counts each such rounding as 2^13 (K*u_acc then adds up every rounding's
// relative error, first order). Element i passes when
//
//	|got_i - want_i| <= (gamma_K(u_acc) + 2 u_out) * max_j |want_j|
//
// with u_acc = 2^-24 the unit roundoff of FP32 accumulation, gamma_K(u) =
// K u / (1 - K u), and u_out the unit roundoff of the output type (2^-24
// float, 2^-11 float16, 2^-8 bfloat16, 2^-53 double, 2^-4 for the E4M3 FP8
// formats, 2^-3 for E5M2).
//
// Derivation. Let s = sum_k t_k be the exact value and S = sum_k |t_k|.
// Recursive summation of K terms in floating point, with each product
// rounded at most once, gives |s_dev - s| <= gamma_K(u_acc) S whatever the
// order (Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed.,
// 2002, §3.1 and §4.2; FP16 and FP8 products are exact in FP32, which only
// makes the bound looser than needed). The device then rounds once to the
// output type: got = fl_out(s_dev). The expected value is assumed to be
// the exact result rounded once to the output type, want = fl_out(s) (a
// reference computed in FP64, whose own error is some 2^29 times below the
// FP32 term, or the ONNX test data when that was made so). Round to
// nearest gives |fl(a) - a| <= u |a|, so
//
//	|got - want| <= |s_dev - s| + u_out (|s_dev| + |s|) ~ gamma_K(u_acc) S + 2 u_out |s|.
//
// The factor 2 on u_out is needed: two values on either side of a rounding
// boundary round one unit in the last place apart, up to 2 u_out |s|, even
// when the accumulation error is tiny.
//
// Scale. The per-element bound needs S and |s| for each element, which the
// checker does not have. The norm-wise form used here replaces both by M =
// max_j |want_j|. That is an estimate, not a bound: it is generous for the
// small elements of a tensor (they inherit the absolute error allowed for
// the largest), and it can be too strict when the terms of a sum cancel
// heavily (S much larger than |s| for every element), where a correct
// device may exceed it. Expected data computed at a precision lower than
// the assumption above carries its own error, which the bound does not
// cover.
package verdict

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"

	"ipu.local/libs/numfmt"
)

// UnitRoundoffFP32 is u_acc: the unit roundoff of FP32 accumulation.
const UnitRoundoffFP32 = 0x1p-24

// kind is how the elements of a type are decoded.
type kind uint8

const (
	kindIEEE kind = iota // IEEE binary floating point: NaN matches NaN
	kindFP8              // FP8: compared as codes
	kindInt              // integers and bool
)

// dtype describes an output element type.
type dtype struct {
	size int
	kind kind
	u    float64 // unit roundoff (floating types)
	uTxt string  // u as printed in derivations
	fp8  numfmt.Format
	// value decodes one element to float64 (exact for every type except
	// 64-bit integers beyond 2^53).
	value func(b []byte) float64
}

var dtypes = map[string]*dtype{
	"float": {size: 4, kind: kindIEEE, u: 0x1p-24, uTxt: "2^-24",
		value: func(b []byte) float64 { return float64(math.Float32frombits(binary.LittleEndian.Uint32(b))) }},
	"double": {size: 8, kind: kindIEEE, u: 0x1p-53, uTxt: "2^-53",
		value: func(b []byte) float64 { return math.Float64frombits(binary.LittleEndian.Uint64(b)) }},
	"float16": {size: 2, kind: kindIEEE, u: 0x1p-11, uTxt: "2^-11",
		value: func(b []byte) float64 { return numfmt.F16ToF64(binary.LittleEndian.Uint16(b)) }},
	"bfloat16": {size: 2, kind: kindIEEE, u: 0x1p-8, uTxt: "2^-8",
		value: func(b []byte) float64 {
			return float64(math.Float32frombits(uint32(binary.LittleEndian.Uint16(b)) << 16))
		}},
	"float8e4m3fn":   fp8Type(numfmt.E4M3FN, 0x1p-4, "2^-4"),
	"float8e4m3fnuz": fp8Type(numfmt.E4M3FNUZ, 0x1p-4, "2^-4"),
	"float8e5m2":     fp8Type(numfmt.E5M2, 0x1p-3, "2^-3"),
	"float8e5m2fnuz": fp8Type(numfmt.E5M2FNUZ, 0x1p-3, "2^-3"),
	"bool":           intType(1, func(b []byte) float64 { return float64(b[0]) }),
	"uint8":          intType(1, func(b []byte) float64 { return float64(b[0]) }),
	"int8":           intType(1, func(b []byte) float64 { return float64(int8(b[0])) }),
	"uint16":         intType(2, func(b []byte) float64 { return float64(binary.LittleEndian.Uint16(b)) }),
	"int16":          intType(2, func(b []byte) float64 { return float64(int16(binary.LittleEndian.Uint16(b))) }),
	"uint32":         intType(4, func(b []byte) float64 { return float64(binary.LittleEndian.Uint32(b)) }),
	"int32":          intType(4, func(b []byte) float64 { return float64(int32(binary.LittleEndian.Uint32(b))) }),
	"uint64":         intType(8, func(b []byte) float64 { return float64(binary.LittleEndian.Uint64(b)) }),
	"int64":          intType(8, func(b []byte) float64 { return float64(int64(binary.LittleEndian.Uint64(b))) }),
}

func fp8Type(f numfmt.Format, u float64, uTxt string) *dtype {
	return &dtype{size: 1, kind: kindFP8, u: u, uTxt: uTxt, fp8: f,
		value: func(b []byte) float64 { return numfmt.F8ToF64(b[0], f, 0) }}
}

func intType(size int, value func([]byte) float64) *dtype {
	return &dtype{size: size, kind: kindInt, value: value}
}

// Supported reports whether Compare knows the element type name (the
// lower-case ONNX name, as in obj.Tensor.DType).
func Supported(dtypeName string) bool { return dtypes[dtypeName] != nil }

// Tolerance is the acceptance rule of one output.
type Tolerance struct {
	Exact bool // bit equality (NaN matches NaN for the IEEE types)
	// Rel is gamma_K(u_acc) + 2 u_out; Scale is max |want|; Abs = Rel *
	// Scale is the largest absolute error allowed. All 0 when Exact.
	Rel, Scale, Abs float64
	// Derivation says in one line where the numbers come from.
	Derivation string
}

// Derive returns the tolerance of an output of element type dtypeName
// whose elements accumulate at most accumulate FP32 additions, when the
// largest expected magnitude is scale.
func Derive(dtypeName string, accumulate int64, scale float64) (Tolerance, error) {
	dt := dtypes[dtypeName]
	if dt == nil {
		return Tolerance{}, fmt.Errorf("element type %q is not supported", dtypeName)
	}
	if accumulate < 0 {
		return Tolerance{}, fmt.Errorf("accumulate %d is negative", accumulate)
	}
	switch {
	case dt.kind == kindInt:
		return Tolerance{Exact: true, Derivation: dtypeName + " output: integer result, exact equality"}, nil
	case accumulate == 0 && dt.kind == kindFP8:
		return Tolerance{Exact: true, Derivation: dtypeName + " output, no accumulation (K=0): exact FP8 codes"}, nil
	case accumulate == 0:
		return Tolerance{Exact: true, Derivation: dtypeName + " output, no accumulation (K=0): one correctly rounded operation, bit equality (NaN matches NaN)"}, nil
	}
	k := float64(accumulate)
	ku := k * UnitRoundoffFP32
	if ku >= 1 {
		return Tolerance{Rel: math.Inf(1), Scale: scale, Abs: math.Inf(1),
			Derivation: fmt.Sprintf("%s output, K=%d: K*2^-24 >= 1, no error bound (every finite result passes)", dtypeName, accumulate)}, nil
	}
	gamma := ku / (1 - ku)
	rel := gamma + 2*dt.u
	abs := rel * scale
	return Tolerance{Rel: rel, Scale: scale, Abs: abs,
		Derivation: fmt.Sprintf("%s output, K=%d FP32 accumulations: atol = (gamma_K(2^-24) + 2*%s) * max|want| = (%s + %s) * %s = %s "+
			"(Higham's recursive summation bound, norm-wise with max|want| as scale; want taken as the exact result rounded once)",
			dtypeName, accumulate, dt.uTxt, fmtG(gamma), fmtG(2*dt.u), fmtG(scale), fmtG(abs))}, nil
}

// ForExpected returns the tolerance Compare uses for an output of element
// type dtypeName with the given Accumulate whose expected raw elements are
// want: Derive with max |want| (finite elements only) as the scale.
func ForExpected(dtypeName string, accumulate int64, want []byte) (Tolerance, error) {
	dt := dtypes[dtypeName]
	if dt == nil {
		return Tolerance{}, fmt.Errorf("element type %q is not supported", dtypeName)
	}
	return Derive(dtypeName, accumulate, maxAbs(dt, want))
}

// maxAbs is the largest finite magnitude among the elements of raw.
func maxAbs(dt *dtype, raw []byte) float64 {
	m := 0.0
	for i := 0; i+dt.size <= len(raw); i += dt.size {
		if v := math.Abs(dt.value(raw[i:])); !math.IsInf(v, 0) && !math.IsNaN(v) {
			m = max(m, v)
		}
	}
	return m
}

// Result is the verdict on one output.
type Result struct {
	Name      string
	DType     string
	Elements  int
	Pass      bool
	Tolerance Tolerance
	// MaxAbsError is the largest |got - want| over the elements, ignoring
	// NaNs that match; +Inf when a non-finite value does not match.
	MaxAbsError float64
	// Bad counts the elements that fail; FirstBad is the index of the
	// first (-1 when none), with Got and Want its values as text.
	Bad       int
	FirstBad  int
	Got, Want string
}

// Compare checks got against want, two tensors of element type dtypeName
// in raw little-endian form, as the output called name with the given
// Accumulate. The error is for inputs that cannot be compared (unknown
// type, lengths that differ or do not divide into elements); a mismatch
// is a Result with Pass false.
func Compare(name, dtypeName string, accumulate int64, got, want []byte) (*Result, error) {
	dt := dtypes[dtypeName]
	if dt == nil {
		return nil, fmt.Errorf("output %q: element type %q is not supported", name, dtypeName)
	}
	if len(got) != len(want) {
		return nil, fmt.Errorf("output %q: device gave %d bytes, expected %d", name, len(got), len(want))
	}
	if len(want)%dt.size != 0 {
		return nil, fmt.Errorf("output %q: %d bytes is not a whole number of %s elements", name, len(want), dtypeName)
	}
	n := len(want) / dt.size
	tol, err := Derive(dtypeName, accumulate, maxAbs(dt, want))
	if err != nil {
		return nil, fmt.Errorf("output %q: %w", name, err)
	}
	r := &Result{Name: name, DType: dtypeName, Elements: n, Tolerance: tol, FirstBad: -1}
	for i := 0; i < n; i++ {
		gb := got[i*dt.size : (i+1)*dt.size]
		wb := want[i*dt.size : (i+1)*dt.size]
		g, w := dt.value(gb), dt.value(wb)
		var errAbs float64
		var ok bool
		switch {
		case math.IsNaN(g) && math.IsNaN(w) && (dt.kind == kindIEEE || !tol.Exact):
			ok = true
		case tol.Exact:
			ok = string(gb) == string(wb)
			if !ok {
				errAbs = absDiff(g, w)
			}
		default:
			errAbs = absDiff(g, w)
			// Non-finite values match only themselves, even under an
			// unbounded tolerance.
			ok = errAbs <= tol.Abs && !math.IsInf(errAbs, 1)
		}
		if errAbs > r.MaxAbsError {
			r.MaxAbsError = errAbs
		}
		if !ok {
			r.Bad++
			if r.FirstBad < 0 {
				r.FirstBad = i
				r.Got, r.Want = dt.text(gb, g), dt.text(wb, w)
			}
		}
	}
	r.Pass = r.Bad == 0
	return r, nil
}

// absDiff is |g - w|: 0 for equal values (infinities included) and for
// two NaNs, +Inf when exactly one is NaN or the values are opposite
// infinities.
func absDiff(g, w float64) float64 {
	if g == w || math.IsNaN(g) && math.IsNaN(w) {
		return 0
	}
	if math.IsNaN(g) || math.IsNaN(w) {
		return math.Inf(1)
	}
	d := math.Abs(g - w)
	if math.IsNaN(d) {
		return math.Inf(1)
	}
	return d
}

// text formats one element: the value, and the bits for floating types.
func (dt *dtype) text(b []byte, v float64) string {
	if dt.kind == kindInt {
		if dt.size == 8 {
			u := binary.LittleEndian.Uint64(b)
			return strconv.FormatUint(u, 10) + fmt.Sprintf(" (%#x)", u)
		}
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	var bits uint64
	for i := len(b) - 1; i >= 0; i-- {
		bits = bits<<8 | uint64(b[i])
	}
	bitSize := 32 // every type but double is exact in float32: print its shortest form
	if dt.size == 8 {
		bitSize = 64
	}
	return fmt.Sprintf("%s (%#0*x)", strconv.FormatFloat(v, 'g', -1, bitSize), 2*len(b), bits)
}

// fmtG prints x with three significant digits.
func fmtG(x float64) string { return strconv.FormatFloat(x, 'g', 3, 64) }

// FormatError formats a maximum absolute error with six significant
// digits, as the check's report prints it ("0.000717", "1.5e-07").
func FormatError(x float64) string { return strconv.FormatFloat(x, 'g', 6, 64) }
