package link

import (
	"os"
	"testing"

	"ipu.local/formats/plan"
)

// BenchmarkLinkFile links the plan file $IPU_BENCH_PLAN (skipped without
// the variable): the whole link in process, for -cpuprofile and
// -benchmem on real models (artifacts/transformers).
func BenchmarkLinkFile(b *testing.B) {
	path := os.Getenv("IPU_BENCH_PLAN")
	if path == "" {
		b.Skip("IPU_BENCH_PLAN is not set")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	pl, err := plan.Read(data)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := Link(pl, "", Options{}); err != nil {
			b.Fatal(err)
		}
	}
}
