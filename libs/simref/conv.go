package simref

import "ipu.local/libs/numfmt"

// The conversions are numfmt's, so that the device, the fast simulator and
// the host reference round alike; these wrappers only adapt the CSR fields.

func f16to32(h uint16) uint32  { return numfmt.F16ToF32(h) }
func f32to16(b uint32) uint16  { return numfmt.F32ToF16(b) }
func f64to16(f float64) uint16 { return numfmt.F64ToF16(f) }

func mode(nanOnOverflow bool) numfmt.Mode {
	if nanOnOverflow {
		return numfmt.NaNOnOverflow
	}
	return numfmt.Saturate
}

func f16to8(h uint16, f, scale int, nan bool) uint8 {
	return numfmt.F16ToF8Dev(h, numfmt.Format(f), scale, mode(nan))
}

func f32to8(b uint32, f, scale int, nan bool) uint8 {
	return numfmt.F32ToF8Dev(b, numfmt.Format(f), scale, mode(nan))
}

func f8to16(b uint8, f, scale int) uint16 { return numfmt.F8ToF16(b, numfmt.Format(f), scale) }
func f8to32(b uint8, f, scale int) uint32 { return numfmt.F8ToF32(b, numfmt.Format(f), scale) }
