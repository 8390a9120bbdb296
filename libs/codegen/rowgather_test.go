package codegen

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"ipu.local/libs/sim"
)

// TestRowGather runs RowGather on the simulator: Y's rows bit-exact
// copies of the table rows the indices name (negative ones wrapped),
// every other byte untouched, cycles equal to Cost.
func TestRowGather(t *testing.T) {
	cases := []struct {
		p          RowGather
		xoff, yoff uint32
	}{
		{RowGather{N: 16, W: 96, Rows: 500, XStride: 96, YStride: 96, Workers: 6}, 0, 0},
		{RowGather{N: 1, W: 1, Rows: 1, XStride: 1, YStride: 1, Workers: 6}, 4, 4},
		{RowGather{N: 7, W: 3, Rows: 11, XStride: 5, YStride: 4, Workers: 3}, 4, 0},
		{RowGather{N: 13, W: 8, Rows: 9, XStride: 8, YStride: 10, Workers: 6}, 0, 8},
		{RowGather{N: 5, W: 2, Rows: 3, XStride: 2, YStride: 2, Workers: 1}, 8, 4},
		{RowGather{N: 40, W: 17, Rows: 70, XStride: 17, YStride: 17, Workers: 5}, 0, 0},
	}
	const iBase, xBase, yBase, guard = 0x60000, 0x80000, 0xB0000, 32
	tl := newTile()
	for ci, tc := range cases {
		p := tc.p
		p.Idx, p.X, p.Y = iBase, xBase+tc.xoff, yBase+tc.yoff
		t.Run(fmt.Sprintf("n%d-w%d-rows%d-s%d,%d-o%d,%d-w%d", p.N, p.W, p.Rows, p.XStride, p.YStride, tc.xoff, tc.yoff, p.Workers), func(t *testing.T) {
			r := rng(int64(ci))
			idx := make([]byte, 4*p.N)
			for i := 0; i < p.N; i++ {
				v := r.Intn(2*p.Rows) - p.Rows // [-Rows, Rows)
				binary.LittleEndian.PutUint32(idx[4*i:], uint32(int32(v)))
			}
			xn := 4 * ((p.Rows-1)*p.XStride + p.W)
			yn := 4 * ((p.N-1)*p.YStride + p.W)
			x := randBytes(r, xn)
			area := randBytes(r, yn+2*guard)
			ys, err := EmulateRowGather(p, idx, x, area[guard:guard+yn])
			if err != nil {
				t.Fatal(err)
			}
			want := append(append(append([]byte(nil), area[:guard]...), ys...), area[guard+yn:]...)
			for _, phase := range []int{0, ci % Slots} {
				tl.put(p.Idx, idx)
				tl.put(p.X, x)
				tl.put(p.Y-guard, area)
				k, cycles := tl.runKernel(t, phase, func(b *Builder) (Kernel, error) { return EmitRowGather(b, p) })
				if d := cmp.Diff(want, tl.get(p.Y-guard, len(area))); d != "" {
					t.Fatalf("phase %d: Y mismatch (-want +got):\n%s", phase, d)
				}
				checkCycles(t, k, cycles, phase)
				if c, err := p.Cost(); err != nil || c.CyclesAt(phase) != cycles {
					t.Errorf("Cost() = %v, %v; measured %d", c.CyclesAt(phase), err, cycles)
				}
			}
		})
	}
}

// TestRowGatherOutOfRange: an index outside [-Rows, Rows) faults the
// device instead of reading outside the table.
func TestRowGatherOutOfRange(t *testing.T) {
	p := RowGather{N: 4, W: 4, Rows: 10, XStride: 4, YStride: 4, Workers: 2, Idx: 0x60000, X: 0x80000, Y: 0xB0000}
	for _, bad := range []int32{10, -11, 1 << 30} {
		idx := make([]byte, 16)
		for i, v := range []int32{1, -10, 9, bad} {
			binary.LittleEndian.PutUint32(idx[4*i:], uint32(v))
		}
		if _, err := EmulateRowGather(p, idx, make([]byte, 160), make([]byte, 64)); err == nil {
			t.Errorf("index %d: emulation accepted it", bad)
		}
		tl := newTile()
		tl.put(p.Idx, idx)
		b := NewBuilder(tl.p, codeBase)
		k, err := EmitRowGather(b, p)
		if err != nil {
			t.Fatal(err)
		}
		sup := b.Here()
		EmitLaunch(b, k.Entry, k.Workers)
		b.Join()
		b.Halt()
		code, err := b.Finish()
		if err != nil {
			t.Fatal(err)
		}
		entry, _ := b.Addr(sup)
		if err := tl.m.Load(0, sim.Image{Entry: entry, Segments: []sim.Segment{{Addr: codeBase, Data: code, Code: true}}}); err != nil {
			t.Fatal(err)
		}
		_ = tl.m.Configure(0, sim.RegEntry, entry)
		_, err = tl.m.Run(nil, 0)
		if err == nil || !strings.Contains(err.Error(), "0x0") && !strings.Contains(strings.ToLower(err.Error()), "outside") {
			t.Errorf("index %d: run error %v, want a fault outside tile memory", bad, err)
		}
	}
}

func TestRowGatherCheck(t *testing.T) {
	for _, p := range []RowGather{
		{N: 0, W: 1, Rows: 1, XStride: 1, YStride: 1, Workers: 1},
		{N: 2, W: 4, Rows: 2, XStride: 3, YStride: 4, Workers: 1},
		{N: 2, W: 4, Rows: 2, XStride: 4, YStride: 3, Workers: 1},
		{N: 2, W: 4, Rows: 2, XStride: 4, YStride: 4, Workers: 7},
	} {
		if _, err := p.Cost(); err == nil {
			t.Errorf("%+v: Cost accepted it", p)
		}
	}
}
