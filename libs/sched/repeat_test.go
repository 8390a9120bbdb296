package sched

import (
	"testing"

	"ipu.local/libs/arch"
	"ipu.local/libs/isa"
)

// TestCompressOnSim compresses every case's code: the compressed plan
// validates, runs on the simulator with the same cycles and delivers the
// same words, and is never longer.
func TestCompressOnSim(t *testing.T) {
	loops := 0
	for _, c := range phaseCases() {
		t.Run(c.name, func(t *testing.T) {
			p := arch.MustLookup(c.arch)
			pl, err := Schedule(p, c.phase, c.opt)
			if err != nil {
				t.Fatal(err)
			}
			cp, stats := Compress(p, pl)
			var sum CompressStats
			for i, s := range stats {
				sum.Add(s)
				if s.PackedBytes+s.PatchBytes > s.CodeBytes {
					t.Errorf("tile %d: %d bytes and %d of patches from %d", pl.Tiles[i].Tile, s.PackedBytes, s.PatchBytes, s.CodeBytes)
				}
			}
			loops += sum.Loops
			if err := Validate(p, c.phase, cp); err != nil {
				t.Fatal(err)
			}
			r, err := runOnSim(t, p, c.phase, cp, nil)
			if err != nil {
				t.Fatalf("simulator: %v", err)
			}
			if err := checkDelivered(p, c.phase, r); err != nil {
				t.Fatal(err)
			}
			st := r.res.Phases[0]
			if st.Cycles != pl.Makespan {
				t.Errorf("simulated superstep %d cycles, plan says %d", st.Cycles, pl.Makespan)
			}
			for _, tc := range cp.Tiles {
				if st.TileCycles[tc.Tile] != tc.Cycles {
					t.Errorf("tile %d: simulated %d cycles, plan says %d", tc.Tile, st.TileCycles[tc.Tile], tc.Cycles)
				}
			}
			t.Logf("%d loops, code %d -> %d bytes, patches %d, elided %d", sum.Loops, sum.CodeBytes, sum.PackedBytes, sum.PatchBytes, sum.ElidedBytes)
		})
	}
	if loops == 0 {
		t.Error("no case compressed: the simulator ran no loop")
	}
}

// TestCompressRuns compresses hand-made runs: strides, values a table
// must hold, a run whose last values later code reads, and one whose
// first gap has no room for the loop's setup.
func TestCompressRuns(t *testing.T) {
	p := arch.MustLookup("ipu21-64")
	li := func(d uint8, v int32) isa.Inst { return isa.Inst{Op: isa.LI, D: d, Imm: v} }
	recv := isa.Inst{Op: isa.RECV, D: 0, A: 1, B: 2}
	delay := func(n int32) isa.Inst { return isa.Inst{Op: isa.DELAY, Imm: n} }
	gatherCode := func(addr func(j int) int32, lead int32, tail bool) []isa.Inst {
		code := []isa.Inst{li(2, 4)}
		if lead >= 0 {
			code = append(code, delay(lead))
		}
		for j := range 10 {
			code = append(code, li(0, int32(j+1)), li(1, addr(j)), delay(6), recv)
		}
		if tail {
			code = append(code, delay(30), recv) // reads the last values again
		}
		return append(code, isa.Inst{Op: isa.SYNC})
	}
	step := func(j int) int32 { return 0x80000 + 16*int32(j) }
	square := func(j int) int32 { return 0x80000 + 16*int32(j*j) }
	for _, c := range []struct {
		name          string
		code          []isa.Inst
		loops         int
		patch, elided int
	}{
		{"strides", gatherCode(step, 60, false), 1, 0, 2 * 4 * 10},
		{"table", gatherCode(square, 60, false), 1, 4 * 10, 4 * 10},
		{"values read later", gatherCode(step, 60, true), 1, 0, 2 * 4 * 10},
		{"no room for the setup", gatherCode(step, -1, false), 0, 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			tc := TileCode{Tile: 5, Code: c.code}
			r := newReplayer(p)
			cy, err := r.run(&tc)
			if err != nil {
				t.Fatal(err)
			}
			tc.Cycles = cy
			out, st := compressTile(p, tc, DefaultRegs)
			if st.Loops != c.loops || st.PatchBytes != c.patch || st.ElidedBytes != c.elided {
				t.Fatalf("loops %d patches %d elided %d, want %d %d %d\n%v", st.Loops, st.PatchBytes, st.ElidedBytes, c.loops, c.patch, c.elided, out.Code)
			}
			if err := sameIssue(tc, out); err != nil {
				t.Fatal(err)
			}
			if c.loops > 0 && len(out.Code)+len(out.Table) >= len(tc.Code) {
				t.Errorf("%d instructions and %d table words from %d", len(out.Code), len(out.Table), len(tc.Code))
			}
		})
	}
}
