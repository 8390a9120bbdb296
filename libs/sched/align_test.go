package sched

import (
	"math/rand"
	"testing"

	"ipu.local/libs/arch"
)

// TestAlignmentRetry schedules a phase whose fast schedule breaks the
// issue-slot constraint (it must be repaired), one whose fast schedule
// holds (no retry) and one where nearly every transfer depends on the
// failing ones (qk-early's re-layout on 1,472 tiles: the exact schedule
// is the retry, whole, in one round); each must validate and run on the
// simulator with the cycles the plan says.
func TestAlignmentRetry(t *testing.T) {
	p := arch.MustLookup("ipu21")
	cases := []struct {
		name         string
		phase        []Transfer
		retry, whole bool
	}{
		{"random", random(rand.New(rand.NewSource(3)), 64, 200, 32, 4), true, false},
		{"one", []Transfer{{Src: 0, Dst: 1, Words: 8, SrcAddr: 0x5_0000, DstAddr: 0x5_0000}}, false, false},
		{"qk-early re-layout", readPhase(t, "qk_early_relayout.json.gz"), true, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pl, st, err := ScheduleStats(p, c.phase, Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%+v", st)
			if st.Retried() != c.retry || !st.Success || st.Transfers != len(c.phase) {
				t.Fatalf("stats %+v, want retry %v and success", st, c.retry)
			}
			if c.retry && !c.whole && (st.Rescheduled < st.Failed || st.Rescheduled >= len(c.phase) || st.Rounds < 2) {
				t.Errorf("stats %+v: want an incremental repair (some transfers kept)", st)
			}
			if c.whole && (st.Rescheduled != len(c.phase) || st.Rounds != 1) {
				t.Errorf("stats %+v: want every transfer rescheduled in one round", st)
			}
			if c.whole {
				// The exact passes' shortest, as Schedule runs them.
				ix := newPhaseIndex(p.Tiles, c.phase)
				best := int64(-1)
				for _, s := range strategies[:defaultPasses(c.phase)] {
					e := newSchedulerIx(p, c.phase, Options{}, s, ix)
					e.run()
					if best < 0 || e.makespan < best {
						best = e.makespan
					}
				}
				if pl.Makespan != best {
					t.Errorf("makespan %d, the exact passes' shortest %d", pl.Makespan, best)
				}
			}
			if !c.retry && (st.Rescheduled != 0 || st.Rounds != 1) {
				t.Errorf("stats %+v: want no rescheduling", st)
			}
			if err := Validate(p, c.phase, pl); err != nil {
				t.Fatal(err)
			}
			r, err := runOnSim(t, p, c.phase, pl, nil)
			if err != nil {
				t.Fatalf("simulator: %v", err)
			}
			if err := checkDelivered(p, c.phase, r); err != nil {
				t.Fatal(err)
			}
			if got := r.res.Phases[0].Cycles; got != pl.Makespan {
				t.Errorf("simulated %d cycles, plan says %d", got, pl.Makespan)
			}
		})
	}
}

// TestFastPassFails shows the fast pass alone is not a valid schedule on
// the retry case: validation finds failing transfers, and each failing
// transfer's first event really breaks the exact issue rule.
func TestFastPassFails(t *testing.T) {
	p := arch.MustLookup("ipu21")
	ph := random(rand.New(rand.NewSource(3)), 64, 200, 32, 4)
	s := newScheduler(p, ph, Options{}, strategies[0])
	for _, tl := range s.tiles {
		if tl != nil {
			tl.loose = true
		}
	}
	s.run()
	var all []int
	for id, tl := range s.tiles {
		if tl != nil {
			all = append(all, id)
		}
	}
	f := s.checkSlots(all)
	if len(f) == 0 {
		t.Fatal("fast pass validated: the case needs no retry")
	}
	dep := s.dependents(f)
	n := 0
	for _, d := range dep {
		if d {
			n++
		}
	}
	t.Logf("%d failing, %d with dependents, of %d", len(f), n, len(ph))
	// The exact pass on its own has nothing to retry.
	e := newScheduler(p, ph, Options{}, strategies[0])
	e.run()
	if g := e.checkSlots(all); len(g) != 0 {
		t.Fatalf("exact pass: %d transfers fail validation", len(g))
	}
}
