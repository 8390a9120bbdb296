package prog

import (
	"testing"

	"ipu.local/libs/codegen"
)

// TestWorkers: the workers a kernel keeps are its cost's, before and
// after its cost is cached, and again after its parameters change.
func TestWorkers(t *testing.T) {
	p := &codegen.Copy{R: 1, W: 2, XStride: 2, YStride: 2, Workers: codegen.Slots}
	k := &Kernel{What: "copy", Params: p}
	for _, words := range []int{2, 1, 600} {
		p.W, p.XStride, p.YStride = words, words, words
		k.ClearCost()
		w, err := k.Workers() // before the cost is cached
		if err != nil {
			t.Fatal(err)
		}
		c, err := k.Cost()
		if err != nil {
			t.Fatal(err)
		}
		again, _ := k.Workers() // from the kernel
		if w != c.Workers || again != c.Workers {
			t.Fatalf("%d words: workers %d then %d, cost's %d", words, w, again, c.Workers)
		}
	}
}
