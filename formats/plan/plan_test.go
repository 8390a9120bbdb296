package plan

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func sample() *Plan {
	return &Plan{
		Format: Format,
		Model:  Model{Path: "m.onnx", Fingerprint: "ab"},
		Arch:   "ipu21", Tiles: 4, Seed: 1,
		Graph: Graph{
			Name: "g", Opset: 21, Inputs: []int{0}, Outputs: []int{2},
			Values: []Value{
				{Name: "x", DType: "float", Shape: []int64{4, 2}},
				{Name: "w", DType: "float", Shape: []int64{2, 16}, Const: make([]byte, 2*16*4)},
				{Name: "y", DType: "float", Shape: []int64{4, 16}},
			},
			Nodes: []Node{{Name: "mm", Op: "MatMul", Inputs: []int{0, 1}, Outputs: []int{2},
				Attrs: []Attr{{Name: "alpha", Floats: []float64{0.5}}, {Name: "trans_a", Ints: []int64{0}}}}},
		},
		Tensors: []Tensor{
			{ID: 0, Value: 0, Name: "x", DType: "float", Shape: []int64{4, 2}, Layout: APanel, Source: FromHost,
				Pieces: []Piece{{Tile: 0, Region: [][2]int64{{0, 2}, {0, 2}}}, {Tile: 1, Region: [][2]int64{{2, 4}, {0, 2}}}}},
			{ID: 1, Value: 1, Name: "w", DType: "float", Shape: []int64{2, 16}, Layout: BPanel, Source: FromConst,
				Pieces: []Piece{{Tile: 0, Region: [][2]int64{{0, 2}, {0, 16}}}, {Tile: 1, Region: [][2]int64{{0, 2}, {0, 16}}}}},
			{ID: 2, Value: 2, Name: "y", DType: "float", Shape: []int64{4, 16}, Layout: RowMajor, Pad: 16, Source: FromStep,
				Pieces: []Piece{{Tile: 0, Region: [][2]int64{{0, 2}, {0, 16}}}, {Tile: 1, Region: [][2]int64{{2, 4}, {0, 16}}}}},
		},
		Steps: []Step{{Node: 0, Name: "mm", Kernel: "amp-fp32", Inputs: []int{0, 1}, Outputs: []int{2}, CastOrder: AfterExchange, Stationary: "b",
			Split: &Split{B: 1, M: 2, N: 1, K: 1}, Tiles: [2]int{0, 2}}},
		Cost:   Cost{FinalCycles: 100, FinalExchange: 10, ComputeBound: 5, Estimated: true},
		Search: Search{Attempts: 3, IncumbentCycles: 100},
	}
}

func TestRoundTrip(t *testing.T) {
	p := sample()
	testRoundTrip(t, p, "step 0 node 0 \"mm\" kernel amp-fp32 in [0,1] out [2] split b=1 m=2 n=1 k=1 tiles [0,2) cast_order=after_exchange stationary=b")
	// A split cut in two (the pieces do not matter to the format).
	p.Steps[0].Split = &Split{B: 1, M: 1, N: 1, K: 1, Rest: &Rest{Axis: "m", At: 2, M: 1, N: 1}}
	testRoundTrip(t, p, "split b=1 m=1 n=1 k=1 rest m>=2 m=1 n=1 tiles [0,2)")
	// Compacted supersteps.
	p.Supersteps = Compact
	testRoundTrip(t, p, "supersteps compact\n")
}

func testRoundTrip(t *testing.T, p *Plan, step string) {
	t.Helper()
	data, err := Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Read(data)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(p, got); d != "" {
		t.Errorf("mismatch (-want +got):\n%s", d)
	}
	again, err := Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data, again) {
		t.Errorf("second marshal differs")
	}
	var b bytes.Buffer
	if err := Dump(&b, got); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{step, "alpha=[0.5]", "tile 1 [2:4,0:16]"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("dump lacks %q:\n%s", want, b.String())
		}
	}
}

