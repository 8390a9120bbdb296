package main

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"ipu.local/libs/arch"
	"ipu.local/libs/codegen"
	"ipu.local/libs/prog"
)

// TestLongestTileParts: the parts are the longest tile's, each launch
// with its call, by kernel type; the other kernels are in no part.
func TestLongestTileParts(t *testing.T) {
	mm := &prog.Kernel{What: "p.matmul", Params: &codegen.MatMul{Type: codegen.AMPFP16, M: 8, K: 64, N: 32, CStride: 32, Workers: 6}}
	sum := &prog.Kernel{What: "p.reduce-add", Params: &codegen.SumParts{N: 64, Parts: 3, Stride: 64, Workers: 6}}
	un := &prog.Kernel{What: "g", Params: &codegen.Unary{Op: codegen.GeluErf, N: 512, Workers: 6}}
	small := &prog.Kernel{What: "q.matmul", Params: &codegen.MatMul{Type: codegen.AMPFP16, M: 4, K: 16, N: 16, CStride: 16, Workers: 6}}
	s := &prog.Superstep{Work: map[int][]*prog.Kernel{
		3: {small},
		7: {mm, sum, un},
		9: {sum},
	}}
	at := func(ks ...*prog.Kernel) []int64 {
		var out []int64
		var now int64
		for _, k := range ks {
			c, err := k.CyclesAt(int(now % codegen.Slots))
			if err != nil {
				t.Fatal(err)
			}
			c += prog.LaunchCallCycles
			out = append(out, c)
			now += c
		}
		return out
	}
	c := at(mm, sum, un)
	products, sums, err := longestTileParts(s)
	if err != nil {
		t.Fatal(err)
	}
	if products != c[0] || sums != c[1] {
		t.Errorf("products %d, sums %d; want tile 7's %d and %d (its Unary %d in neither)", products, sums, c[0], c[1], c[2])
	}
}

// TestBreakdown measures small rows end to end: the parts add up to the
// linked final_cycles (measure checks it), the products and the
// exchanges are there, no exchange beats its lower bound, and the line
// names them.
func TestBreakdown(t *testing.T) {
	p := arch.MustLookup("ipu21")
	cfg := config{arch: p, progress: io.Discard}
	var rows []figures
	for _, r := range []row{
		{"../../testdata/models/mlp-small.onnx", 16, "inference"},
		{"../../testdata/models/qk-early.onnx", 64, "device"},
	} {
		f := measureFigures(cfg, r)
		if f.err != nil {
			t.Fatalf("%s: %v", r.label(), f.err)
		}
		b := f.cycles
		if b == nil {
			t.Fatalf("%s: no breakdown", r.label())
		}
		if b.total() != f.final || b.total() != f.simulated {
			t.Errorf("%s: parts add up to %d, final_cycles %d, simulated %d", r.label(), b.total(), f.final, f.simulated)
		}
		if b.products <= 0 || b.other <= 0 || b.exchange <= 0 || b.syncs <= 0 {
			t.Errorf("%s: %+v: want products, other compute, exchange and syncs", r.label(), *b)
		}
		if b.exchangeBound <= 0 || b.exchangeBound > b.exchange {
			t.Errorf("%s: exchange %d against its lower bound %d", r.label(), b.exchange, b.exchangeBound)
		}
		rows = append(rows, f)
	}
	rows = append(rows, figures{row: row{"none.onnx", 8, "inference"}}) // not measured: no line
	var out bytes.Buffer
	printBreakdown(&out, rows)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2:\n%s", len(lines), out.String())
	}
	for i, l := range lines {
		if !strings.HasPrefix(l, rows[i].label()+": where the device cycles go") || !strings.Contains(l, "products ") || !strings.Contains(l, "its lower bound") {
			t.Errorf("line %d: %s", i, l)
		}
	}
}
