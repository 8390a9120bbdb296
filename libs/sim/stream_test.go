package sim

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"

	"ipu.local/libs/arch"
	"ipu.local/libs/isa"
)

// streamLoop: each worker runs body 256 times ($m2 at stream A, $m3 at
// b, $a2:3..$a10:11 loaded first from init), then stores $a0:1..$a10:11
// into its scratch block.
func streamLoop(b int32, body ...isa.Inst) []any {
	items := []any{
		li(2, dataBase+0x2000), li(3, b), li(4, dataBase+0x4000),
		I(isa.LD64, 2, 4, 0, 0), I(isa.LD64, 4, 4, 0, 8), I(isa.LD64, 6, 4, 0, 16),
		I(isa.LD64, 8, 4, 0, 24), I(isa.LD64, 10, 4, 0, 32),
		li(1, 256), I(isa.RPT, 0, 1, 0, int32(len(body))),
	}
	for _, in := range body {
		items = append(items, in)
	}
	for p := uint8(0); p < 12; p += 2 {
		items = append(items, I(isa.ST64, p, 0, 0, 4*int32(p)))
	}
	return append(items, exit())
}

// sameAsStepwise runs code with segs on one tile with run-ahead and one
// instruction at a time and fails unless the results (faults included),
// the tile's state and its memory agree.
func sameAsStepwise(t *testing.T, what string, code []uint32, segs ...Segment) {
	t.Helper()
	var res [2]*RunResult
	var snaps [2]TileSnapshot
	var mems [2][]byte
	var errs [2]string
	for i, step := range []bool{true, false} {
		rg := newRig(t, "ipu21-tiny", Options{Parallel: 1, Stepwise: step})
		rg.load(0, code, segs...)
		got, err := rg.m.Run(nil, 0)
		if err != nil {
			errs[i] = err.Error()
		}
		res[i], snaps[i], mems[i] = got, rg.m.Snapshot(0), rg.mems[0]
	}
	if diff := cmp.Diff([]any{res[0], snaps[0], errs[0]}, []any{res[1], snaps[1], errs[1]}); diff != "" {
		t.Fatalf("%s: run ahead differs from stepwise: mismatch (-want +got):\n%s", what, diff)
	}
	if !bytes.Equal(mems[0], mems[1]) {
		t.Fatalf("%s: run ahead's memory differs from stepwise's", what)
	}
}

// streamData is FP16 lanes for two streams of 256 vectors and the five
// starting pairs: mixed kinds (lane16) with Inf and NaN, or without.
func streamData(r *rand.Rand, special bool) (a, b, init []byte) {
	data := make([]byte, 2*256*8+40)
	for i := 0; i < len(data); i += 2 {
		h := lane16(r, 0x4800)
		if !special && h&0x7C00 == 0x7C00 {
			h = 0x3555
		}
		binary.LittleEndian.PutUint16(data[i:], h)
	}
	return data[:256*8], data[256*8 : 512*8], data[512*8:]
}

