package lower

import (
	"testing"

	"ipu.local/formats/plan"
	"ipu.local/libs/graph"
	"ipu.local/libs/layout"
)

// TestTensorCache: a step cache gives back the layout read for a plan
// tensor only for that tensor's equal, on as many tiles of the same
// graph: any field or piece that differs reads afresh.
func TestTensorCache(t *testing.T) {
	pt := plan.Tensor{ID: 3, Value: 7, Name: "x", Shape: []int64{4, 8}, Layout: layout.RowMajor.String(), Pad: 2, Source: layout.FromStep.String(),
		Pieces: []plan.Piece{{Tile: 0, Region: [][2]int64{{0, 2}, {0, 8}}}, {Tile: 1, Region: [][2]int64{{2, 4}, {0, 8}}}}}
	lt := &layout.Tensor{ID: 3, Value: 7, Name: "x", Size: 4, Shape: []int{4, 8}, Kind: layout.RowMajor, Pad: 2, Source: layout.FromStep,
		Pieces: []layout.Piece{{Tile: 0, Box: layout.Box{{Lo: 0, Hi: 2}, {Lo: 0, Hi: 8}}}, {Tile: 1, Box: layout.Box{{Lo: 2, Hi: 4}, {Lo: 0, Hi: 8}}}}}
	g, other := &graph.Graph{}, &graph.Graph{}
	c := NewStepCache()
	if got, _ := c.tensor(pt, g, 64); got != nil {
		t.Fatal("an empty cache gave a layout")
	}
	c.keepTensor(lt, "key", g, 64)
	if got, key := c.tensor(pt, g, 64); got != lt || key != "key" {
		t.Fatalf("the equal tensor: got %p %q, want the kept layout and its key", got, key)
	}
	var none *StepCache
	if got, _ := none.tensor(pt, g, 64); got != nil {
		t.Error("no cache gave a layout")
	}
	if got, _ := c.tensor(pt, other, 64); got != nil {
		t.Error("another graph's tensor was taken")
	}
	if got, _ := c.tensor(pt, g, 32); got != nil {
		t.Error("a tensor read on 64 tiles was taken on 32")
	}
	change := map[string]func(p *plan.Tensor){
		"id":          func(p *plan.Tensor) { p.ID = 4 },
		"value":       func(p *plan.Tensor) { p.Value = 8 },
		"name":        func(p *plan.Tensor) { p.Name = "y" },
		"transposed":  func(p *plan.Tensor) { p.Transposed = true },
		"pad":         func(p *plan.Tensor) { p.Pad = 4 },
		"layout":      func(p *plan.Tensor) { p.Layout = layout.APanel.String() },
		"source":      func(p *plan.Tensor) { p.Source = layout.FromHost.String() },
		"shape":       func(p *plan.Tensor) { p.Shape = []int64{4, 9} },
		"rank":        func(p *plan.Tensor) { p.Shape = []int64{32} },
		"pieces":      func(p *plan.Tensor) { p.Pieces = p.Pieces[:1] },
		"tile":        func(p *plan.Tensor) { p.Pieces[1].Tile = 2 },
		"region":      func(p *plan.Tensor) { p.Pieces[1].Region[1][1] = 7 },
		"region rank": func(p *plan.Tensor) { p.Pieces[1].Region = p.Pieces[1].Region[:1] },
	}
	for name, f := range change {
		q := pt
		q.Shape = append([]int64(nil), pt.Shape...)
		q.Pieces = []plan.Piece{pt.Pieces[0], {Tile: 1, Region: [][2]int64{{2, 4}, {0, 8}}}}
		f(&q)
		if got, _ := c.tensor(q, g, 64); got != nil {
			t.Errorf("%s changed: the kept layout was taken", name)
		}
	}
}
