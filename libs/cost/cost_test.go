package cost

import (
	"testing"

	"ipu.local/formats/obj"
	"ipu.local/libs/arch"
	"ipu.local/libs/codegen"
	"ipu.local/libs/prog"
)

// TestExchangeReuse prices three exchange supersteps of one pattern: the
// second moves the first one's buffers' copies and is priced by the
// first one's schedule; in the third tile 0 sends one buffer twice where
// the others send two, so it is scheduled. Every superstep costs what
// its own schedule says.
func TestExchangeReuse(t *testing.T) {
	p := arch.MustLookup("ipu21-64")
	pr := &prog.Program{Arch: p}
	step := func(same bool) *prog.Superstep {
		a := pr.NewBuffer("a", []int{0, 3}, 64, 16, prog.Interleaved)
		b := a
		if !same {
			b = pr.NewBuffer("b", []int{0}, 64, 16, prog.Interleaved)
		}
		d := pr.NewBuffer("d", []int{0, 1, 2}, 64, 16, prog.Interleaved)
		e := pr.NewBuffer("e", []int{0, 1}, 64, 16, prog.Interleaved)
		s := prog.NewSuperstep(obj.Exchange, "x")
		s.Xfers = []prog.Transfer{
			{Src: 0, Dst: 1, Words: 8, From: prog.Ref{Buf: a}, To: prog.Ref{Buf: d}},
			{Src: 0, Dst: 2, Words: 8, From: prog.Ref{Buf: b}, To: prog.Ref{Buf: d}},
			{Src: 3, Dst: 0, DstN: 2, Words: 6, From: prog.Ref{Buf: a}, To: prog.Ref{Buf: e}},
		}
		return s
	}
	pr.Steps = []*prog.Superstep{step(false), step(false), step(true)}
	r, err := Program(pr)
	if err != nil {
		t.Fatal(err)
	}
	if r.ReusedExchanges != 1 {
		t.Fatalf("%d supersteps reused a schedule, want 1", r.ReusedExchanges)
	}
	addr := synthetic(p, pr.Buffers)
	for i, s := range pr.Steps {
		want, err := ExchangeCycles(p, s, addr)
		if err != nil {
			t.Fatal(err)
		}
		if r.Supersteps[i] != want {
			t.Errorf("superstep %d: %d cycles, its schedule says %d", i, r.Supersteps[i], want)
		}
	}
}

// TestLaunches: a tile's launches, each at its phase with its call, end
// where ComputeCycles counts the tile; the latest end plus the tail is
// the superstep's cycles.
func TestLaunches(t *testing.T) {
	mm := &prog.Kernel{What: "mm", Params: &codegen.MatMul{Type: codegen.AMPFP16, M: 8, K: 64, N: 32, CStride: 32, Workers: 6}}
	sum := &prog.Kernel{What: "sum", Params: &codegen.SumParts{N: 64, Parts: 3, Stride: 64, Workers: 6}}
	un := &prog.Kernel{What: "gelu", Params: &codegen.Unary{Op: codegen.GeluErf, N: 510, Workers: 5}}
	s := prog.NewSuperstep(obj.Compute, "c")
	s.Pre = 3 // a phase other than 0 for the first launch
	s.Work[2] = []*prog.Kernel{un, mm}
	s.Work[5] = []*prog.Kernel{mm, sum, un}
	latest := int64(0)
	for _, tile := range []int{2, 5} {
		cs, end, err := Launches(s, tile)
		if err != nil {
			t.Fatal(err)
		}
		at := s.Pre
		for i, k := range s.Work[tile] {
			c, err := k.CyclesAt(int(at % codegen.Slots))
			if err != nil {
				t.Fatal(err)
			}
			if cs[i] != c+prog.LaunchCallCycles {
				t.Errorf("tile %d launch %d: %d cycles, want %d", tile, i, cs[i], c+prog.LaunchCallCycles)
			}
			at += c + prog.LaunchCallCycles
		}
		if end != at {
			t.Errorf("tile %d: ends at %d, want %d", tile, end, at)
		}
		latest = max(latest, end)
	}
	got, err := ComputeCycles(s)
	if err != nil {
		t.Fatal(err)
	}
	if want := latest + prog.ProfileStoreCycles + s.Post + 1; got != want {
		t.Errorf("ComputeCycles %d, want the latest end %d plus the tail: %d", got, latest, want)
	}
}
