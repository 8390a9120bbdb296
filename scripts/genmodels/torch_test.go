package main

import (
	"bytes"
	"strings"
	"testing"

	"ipu.local/libs/graph"
	"ipu.local/libs/hostref"
	"ipu.local/libs/onnx"
)

// Every -torch case is deterministic, reads back at its opset, has
// distinct names, and each gated detector's condition is what its name
// says (taken: true, skipped: false) on its input.
func TestTorchCases(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range torchCases() {
		t.Run(c.Name, func(t *testing.T) {
			if seen[c.Name] {
				t.Fatal("duplicate case name")
			}
			seen[c.Name] = true
			if err := c.check(); err != nil {
				t.Fatal(err)
			}
			model, inputs := c.model()
			again, _ := c.model()
			if !bytes.Equal(model, again) {
				t.Fatal("two runs of the generator differ")
			}
			m, err := onnx.ReadModel(model)
			if err != nil {
				t.Fatal(err)
			}
			if m.Opset("") != c.Opset {
				t.Fatalf("opset %d, want %d", m.Opset(""), c.Opset)
			}
			g, err := graph.Build(m)
			if err != nil {
				t.Fatal(err)
			}
			if c.Family != torchGate {
				return
			}
			vals, err := hostref.EvalValues(g, inputs, hostref.Options{Precision: hostref.FP64, Threads: 1})
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, v := range g.Values {
				if v.Producer != nil && v.Producer.Op == "Cast" && v.DType == onnx.Bool {
					found = true
					if got := vals[v.Index][0] != 0; got != c.Taken {
						t.Fatalf("condition %s = %v, want %v", v.Name, got, c.Taken)
					}
				}
			}
			if !found {
				t.Fatal("no bool Cast")
			}
			if strings.Contains(c.Name, "taken") != c.Taken {
				t.Fatal("name and Taken disagree")
			}
		})
	}
}