func TestReadErrors(t *testing.T) {
	tests := []struct {
		name string
		edit func(p *Plan)
		raw  string
		want string
	}{
		{name: "version", edit: func(p *Plan) { p.Format = "ipu-plan/9" }, want: `plan: format: unsupported format "ipu-plan/9"`},
		{name: "no format", raw: `{"arch":"x"}`, want: "plan: format: missing"},
		{name: "syntax", raw: `{"format":`, want: "plan: bad JSON"},
		{name: "unknown field", raw: `{"format":"ipu-plan/2","bogus":1}`, want: `unknown field "bogus"`},
		{name: "type", raw: `{"format":"ipu-plan/2","tiles":"x"}`, want: "plan: tiles: string where int expected"},
		{name: "node input", edit: func(p *Plan) { p.Graph.Nodes[0].Inputs[1] = 7 }, want: "plan: graph.nodes[0].inputs[1]: value 7 out of range [0, 3)"},
		{name: "const size", edit: func(p *Plan) { p.Graph.Values[1].Const = []byte{1} }, want: "plan: graph.values[1].const: 1 bytes, want 128"},
		{name: "dtype", edit: func(p *Plan) { p.Graph.Values[0].DType = "bfloat9" }, want: `plan: graph.values[0].dtype: unknown element type "bfloat9"`},
		{name: "use before def", edit: func(p *Plan) { p.Graph.Inputs = nil }, want: "plan: graph.nodes[0].inputs[0]: value 0 (\"x\") is not defined before the node"},
		{name: "piece tile", edit: func(p *Plan) { p.Tensors[2].Pieces[1].Tile = 4 }, want: "plan: tensors[2].pieces[1].tile: 4 out of range [0, 4)"},
		{name: "piece region", edit: func(p *Plan) { p.Tensors[2].Pieces[1].Region[0] = [2]int64{2, 5} }, want: "plan: tensors[2].pieces[1].region[0]: [2, 5) empty or outside [0, 4)"},
		{name: "piece order", edit: func(p *Plan) { p.Tensors[2].Pieces[1].Tile = 0; p.Tensors[2].Pieces[1].Region[0] = [2]int64{0, 2} }, want: "plan: tensors[2].pieces[1]: not sorted"},
		{name: "layout", edit: func(p *Plan) { p.Tensors[2].Layout = "zigzag" }, want: `plan: tensors[2].layout: unknown layout "zigzag"`},
		{name: "tensor id", edit: func(p *Plan) { p.Tensors[1].ID = 5 }, want: "plan: tensors[1].id: 5, want 1"},
		{name: "tensor shape", edit: func(p *Plan) { p.Tensors[1].Shape = []int64{16, 2} }, want: "plan: tensors[1].shape: [16 2], want [2 16]"},
		{name: "source", edit: func(p *Plan) { p.Tensors[0].Source = "air" }, want: `plan: tensors[0].source: unknown source "air"`},
		{name: "write host", edit: func(p *Plan) { p.Steps[0].Outputs[0] = 0 }, want: "plan: steps[0].outputs[0]: tensor 0 (\"x\") has source host, not step"},
		{name: "unwritten", edit: func(p *Plan) { p.Steps[0].Outputs = []int{-1} }, want: `plan: tensors[2]: "y" has source step but no step writes it`},
		{name: "step input", edit: func(p *Plan) { p.Steps[0].Inputs[1] = 9 }, want: "plan: steps[0].inputs[1]: tensor 9 out of range [-1, 3)"},
		{name: "no step", edit: func(p *Plan) { p.Steps = nil; p.Tensors = p.Tensors[:2] }, want: `plan: steps: node 0 ("mm") has no step`},
		{name: "step split", edit: func(p *Plan) { p.Steps[0].Split.N = 2 }, want: "plan: steps[0].split: 1 x 2 x 2 x 1 blocks exceed the 2 tiles"},
		{name: "rest axis", edit: func(p *Plan) { p.Steps[0].Split.Rest = &Rest{Axis: "k", At: 2, M: 1, N: 1} }, want: `plan: steps[0].split.rest.axis: "k" (want "m" or "n")`},
		{name: "rest at", edit: func(p *Plan) { p.Steps[0].Split.Rest = &Rest{Axis: "m", At: 0, M: 1, N: 1} }, want: "plan: steps[0].split.rest.at: 0"},
		{name: "rest factors", edit: func(p *Plan) { p.Steps[0].Split.Rest = &Rest{Axis: "n", At: 16, M: 0, N: 1} }, want: "plan: steps[0].split.rest: factors 0, 1"},
		{name: "rest tiles", edit: func(p *Plan) { p.Steps[0].Split.Rest = &Rest{Axis: "m", At: 2, M: 1, N: 1} }, want: "plan: steps[0].split: 1 x 1 x (2 x 1 + 1 x 1) blocks exceed the 2 tiles"},
		{name: "step tiles", edit: func(p *Plan) { p.Steps[0].Tiles = [2]int{3, 9} }, want: "plan: steps[0].tiles: [3, 9) is not a non-empty range of [0, 4)"},
		{name: "supersteps", edit: func(p *Plan) { p.Supersteps = "asap" }, want: `plan: supersteps: unknown order "asap" (want "compact" or none)`},
		{name: "packs", edit: func(p *Plan) { p.Packs = "inplace" }, want: `plan: packs: unknown packing "inplace" (want "staged" or none)`},
		{name: "step node", edit: func(p *Plan) { p.Steps[0].Node = 1 }, want: "plan: steps[0].node: 1 out of range [-1, 1)"},
		{name: "cast order", edit: func(p *Plan) { p.Steps[0].CastOrder = "never" }, want: `plan: steps[0].cast_order: unknown cast order "never"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data := []byte(tc.raw)
			if tc.edit != nil {
				p := sample()
				tc.edit(p)
				var err error
				if data, err = Marshal(p); err != nil {
					t.Fatal(err)
				}
			}
			_, err := Read(data)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Read error = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestState(t *testing.T) {
	s := NewState("fp", "ipu21", 4, 7)
	pcg, err := s.PCG()
	if err != nil {
		t.Fatal(err)
	}
	pcg.Uint64()
	s.SetPCG(pcg)
	s.Attempts = 5
	s.Incumbent = Point{Cycles: 9, Decisions: []Decision{{Node: 2, Split: Split{M: 1, N: 2, K: 1}, Tiles: [2]int{0, 2}, CastOrder: BeforeExchange, Stationary: "a"}}}
	s.Visited = []string{"a", "b"}
	s.Whole = []int{3, 17}
	data, err := MarshalState(s)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ReadState(data)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(s, got); d != "" {
		t.Errorf("mismatch (-want +got):\n%s", d)
	}
	g2, _ := got.PCG()
	if a, b := pcg.Uint64(), g2.Uint64(); a != b {
		t.Errorf("restored generator gives %d, want %d", b, a)
	}
	for _, tc := range []struct {
		name string
		edit func(s *State)
		want string
	}{
		{"format", func(s *State) { s.Format = "x" }, `search state: format: unsupported format "x"`},
		{"rng", func(s *State) { s.RNG = []byte{1} }, "search state: rng:"},
		{"visited", func(s *State) { s.Visited = []string{"b", "a"} }, "search state: visited[1]: not sorted"},
		{"tiles", func(s *State) { s.Incumbent.Decisions[0].Tiles = [2]int{0, 5} }, "search state: incumbent.decisions[0].tiles"},
		{"shard", func(s *State) { s.Shard, s.Shards = 4, 4 }, "search state: shard: shard 4 of 4"},
		{"shard-alone", func(s *State) { s.Shard = 1 }, "search state: shard: shard 1 of 0"},
		{"validated", func(s *State) { s.Validated = -1 }, "search state: validated_cycles: negative"},
		{"reserve", func(s *State) { s.Reserve = -8 }, "search state: memory_reserve: -8 out of range"},
		{"max-variable", func(s *State) { s.MaxVariable = 1 << 31 }, "search state: max_variable_bytes: 2147483648 out of range"},
		{"whole-order", func(s *State) { s.Whole = []int{17, 3} }, "search state: whole_rows[1]: 3: values must be sorted"},
		{"whole-negative", func(s *State) { s.Whole = []int{-1} }, "search state: whole_rows[0]: -1"},
		{"stride", func(s *State) {
			s.Exchanges = []Exchange{{Transfers: [][6]int64{{0, 1, 2 | (MaxTiles+1)<<16, 4, 0, 0}}, Events: []ExchangeEvent{{Arrive: []int64{10, 11}}}}}
		}, fmt.Sprintf("search state: exchanges[0].transfers[0][2]: stride %d out of range", MaxTiles+1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := ReadState(data)
			tc.edit(c)
			d, err := MarshalState(c)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ReadState(d); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ReadState error = %v, want %q", err, tc.want)
			}
		})
	}
}

func FuzzRead(f *testing.F) {
	data, _ := Marshal(sample())
	f.Add(data)
	f.Add([]byte(`{"format":"ipu-plan/1"}`))
	s, _ := MarshalState(NewState("m", "a", 1, 1))
	f.Add(s)
	f.Fuzz(func(t *testing.T, data []byte) {
		if p, err := Read(data); err == nil {
			if _, err := Marshal(p); err != nil {
				t.Fatalf("marshal of a read plan: %v", err)
			}
			var b bytes.Buffer
			_ = Dump(&b, p)
		}
		_, _ = ReadState(data)
	})
}
