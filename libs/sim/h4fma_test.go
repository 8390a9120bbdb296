package sim

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"

	"ipu.local/libs/isa"
)

// lane16 returns FP16 bits of one of several kinds: the edges
// (interesting16), any normal, normals near the subnormals or near
// overflow, or the half ulp of ref's lane (with b = 1.0 its sum with ref is
// often an exact midpoint).
func lane16(r *rand.Rand, ref uint16) uint16 {
	sign := uint16(r.IntN(2)) << 15
	switch r.IntN(6) {
	case 0:
		return interesting16(r)
	case 1:
		return sign | uint16(1+r.IntN(30))<<10 | uint16(r.IntN(1024))
	case 2:
		return sign | uint16(1+r.IntN(4))<<10 | uint16(r.IntN(1024))
	case 3:
		return sign | uint16(26+r.IntN(5))<<10 | uint16(r.IntN(1024))
	case 4:
		e := int(ref>>10&31) - 11 + r.IntN(3)
		if e < 1 {
			e = 1
		}
		return sign | uint16(e)<<10 | uint16(r.IntN(2)*r.IntN(1024))
	}
	return sign | uint16(10+r.IntN(8))<<10 | uint16(r.IntN(1024))
}

// TestH4FMAChain runs chains of fmas the way runBody does, each addend's
// lanes the FP64 values the last fma returned (h4fmaZ), against h4op
// from the bits: the results' bits, and their lanes exactly the values of
// those bits (round4 of them gives the bits back). The operands drive the
// accumulator through ties, subnormals, overflow, Inf and NaN.
func TestH4FMAChain(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	half := halfTable()
	lanes := func(v [4]float64) [4]float64 { return v }
	for chain := 0; chain < 3000; chain++ {
		var d uint64
		for i := 0; i < 64; i += 16 {
			d |= uint64(lane16(r, 0x3C00)) << i
		}
		z := [4]float64{float64(half[uint16(d)]), float64(half[uint16(d>>16)]), float64(half[uint16(d>>32)]), float64(half[uint16(d>>48)])}
		for n := 0; n < 100; n++ {
			var a, b uint64
			for i := 0; i < 64; i += 16 {
				a |= uint64(lane16(r, uint16(d>>i))) << i
				bl := uint16(0x3C00) // 1.0
				if r.IntN(2) == 0 {
					bl = lane16(r, 0x3C00)
				}
				b |= uint64(bl) << i
			}
			want := h4op(isa.H4FMA, a, b, d)
			got, z0, z1, z2, z3 := h4fmaZ(a, b, z[0], z[1], z[2], z[3], half)
			if got != want || h4fma(a, b, d, half) != want {
				t.Fatalf("fma(%016x, %016x, %016x) = %016x, want %016x", a, b, d, got, want)
			}
			zs := lanes([4]float64{z0, z1, z2, z3})
			for i, v := range zs {
				w := float64(half[uint16(want>>(16*i))])
				if math.Float64bits(v) != math.Float64bits(w) && !(v != v && w != w) {
					t.Fatalf("fma(%016x, %016x, %016x) lane %d = %v, want %v", a, b, d, i, v, w)
				}
			}
			if round4(z0, z1, z2, z3) != want {
				t.Fatalf("round4 of fma(%016x, %016x, %016x)'s lanes %v differs", a, b, d, zs)
			}
			d, z = want, zs
		}
	}
}

func sameFloat(x, y float64) bool {
	return math.Float64bits(x) == math.Float64bits(y) || x != x && y != y
}

// f16AccLoop: each worker runs a repeat body over 256 vectors of mixed
// FP16 data (coefficients $a2:3 and the accumulators' starting values
// loaded first), then stores $a14:15 ($a15 reads as zero), $a4:5, $a6:7 and $a8:9.
func f16AccLoop(body ...isa.Inst) []any {
	items := []any{
		li(2, dataBase+0x2000), li(4, dataBase+0x4000),
		I(isa.LD64, 2, 4, 0, 0), I(isa.LD64, 4, 4, 0, 8), I(isa.LD64, 6, 4, 0, 16),
		I(isa.LD64, 8, 4, 0, 24), I(isa.LD64, 14, 4, 0, 32),
		li(1, 256), I(isa.RPT, 0, 1, 0, int32(len(body))),
	}
	for _, in := range body {
		items = append(items, in)
	}
	return append(items, I(isa.ST64, 14, 0, 0, 24), I(isa.ST64, 4, 0, 0, 0), I(isa.ST64, 6, 0, 0, 8),
		I(isa.ST64, 8, 0, 0, 16), exit())
}

