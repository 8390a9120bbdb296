package link

import (
	"strings"
	"testing"
)

// TestOldFP32KernelName: a plan written before FP32 products ran on the
// AMP names their kernel vec-fp32; linking it says which step and what
// the kernel is now, instead of running another kernel than the plan's.
func TestOldFP32KernelName(t *testing.T) {
	pl, _, _, _, err := planLinkN(t, fp8Product(10, 16), 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for i := range pl.Steps {
		if pl.Steps[i].Kernel == "amp-fp32" {
			pl.Steps[i].Kernel = "vec-fp32"
			n++
		}
	}
	if n == 0 {
		t.Fatal("no amp-fp32 step in the plan")
	}
	_, _, err = Link(pl, "test", Options{})
	if err == nil || !strings.Contains(err.Error(), `kernel "vec-fp32", the operands' types make it "amp-fp32"`) {
		t.Fatalf("linking a vec-fp32 step: got %v", err)
	}
	t.Log(err)
}
