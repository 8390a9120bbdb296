package graph

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"ipu.local/formats/plan"
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
node "Neg" Neg (x) -> t float[1,2] [then of "if"]
node "tm" Mul (t, k) -> c_2 float[1,2] [then of "if"]
node "if_Where0" Where (c, c_2, s) -> p float[1,2] [select of "if"]
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
node "Neg" Neg (x) -> t float[1,2] [then of "if"]
node "tm" Mul (t, k) -> c_2 float[1,2] [then of "if"]
node "if_Where0" Where (if_cond, c_2, s) -> p float[1,2] [select of "if"]
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
			dg, err := Decode(&pg)
			if err != nil {
				t.Fatalf("Decode(Encode): %v", err)
			}
			if diff := cmp.Diff(g.String(), dg.String()); diff != "" {
				t.Errorf("tags through the codec: mismatch (-want +got):\n%s", diff)
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

// A plan node's tag is checked when decoded: a side without an If, an
// unknown side, a select that is no Where are errors naming the node;
// a plan without tags (written before branching) decodes untagged.
func TestDecodeIfTags(t *testing.T) {
	g, err := Build(gateModel(nil)())
	if err != nil {
		t.Fatal(err)
	}
	g, _ = Simplify(g)
	g, _ = PredicateIfs(g)
	for _, tc := range []struct {
		name string
		edit func(pg *plan.Graph)
		want string // error text; "" decodes
	}{
		{"untagged", func(pg *plan.Graph) {
			for i := range pg.Nodes {
				pg.Nodes[i].If, pg.Nodes[i].Side = "", ""
			}
		}, ""},
		{"side without if", func(pg *plan.Graph) { pg.Nodes[3].If = "" }, `graph.nodes[3] ("Neg"): side "then" and if "": a tagged node names both`},
		{"unknown side", func(pg *plan.Graph) { pg.Nodes[3].Side = "maybe" }, `graph.nodes[3] ("Neg"): unknown side "maybe"`},
		{"select not where", func(pg *plan.Graph) { pg.Nodes[3].Side = "select" }, `graph.nodes[3] ("Neg"): a select is a Where of 3 inputs, not Neg of 1`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pg := Encode(g)
			tc.edit(&pg)
			_, err := Decode(&pg)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Decode: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Decode: %v, want %q", err, tc.want)
			}
		})
	}
}

// An If inside another If's branch is predicated within it: its nodes
// and its Where carry the outer If's side.
func TestPredicateNestedIf(t *testing.T) {
	m := newModel(13)
	input(m, "x", onnx.Float, 1, 2)
	input(m, "c", onnx.Bool)
	input(m, "d", onnx.Bool)
	inner := &onnx.Graph{Name: "inner", Nodes: []onnx.Node{{Name: "ia", OpType: "If", Inputs: l("d"), Outputs: l("w"), Attrs: []onnx.Attr{
		aGraph("then_branch", &onnx.Graph{Name: "t2", Nodes: []onnx.Node{nd("Abs", l("x"), l("ab"))}, Outputs: []onnx.ValueInfo{{Name: "ab"}}}),
		aGraph("else_branch", &onnx.Graph{Name: "e2", Nodes: []onnx.Node{nd("Relu", l("x"), l("re"))}, Outputs: []onnx.ValueInfo{{Name: "re"}}}),
	}}}, Outputs: []onnx.ValueInfo{{Name: "w"}}}
	els := &onnx.Graph{Name: "else", Nodes: []onnx.Node{nd("Neg", l("x"), l("ng"))}, Outputs: []onnx.ValueInfo{{Name: "ng"}}}
	addNode(m, "If", "outer", l("c"), l("p"), aGraph("then_branch", inner), aGraph("else_branch", els))
	output(m, "p")
	g, err := Build(m)
	if err != nil {
		t.Fatal(err)
	}
	g, _ = PredicateIfs(g)
	if err := Check(g); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, n := range g.Nodes {
		got[n.Name] = n.Side.String() + " " + n.If
	}
	want := map[string]string{"Abs": "then outer", "Relu": "then outer", "ia_Where0": "then outer", "Neg": "else outer", "outer_Where0": "select outer"}
	if len(got) == len(want)+1 {
		for k := range got {
			if _, ok := want[k]; !ok {
				want[k] = got[k] // the condition's reshape, if any
			}
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tags: mismatch (-want +got):\n%s", diff)
	}
}