// TestF16AccLoopsMatchStepwise runs repeat bodies with an f16v4 fma whose
// accumulator only it uses (kept as FP64 across the body; an operand the
// body does not write, either one, or none), one another instruction
// reads, one into $a14:15, two fmas into one register, and max or min
// whose result only they read (as a or b) or another reads or writes too,
// over data that takes the accumulators through ties, subnormals,
// overflow, Inf and NaN: run ahead and one instruction at a time must
// give the same results, states and memory.
func TestF16AccLoopsMatchStepwise(t *testing.T) {
	ld := I(isa.LD64P, 0, 2, 0, 8)
	bodies := map[string][]isa.Inst{
		"private":  {ld, I(isa.H4FMA, 4, 0, 2, 0), I(isa.H4MAX, 6, 6, 0, 0)},
		"read":     {ld, I(isa.H4FMA, 4, 0, 2, 0), I(isa.H4ADD, 8, 4, 2, 0)},
		"a14":      {ld, I(isa.H4FMA, 14, 0, 2, 0), I(isa.H4FMA, 4, 0, 0, 0)},
		"two fmas": {ld, I(isa.H4FMA, 4, 0, 2, 0), I(isa.H4FMA, 4, 2, 0, 0), I(isa.H4MIN, 8, 8, 4, 0)},
		"written":  {ld, I(isa.H4FMA, 4, 0, 2, 0), I(isa.H4MAX, 6, 6, 0, 0), I(isa.H4ADD, 4, 0, 2, 0), I(isa.H4MUL, 6, 0, 2, 0)},
		"inv a":    {ld, I(isa.H4FMA, 4, 2, 0, 0), I(isa.H4MIN, 8, 0, 8, 0)},
		"min read": {ld, I(isa.H4FMA, 4, 0, 2, 0), I(isa.H4MIN, 8, 0, 8, 0), I(isa.H4SUB, 6, 8, 2, 0)},
	}
	for seed := uint64(0); seed < 6; seed++ {
		r := rand.New(rand.NewPCG(seed, 7))
		data := make([]byte, 256*8+40)
		for i := 0; i < len(data); i += 2 {
			h := lane16(r, 0x4800)
			if seed%2 == 0 && h&0x7C00 == 0x7C00 { // some runs without Inf or NaN
				h = 0x3555
			}
			binary.LittleEndian.PutUint16(data[i:], h)
		}
		for name, body := range bodies {
			var res [2]*RunResult
			var snaps [2]TileSnapshot
			var mems [2][]byte
			for i, step := range []bool{true, false} {
				rg := newRig(t, "ipu21-tiny", Options{Parallel: 1, Stepwise: step})
				rg.load(0, benchProgram(f16AccLoop(body...)),
					Segment{Addr: dataBase + 0x2000, Data: data[:256*8]}, Segment{Addr: dataBase + 0x4000, Data: data[256*8:]})
				got, err := rg.m.Run(nil, 0)
				if err != nil {
					t.Fatal(err)
				}
				res[i], snaps[i], mems[i] = got, rg.m.Snapshot(0), rg.mems[0]
			}
			if diff := cmp.Diff([]any{res[0], snaps[0]}, []any{res[1], snaps[1]}); diff != "" {
				t.Fatalf("seed %d, %s: run ahead differs from stepwise: mismatch (-want +got):\n%s", seed, name, diff)
			}
			if !bytes.Equal(mems[0], mems[1]) {
				t.Fatalf("seed %d, %s: run ahead's memory differs from stepwise's", seed, name)
			}
		}
	}
}

// TestH4FMAEdges: every FP16 a times b for a few b, added to addends at
// the edges of the fast path (the smallest normals, the largest finite
// values, ones), against h4op; and sums that are NaNs whose rounding
// carries into the sign bit are not taken for zeros.
func TestH4FMAEdges(t *testing.T) {
	half := halfTable()
	for _, z := range []uint16{0x0400, 0x8400, 0x0401, 0x03FF, 0x83FF, 0x7BFF, 0xFBFF, 0x7BFE, 0x3C00, 0} {
		zf := float64(half[z])
		for _, b := range []uint16{0x3C00, 0x0800, 0x8800, 0x1400, 0x3800, 0x5BFF} {
			for a := 0; a < 1<<16; a++ {
				av, bv, dv := uint64(a)*0x0001000100010001, uint64(b)*0x0001000100010001, uint64(z)*0x0001000100010001
				want := h4op(isa.H4FMA, av, bv, dv)
				if got, _, _, _, _ := h4fmaZ(av, bv, zf, zf, zf, zf, half); got != want {
					t.Fatalf("fma(%04x, %04x, %04x) = %016x, want %016x", a, b, z, got, want)
				}
			}
		}
	}
	for _, nan := range []uint64{0x7FFFFFFFFFFFFFFF, 0xFFFFFFFFFFFFFFFF, 0x7FFFFE0000000000} {
		z := math.Float64frombits(nan)
		if _, _, _, _, ok := h4fmaFastY(0, 0, 0, 0, 0, z, 0, 0, 0, half); ok {
			t.Fatalf("h4fmaFastY takes the sum with NaN %016x", nan)
		}
	}
}
