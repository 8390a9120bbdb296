package planner

import (
	"os"
	"testing"

	"ipu.local/libs/arch"
	"ipu.local/libs/graph"
	"ipu.local/libs/onnx"
)

// BenchmarkPlanFile plans the model file $IPU_BENCH_MODEL on all tiles
// with ipu-plan's default attempts (skipped without the variable): the
// search in process, for -cpuprofile and -benchmem on real models.
func BenchmarkPlanFile(b *testing.B) {
	path := os.Getenv("IPU_BENCH_MODEL")
	if path == "" {
		b.Skip("IPU_BENCH_MODEL is not set")
	}
	m, err := onnx.ReadModelFile(path)
	if err != nil {
		b.Fatal(err)
	}
	g, err := graph.Build(m)
	if err != nil {
		b.Fatal(err)
	}
	p, err := arch.Lookup("ipu21")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, _, err := Plan(g, p, Options{MaxAttempts: 20, SearchEstimate: true}); err != nil {
			b.Fatal(err)
		}
	}
}
