package artdiff

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"ipu.local/formats/plan"
	"ipu.local/libs/arch"
	"ipu.local/libs/graph"
	"ipu.local/libs/onnx"
	"ipu.local/libs/planner"
)

func TestPlans(t *testing.T) {
	m, err := onnx.ReadModelFile("../../testdata/models/qk-early.onnx")
	if err != nil {
		t.Fatal(err)
	}
	g, err := graph.Build(m)
	if err != nil {
		t.Fatal(err)
	}
	p := arch.MustLookup("ipu21-64")
	a, _, _, err := planner.Plan(g, p, planner.Options{Tiles: 64, Seed: 1, ModelFingerprint: "fp"})
	if err != nil {
		t.Fatal(err)
	}
	data, err := plan.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	if !planKind.Match(data) || objectKind.Match(data) {
		t.Fatal("a plan is not recognised as a plan")
	}
	same, err := plan.Read(data)
	if err != nil {
		t.Fatal(err)
	}
	if d := Plans(a, same); len(d) != 0 {
		t.Fatalf("a plan differs from itself: %q", d)
	}

	b, err := plan.Read(data)
	if err != nil {
		t.Fatal(err)
	}
	b.Model.Fingerprint = "other"
	b.Steps[len(b.Steps)-1].Split.M++
	moved := -1
	for i := range b.Tensors {
		if len(b.Tensors[i].Pieces) > 0 {
			b.Tensors[i].Pieces[0].Tile += 1000
			moved = i
			break
		}
	}
	got := Plans(a, b)
	want := []string{
		`header: model.fingerprint "fp" -> "other"`,
		"tensor " + quote(b.Tensors[moved].Name) + ": moved: tiles ",
		fmt.Sprintf("step %s: split.m %d -> %d", quote(b.Steps[len(b.Steps)-1].Name), a.Steps[len(a.Steps)-1].Split.M, b.Steps[len(b.Steps)-1].Split.M),
	}
	for _, w := range want {
		found := false
		for _, line := range got {
			if strings.HasPrefix(line, w) {
				found = true
			}
		}
		if !found {
			t.Errorf("no line starting %q in:\n%s", w, strings.Join(got, "\n"))
		}
	}
	if d := cmp.Diff(got, Plans(a, b)); d != "" {
		t.Errorf("two diffs of the same plans differ (-first +second):\n%s", d)
	}
}

func quote(s string) string { return `"` + s + `"` }
