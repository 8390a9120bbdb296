package planner

import (
	"errors"
	"testing"

	"ipu.local/formats/plan"
	"ipu.local/libs/arch"
	"ipu.local/libs/graph"
	"ipu.local/libs/layout"
	"ipu.local/libs/link"
	"ipu.local/libs/prog"
)

// hostVolume is the elements of plan p's host tensors, copies counted.
func hostVolume(p *plan.Plan) (int, int) {
	vol, n := 0, 0
	for _, t := range p.Tensors {
		if t.Source != "host" {
			continue
		}
		n++
		for _, pc := range t.Pieces {
			v := 1
			for _, r := range pc.Region {
				v *= int(r[1] - r[0])
			}
			vol += v
		}
	}
	return vol, n
}

// TestHostSpread: three projections of one graph input on the full chip.
// Under the inference objective the start spreads the input (one host
// tensor for the three, each element once) and re-lays it out to the
// blocks; the same splits with the blocks delivered by the host cost
// more, host link included. Under the device objective the host
// delivers the blocks, every copy.
func TestHostSpread(t *testing.T) {
	const m, k, n = 128, 768, 768
	g := projGraph(t, m, k, n, 3, false)
	p := arch.MustLookup("ipu21")
	pl, pt, r, out := startOf(t, g, p, false)
	relayouts := 0
	for _, s := range out.Steps {
		if s.Kernel == "relayout" && out.Tensors[s.Inputs[0]].Source == "host" {
			relayouts++
		}
	}
	vol, hosts := hostVolume(out)
	t.Logf("inference: %v, %d cycles, host %d; %d host tensors of %d elements, %d re-layouts", pt, r.total, r.host, hosts, vol, relayouts)
	if vol != m*k || hosts != 1 || relayouts == 0 {
		t.Fatalf("host tensors: %d of %d elements (the input has %d), %d re-layouts from them", hosts, vol, m*k, relayouts)
	}
	blocks := pt.clone()
	for i := range blocks {
		if blocks[i].CastOrder != plan.BeforeExchange {
			t.Fatalf("product %d: cast order %q, want %q", i, blocks[i].CastOrder, plan.BeforeExchange)
		}
		blocks[i].CastOrder = ""
	}
	rb, err := pl.eval(blocks)
	if err != nil {
		t.Fatal(err)
	}
	if rb.host <= r.host || rb.cost() <= r.cost() {
		t.Errorf("blocks from the host: %d cycles, host %d; spread: %d, host %d", rb.total, rb.host, r.total, r.host)
	}

	_, dpt, dr, dout := startOf(t, g, p, true)
	dvol, _ := hostVolume(dout)
	t.Logf("device: %v, %d cycles, host %d; host elements %d", dpt, dr.total, dr.host, dvol)
	for _, d := range dpt {
		if d.CastOrder != "" {
			t.Fatalf("device objective: cast order %q, want the blocks from the host", d.CastOrder)
		}
	}
	if dvol <= m*k || dr.total > r.total {
		t.Errorf("device objective: host elements %d (input %d), %d cycles against the spread start's %d", dvol, m*k, dr.total, r.total)
	}
}

// startOf is the analytic start of g on every tile of p (under the
// device objective when device), its price and its plan.
func startOf(t *testing.T, g *graph.Graph, p *arch.Preset, device bool) (*planner, point, *result, *plan.Plan) {
	t.Helper()
	pl, err := newPlanner(g, p, p.Tiles)
	if err != nil {
		t.Fatal(err)
	}
	pl.device = device
	pt, r, err := pl.startFitting()
	if err != nil {
		t.Fatal(err)
	}
	out, err := pl.planOf(pt)
	if err != nil {
		t.Fatal(err)
	}
	return pl, pt, r, out
}

// TestHostCycles: the search's host link cycles for its incumbent are the
// linker's host_link_cycles.
func TestHostCycles(t *testing.T) {
	p := arch.MustLookup("ipu21")
	for _, tc := range []struct {
		model string
		tiles int
	}{{"mlp-small", 64}, {"qk-early", 64}, {"transformers/bert_small_layer_fp16/model", 256}} {
		g := load(t, tc.model)
		pl, _, _, err := Plan(g, p, Options{Tiles: tc.tiles, Seed: 1, MaxAttempts: 0, ModelFingerprint: "fp"})
		if err != nil {
			t.Fatal(err)
		}
		data, err := plan.Marshal(pl)
		if err != nil {
			t.Fatal(err)
		}
		_, st, err := link.Link(pl, plan.Fingerprint(data), link.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := pl.Cost.HostLinkCycles, st.HostLinkCycles(p); got != want || got == 0 {
			t.Errorf("%s on %d tiles: the search's host link cycles %d, the linker's %d", tc.model, tc.tiles, got, want)
		}
	}
}

// TestFitsRegions: a buffer larger than the region its kernels need is
// a RegionError; one that fits, or that may go anywhere, is not.
func TestFitsRegions(t *testing.T) {
	p := arch.MustLookup("ipu21")
	ni := int(p.NonInterleaved.Size())
	for _, tc := range []struct {
		region prog.Region
		size   int
		bad    bool
	}{
		{prog.NonInterleaved, ni, false},
		{prog.NonInterleaved, ni + 8, true},
		{prog.Interleaved, int(p.Interleaved.Size()) + 8, true},
		{prog.AnyRegion, ni + 8, false},
	} {
		pr := &prog.Program{}
		b := pr.NewBuffer("a", []int{0}, tc.size, 8, tc.region)
		_ = b
		err := fitsRegions(p, pr)
		var re *RegionError
		if got := errors.As(err, &re); got != tc.bad {
			t.Errorf("%v buffer of %d bytes: error %v, want one %t", tc.region, tc.size, err, tc.bad)
		}
	}
}

// TestCopied: blocks hold an element twice exactly when their boxes'
// elements exceed the operand's.
func TestCopied(t *testing.T) {
	box := func(r0, r1, c0, c1 int) layout.Box {
		return layout.Box{{Lo: r0, Hi: r1}, {Lo: c0, Hi: c1}}
	}
	whole := []layout.Piece{{Tile: 0, Box: box(0, 4, 0, 8)}, {Tile: 1, Box: box(4, 8, 0, 8)}}
	if copied(whole, []int{8, 8}) {
		t.Error("a partition is not copied")
	}
	if !copied(append(whole, layout.Piece{Tile: 2, Box: box(0, 4, 0, 8)}), []int{8, 8}) {
		t.Error("a block on two tiles is copied")
	}
}
