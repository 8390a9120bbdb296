package simref_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"ipu.local/libs/arch"
	"ipu.local/libs/isa"
	"ipu.local/libs/sim"
	"ipu.local/libs/simref"
)

// TestEdges runs corner cases the random generator rarely reaches on both
// simulators.
func TestEdges(t *testing.T) {
	tests := []struct {
		name  string
		tiles map[int]*prog
	}{
		{"rpti zero count", map[int]*prog{0: newProg().
			i(isa.RPTI, 0, 0, 0<<8|2).
			i(isa.ADDI, m1, m1, 1).
			i(isa.ADDI, m1, m1, 1).
			i(isa.ADDI, m2, m1, 1).
			op(isa.HALT)}},
		{"rpti empty body", map[int]*prog{0: newProg().
			i(isa.RPTI, 0, 0, 5<<8|0).
			i(isa.ADDI, m1, m1, 1).
			br(isa.BRZ, 0, m3, "x").
			label("x").
			op(isa.HALT)}},
		{"rpt register count", map[int]*prog{0: newProg().
			i(isa.LI, m4, 0, 7).
			i(isa.RPT, 0, m4, 1).
			i(isa.ADDI, m4, m4, 1).
			op(isa.HALT)}},
		{"get cycles", map[int]*prog{0: newProg().
			i(isa.DELAY, 0, 0, 3).
			add(isa.GET, m1, 0, 0, 0, isa.CSRCycles).
			add(isa.GET, m2, 0, 0, 0, isa.CSRContext).
			add(isa.GET, m3, 0, 0, 0, isa.CSRTiles).
			add(isa.GET, m4, 0, 0, 0, isa.CSRFP8).
			op(isa.HALT)}},
		{"hsync into mzero", map[int]*prog{0: newProg().
			i(isa.HSYNC, 15, 0, 0).
			op(isa.HALT)}},
		{"call and jr", map[int]*prog{0: newProg().
			br(isa.CALL, m5, 0, "sub").
			i(isa.ADDI, m1, m1, 1).
			op(isa.HALT).
			label("sub").
			i(isa.ADDI, m2, m2, 1).
			i(isa.JR, 0, m5, 0)}},
		{"call into mzero", map[int]*prog{0: newProg().
			br(isa.CALL, 15, 0, "sub").
			op(isa.HALT).
			label("sub").
			op(isa.HALT)}},
		{"big delay", map[int]*prog{0: newProg().
			i(isa.DELAY, 0, 0, 1000).
			op(isa.HALT)}},
		{"run same worker twice", map[int]*prog{0: newProg().
			li(m1, codeBase+4*8).
			r(isa.RUN, 0, m1, m2).
			r(isa.RUN, 0, m1, m2).
			add(isa.RUN, 0, m1, m2, 0, 5).
			op(isa.SYNC).
			op(isa.HALT).
			op(isa.NOP).
			label("w").
			i(isa.ADDI, m0, m0, 1).
			i(isa.DELAY, 0, 0, 7).
			op(isa.EXIT)}},
		{"amph same register", map[int]*prog{0: newProg().
			li(m1, codeBase+4*6).
			li(m2, dataBase).
			r(isa.RUN, 0, m1, m2).
			op(isa.HALT).
			r(isa.AMPH, 0, m0, m0).
			op(isa.EXIT)}},
		{"ampq same element", map[int]*prog{0: newProg().
			li(m1, codeBase+4*7).
			li(m2, dataBase).
			r(isa.RUN, 0, m1, m2).
			op(isa.JOIN).
			op(isa.HALT).
			i(isa.ADDI, m1, m0, 64).
			r(isa.AMPQ, 0, m0, m1).
			r(isa.AMPQ, 0, m0, m1).
			add(isa.GET, m3, 0, 0, 0, isa.CSRCycles).
			op(isa.EXIT)}},
		{"send zero words", map[int]*prog{
			0: newProg().i(isa.LI, m1, 0, 1).li(m2, dataBase).r(isa.SEND, m1, m2, 15).r(isa.SEND, m1, m2, 15).op(isa.SYNC).op(isa.HALT),
			1: newProg().i(isa.LI, m2, 0, 0).r(isa.RECV, 15, m2, 15).op(isa.SYNC).op(isa.HALT),
		}},
		{"recv cut by recv", map[int]*prog{
			0: newProg().li(m2, dataBase).i(isa.LI, m3, 0, 4).r(isa.RECV, 15, m2, m3).r(isa.RECV, 15, m2, m3).op(isa.SYNC).op(isa.HALT),
		}},
		{"hin then hout", map[int]*prog{
			0: newProg().li(m1, dataBase).li(m2, 1<<24|0x40).i(isa.LI, m3, 0, 64).
				r(isa.HIN, m1, m2, m3).
				i(isa.ADDI, m2, m2, 0x100).
				r(isa.HOUT, m2, m1, m3).
				op(isa.SYNC).op(isa.HALT),
		}},
		{"hout unattached", map[int]*prog{
			0: newProg().li(m1, dataBase).li(m2, 2<<24).i(isa.LI, m3, 0, 8).
				r(isa.HOUT, m2, m1, m3).
				op(isa.SYNC).op(isa.HALT),
		}},
		// A send2 and a send on one supertile bus: 3 slots of 2.
		{"bus send2 and send", map[int]*prog{
			0: newProg().li(m1, dataBase).i(isa.LI, m2, 0, 4).i(isa.LI, m3, 0, 2).r(isa.SEND2, m3, m1, m2).op(isa.SYNC),
			1: newProg().li(m1, dataBase).i(isa.LI, m2, 0, 4).i(isa.LI, m3, 0, 3).r(isa.SEND, m3, m1, m2).op(isa.SYNC),
		}},
		// Two sends on one bus fit.
		{"bus two sends", map[int]*prog{
			0: newProg().li(m1, dataBase).i(isa.LI, m2, 0, 2).i(isa.LI, m3, 0, 2).r(isa.SEND, m3, m1, m2).op(isa.SYNC).op(isa.HALT),
			1: newProg().li(m1, dataBase).i(isa.LI, m2, 0, 2).i(isa.LI, m3, 0, 3).r(isa.SEND, m3, m1, m2).op(isa.SYNC).op(isa.HALT),
			2: newProg().li(m1, dataBase).i(isa.LI, m2, 0, 2).i(isa.DELAY, 0, 0, 10).r(isa.RECV, 15, m1, m2).op(isa.SYNC).op(isa.HALT),
			3: newProg().li(m1, dataBase).i(isa.LI, m2, 0, 2).i(isa.LI, m3, 0, 1).i(isa.DELAY, 0, 0, 4).r(isa.RECV, m3, m1, m2).op(isa.SYNC).op(isa.HALT),
		}},
		// Destinations one past the last tile.
		{"send beyond the last tile", map[int]*prog{
			0: newProg().li(m1, dataBase).i(isa.LI, m2, 0, 1).li(m3, 3|2<<16).r(isa.SEND, m3, m1, m2).op(isa.SYNC),
		}},
		// Two tiles fault in the same cycle: the lower tile's fault wins.
		{"same-cycle faults", map[int]*prog{
			0: newProg().li(m1, dataBase+2).i(isa.LDM, m2, m1, 0),
			1: newProg().li(m1, dataBase).i(isa.LDM, m2, m1, 1),
		}},
		// Worker 4 faults in cycle 40, when the word tile 0 sent at 30
		// reaches tile 1, which does not listen: both faults name tile 0
		// at cycle 40; execution wins over exchange.
		{"exec fault beats exchange fault", map[int]*prog{
			0: newProg().
				i(isa.LI, m1, 0, codeBase+4*8). // 0
				li(m2, dataBase).               // 6, 12
				i(isa.LI, m3, 0, 1).            // 18
				i(isa.LI, m4, 0, 1).            // 24 (the worker starts at 28)
				add(isa.RUN, 0, m1, m2, 0, 4).  // 30: worker 4 issues from 34
				r(isa.SEND, m3, m2, m4).        // 36: arrives at tile 1 at 46
				op(isa.SYNC).
				op(isa.NOP).           // 8: worker
				op(isa.NOP).           // 40
				i(isa.LDM, m1, m0, 2), // 46: misaligned
			1: newProg().op(isa.SYNC).op(isa.HALT),
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { checkRepro(t, tc.tiles) })
	}
}

// TestEdgeHostLink: 24 tiles reading the host at once take longer than
// any one tile: the chip-wide link bounds the superstep.
func TestEdgeHostLink(t *testing.T) {
	tiles := map[int]*prog{}
	for i := 0; i < 24; i++ {
		tiles[i] = newProg().
			li(m1, dataBase).
			li(m2, 1<<24|uint32(i)*1024).
			i(isa.LI, m3, 0, 1024).
			r(isa.HIN, m1, m2, m3).
			op(isa.SYNC).
			op(isa.HALT)
	}
	pr := reproOn(arch.MustLookup("ipu21-64"), tiles)
	ref, err := execute(pr, newRef)
	if err != nil {
		t.Fatal(err)
	}
	ph := ref.Runs[0].Result.Phases[0]
	if want := int64(24*1024+42) / 43; ph.Cycles != want {
		t.Errorf("reference superstep cycles = %d, want %d (host link bound; longest tile %d)", ph.Cycles, want, ph.TileCycles[0])
	}
	diff, err := compare(pr)
	if err != nil {
		t.Fatal(err)
	}
	if diff != "" {
		t.Error(diff)
	}
}

// TestEdgeSuperstepLimit: a program that syncs forever faults after the
// superstep limit of one Run.
func TestEdgeSuperstepLimit(t *testing.T) {
	pr := reproProgram(map[int]*prog{
		0: newProg().label("l").op(isa.SYNC).br(isa.BR, 0, 0, "l"),
		1: newProg().label("l").op(isa.NOP).op(isa.SYNC).br(isa.BR, 0, 0, "l"),
	})
	const limit = 40
	ref, err := execute(pr, func(p *arch.Preset, mem func(int) []byte) machine {
		m := simref.New(p, mem)
		m.MaxSupersteps = limit
		return m
	})
	if err != nil {
		t.Fatal(err)
	}
	fast, err := execute(pr, func(p *arch.Preset, mem func(int) []byte) machine {
		return sim.New(p, mem, sim.Options{MaxSupersteps: limit})
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(ref.Runs[0].Result.Phases); got != limit || ref.Runs[0].Fault == nil || ref.Runs[0].Fault.Kind != sim.FaultWatchdog {
		t.Errorf("reference: %d supersteps, fault %v; want %d and a watchdog fault", got, ref.Runs[0].Fault, limit)
	}
	if d := cmp.Diff(withoutDetails(ref.Runs), withoutDetails(fast.Runs)); d != "" {
		t.Errorf("runs mismatch (-ref +fast):\n%s", d)
	}
}
