package artdiff

import (
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"ipu.local/formats/plan"
)

// rows is the region of rows [lo, hi) of an 8-column matrix.
func rows(lo, hi int64) [][2]int64 { return [][2]int64{{lo, hi}, {0, 8}} }

// testPlan returns a small valid plan: y = MatMul(x, w) on tiles 0-1,
// z = Relu(y) where y lies, s = Neg(x) on tiles 2-3. Every value is an
// 8x8 float matrix; row-major tensors pad their rows to 2 elements.
func testPlan() *plan.Plan {
	m := func(name string) plan.Value { return plan.Value{Name: name, DType: "float", Shape: []int64{8, 8}} }
	w := m("w")
	w.Const = make([]byte, 8*8*4)
	halves := []plan.Piece{{Tile: 0, Region: rows(0, 4)}, {Tile: 1, Region: rows(4, 8)}}
	return &plan.Plan{
		Format: plan.Format, Model: plan.Model{Path: "m.onnx", Fingerprint: "fp"},
		Arch: "ipu21-tiny", Tiles: 8, Seed: 1,
		Graph: plan.Graph{
			Name: "g", Opset: 17, Inputs: []int{0}, Outputs: []int{3, 4},
			Values: []plan.Value{m("x"), w, m("y"), m("z"), m("s")},
			Nodes: []plan.Node{
				{Name: "mm", Op: "MatMul", Inputs: []int{0, 1}, Outputs: []int{2}},
				{Name: "act", Op: "Relu", Inputs: []int{2}, Outputs: []int{3}},
				{Name: "scale", Op: "Neg", Inputs: []int{0}, Outputs: []int{4}},
			},
		},
		Tensors: []plan.Tensor{
			{ID: 0, Value: 0, Name: "x", DType: "float", Shape: []int64{8, 8}, Layout: plan.APanel, Source: plan.FromHost, Pieces: slices.Clone(halves)},
			{ID: 1, Value: 1, Name: "w", DType: "float", Shape: []int64{8, 8}, Layout: plan.BPanel, Source: plan.FromConst,
				Pieces: []plan.Piece{{Tile: 0, Region: rows(0, 8)}, {Tile: 1, Region: rows(0, 8)}}},
			{ID: 2, Value: 2, Name: "y", DType: "float", Shape: []int64{8, 8}, Layout: plan.RowMajor, Pad: 2, Source: plan.FromStep, Pieces: slices.Clone(halves)},
			{ID: 3, Value: 3, Name: "z", DType: "float", Shape: []int64{8, 8}, Layout: plan.RowMajor, Pad: 2, Source: plan.FromStep, Pieces: slices.Clone(halves)},
			{ID: 4, Value: 0, Name: "x", DType: "float", Shape: []int64{8, 8}, Layout: plan.RowMajor, Pad: 2, Source: plan.FromHost,
				Pieces: []plan.Piece{{Tile: 2, Region: rows(0, 4)}, {Tile: 3, Region: rows(4, 8)}}},
			{ID: 5, Value: 4, Name: "s", DType: "float", Shape: []int64{8, 8}, Layout: plan.RowMajor, Pad: 2, Source: plan.FromStep,
				Pieces: []plan.Piece{{Tile: 2, Region: rows(0, 4)}, {Tile: 3, Region: rows(4, 8)}}},
		},
		Steps: []plan.Step{
			{Node: 0, Name: "mm", Kernel: "matmul", Inputs: []int{0, 1}, Outputs: []int{2}, Split: &plan.Split{M: 2, N: 1, K: 1}, Tiles: [2]int{0, 2}},
			{Node: 1, Name: "act", Kernel: "relu", Inputs: []int{2}, Outputs: []int{3}},
			{Node: 2, Name: "scale", Kernel: "neg", Inputs: []int{4}, Outputs: []int{5}},
		},
		Cost:   plan.Cost{FinalCycles: 1000, FinalExchange: 200, ComputeBound: 500},
		Search: plan.Search{Attempts: 10, IncumbentCycles: 1000},
	}
}

// addRelayout inserts a re-layout of y onto tiles 4-7 for act, as the
// planner would: the new tensor numbered where it is made, before z.
func addRelayout(p *plan.Plan) {
	moved := plan.Tensor{ID: 3, Value: 2, Name: "y", DType: "float", Shape: []int64{8, 8}, Layout: plan.RowMajor, Pad: 2, Source: plan.FromStep}
	for i := int64(0); i < 4; i++ {
		moved.Pieces = append(moved.Pieces, plan.Piece{Tile: 4 + int(i), Region: rows(2*i, 2*i+2)})
	}
	p.Tensors = slices.Insert(p.Tensors, 3, moved)
	for i := range p.Tensors {
		p.Tensors[i].ID = i
	}
	p.Steps = []plan.Step{
		p.Steps[0],
		{Node: -1, Name: "relayout:y", Kernel: "relayout", Inputs: []int{2}, Outputs: []int{3}},
		{Node: 1, Name: "act", Kernel: "relu", Inputs: []int{3}, Outputs: []int{4}},
		{Node: 2, Name: "scale", Kernel: "neg", Inputs: []int{5}, Outputs: []int{6}},
	}
}

