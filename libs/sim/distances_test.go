package sim

import (
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"

	"ipu.local/libs/isa"
)

// TestDistancesShareGraph checks that distances, which searches one
// reverse graph twice, gives what a graph of each search's own gives,
// on random words (with exits, branches and repeats among them) and on
// code with an exit that is not a boundary (the separate searches).
func TestDistancesShareGraph(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	exit := decodeWord(isa.MustEncode(isa.Inst{Op: isa.EXIT}))
	for i := 0; i < 200; i++ {
		insts := make([]inst, 1+rng.IntN(300))
		for j := range insts {
			switch rng.IntN(8) {
			case 0:
				insts[j] = exit
			case 1:
				insts[j] = inst{flags: fNotCode}
			default:
				insts[j] = decodeWord(rng.Uint32() | 0x80000000)
			}
		}
		if i%10 == 9 {
			insts[rng.IntN(len(insts))] = inst{op: isa.EXIT}
		}
		w, e := distances(insts)
		want := [][]uint32{distancesOf(insts, false), distancesOf(insts, true)}
		if diff := cmp.Diff(want, [][]uint32{w, e}); diff != "" {
			t.Fatalf("program %d: mismatch (-want +got):\n%s", i, diff)
		}
	}
}

// TestSweepDistances checks the passes against the search on random
// code (when they converge within maxSweeps) and on straight code with
// loops, and that most random programs take the passes.
func TestSweepDistances(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	exit := decodeWord(isa.MustEncode(isa.Inst{Op: isa.EXIT}))
	swept := 0
	const programs = 400
	for i := 0; i < programs; i++ {
		insts := make([]inst, 1+rng.IntN(400))
		for j := range insts {
			switch r := rng.IntN(40); {
			case r == 0:
				insts[j] = exit
			case r == 1:
				insts[j] = inst{flags: fNotCode}
			case r < 6 || i%2 == 0:
				// Branches, repeats and stores among them.
				insts[j] = decodeWord(rng.Uint32() | 0x80000000)
			default:
				insts[j] = decodeWord(isa.MustEncode(isa.Inst{Op: isa.ADDI, D: 1, A: 1, Imm: 1}))
			}
		}
		if sweptAsSearched(t, i, insts) {
			swept++
		}
	}
	t.Logf("%d of %d programs converged within %d passes", swept, programs, maxSweeps)
	if swept < programs/2 {
		t.Fatalf("%d of %d programs converged within %d passes", swept, programs, maxSweeps)
	}
}

// TestSweepDistancesLoops checks the passes against the search on code
// built of loops: branches back and forth within the code (brnz, brz,
// br), repeat bodies (rpt, rpti) and stores among straight runs, where
// distances cross back edges and a repeat body's end takes its start's
// distance. Random words rarely branch within the code, so this is the
// test that a pass ending with a back edge unsatisfied goes on.
func TestSweepDistancesLoops(t *testing.T) {
	rng := rand.New(rand.NewPCG(25, 26))
	enc := func(in isa.Inst) inst { return decodeWord(isa.MustEncode(in)) }
	swept, backward := 0, 0
	const programs = 400
	for i := 0; i < programs; i++ {
		n := 2 + rng.IntN(200)
		insts := make([]inst, n)
		for j := range insts {
			off := int32(rng.IntN(2*n+1) - n) // mostly within the code
			r := rng.IntN(30)
			switch {
			case r == 0:
				insts[j] = enc(isa.Inst{Op: isa.EXIT})
			case r == 1:
				insts[j] = enc(isa.Inst{Op: isa.ST32, D: 1, A: 2})
			case r == 2:
				insts[j] = enc(isa.Inst{Op: isa.BRNZ, A: 1, Imm: off})
			case r == 3:
				insts[j] = enc(isa.Inst{Op: isa.BRZ, A: 1, Imm: off})
			case r == 4:
				insts[j] = enc(isa.Inst{Op: isa.BR, Imm: off})
			case r == 5:
				insts[j] = enc(isa.Inst{Op: isa.RPT, A: 1, Imm: int32(1 + rng.IntN(12))})
			case r == 6:
				insts[j] = enc(isa.Inst{Op: isa.RPTI, Imm: int32(3<<8 | (1 + rng.IntN(12)))})
			default:
				insts[j] = enc(isa.Inst{Op: isa.ADDI, D: 1, A: 1, Imm: 1})
			}
			if off < 0 && r >= 2 && r <= 4 && int(off)+j+1 >= 0 {
				backward++
			}
		}
		if sweptAsSearched(t, i, insts) {
			swept++
		}
	}
	t.Logf("%d of %d programs converged within %d passes; %d branches back within the code", swept, programs, maxSweeps, backward)
	if swept < programs/2 || backward < programs {
		t.Fatalf("%d of %d programs converged, %d branches back: the test no longer covers loops", swept, programs, backward)
	}
}

// sweptAsSearched reports whether the passes settle on program i, and
// fails the test when they give other distances than the search.
func sweptAsSearched(t *testing.T, i int, insts []inst) bool {
	t.Helper()
	w, e, ok := sweepDistances(insts)
	if !ok {
		return false
	}
	if diff := cmp.Diff([][]uint32{distancesOf(insts, false), distancesOf(insts, true)}, [][]uint32{w, e}); diff != "" {
		t.Fatalf("program %d: mismatch (-search +passes):\n%s", i, diff)
	}
	return true
}
