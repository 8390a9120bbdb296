package cost

import (
	"testing"

	"ipu.local/formats/obj"
	"ipu.local/libs/arch"
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
