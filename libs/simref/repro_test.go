package simref_test

import (
	"testing"

	"ipu.local/libs/arch"
	"ipu.local/libs/isa"
	"ipu.local/libs/sim"
)

// Minimal programs on which the fast simulator and the reference
// interpreter once disagreed. Each comment says which side was wrong and
// by which rule.

// reproProgram wraps hand-written supervisor programs (tile -> program) as
// a generated one.
func reproProgram(tiles map[int]*prog) *program {
	return reproOn(arch.MustLookup("ipu21-tiny"), tiles)
}

// reproOn is reproProgram on preset p.
func reproOn(p *arch.Preset, tiles map[int]*prog) *program {
	pr := &program{
		preset:   p,
		images:   map[int]sim.Image{},
		fp8:      map[int]uint32{},
		commands: []uint32{0x1234},
		host:     make([]byte, hostBytes),
	}
	for id := 0; id < pr.preset.Tiles; id++ {
		if p, ok := tiles[id]; ok {
			pr.tiles = append(pr.tiles, id)
			pr.images[id] = p.image()
		}
	}
	return pr
}

func checkRepro(t *testing.T, tiles map[int]*prog) {
	t.Helper()
	diff, err := compare(reproProgram(tiles))
	if err != nil {
		t.Fatal(err)
	}
	if diff != "" {
		t.Error(diff)
	}
}

// TestReproDelayClosesRepeat: a delay as the last instruction of a repeat
// body must close the loop like any other instruction ("when the PC reaches
// end and remaining > 1, PC = start"). The fast simulator skipped the loop
// check after delay, so the loop ran once and the context stayed "inside a
// repeat body": the next branch faulted. Fast simulator wrong.
func TestReproDelayClosesRepeat(t *testing.T) {
	checkRepro(t, map[int]*prog{0: newProg().
		i(isa.RPTI, 0, 0, 3<<8|1).
		i(isa.DELAY, 0, 0, 1).
		i(isa.ADDI, m1, m1, 1).
		label("l").
		br(isa.BRZ, 0, m2, "l2").
		label("l2").
		op(isa.HALT)})
}
