package sim

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"ipu.local/libs/isa"
)

// TestHsyncCommand checks that each Run delivers its command to the hsync
// register and that the marks count every barrier.
func TestHsyncCommand(t *testing.T) {
	r := newRig(t, "ipu21-tiny", Options{})
	r.load(0, assemble(li(2, dataBase),
		label("l"), hsync(5), stm(5, 2, 0), addi(2, 2, 4), sync_(), br("l")))
	r.load(1, assemble(label("l"), hsync(15), sync_(), br("l")))
	var marks []int
	for _, cmd := range []uint32{7, 8, 9} {
		res, err := r.m.Run(nil, cmd)
		if err != nil {
			t.Fatal(err)
		}
		if !res.AtHost {
			t.Fatal("not at host")
		}
		marks = append(marks, r.m.Mark())
	}
	if diff := cmp.Diff([]int{1, 3, 5}, marks); diff != "" {
		t.Errorf("marks: mismatch (-want +got):\n%s", diff)
	}
	got := []uint32{r.word(0, dataBase), r.word(0, dataBase+4), r.word(0, dataBase+8)}
	if diff := cmp.Diff([]uint32{8, 9, 0}, got); diff != "" {
		t.Errorf("commands stored: mismatch (-want +got):\n%s", diff)
	}
	if s := r.m.Snapshot(1); s.Ctx[supCtx].M[15] != 0 {
		t.Errorf("$m15 = %d after an hsync into it", s.Ctx[supCtx].M[15])
	}
}

// TestSamples checks the sampled PCs: the supervisor's, or the lowest
// running worker's.
func TestSamples(t *testing.T) {
	r := newRig(t, "ipu21-tiny", Options{SamplePeriod: 10})
	r.load(0, assemble(nop(), nop(), nop(), nop(), nop(), sync_(), halt()))
	r.load(1, assemble(li(1, int32(pcOf(4))), run(1, 2, 2), sync_(), halt(), nop(), nop(), nop(), exit()))
	res, err := r.m.Run(nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []Sample{
		{0, 0, 0, pcOf(0)}, {0, 0, 10, pcOf(2)}, {0, 0, 20, pcOf(4)}, {0, 0, 30, pcOf(5)},
		// Tile 1: li at 0, run at 6; worker 2 issues at 8, 14, 20, 26
		// (exit); the supervisor syncs at 27.
		{1, 0, 0, pcOf(0)}, {1, 0, 10, pcOf(5)}, {1, 0, 20, pcOf(6)},
		{0, 1, 0, pcOf(6)},
		{1, 1, 0, pcOf(3)},
	}
	if diff := cmp.Diff(want, res.Samples); diff != "" {
		t.Errorf("samples: mismatch (-want +got):\n%s", diff)
	}
	if got := res.Phases[0].TileCycles; !cmp.Equal(got, []int64{31, 28, 0, 0}) {
		t.Errorf("tile cycles = %v, want [31 28 0 0]", got)
	}
}

// TestFP8Config checks RegFP8, put, and the copy a worker gets at run.
func TestFP8Config(t *testing.T) {
	r := newRig(t, "ipu21-tiny", Options{})
	if err := r.m.Configure(0, RegFP8, 0x1_0005); err != nil {
		t.Fatal(err)
	}
	if err := r.m.Configure(0, RegFP8, 0x2_0000); err == nil {
		t.Error("undefined fp8 bits: no error")
	}
	r.load(0, assemble(
		li(2, dataBase), get(1, isa.CSRFP8), stm(1, 2, 0),
		li(3, 0x33), I(isa.PUT, 0, 3, 0, isa.CSRFP8),
		li(1, int32(pcOf(10))), addi(2, 2, 4), run(1, 2, 0), sync_(), halt(),
		get(1, isa.CSRFP8), stm(1, 0, 0), exit()))
	if _, err := r.m.Run(nil, 0); err != nil {
		t.Fatal(err)
	}
	got := []uint32{r.word(0, dataBase), r.word(0, dataBase+4)}
	if diff := cmp.Diff([]uint32{0x1_0005, 0x33}, got); diff != "" {
		t.Errorf("fp8 seen by supervisor, worker: mismatch (-want +got):\n%s", diff)
	}
}

// TestSharedPrograms checks that tiles with identical code share one
// predecoded program and that different code does not.
func TestSharedPrograms(t *testing.T) {
	r := newRig(t, "ipu21-tiny", Options{})
	r.load(0, assemble(nop(), halt()))
	r.load(1, assemble(nop(), halt()))
	r.load(2, assemble(halt()))
	if r.m.tiles[0].prog != r.m.tiles[1].prog || r.m.tiles[0].prog == r.m.tiles[2].prog {
		t.Error("programs not shared as expected")
	}
}