// swapXTensors renumbers x's two host tensors (0 and 4) the other way
// round, as if the planner had made them in the other order.
func swapXTensors(p *plan.Plan) {
	p.Tensors[0], p.Tensors[4] = p.Tensors[4], p.Tensors[0]
	p.Tensors[0].ID, p.Tensors[4].ID = 0, 4
	swap := map[int]int{0: 4, 4: 0}
	for i := range p.Steps {
		for k, id := range p.Steps[i].Inputs {
			if to, ok := swap[id]; ok {
				p.Steps[i].Inputs[k] = to
			}
		}
	}
}

// shareX makes scale read x's host tensor that mm reads, dropping its
// own.
func shareX(p *plan.Plan) {
	p.Tensors = slices.Delete(p.Tensors, 4, 5)
	p.Tensors[4].ID = 4
	p.Steps[2].Inputs = []int{0}
	p.Steps[2].Outputs = []int{4}
}

// addBias adds a constant vector b with one tensor of the given layout.
func addBias(layout string, pad int) func(p *plan.Plan) {
	return func(p *plan.Plan) {
		p.Graph.Values = append(p.Graph.Values, plan.Value{Name: "b", DType: "float", Shape: []int64{8}, Const: make([]byte, 32)})
		p.Tensors = append(p.Tensors, plan.Tensor{ID: len(p.Tensors), Value: len(p.Graph.Values) - 1, Name: "b", DType: "float",
			Shape: []int64{8}, Layout: layout, Pad: pad, Source: plan.FromConst, Pieces: []plan.Piece{{Tile: 0, Region: [][2]int64{{0, 8}}}}})
	}
}

