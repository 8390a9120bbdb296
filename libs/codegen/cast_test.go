package codegen

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/google/go-cmp/cmp"

	"ipu.local/libs/numfmt"
)

// castInput returns n random input elements of kind k as bytes: FP32
// values of assorted magnitudes (overflowing the FP8 formats too) and
// specials; FP16 and FP8 as random codes.
func castInput(r *rand.Rand, k CastKind, n int) []byte {
	ein, _ := k.sizes()
	b := make([]byte, n*ein)
	for i := 0; i < n; i++ {
		switch ein {
		case 4:
			v := float32(r.NormFloat64() * math.Ldexp(1, r.Intn(40)-20))
			if i < len(specials) && n > 50 {
				v = specials[i]
			}
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
		case 2:
			binary.LittleEndian.PutUint16(b[2*i:], uint16(r.Intn(1<<16)))
		default:
			b[i] = byte(r.Intn(256))
		}
	}
	return b
}

// castExact converts one input element with the float64 conversions the
// host reference uses (numfmt.F64ToF8, F64ToF16) from the element's
// exact value: the device must give the same code.
func castExact(p Cast, x []byte) []byte {
	mode := numfmt.Saturate
	if !p.Saturate {
		mode = numfmt.NaNOnOverflow
	}
	var v float64
	switch p.Kind {
	case F32ToF16, F32ToF8:
		v = float64(math.Float32frombits(binary.LittleEndian.Uint32(x)))
	case F16ToF32, F16ToF8:
		v = numfmt.F16ToF64(binary.LittleEndian.Uint16(x))
	case F8ToF32:
		v = numfmt.F8ToF64(x[0], p.Format, p.Scale)
	case I32ToF32:
		// Any int32 (the input bits read as one): above 2^24 the
		// conversion rounds to nearest even, as Go's does.
		v = float64(int32(binary.LittleEndian.Uint32(x)))
	}
	switch p.Kind {
	case F32ToF16:
		h := numfmt.F64ToF16(v)
		if p.MulF16 != 0 {
			// The product of two FP16 values is exact in float64: one
			// rounding of it.
			h = numfmt.F64ToF16(numfmt.F16ToF64(h) * numfmt.F16ToF64(p.MulF16))
		}
		return binary.LittleEndian.AppendUint16(nil, h)
	case F16ToF32, F8ToF32, I32ToF32:
		return binary.LittleEndian.AppendUint32(nil, math.Float32bits(float32(v)))
	}
	return []byte{numfmt.F64ToF8Dev(v, p.Format, p.Scale, mode)}
}

func TestCast(t *testing.T) {
	tl := newTile()
	type variant struct {
		f     numfmt.Format
		scale int
		sat   bool
		mul   uint16 // MulF16
	}
	variants := map[CastKind][]variant{
		// The factors: 0.125 (attention's scale), -3, 1/3 (rounded) and
		// 1000 (overflowing to Inf).
		F32ToF16: {{}, {mul: 0x3000}, {mul: 0xC200}, {mul: 0x3555}, {mul: 0x63D0}},
		F16ToF32: {{}},
		F32ToF8:  {{numfmt.E4M3FNUZ, 0, true, 0}, {numfmt.E5M2FNUZ, 3, false, 0}, {numfmt.E4M3FN, -2, false, 0}, {numfmt.E5M2, 0, true, 0}, {numfmt.E5M2, 1, false, 0}},
		F8ToF32:  {{numfmt.E4M3FNUZ, 0, true, 0}, {numfmt.E5M2FNUZ, -5, true, 0}, {numfmt.E4M3FN, 4, true, 0}, {numfmt.E5M2, 20, true, 0}},
		F16ToF8:  {{numfmt.E4M3FNUZ, 0, true, 0}, {numfmt.E5M2FNUZ, 0, false, 0}, {numfmt.E4M3FN, 1, true, 0}, {numfmt.E5M2, -1, false, 0}},
		I32ToF32: {{}},
	}
	sizes := []struct{ n, w int }{{1, 6}, {2, 6}, {3, 6}, {5, 2}, {8, 6}, {30, 6}, {103, 6}, {1001, 5}}
	for kind := CastKind(0); kind < numCasts; kind++ {
		for vi, v := range variants[kind] {
			for si, sh := range sizes {
				if vi > 0 && si%2 == 0 && si < 6 {
					continue
				}
				t.Run(fmt.Sprintf("%s/%s%+d-sat%v-mul%#x/n%d-w%d", kind, v.f, v.scale, v.sat, v.mul, sh.n, sh.w), func(t *testing.T) {
					p := Cast{Kind: kind, N: sh.n, X: ilBuf, Y: nonIlBuf, Format: v.f, Scale: v.scale, Saturate: v.sat, MulF16: v.mul, Workers: sh.w}
					_, eout := kind.sizes()
					x := castInput(rng(int64(100*int(kind)+10*vi+si)), kind, p.N)
					tl.put(p.X, x)
					guard := make([]byte, p.N*eout+16)
					for i := range guard {
						guard[i] = 0xA5
					}
					tl.put(p.Y, guard)
					phase := si % Slots
					k, cycles := tl.runKernel(t, phase, func(b *Builder) (Kernel, error) { return EmitCast(b, p) })
					got := tl.get(p.Y, p.N*eout+16)
					want := append(EmulateCast(p, x), guard[p.N*eout:]...)
					if diff := cmp.Diff(want, got); diff != "" {
						t.Fatalf("result mismatch (-want +got):\n%s", diff)
					}
					ein, _ := kind.sizes()
					for i := 0; i < p.N; i++ {
						ex := castExact(p, x[i*ein:(i+1)*ein])
						g := got[i*eout : (i+1)*eout]
						if !cmp.Equal(ex, g) && !bothNaN(p, ex, g) {
							t.Errorf("element %d (% x): got % x, the float64 conversion gives % x", i, x[i*ein:(i+1)*ein], g, ex)
						}
					}
					checkCycles(t, k, cycles, phase)
				})
			}
		}
	}
}

// bothNaN reports whether two encodings of the output type are NaNs
// (payloads may differ between the FP32 routes).
func bothNaN(p Cast, a, b []byte) bool {
	switch len(a) {
	case 4:
		x, y := math.Float32frombits(binary.LittleEndian.Uint32(a)), math.Float32frombits(binary.LittleEndian.Uint32(b))
		return x != x && y != y
	case 2:
		return numfmt.F16ToF64(binary.LittleEndian.Uint16(a)) != numfmt.F16ToF64(binary.LittleEndian.Uint16(a)) &&
			numfmt.F16ToF64(binary.LittleEndian.Uint16(b)) != numfmt.F16ToF64(binary.LittleEndian.Uint16(b))
	}
	return p.Format.IsNaN(a[0]) && p.Format.IsNaN(b[0])
}
