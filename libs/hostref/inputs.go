package hostref

import (
	"math/rand/v2"

	"ipu.local/libs/graph"
	"ipu.local/libs/numfmt"
	"ipu.local/libs/onnx"
)

// GenerateInputs returns deterministic inputs for g, one tensor per graph
// input in order: values uniform on a grid of step 2^-23 in [-1, 1), then
// rounded to the input's type (to nearest even; float16 and FP8 values
// near 1 may round up to 1). The same seed gives the same tensors on every
// platform and Go version: the generator is PCG, seeded by (seed, input
// index).
func GenerateInputs(g *graph.Graph, seed uint64) []*onnx.Tensor {
	out := make([]*onnx.Tensor, len(g.Inputs))
	for i, v := range g.Inputs {
		rng := rand.New(rand.NewPCG(seed, uint64(i)))
		data := make([]float64, v.NumElements())
		f, fp8 := graph.FP8Format(v.DType)
		for j := range data {
			x := float64(int64(rng.Uint64()>>40)-1<<23) / (1 << 23)
			switch {
			case v.DType == onnx.Float16:
				x = numfmt.F16ToF64(numfmt.F64ToF16(x))
			case fp8:
				x = numfmt.F8ToF64(numfmt.F64ToF8(x, f, 0, numfmt.Saturate), f, 0)
			}
			data[j] = x
		}
		// Graph inputs are float, float16 or FP8, which Encode takes.
		t, _ := Encode(v.Name, v.DType, v.Shape, data)
		out[i] = t
	}
	return out
}
