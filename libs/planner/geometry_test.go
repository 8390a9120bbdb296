package planner

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"ipu.local/libs/arch"
	"ipu.local/libs/codegen"
	"ipu.local/libs/isa"
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

// The expanded geometry of random transfers (multicasts to consecutive
// and strided tiles, single receptions) is what visiting every receiver
// gives.
func TestExpandGeometryRandom(t *testing.T) {
	p := arch.MustLookup("ipu21-64")
	rng := rand.New(rand.NewPCG(1, 2))
	addr := func(r prog.Ref) uint32 { return 0x90000 + r.Off }
	for trial := range 200 {
		pr := &prog.Program{Arch: p}
		buf := pr.NewBuffer("b", []int{0}, 4096, 16, prog.AnyRegion)
		for range 1 + rng.IntN(3) {
			s := prog.NewSuperstep(0, "x")
			for range 1 + rng.IntN(20) {
				x := prog.Transfer{Src: rng.IntN(p.Tiles), Dst: rng.IntN(p.Tiles), Words: 1 + rng.IntN(3000),
					From: prog.Ref{Buf: buf, Off: uint32(8 * rng.IntN(512))}, To: prog.Ref{Buf: buf, Off: uint32(8 * rng.IntN(512))}}
				if rng.IntN(2) == 0 {
					x.Stride = rng.IntN(4)
					step := max(x.Stride, 1)
					x.DstN = 1 + rng.IntN((p.Tiles-1-x.Dst)/step+1)
				}
				s.Xfers = append(s.Xfers, x)
			}
			pr.Steps = append(pr.Steps, s)
		}
		frags, bytes := make([]int, p.Tiles), make([]int64, p.Tiles)
		cl := codegen.ConstLen
		for _, s := range pr.Steps {
			for _, x := range s.Xfers {
				d := uint32(x.Dst)
				if n := x.Dests(); n > 1 {
					d |= uint32(n) << 16
				}
				frags[x.Src]++
				bytes[x.Src] += 4 * int64(cl(d)+cl(addr(x.From))+cl(isa.SendCount(x.Words, x.Step()))+1)
				for k := range x.Dests() {
					u := x.Dst + k*x.Step()
					frags[u]++
					bytes[u] += 4 * int64(cl(uint32(x.Src))+cl(addr(x.To))+cl(uint32(x.Words))+1)
				}
			}
		}
		g, got := expandGeometry(p, pr, addr)
		if !slices.Equal(got, bytes) {
			t.Fatalf("trial %d: bytes by tile %v, want %v", trial, got, bytes)
		}
		most := slices.Max(frags)
		if g.fragments != most || frags[g.tile] != most || slices.Index(frags, most) != g.tile || g.rowBytes != slices.Max(bytes) {
			t.Fatalf("trial %d: %+v, want %d fragments on tile %d, row bytes %d", trial, g, most, slices.Index(frags, most), slices.Max(bytes))
		}
	}
}