// TestStreamBodiesMatchStepwise runs the stream bodies runStream takes
// (and a few it leaves to runIters) over data that takes the lanes
// through ties, subnormals, overflow, Inf and NaN, against one
// instruction at a time; then loads that fault in the middle of the
// loop, at its first iteration, and an accumulator holding a NaN with a
// payload that no fma reaches.
func TestStreamBodiesMatchStepwise(t *testing.T) {
	ldA, ldB := I(isa.LD64P, 0, 2, 0, 8), I(isa.LD64P, 8, 3, 0, 8)
	bodies := []struct {
		name   string
		stream bool
		body   []isa.Inst
	}{
		{"fma by invariant, max", true, []isa.Inst{ldA, I(isa.H4FMA, 4, 0, 2, 0), I(isa.H4MAX, 6, 6, 0, 0)}},
		{"invariant a, min", true, []isa.Inst{ldA, I(isa.H4FMA, 4, 2, 0, 0), I(isa.H4MIN, 6, 0, 6, 0)}},
		{"min before fma", true, []isa.Inst{ldA, I(isa.H4MIN, 6, 0, 6, 0), I(isa.H4FMA, 4, 2, 0, 0)}},
		{"two streams", true, []isa.Inst{ldA, ldB, I(isa.H4FMA, 4, 0, 8, 0)}},
		{"one base twice", true, []isa.Inst{ldA, I(isa.LD64P, 8, 2, 0, 8), I(isa.H4FMA, 4, 8, 0, 0), I(isa.H4MAX, 6, 0, 6, 0)}},
		{"same pair twice", true, []isa.Inst{ldA, I(isa.LD64P, 0, 3, 0, 8), I(isa.H4FMA, 4, 0, 10, 0)}},
		{"backwards", true, []isa.Inst{I(isa.LD64P, 0, 2, 0, -8), I(isa.H4FMA, 4, 0, 2, 0)}},
		{"max only", true, []isa.Inst{ldA, I(isa.H4MAX, 6, 6, 0, 0)}},
		{"max of invariant", true, []isa.Inst{ldA, I(isa.H4MAX, 6, 10, 6, 0), I(isa.H4FMA, 4, 10, 0, 0)}},
		{"fma only", true, []isa.Inst{ldA, I(isa.H4FMA, 4, 0, 2, 0)}},
		{"unused load", true, []isa.Inst{ldA, ldB, I(isa.H4FMA, 4, 10, 2, 0)}},
		{"fma before its load", false, []isa.Inst{I(isa.H4FMA, 4, 0, 2, 0), ldA}},
		{"five loads", false, []isa.Inst{ldA, ldA, ldA, ldA, ldB, I(isa.H4FMA, 4, 0, 8, 0)}},
		{"into a14", false, []isa.Inst{I(isa.LD64P, 14, 2, 0, 8), I(isa.H4FMA, 4, 14, 2, 0)}},
		{"add too", false, []isa.Inst{ldA, I(isa.H4FMA, 4, 0, 2, 0), I(isa.H4ADD, 8, 0, 2, 0)}},
	}
	for _, bd := range bodies {
		var insts []inst
		for _, in := range bd.body {
			insts = append(insts, decodeWord(isa.MustEncode(in)))
		}
		fi, mi := privatePairs(insts)
		if _, ok := streamOf(insts, fi, mi); ok != bd.stream {
			t.Fatalf("%s: streamOf = %v, want %v", bd.name, ok, bd.stream)
		}
		for seed := uint64(0); seed < 4; seed++ {
			a, b, init := streamData(rand.New(rand.NewPCG(seed, 11)), seed%2 == 1)
			segs := []Segment{{Addr: dataBase + 0x2000, Data: a}, {Addr: dataBase + 0x3000, Data: b}, {Addr: dataBase + 0x4000, Data: init}}
			sameAsStepwise(t, bd.name, benchProgram(streamLoop(dataBase+0x3000, bd.body...)), segs...)
			// Stream b runs off the end of memory after 100 vectors, or
			// is misaligned from the start.
			end := int32(arch.MustLookup("ipu21-tiny").Memory.Hi - 100*8)
			sameAsStepwise(t, bd.name+", fault", benchProgram(streamLoop(end, bd.body...)), segs...)
			sameAsStepwise(t, bd.name+", misaligned", benchProgram(streamLoop(dataBase+0x3004, bd.body...)), segs...)
		}
	}
	// The accumulator $a4:5 holds NaNs with payloads; the first load
	// faults, so no fma writes it (the workers wait first, so that the
	// supervisor is done starting them and the loops run ahead).
	init := make([]byte, 40)
	for i := 8; i < 16; i += 2 {
		binary.LittleEndian.PutUint16(init[i:], 0x7C01)
	}
	body := []isa.Inst{ldB, I(isa.H4FMA, 4, 8, 2, 0), I(isa.H4MAX, 6, 6, 8, 0)}
	prog := append([]any{delay(200)}, streamLoop(dataBase+0x3004, body...)...)
	sameAsStepwise(t, "NaN payload", benchProgram(prog), Segment{Addr: dataBase + 0x4000, Data: init})
}

