package sim

import (
	"math"
	"math/big"
	"testing"

	"github.com/google/go-cmp/cmp"

	"ipu.local/libs/isa"
)

// runOne loads items on tile 0 of a tiny device, runs it to the end and
// returns the result.
func runOne(t *testing.T, items []any, segs ...Segment) (*rig, *RunResult) {
	t.Helper()
	r := newRig(t, "ipu21-tiny", Options{Parallel: 1})
	r.load(0, assemble(items...), segs...)
	res, err := r.m.Run(nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	return r, res
}

func nops(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = nop()
	}
	return out
}

func cat(parts ...[]any) []any {
	var out []any
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func TestTiming(t *testing.T) {
	const n = 10
	tests := []struct {
		name   string
		items  []any
		cycles int64 // first superstep
		instrs int64
	}{
		// The supervisor alone issues every 6 cycles: n nops, sync at 6n.
		{"supervisor alone", cat(nops(n), []any{sync_(), halt()}), 6*n + 1, n + 1},
		// delay 10 at 0: the nop issues at 16, the sync at 22.
		{"supervisor delay", []any{delay(10), nop(), sync_(), halt()}, 23, 3},
		// A 2-cycle instruction delays the next issue by 12.
		{"two-cycle instruction", []any{I(isa.FEXP, 0, 0, 0, 0), sync_(), halt()}, 13, 2},
		// run at 6 (after li at 0); worker 0 issues from 12, n nops and exit
		// at 12+6n; the supervisor retries sync in slot 1 and issues it at
		// 12+6n+1.
		{"one worker", cat([]any{li(1, int32(pcOf(4))), run(1, 2, 0), sync_(), halt()}, nops(n), []any{exit()}),
			12 + 6*n + 2, 2 + n + 1 + 1},
		// Worker 3 started at 6 issues at 9, 15, ...; its exit at 9+6n frees
		// the supervisor, which syncs at 9+6n+1.
		{"worker 3", cat([]any{li(1, int32(pcOf(4))), run(1, 2, 3), sync_(), halt()}, nops(n), []any{exit()}),
			9 + 6*n + 2, 2 + n + 1 + 1},
		// halt does not wait for workers: li at 0, run at 6, halt in the
		// first free slot after 12 (worker 0's).
		{"halt with a running worker", []any{li(1, int32(pcOf(3))), run(1, 2, 0), halt(), label("l"), br("l")},
			14, 3 + 1},
		// A worker's delay keeps it in its slot: delay 10 at 12 gives 28,
		// rounded up to 30 (slot 0).
		{"worker delay", []any{li(1, int32(pcOf(4))), run(1, 2, 0), sync_(), halt(), delay(10), exit()},
			30 + 2, 5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, res := runOne(t, tc.items)
			got := []int64{res.Phases[0].Cycles, res.Phases[0].Instructions}
			if diff := cmp.Diff([]int64{tc.cycles, tc.instrs}, got); diff != "" {
				t.Errorf("cycles, instructions: mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSixWorkers starts every worker; each stores the cycle of its first
// instruction and runs n nops. The workers interleave: worker w starts in
// its slot, the first after the run that started it.
func TestSixWorkers(t *testing.T) {
	const n = 20
	items := []any{li(1, int32(pcOf(16))), li(2, dataBase)}
	for w := int32(0); w < 6; w++ {
		items = append(items, run(1, 2, w), addi(2, 2, 4))
	}
	items = append(items, sync_(), halt())
	if len(items) != 16 {
		t.Fatalf("supervisor code is %d words", len(items))
	}
	// Worker: $m0 = its slot of the result array.
	items = append(items, get(1, isa.CSRCycles), stm(1, 0, 0))
	items = append(items, nops(n)...)
	items = append(items, exit())
	r, res := runOne(t, items)
	// li at 0 and 6; run w0 at 12 (slot 0): w0 starts at 18. addi at 18 is
	// in slot 0, now w0's: it goes at 19; run w1 at 25, w1 starts at 31;
	// and so on, 13 cycles apart.
	var got, want []uint32
	for w := uint32(0); w < 6; w++ {
		got = append(got, r.word(0, dataBase+4*w))
		want = append(want, 18+13*w)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("worker start cycles: mismatch (-want +got):\n%s", diff)
	}
	// The last worker starts at 83 and runs n+3 instructions, exiting at
	// 83+6(n+2); the supervisor syncs in the next cycle (slot 0 is free).
	if got, want := res.Phases[0].Cycles, int64(83+6*(n+2)+2); got != want {
		t.Errorf("cycles = %d, want %d", got, want)
	}
	if got, want := res.Phases[0].Instructions, int64(15+6*(n+3)); got != want {
		t.Errorf("instructions = %d, want %d", got, want)
	}
}

// TestSupervisorStallsOnBusyWorker runs worker 0 twice: the second run
// waits for the first to exit.
func TestSupervisorStallsOnBusyWorker(t *testing.T) {
	const n = 5
	items := []any{li(1, int32(pcOf(5))), run(1, 2, 0), run(1, 2, 0), sync_(), halt()}
	items = append(items, nops(n)...)
	items = append(items, exit())
	_, res := runOne(t, items)
	// First run at 6: worker issues 12 .. 12+6n (exit). Second run at
	// 12+6n+1, worker from 12+6n+6 to 12+12n+6 (exit); sync at 12+12n+7.
	if got, want := res.Phases[0].Cycles, int64(12+12*n+8); got != want {
		t.Errorf("cycles = %d, want %d", got, want)
	}
}

func TestRepeat(t *testing.T) {
	tests := []struct {
		name   string
		items  []any
		want   uint32
		cycles int64
	}{
		// rpti 5 x 2: 10 body instructions.
		{"rpti", []any{li(1, 0), rpti(5, 2), addi(1, 1, 1), addi(1, 1, 2), li(2, dataBase), stm(1, 2, 0), sync_(), halt()},
			15, 6*(2+10+2) + 1},
		{"rpt from register", []any{li(1, 0), li(3, 7), I(isa.RPT, 0, 3, 0, 1), addi(1, 1, 3), li(2, dataBase), stm(1, 2, 0), sync_(), halt()},
			21, 6*(3+7+2) + 1},
		{"count 0 skips", []any{li(1, 4), rpti(0, 2), addi(1, 1, 1), addi(1, 1, 2), li(2, dataBase), stm(1, 2, 0), sync_(), halt()},
			4, 6*(2+2) + 1},
		{"count 1", []any{li(1, 4), rpti(1, 1), addi(1, 1, 1), li(2, dataBase), stm(1, 2, 0), sync_(), halt()},
			5, 6*(2+1+2) + 1},
		{"empty body", []any{li(1, 4), rpti(9, 0), li(2, dataBase), stm(1, 2, 0), sync_(), halt()},
			4, 6*(2+2) + 1},
		{"delay in body", []any{li(1, 0), rpti(3, 2), delay(0), addi(1, 1, 1), li(2, dataBase), stm(1, 2, 0), sync_(), halt()},
			3, 6*(2+6+2) + 1},
		// A branch into a body runs it once, linearly.
		{"branch into body", []any{li(1, 0), br("in"), rpti(5, 2), addi(1, 1, 1), label("in"), addi(1, 1, 2), li(2, dataBase), stm(1, 2, 0), sync_(), halt()},
			2, 6*(2+1+2) + 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, res := runOne(t, tc.items)
			if got := r.word(0, dataBase); got != tc.want {
				t.Errorf("result = %d, want %d", got, tc.want)
			}
			if got := res.Phases[0].Cycles; got != tc.cycles {
				t.Errorf("cycles = %d, want %d", got, tc.cycles)
			}
		})
	}
}

// TestAMPH checks amph against a direct computation: FP32 products of
// FP16 values, accumulated in FP32 with one rounding per add, k in order.
func TestAMPH(t *testing.T) {
	const K = 8
	x := make([]uint32, K*2) // K x 4 FP16
	w := make([]uint32, K*8) // K x 16 FP16
	var xs [K][4]float32
	var ws [K][16]float32
	seed := uint32(12345)
	rnd := func() uint16 {
		seed = seed*1664525 + 1013904223
		// random FP16 in about [-4, 4), mantissa full
		h := uint16(seed>>16)&0x83FF | uint16(13+seed%4)<<10
		return h
	}
	for k := 0; k < K; k++ {
		for i := 0; i < 4; i++ {
			h := rnd()
			xs[k][i] = math.Float32frombits(f16to32(h))
			x[k*2+i/2] |= uint32(h) << (16 * (i % 2))
		}
		for j := 0; j < 16; j++ {
			h := rnd()
			ws[k][j] = math.Float32frombits(f16to32(h))
			w[k*8+j/2] |= uint32(h) << (16 * (j % 2))
		}
	}
	checkAMPLoop(t, amph(1, 2), K, 8, 32, x, w, func(i, j int) float32 {
		var acc float32
		for k := 0; k < K; k++ {
			p := xs[k][i] * ws[k][j]
			acc = float32(acc + p)
		}
		return acc
	})
}

// checkAMPLoop runs op (operands $m1 at dataBase and $m2 at ilBase) K
// times in an rpti loop from a cleared accumulator, x and w there, and
// checks the stored rows against want(i, j) and the operand registers
// against K steps of sa and sb bytes.
func checkAMPLoop(t *testing.T, op isa.Inst, K, sa, sb int, x, w []uint32, want func(i, j int) float32) {
	t.Helper()
	items := []any{li(1, int32(pcOf(4))), run(1, 2, 0), sync_(), halt(),
		li(1, dataBase), li(2, ilBase), op0(isa.AMPCLR), rpti(int32(K), 1), op, li(3, ilBase+0x1000)}
	for row := int32(0); row < 4; row++ {
		items = append(items, ampst(3, row), addi(3, 3, 64))
	}
	items = append(items, exit())
	r, _ := runOne(t, items, words(dataBase, x...), words(ilBase, w...))
	var got, exp []uint32
	for i := 0; i < 4; i++ {
		for j := 0; j < 16; j++ {
			exp = append(exp, math.Float32bits(want(i, j)))
			got = append(got, r.word(0, uint32(ilBase+0x1000+64*i+4*j)))
		}
	}
	if diff := cmp.Diff(exp, got); diff != "" {
		t.Errorf("accumulator: mismatch (-want +got):\n%s", diff)
	}
	s := r.m.Snapshot(0)
	if got, want := s.Ctx[0].M[1], uint32(dataBase+sa*K); got != want {
		t.Errorf("operand a after the loop = %#x, want %#x", got, want)
	}
	if got, want := s.Ctx[0].M[2], uint32(ilBase+sb*K); got != want {
		t.Errorf("operand b after the loop = %#x, want %#x", got, want)
	}
}

// TestAMPF checks ampf against a direct computation: each step's
// d + x*w rounded once to FP32 (exactly in math/big, then rounded to
// nearest even), k in order, and its pointers' steps.
func TestAMPF(t *testing.T) {
	const K = 8
	x := make([]uint32, K*4)  // K x 4 FP32
	w := make([]uint32, K*16) // K x 16 FP32
	seed := uint32(777)
	rnd := func() uint32 {
		seed = seed*1664525 + 1013904223
		// random FP32 in about [-4, 4), mantissa full, some tiny
		e := uint32(126 + seed%3)
		if seed%7 == 0 {
			e = 100
		}
		return seed&0x807FFFFF | e<<23
	}
	for i := range x {
		x[i] = rnd()
	}
	for i := range w {
		w[i] = rnd()
	}
	checkAMPLoop(t, ampf(1, 2), K, 16, 64, x, w, func(i, j int) float32 {
		var acc float32
		for k := 0; k < K; k++ {
			e := new(big.Float).SetPrec(600).SetFloat64(float64(math.Float32frombits(x[4*k+i])))
			e.Mul(e, new(big.Float).SetFloat64(float64(math.Float32frombits(w[16*k+j]))))
			e.Add(e, new(big.Float).SetFloat64(float64(acc)))
			acc, _ = e.Float32()
		}
		return acc
	})
}

// TestAMPConflict checks the extra cycle of two operands in one element:
// amph issues over 1 cycle (6), ampf over 4 (24), one more when a word of
// its a operand lies in an element of a pair its b operand touches (b's
// words cover both elements of each such pair).
func TestAMPConflict(t *testing.T) {
	for _, tc := range []struct {
		name   string
		op     isa.Inst
		a, b   int32
		cycles int64
	}{
		{"different elements", amph(1, 2), dataBase, ilBase, 12 + 6 + 6 + 6 + 2},
		{"same element", amph(1, 2), ilBase + 0x100, ilBase, 12 + 6 + 6 + 12 + 2},
		{"ampf different elements", ampf(1, 2), dataBase, ilBase, 12 + 6 + 6 + 24 + 2},
		{"ampf next pair", ampf(1, 2), ilBase + 0x8000, ilBase, 12 + 6 + 6 + 24 + 2},
		{"ampf first word in b's pair, second in the next", ampf(1, 2), ilBase + 0x7ff8, ilBase, 12 + 6 + 6 + 30 + 2},
		{"ampf same element", ampf(1, 2), ilBase + 0x108, ilBase, 12 + 6 + 6 + 30 + 2},
		{"ampf b across two pairs, a in the second", ampf(1, 2), ilBase + 0x8100, ilBase + 0x7fe0, 12 + 6 + 6 + 30 + 2},
		{"ampf b across two pairs, a in neither", ampf(1, 2), ilBase + 0x10100, ilBase + 0x7fe0, 12 + 6 + 6 + 24 + 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, res := runOne(t, []any{li(1, int32(pcOf(4))), run(1, 2, 0), sync_(), halt(),
				li(1, tc.a), li(2, tc.b), tc.op, exit()})
			if got := res.Phases[0].Cycles; got != tc.cycles {
				t.Errorf("cycles = %d, want %d", got, tc.cycles)
			}
		})
	}
}
