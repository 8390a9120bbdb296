package sched

import (
	"errors"
	"math/rand"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"ipu.local/libs/arch"
	"ipu.local/libs/isa"
)

// shifted returns phase with every source address moved by ds and every
// destination address by dd.
func shifted(phase []Transfer, ds, dd int32) []Transfer {
	out := append([]Transfer(nil), phase...)
	for i := range out {
		out[i].SrcAddr = uint32(int32(out[i].SrcAddr) + ds)
		out[i].DstAddr = uint32(int32(out[i].DstAddr) + dd)
	}
	return out
}

// TestRelocateEqualsSchedule relocates every case's plan to the case's
// phase at shifted addresses: the plan must be the one Schedule makes
// for the shifted phase, pass Validate, and run on the simulator in its
// cycles with every word delivered.
func TestRelocateEqualsSchedule(t *testing.T) {
	for _, c := range phaseCases() {
		t.Run(c.name, func(t *testing.T) {
			p := arch.MustLookup(c.arch)
			pl, err := Schedule(p, c.phase, c.opt)
			if err != nil {
				t.Fatal(err)
			}
			to := shifted(c.phase, 0x2000, -0x1000)
			rl, err := Relocate(pl, c.phase, to)
			if err != nil {
				t.Fatal(err)
			}
			if err := Validate(p, to, rl); err != nil {
				t.Fatal(err)
			}
			want, err := Schedule(p, to, c.opt)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, rl); diff != "" {
				t.Fatalf("relocated plan differs from the schedule (-want +got):\n%s", diff)
			}
			if len(rl.Tiles) > 0 && cmp.Equal(pl.Tiles, rl.Tiles) {
				t.Fatal("relocation left the code as it was")
			}
			r, err := runOnSim(t, p, to, rl, nil)
			if err != nil {
				t.Fatalf("simulator: %v", err)
			}
			if err := checkDelivered(p, to, r); err != nil {
				t.Fatal(err)
			}
			if len(r.res.Phases) > 0 && r.res.Phases[0].Cycles != rl.Makespan {
				t.Errorf("simulated %d cycles, relocated plan says %d", r.res.Phases[0].Cycles, rl.Makespan)
			}
		})
	}
}

// TestRelocateRefuses changes what the schedule depends on: the
// relocation must be refused with a RelocateError.
func TestRelocateRefuses(t *testing.T) {
	p := arch.MustLookup("ipu21-64")
	// Tile 0 sends two buffers; in the new phase they are one buffer sent
	// twice, so one register can serve both sends.
	from := []Transfer{
		{Src: 0, Dst: 1, Words: 8, SrcAddr: srcBase, DstAddr: dstBase},
		{Src: 0, Dst: 2, Words: 8, SrcAddr: srcBase + 0x100, DstAddr: dstBase},
	}
	same := shifted(from, 0, 0x40)
	same[1].SrcAddr = same[0].SrcAddr
	pl, err := Schedule(p, from, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		to   []Transfer
		want string
	}{
		{"two values become one", same, "values 0x60000 and 0x60100 both become 0x60000"},
		{"other pattern", append(shifted(from, 0, 0), from[0]), "different patterns"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Relocate(pl, from, tt.to)
			var re *RelocateError
			if !errors.As(err, &re) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want a RelocateError with %q", err, tt.want)
			}
			if err := Relocatable(from, tt.to); !errors.As(err, &re) {
				t.Fatalf("Relocatable: %v, want a RelocateError", err)
			}
		})
	}
	// One value that becomes two: refused as well.
	split := shifted(same, 0, 0)
	split[1].SrcAddr = srcBase + 0x200
	plSame, err := Schedule(p, same, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Relocate(plSame, same, split); err == nil || !strings.Contains(err.Error(), "becomes both") {
		t.Fatalf("error %v, want one value becoming two", err)
	}
	// The schedule of the merged phase is indeed another one: tile 0
	// loads one address fewer.
	if a, b := loads(pl.Tile(0).Code), loads(plSame.Tile(0).Code); a != 5 || b != 4 {
		t.Fatalf("tile 0 loads %d and %d values, want 5 and 4", a, b)
	}
}

func loads(code []isa.Inst) int {
	n := 0
	for _, in := range code {
		if in.Op == isa.LI {
			n++
		}
	}
	return n
}

// TestRelocateRandom relocates random phases by random per-transfer
// shifts, some of which make addresses of one tile equal or unequal:
// whenever Relocate accepts, its plan must be the plan Schedule makes
// for the new phase.
func TestRelocateRandom(t *testing.T) {
	p := arch.MustLookup("ipu21-64")
	r := rand.New(rand.NewSource(7))
	accepted, refused := 0, 0
	for it := 0; it < 60; it++ {
		from := random(r, 64, 40+r.Intn(80), 24, 4)
		pl, err := Schedule(p, from, Options{})
		if err != nil {
			t.Fatal(err)
		}
		to := append([]Transfer(nil), from...)
		shift := uint32(4 * r.Intn(3))
		for i := range to {
			if r.Intn(4) == 0 {
				to[i].SrcAddr += 4 * uint32(r.Intn(3))
			} else {
				to[i].SrcAddr += shift
			}
			to[i].DstAddr += 0x1000
		}
		rl, err := Relocate(pl, from, to)
		if err != nil {
			var re *RelocateError
			if !errors.As(err, &re) {
				t.Fatalf("case %d: %v", it, err)
			}
			refused++
			continue
		}
		accepted++
		if err := Validate(p, to, rl); err != nil {
			t.Fatalf("case %d: %v", it, err)
		}
		want, err := Schedule(p, to, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, rl); diff != "" {
			t.Fatalf("case %d: relocated plan differs from the schedule (-want +got):\n%s", it, diff)
		}
	}
	t.Logf("%d relocations accepted, %d refused", accepted, refused)
	if accepted == 0 || refused == 0 {
		t.Fatalf("%d accepted, %d refused: the test exercises only one side", accepted, refused)
	}
}
