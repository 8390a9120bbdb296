package planner

import (
	"strings"
	"testing"

	"ipu.local/libs/arch"
	"ipu.local/libs/codegen"
	"ipu.local/libs/prog"
	"ipu.local/libs/sched"
)

// The expanded geometry counts every stream end on its tile, with the
// code of its operand loads, and a tile beyond the limit is refused.
func TestExpandGeometry(t *testing.T) {
	p := arch.MustLookup("ipu21")
	pr := &prog.Program{Arch: p}
	buf := pr.NewBuffer("b", []int{0, 1, 2, 3, 4}, 4096, 16, prog.AnyRegion)
	s := prog.NewSuperstep(0, "x")
	s.Xfers = []prog.Transfer{
		{Src: 0, Dst: 1, DstN: 3, Words: 2, From: prog.Ref{Buf: buf}, To: prog.Ref{Buf: buf, Off: 64}},
		{Src: 4, Dst: 1, Words: 3, From: prog.Ref{Buf: buf, Off: 8}, To: prog.Ref{Buf: buf, Off: 128}},
	}
	pr.Steps = append(pr.Steps, s, s) // two supersteps alike
	addr := func(r prog.Ref) uint32 { return 0x90000 + r.Off }
	g, _ := expandGeometry(p, pr, addr)
	if g.fragments != 4 || g.tile != 1 {
		t.Errorf("fragments %d on tile %d, want 4 on tile 1 (two receptions in each superstep)", g.fragments, g.tile)
	}
	cl := codegen.ConstLen
	recv := func(src int, off uint32, w int) int64 {
		return 4 * int64(cl(uint32(src))+cl(0x90000+off)+cl(uint32(w))+1)
	}
	if want := 2 * (recv(0, 64, 2) + recv(4, 128, 3)); g.rowBytes != want {
		t.Errorf("row bytes %d, want %d", g.rowBytes, want)
	}
	if g.heuristic != 4*5*4 {
		t.Errorf("heuristic %d, want 80", g.heuristic)
	}
	if err := g.check(sched.FragmentLimit(p)); err != nil {
		t.Error(err)
	}
	if err := g.check(3); err == nil || !strings.Contains(err.Error(), "tile 1: 4 exchange fragments") {
		t.Errorf("limit 3: %v", err)
	}
	// A memory reaching past 2^20: an address there loads in two
	// instructions, and each is asked of addr.
	big := *p
	big.Memory.Hi = 0x200000
	far := func(r prog.Ref) uint32 { return 0xF0000 + 0x8000*r.Off/64 } // past 2^20 from offset 128 on
	if g, _ = expandGeometry(&big, pr, far); g.rowBytes != 2*4*int64(cl(0)+cl(far(prog.Ref{Off: 64}))+cl(2)+1+cl(4)+cl(far(prog.Ref{Off: 128}))+cl(3)+1) || cl(far(prog.Ref{Off: 128})) != 2 {
		t.Errorf("memory past 2^20: row bytes %d", g.rowBytes)
	}
}
