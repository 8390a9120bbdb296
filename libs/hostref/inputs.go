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
//
// Integer inputs are uniform in [0, n): n is the smallest dimension a
// Gather that takes the input as indices reads along (so that the
// indices are in range), 16 for other integer inputs. Bool inputs are
// uniform over false and true.
func GenerateInputs(g *graph.Graph, seed uint64) []*onnx.Tensor {
	out := make([]*onnx.Tensor, len(g.Inputs))
	bound := indexBounds(g)
	for i, v := range g.Inputs {
		rng := rand.New(rand.NewPCG(seed, uint64(i)))
		if isIntType(v.DType) {
			n := uint64(2)
			if v.DType != onnx.Bool {
				n = 16
				if b, ok := bound[v]; ok {
					n = uint64(max(b, 1))
				}
			}
			ints := make([]int64, v.NumElements())
			for j := range ints {
				ints[j] = int64(rng.Uint64N(n))
			}
			out[i], _ = encodeInts(v.Name, v.DType, v.Shape, ints)
			continue
		}
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
		// The other inputs are float, float16 or FP8, which Encode takes.
		t, _ := Encode(v.Name, v.DType, v.Shape, data)
		out[i] = t
	}
	return out
}

// indexBounds returns, for each value some Gather takes as indices, the
// smallest dimension such a Gather reads along (branches included).
func indexBounds(g *graph.Graph) map[*graph.Value]int64 {
	out := map[*graph.Value]int64{}
	var walk func([]*graph.Node)
	walk = func(nodes []*graph.Node) {
		for _, n := range nodes {
			if a, ok := n.Attrs.(*graph.If); ok {
				for _, br := range []*graph.Branch{a.Then, a.Else} {
					if br != nil {
						walk(br.Nodes)
					}
				}
			}
			a, ok := n.Attrs.(*graph.Gather)
			if n.Op != "Gather" || !ok || len(n.Inputs) < 2 || n.Inputs[0] == nil || n.Inputs[1] == nil || a.Axis < 0 || a.Axis >= len(n.Inputs[0].Shape) {
				continue
			}
			d := n.Inputs[0].Shape[a.Axis]
			if b, seen := out[n.Inputs[1]]; !seen || d < b {
				out[n.Inputs[1]] = d
			}
		}
	}
	walk(g.Nodes)
	return out
}
