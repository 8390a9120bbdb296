package prog

import (
	"testing"

	"ipu.local/formats/obj"
)

// TestLivenessAlias: an access to a buffer the program's Alias maps
// (chains included) counts for the buffer it stands for; the stale
// buffer itself is not the program's and changes nothing.
func TestLivenessAlias(t *testing.T) {
	p := &Program{}
	a := p.NewBuffer("a", []int{0}, 64, 8, AnyRegion)
	unused := p.NewBuffer("unused", []int{0}, 64, 8, AnyRegion)
	stale, older := &Buffer{Name: "a, as cached"}, &Buffer{Name: "a, cached before"}
	var x uint32
	read := func(b *Buffer) *Superstep {
		return &Superstep{Kind: obj.Compute, Work: map[int][]*Kernel{0: {{Fixes: []Fix{{Field: &x, Ref: Ref{Buf: b}}}}}}}
	}
	write := &Superstep{Kind: obj.Compute, Work: map[int][]*Kernel{0: {{Fixes: []Fix{{Field: &x, Ref: Ref{Buf: a}, Write: true}}}}}}
	xfer := &Superstep{Kind: obj.Exchange, Xfers: []Transfer{{Src: 0, Dst: 1, DstN: 1, Words: 1, From: Ref{Buf: older}, To: Ref{Buf: older}}}}
	p.Steps = []*Superstep{write, read(a), read(stale), xfer, read(a)}
	p.Liveness()
	if a.First != 0 || a.Last != 4 {
		t.Fatalf("without aliases: a lives [%d, %d], want [0, 4]", a.First, a.Last)
	}
	p.Steps = p.Steps[:4]
	p.Liveness()
	if a.First != 0 || a.Last != 1 {
		t.Fatalf("without aliases, the stale reads dropped: a lives [%d, %d], want [0, 1]", a.First, a.Last)
	}
	p.Alias = map[*Buffer]*Buffer{stale: a, older: stale}
	p.Liveness()
	if a.First != 0 || a.Last != 3 {
		t.Errorf("with aliases: a lives [%d, %d], want [0, 3] (read through an alias at 2, a chain at 3)", a.First, a.Last)
	}
	if unused.First != 0 || unused.Last != len(p.Steps) {
		t.Errorf("an untouched buffer lives [%d, %d], want the whole program [0, %d]", unused.First, unused.Last, len(p.Steps))
	}
}
