package plan

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestGraphRoundTrip(t *testing.T) {
	p := sample()
	p.Graph.Name = "a<b>&c" // not HTML-escaped, as in a plan file
	data, err := MarshalGraph(p.Graph)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.HasSuffix(data, []byte("\n")) || bytes.Contains(data, []byte("\n ")) {
		t.Errorf("encoding is not compact:\n%s", data)
	}
	if !bytes.Contains(data, []byte(`"name":"a<b>&c"`)) {
		t.Errorf("name escaped: %s", data)
	}
	got, err := ReadGraph(data)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(&p.Graph, got); d != "" {
		t.Errorf("mismatch (-want +got):\n%s", d)
	}
	again, err := MarshalGraph(*got)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data, again) {
		t.Errorf("second marshal differs:\n%s\n%s", data, again)
	}

	// The graph field of a plan file reads as the same graph, and its
	// compact form is what MarshalGraph gives.
	full, err := Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var fields struct {
		Graph json.RawMessage `json:"graph"`
	}
	if err := json.Unmarshal(full, &fields); err != nil {
		t.Fatal(err)
	}
	fromPlan, err := ReadGraph(fields.Graph)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(&p.Graph, fromPlan); d != "" {
		t.Errorf("graph field: mismatch (-want +got):\n%s", d)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, fields.Graph); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(string(data), compact.String()); d != "" {
		t.Errorf("compacted graph field: mismatch (-want +got):\n%s", d)
	}
}

func TestReadGraphErrors(t *testing.T) {
	tests := []struct {
		name string
		edit func(g *Graph)
		raw  string
		want string
	}{
		{name: "empty", raw: ``, want: "plan: bad JSON at byte 0"},
		{name: "syntax", raw: `{"name":`, want: "plan: bad JSON"},
		{name: "trailing", raw: `{"outputs":[0],"values":[{"name":"x","dtype":"float","shape":[]}]} {}`, want: "plan: bad JSON at byte 68"},
		{name: "unknown field", raw: `{"format":"ipu-plan/1"}`, want: `unknown field "format"`},
		{name: "type", raw: `{"nodes":[{"inputs":["a"]}]}`, want: "plan: graph.nodes.inputs: string where int expected"},
		{name: "null", raw: `null`, want: "plan: graph.outputs: empty"},
		{name: "node input", edit: func(g *Graph) { g.Nodes[0].Inputs[1] = 7 }, want: "plan: graph.nodes[0].inputs[1]: value 7 out of range [0, 3)"},
		{name: "output index", edit: func(g *Graph) { g.Outputs[0] = -1 }, want: "plan: graph.outputs[0]: value -1 out of range [0, 3)"},
		{name: "const size", edit: func(g *Graph) { g.Values[1].Const = []byte{1} }, want: "plan: graph.values[1].const: 1 bytes, want 128"},
		{name: "dtype", edit: func(g *Graph) { g.Values[0].DType = "bfloat9" }, want: `plan: graph.values[0].dtype: unknown element type "bfloat9"`},
		{name: "shape", edit: func(g *Graph) { g.Values[0].Shape = []int64{1 << 20, 1 << 20} }, want: "plan: graph.values[0].shape: more than"},
		{name: "use before def", edit: func(g *Graph) { g.Inputs = nil }, want: "plan: graph.nodes[0].inputs[0]: value 0 (\"x\") is not defined before the node"},
		{name: "attr order", edit: func(g *Graph) { g.Nodes[0].Attrs[0].Name = "z" }, want: `plan: graph.nodes[0].attrs[1].name: "trans_a" not after "z"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data := []byte(tc.raw)
			if tc.edit != nil {
				g := sample().Graph
				tc.edit(&g)
				var err error
				if data, err = MarshalGraph(g); err != nil {
					t.Fatal(err)
				}
			}
			_, err := ReadGraph(data)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ReadGraph error = %v, want %q", err, tc.want)
			}
		})
	}
}

func FuzzReadGraph(f *testing.F) {
	data, _ := MarshalGraph(sample().Graph)
	f.Add(data)
	f.Add([]byte(`{"outputs":[0],"values":[{"name":"x","dtype":"float","shape":[]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := ReadGraph(data)
		if err != nil {
			return
		}
		out, err := MarshalGraph(*g)
		if err != nil {
			t.Fatalf("marshal of a read graph: %v", err)
		}
		if _, err := ReadGraph(out); err != nil {
			t.Fatalf("read of a marshalled graph: %v", err)
		}
	})
}
