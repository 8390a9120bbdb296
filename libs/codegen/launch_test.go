package codegen

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"

	"ipu.local/libs/sim"
)

func TestLaunchCycles(t *testing.T) {
	tl := newTile()
	tests := []struct {
		name string
		nops []int
	}{
		{"one", []int{0}},
		{"one-long", []int{40}},
		{"six-equal", []int{10, 10, 10, 10, 10, 10}},
		{"six-short", []int{0, 0, 0, 0, 0, 0}},
		{"decreasing", []int{30, 20, 10, 5, 1, 0}},
		{"increasing", []int{0, 1, 2, 3, 20, 50}},
		{"three", []int{7, 3, 9}},
		{"first-long", []int{100, 0, 0, 0, 0, 0}},
	}
	for _, tc := range tests {
		for phase := 0; phase < Slots; phase++ {
			t.Run(fmt.Sprintf("%s/phase%d", tc.name, phase), func(t *testing.T) {
				k, got := tl.runKernel(t, phase, func(b *Builder) (Kernel, error) {
					return spinKernel(b, tc.nops), nil
				})
				want := k.CyclesAt(phase)
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("cycles mismatch (-want +got):\n%s", diff)
				}
			})
		}
	}
}

// spinKernel emits a kernel where worker w spins nops[w] iterations of a
// one-instruction repeat body after finding its count in a table.
func spinKernel(b *Builder, nops []int) Kernel {
	entry := b.Here()
	table := b.Label()
	emitTableBase(b, table, 1, M1)
	b.Ldm(M2, M1, 0)
	end := b.Label()
	b.Rpt(M2, end)
	b.Nop()
	b.Bind(end)
	b.Exit()
	rows := make([][]uint32, len(nops))
	work := make([]int64, len(nops))
	for w, n := range nops {
		rows[w] = []uint32{uint32(n)}
		work[w] = Slots * int64(tableBaseIssues+2+n)
	}
	emitTable(b, table, rows)
	return Kernel{Entry: entry, Cost: Cost{Workers: len(nops), Work: work}}
}

// TestLaunchSequence runs kernels back to back: each starts at the phase
// the previous one ended at, and the costs add up.
func TestLaunchSequence(t *testing.T) {
	tl := newTile()
	mm := MatMul{Type: AMPFP16, M: 8, K: 16, N: 32, A: nonIlBuf, B: ilBuf, C: ilBuf + 0x4000, CStride: 32, Workers: 6}
	sm := Rows{Op: Softmax, R: 4, C: 9, X: ilBuf + 0x8000, XStride: 10, Y: ilBuf + 0x8000, YStride: 10, Workers: 6}
	un := Unary{Op: Exp, N: 37, X: ilBuf + 0x9000, Y: ilBuf + 0x9000, Workers: 3}
	b := NewBuilder(tl.p, codeBase)
	k1, err := EmitMatMul(b, mm)
	if err != nil {
		t.Fatal(err)
	}
	k2, err := EmitRows(b, sm)
	if err != nil {
		t.Fatal(err)
	}
	k3, err := EmitUnary(b, un)
	if err != nil {
		t.Fatal(err)
	}
	sup := b.Here()
	want := int64(0)
	for _, k := range []Kernel{k1, k2, k3, k1} {
		EmitLaunch(b, k.Entry, k.Workers)
		b.Join()
		want += k.CyclesAt(int(want % Slots))
	}
	b.Halt()
	code, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	entry, _ := b.Addr(sup)
	if err := tl.m.Load(0, sim.Image{Entry: entry, Segments: []sim.Segment{{Addr: codeBase, Data: code, Code: true}}}); err != nil {
		t.Fatal(err)
	}
	res, err := tl.m.Run(nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, res.Cycles-1); diff != "" {
		t.Errorf("cycles mismatch (-sum of costs +measured):\n%s", diff)
	}
}

// TestLaunchCyclesSkip checks LaunchCycles' skip over busy cycles
// against stepping one cycle at a time, on random work and phases.
func TestLaunchCyclesSkip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 20000; i++ {
		work := make([]int64, 1+rng.IntN(Slots))
		for w := range work {
			work[w] = int64(rng.IntN(200))
			if rng.IntN(4) == 0 {
				work[w] = int64(rng.IntN(6))
			}
		}
		phase := rng.IntN(Slots)
		if got, want := LaunchCycles(phase, work), launchCyclesStepped(phase, work); got != want {
			t.Fatalf("LaunchCycles(%d, %v) = %d, stepping gives %d", phase, work, got, want)
		}
	}
}

// launchCyclesStepped is LaunchCycles stepping one cycle at a time.
func launchCyclesStepped(phase int, work []int64) int64 {
	t0 := int64(phase)
	var runAt, end [Slots]int64
	var ran [Slots]bool
	next := func(t int64) int64 {
		for {
			s := int(t % Slots)
			if !(ran[s] && runAt[s] < t && t <= end[s]) {
				return t
			}
			t++
		}
	}
	snext := t0 + Slots
	for w := 0; w < len(work) && w < Slots; w++ {
		t := next(snext)
		start := t + 1 + (int64(w)-(t+1)%Slots+Slots)%Slots
		ran[w], runAt[w], end[w] = true, t, start+work[w]
		snext = t + Slots
	}
	tj := next(snext)
	last := int64(-1)
	for w := range ran {
		if ran[w] && end[w] > last {
			last = end[w]
		}
	}
	if last >= tj {
		return last + 1 + Slots - t0
	}
	return tj + Slots - t0
}
