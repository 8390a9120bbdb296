package graph

import (
	"strings"
	"testing"

	"ipu.local/libs/onnx"
)

// PredicateIfs puts both branches where the If was and selects each
// output with Where on the condition made a scalar; the graph stays valid.
func TestPredicateIfs(t *testing.T) {
	for _, tc := range []struct {
		name  string
		model func() *onnx.Model
		want  string
	}{
		{"scalar condition", gateModel(nil), `
input x float[1,2]
const thr float[]
const k float[]
node "sig" Sigmoid (x) -> s float[1,2]
node "rm" ReduceMax {Axes:[0 1] KeepDims:false} (s) -> r float[]
node "ge" GreaterOrEqual (r, thr) -> c bool[]
node "Neg" Neg (x) -> t float[1,2]
node "tm" Mul (t, k) -> c_2 float[1,2]
node "if_Where0" Where (c, c_2, s) -> p float[1,2]
output p
`},
		{"one-element condition of rank 2", gateModel(func(m *onnx.Model) {
			for i := range m.Graph.Nodes {
				if m.Graph.Nodes[i].Name == "rm" {
					m.Graph.Nodes[i].Attrs = nil // keepdims 1: r is [1,1]
				}
			}
		}), `
input x float[1,2]
const thr float[]
const k float[]
node "sig" Sigmoid (x) -> s float[1,2]
node "rm" ReduceMax {Axes:[0 1] KeepDims:true} (s) -> r float[1,1]
node "ge" GreaterOrEqual (r, thr) -> c bool[1,1]
node "if_cond_Reshape" Reshape {Shape:[]} (c) -> if_cond bool[]
node "Neg" Neg (x) -> t float[1,2]
node "tm" Mul (t, k) -> c_2 float[1,2]
node "if_Where0" Where (if_cond, c_2, s) -> p float[1,2]
output p
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := Build(tc.model())
			if err != nil {
				t.Fatal(err)
			}
			g, _ = Simplify(g)
			g, rw := PredicateIfs(g)
			if len(rw) != 1 || !strings.Contains(rw[0].What, "If predicated") {
				t.Errorf("rewrites %v", rw)
			}
			if err := Check(g); err != nil {
				t.Fatalf("Check: %v", err)
			}
			pg := Encode(g)
			if _, err := Decode(&pg); err != nil {
				t.Fatalf("Decode(Encode): %v", err)
			}
			got := g.String()
			if _, body, ok := strings.Cut(got, "\n"); ok {
				got = body
			}
			if strings.TrimSpace(got) != strings.TrimSpace(tc.want) {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}
