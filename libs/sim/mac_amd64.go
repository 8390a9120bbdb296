package sim

// mac64 is mac64Go with SSE: MULPS and ADDPS round each lane as the scalar
// float32 multiply and add do (no fused multiply-add), so the results are
// the same bits.
//
//go:noescape
func mac64(acc *[64]float32, x *[4]float32, w *[16]float32)