func TestPlans(t *testing.T) {
	packed := plan.PackSchedules([]plan.Exchange{{Transfers: [][6]int64{{0, 1, 1, 4, 0x80000, 0x80000}},
		Events: []plan.ExchangeEvent{{Send: 6, Cycles: 4, Arrive: []int64{10}}}, Makespan: 12, Bound: 11}})
	tests := []struct {
		name string
		a, b func(p *plan.Plan) // changes to testPlan; nil: none
		want []string
	}{
		{"equal", nil, nil, nil},
		{"move", nil, func(p *plan.Plan) {
			y := &p.Tensors[2]
			y.Pieces = nil
			for i := int64(0); i < 4; i++ {
				y.Pieces = append(y.Pieces, plan.Piece{Tile: int(i), Region: rows(2*i, 2*i+2)})
			}
			w := &p.Tensors[1]
			w.Pieces = append(w.Pieces, plan.Piece{Tile: 2, Region: rows(0, 8)}, plan.Piece{Tile: 3, Region: rows(0, 8)})
		}, []string{
			`tensor "w" const#0: moved: 2 tiles changed, bytes per tile max 512 -> 512, total bytes 1024 -> 2048, tiles 0-1 -> 0-3`,
			`tensor "y" step#0: moved: 4 tiles changed, bytes per tile max 128 -> 64, total bytes 256 -> 256, tiles 0-1 -> 0-3`,
		}},
		{"layout and pad", nil, func(p *plan.Plan) {
			p.Tensors[0].Layout, p.Tensors[0].Pad = plan.RowMajor, 2
			p.Tensors[3].Pad = 16
		}, []string{
			`tensor "x" host#0: layout apanel -> rowmajor, pad 0 -> 2`,
			`tensor "z" step#0: pad 2 -> 16, storage: bytes per tile max 128 -> 256, total bytes 256 -> 512`,
		}},
		{"re-layout added", nil, addRelayout, []string{
			`tensor "y" step#1 added: rowmajor pad 2, tiles 4-7, bytes per tile max 64, total bytes 256`,
			`step "act": inputs ["y" step#0] -> ["y" step#1]`,
			`step "relayout:y" added: relayout ["y" step#0] -> ["y" step#1]`,
		}},
		{"re-layout removed", addRelayout, nil, []string{
			`tensor "y" step#1 removed: rowmajor pad 2, tiles 4-7, bytes per tile max 64, total bytes 256`,
			`step "relayout:y" removed: relayout ["y" step#0] -> ["y" step#1]`,
			`step "act": inputs ["y" step#1] -> ["y" step#0]`,
		}},
		{"renumbered", nil, swapXTensors, nil},
		{"renumbered and moved", nil, func(p *plan.Plan) {
			swapXTensors(p)
			p.Tensors[0].Pieces[0].Tile, p.Tensors[0].Pieces[1].Tile = 4, 5
		}, []string{
			`tensor "x" host#1 -> host#0: moved: 4 tiles changed, bytes per tile max 128 -> 128, total bytes 256 -> 256, tiles 2-3 -> 4-5`,
		}},
		{"host layout shared", nil, shareX, []string{
			`tensor "x" host#1 removed: rowmajor pad 2, tiles 2-3, bytes per tile max 128, total bytes 256`,
			`step "scale": inputs ["x" host#1] -> ["x" host#0]`,
		}},
		{"split", nil, func(p *plan.Plan) {
			s := &p.Steps[0]
			s.Split = &plan.Split{B: 1, M: 1, N: 2, K: 2}
			s.Tiles = [2]int{0, 4}
			s.CastOrder, s.Stationary = plan.BeforeExchange, "b"
			p.Steps[1].Kernel = "relu2d"
		}, []string{
			`step "mm": split m2 n1 k1 -> b1 m1 n2 k2`,
			`step "mm": tiles [0,2) -> [0,4)`,
			`step "mm": cast order none -> before_exchange`,
			`step "mm": stationary none -> b`,
			`step "act": kernel relu -> relu2d`,
		}},
		{"program order", nil, func(p *plan.Plan) {
			s := p.Steps
			p.Steps = []plan.Step{s[2], s[0], s[1]}
		}, []string{`steps: program order changed: step "scale" now runs before step "mm"`}},
		{"panel of a vector", addBias(plan.RowMajor, 2), addBias(plan.APanel, 0), []string{
			`tensor "b" const#0: layout rowmajor -> apanel, pad 2 -> 0, storage: bytes per tile max 32 -> ?, total bytes 32 -> ?`,
		}},
		{"header, cost and search", nil, func(p *plan.Plan) {
			p.Seed = 2
			p.Cost.FinalCycles = 900
			p.Search.Attempts = 20
		}, []string{
			`header: seed 1 -> 2`,
			`cost: final_cycles 1000 -> 900`,
			`search: attempts 10 -> 20`,
		}},
		{"superstep order and packing", nil, func(p *plan.Plan) {
			p.Supersteps = plan.Compact
			p.Packs = plan.StagedPacks
		}, []string{`header: supersteps "" -> "compact"`, `header: packs "" -> "staged"`}},
		{"exchange schedules", nil, func(p *plan.Plan) { p.Schedules = packed },
			[]string{fmt.Sprintf("exchange_schedules: 0 packed bytes -> %d", len(packed))}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := testPlan(), testPlan()
			for _, c := range []struct {
				p      *plan.Plan
				change func(*plan.Plan)
			}{{a, tt.a}, {b, tt.b}} {
				if c.change != nil {
					c.change(c.p)
				}
				if err := c.p.Validate(); err != nil {
					t.Fatalf("test plan: %v", err)
				}
			}
			got := Plans(a, b)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("lines mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestComparePlans compares plan files: recognised by their format,
// decoded, and the same lines as Plans.
func TestComparePlans(t *testing.T) {
	a := testPlan()
	b := testPlan()
	addRelayout(b)
	da, err := plan.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	db, err := plan.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	if k := Detect(da); k != planKind {
		t.Fatalf("a plan file is detected as %v", k)
	}
	r, err := Compare(File{"a.json", da}, File{"b.json", db})
	if err != nil {
		t.Fatal(err)
	}
	if r.Kind != planKind {
		t.Errorf("kind %q, want plan", r.Kind.Name)
	}
	if diff := cmp.Diff(Plans(a, b), r.Lines); diff != "" {
		t.Errorf("lines mismatch (-want +got):\n%s", diff)
	}
	if r, err := Compare(File{"a.json", da}, File{"a.json", da}); err != nil || !r.Equal() {
		t.Errorf("a plan differs from itself: %v %q", err, r.Lines)
	}
	bad := []byte(`{"format": "ipu-plan/1"}`)
	if _, err := Compare(File{"a.json", da}, File{"old.json", bad}); err == nil {
		t.Error("a plan of another format version is accepted")
	}
}

// TestPlansUnvalidated gives Plans plans that were never validated: it
// describes what it can and does not panic.
func TestPlansUnvalidated(t *testing.T) {
	a, b := testPlan(), testPlan()
	b.Steps[1].Inputs = []int{99, -1}
	b.Tensors[0].Pieces[0].Region = [][2]int64{{0, 4}} // rank 1 panel region
	b.Tensors[1].Layout = "diagonal"
	want := []string{
		`tensor "x" host#0: moved: 1 tiles changed, bytes per tile max 128 -> ?, total bytes 256 -> ?, tiles 0-1 -> 0-1`,
		`tensor "w" const#0: layout bpanel -> diagonal, storage: bytes per tile max 512 -> ?, total bytes 1024 -> ?`,
		`step "act": inputs ["y" step#0] -> [tensor 99?, -]`,
	}
	if diff := cmp.Diff(want, Plans(a, b)); diff != "" {
		t.Errorf("lines mismatch (-want +got):\n%s", diff)
	}
}
