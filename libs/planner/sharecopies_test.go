package planner

import (
	"testing"

	"ipu.local/libs/arch"
	"ipu.local/libs/onnx"
)

// A constant smaller than the operand it multiplies (a convolution's
// weight beside its columns, W[M, K] x X[K, N]) may be copied within its
// fair share of the machine (shareCopies), so that the start spreads the
// columns over the tiles; a transformer's projection weight, larger than
// its few tokens, keeps the startCopies limit.
func TestShareCopies(t *testing.T) {
	for _, tc := range []struct {
		m, k, n, tiles int
		share          bool
	}{
		{128, 1152, 784, 1472, true}, // ResNet's layer2 convolution
		{64, 576, 3136, 1472, true},  // its layer1 convolution
		{768, 768, 128, 1472, false}, // a projection of 128 tokens
		{3072, 768, 128, 1472, false},
	} {
		b := onnx.NewModel(17)
		b.AddInitializer(onnx.NewFloat32("w", []int64{int64(tc.m), int64(tc.k)}, make([]float32, tc.m*tc.k)))
		b.AddInput("x", onnx.Float, []int64{int64(tc.k), int64(tc.n)})
		b.AddNode("MatMul", "mm", []string{"w", "x"}, []string{"y"})
		b.AddOutput("y", onnx.Float, []int64{int64(tc.m), int64(tc.n)})
		pl, err := newPlanner(canonical(t, b), arch.MustLookup("ipu21"), tc.tiles)
		if err != nil {
			t.Fatal(err)
		}
		pr := pl.products[0]
		if got := pl.shareCopies(pr); tc.share != (got > startCopies) {
			t.Errorf("%v: %d copies allowed, want more than %d: %v", tc, got, startCopies, tc.share)
		}
		ss, _ := pl.screenN(pr, tc.tiles, 0, startCopies)
		if len(ss) == 0 {
			t.Fatalf("%v: no split", tc)
		}
		if copies := ss[0].GN; tc.share && (copies <= startCopies || ss[0].Tiles() < tc.tiles/2) {
			t.Errorf("%v: best split %+v copies the weight %d times over %d tiles: the columns do not spread", tc, ss[0], copies, ss[0].Tiles())
		}
	}
}
