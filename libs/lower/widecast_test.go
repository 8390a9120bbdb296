package lower

import (
	"testing"

	"ipu.local/formats/obj"
	"ipu.local/libs/arch"
	"ipu.local/libs/codegen"
	"ipu.local/libs/prog"
)

// wideCasts moves a cast's buffers to interleaved memory only on tiles
// with room to spare, undoes its earlier choices when the program
// changes (shared buffers of pricing), and a kernel whose choice changes
// is costed again.
func TestWideCasts(t *testing.T) {
	p := arch.MustLookup("ipu21")
	pr := &prog.Program{Arch: p}
	x := pr.NewBuffer("x", []int{0}, 4*256, 16, prog.AnyRegion)
	y := pr.NewBuffer("y", []int{0}, 256, 16, prog.AnyRegion)
	c := &codegen.Cast{Kind: codegen.F32ToF8, N: 256, Format: 0, Saturate: true, Workers: codegen.Slots}
	k := &prog.Kernel{What: "cast", Params: c, Fixes: []prog.Fix{{Field: &c.X, Ref: prog.Ref{Buf: x}}, {Field: &c.Y, Ref: prog.Ref{Buf: y}, Write: true}}}
	s := prog.NewSuperstep(obj.Compute, "compute:cast")
	s.Work[0] = []*prog.Kernel{k}
	pr.Steps = []*prog.Superstep{s}
	narrow, err := k.CyclesAt(0)
	if err != nil {
		t.Fatal(err)
	}
	wideCasts(pr, p)
	if !c.Interleaved || x.Region != prog.Interleaved || y.Region != prog.Interleaved || !x.Promoted {
		t.Fatalf("roomy tile: interleaved %v, regions %v %v", c.Interleaved, x.Region, y.Region)
	}
	wide, _ := k.CyclesAt(0)
	if wide >= narrow {
		t.Errorf("wide cast %d cycles, narrow %d", wide, narrow)
	}
	// The tile fills up: the cast goes back to its narrow code and its
	// buffers to no region.
	pr.NewBuffer("big", []int{0}, int(p.Interleaved.Size()/2), 16, prog.AnyRegion)
	wideCasts(pr, p)
	if c.Interleaved || x.Region != prog.AnyRegion || y.Region != prog.AnyRegion || x.Promoted {
		t.Fatalf("full tile: interleaved %v, regions %v %v", c.Interleaved, x.Region, y.Region)
	}
	if again, _ := k.CyclesAt(0); again != narrow {
		t.Errorf("narrow again: %d cycles, want %d", again, narrow)
	}
	// A buffer an A operand holds (non-interleaved) is not moved.
	pr.Buffers = pr.Buffers[:2]
	y.Region = prog.NonInterleaved
	wideCasts(pr, p)
	if c.Interleaved || x.Region != prog.AnyRegion {
		t.Errorf("non-interleaved output: interleaved %v, x region %v", c.Interleaved, x.Region)
	}
}