// TestFmaPassSSE: the assembly pass against fmaPassGo, from the same
// lanes over the same strided data (mixed kinds, ties, subnormals,
// overflow, Inf and NaN; strides up, down and zero), each stopping at
// the same iteration with the same lanes, bit for bit, then the slow
// iteration by h4fmaZ and on; and every FP16 value in every lane times a
// few multipliers into addends at the edges of the fast path, one
// iteration at a time.
func TestFmaPassSSE(t *testing.T) {
	if !haveFmaPassSSE {
		t.Skip("no assembly on this host")
	}
	half := halfTable()
	same := func(x, y [4]float64) bool {
		for i := range x {
			if math.Float64bits(x[i]) != math.Float64bits(y[i]) {
				return false
			}
		}
		return true
	}
	r := rand.New(rand.NewPCG(9, 10))
	mem := make([]byte, 512*8)
	for trial := 0; trial < 400; trial++ {
		for i := 0; i < len(mem); i += 2 {
			h := lane16(r, 0x3C00)
			if trial%2 == 0 && h&0x7C00 == 0x7C00 {
				h = 0x3555
			}
			binary.LittleEndian.PutUint16(mem[i:], h)
		}
		var bv uint64
		for i := 0; i < 64; i += 16 {
			bv |= uint64(lane16(r, 0x3C00)) << i
		}
		a := strided{off: 8 * uint32(r.IntN(64)), stride: 8}
		switch trial % 4 {
		case 1:
			a.off, a.stride = 511*8, uint32(-8*int32(1+r.IntN(2)))
		case 2:
			a.stride = 0
		}
		b := strided{inv: true, v: bv}
		var z [4]float64
		for i := range z {
			z[i] = float64(half[lane16(r, 0x3C00)])
		}
		zg, n := z, int64(200)
		for j, jg := int64(0), int64(0); j < n; {
			j, jg = fmaPass(mem, half, &a, &b, &z, j, n), fmaPassGo(mem, half, &a, &b, &zg, jg, n)
			if j != jg || !same(z, zg) {
				t.Fatalf("trial %d: SSE ran to %d with lanes %v, Go to %d with %v", trial, j, z, jg, zg)
			}
			if j < n {
				_, z[0], z[1], z[2], z[3] = h4fmaZ(a.at(mem, j), bv, z[0], z[1], z[2], z[3], half)
				zg = z
				j++
				jg = j
			}
		}
	}
	edges := []uint16{0x0400, 0x8400, 0x0401, 0x03FF, 0x83FF, 0x7BFF, 0xFBFF, 0x7BFE, 0x3C00, 0, 0x8000, 0x7C00, 0x7E00}
	all := make([]byte, 1<<17)
	for v := 0; v < 1<<16; v++ {
		binary.LittleEndian.PutUint16(all[2*v:], uint16(v))
	}
	for _, zh := range edges {
		for _, m := range []uint16{0x3C00, 0x0800, 0x8800, 0x1400, 0x3800, 0x5BFF} {
			b := strided{inv: true, v: uint64(m) * 0x0001000100010001}
			for off := uint32(0); off < 1<<17; off += 8 {
				a := strided{off: off, stride: 8}
				zv := float64(half[zh])
				z := [4]float64{zv, zv, zv, zv}
				zg := z
				j, jg := fmaPass(all, half, &a, &b, &z, 0, 1), fmaPassGo(all, half, &a, &b, &zg, 0, 1)
				if j != jg || !same(z, zg) {
					t.Fatalf("fma(%016x, %04x, %04x): SSE ran %d with lanes %v, Go %d with %v",
						binary.LittleEndian.Uint64(all[off:]), m, zh, j, z, jg, zg)
				}
			}
		}
	}
}

// TestMMPass: mmPass's two chains against one h4maxmin after another,
// for max and min, over lanes of every kind (±0, NaNs with payloads,
// Inf) and counts odd and even, from own values with NaNs too.
func TestMMPass(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 12))
	mem := make([]byte, 64*8)
	for trial := 0; trial < 2000; trial++ {
		for i := 0; i < len(mem); i += 2 {
			h := interesting16(r)
			if r.IntN(3) > 0 {
				h = lane16(r, 0x3C00)
			}
			if trial%3 > 0 && h&0x7C00 == 0x7C00 {
				h &= 0x83FF
			}
			binary.LittleEndian.PutUint16(mem[i:], h)
		}
		mv := binary.LittleEndian.Uint64(mem[8*r.IntN(64):])
		o := strided{off: 8 * uint32(r.IntN(32)), stride: 8}
		n := int64(1 + r.IntN(32))
		isMax := trial%2 == 0
		want := mv
		for j := int64(0); j < n; j++ {
			want = h4maxmin(want, o.at(mem, j), isMax)
		}
		if got := mmPass(mem, &o, mv, n, isMax); got != want {
			t.Fatalf("trial %d: mmPass = %016x, want %016x", trial, got, want)
		}
	}
}
