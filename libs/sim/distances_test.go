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
		for _, ex := range []bool{false, true} {
			got, ok := sweepDistances(insts, ex)
			if !ok {
				continue
			}
			swept++
			if diff := cmp.Diff(distancesOf(insts, ex), got); diff != "" {
				t.Fatalf("program %d, exit %v: mismatch (-search +passes):\n%s", i, ex, diff)
			}
		}
	}
	t.Logf("%d of %d searches converged within %d passes", swept, 2*programs, maxSweeps)
	if swept < programs {
		t.Fatalf("%d of %d searches converged within %d passes", swept, 2*programs, maxSweeps)
	}
}
