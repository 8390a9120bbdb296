package sched

import (
	"math/rand"
	"testing"

	"ipu.local/libs/arch"
	"ipu.local/libs/isa"
)

// TestReplayAgreesWithSim breaks scheduled code at random (a delay longer
// or shorter, a loaded value changed, two instructions swapped) and
// checks that Validate's replay rejects exactly the code the simulator
// faults on or delivers wrong data with. With EarlySync the replay's
// rules are the simulator's only.
func TestReplayAgreesWithSim(t *testing.T) {
	r := rand.New(rand.NewSource(9))
	n := 200
	if testing.Short() {
		n = 40
	}
	var broken, fine int
	for i := 0; i < n; i++ {
		p := arch.MustLookup([]string{"ipu21-tiny", "ipu21-64"}[r.Intn(2)])
		ph := random(r, min(p.Tiles, 4+r.Intn(12)), 1+r.Intn(10), 1+r.Intn(12), 4)
		opt := Options{EarlySync: true, NoSend2: r.Intn(2) == 0, Passes: 1}
		pl, err := Schedule(p, ph, opt)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		k := r.Intn(len(pl.Tiles))
		tc := &pl.Tiles[k]
		code := tc.Code
		at := r.Intn(len(code) - 1) // never the sync
		switch in := &code[at]; {
		case in.Op == isa.DELAY && r.Intn(2) == 0:
			in.Imm = max(0, in.Imm+int32(r.Intn(5))-2)
		case in.Op == isa.LI:
			in.Imm += int32(r.Intn(9)-4) * 4
			in.Imm = max(0, in.Imm)
		case code[at+1].Op != isa.SYNC:
			code[at], code[at+1] = code[at+1], code[at]
		}
		_, rerr := replay(p, ph, pl.Tiles, true)
		res, serr := runOnSim(t, p, ph, pl, nil)
		simOK := serr == nil && checkDelivered(p, ph, res) == nil
		if simOK != (rerr == nil) {
			t.Fatalf("case %d: tile %d pc %d edited: simulator ok %v (%v), replay %v\n%s", i, tc.Tile, at, simOK, serr, rerr, listing(pl))
		}
		if simOK {
			fine++
		} else {
			broken++
		}
	}
	t.Logf("%d edits broke the exchange, %d did not", broken, fine)
}
