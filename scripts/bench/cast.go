package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"

	"ipu.local/libs/arch"
	"ipu.local/libs/codegen"
	"ipu.local/libs/numfmt"
	"ipu.local/libs/sim"
)

// targetCast is issue 10's FP8 cast rate: elements per cycle per tile.
const targetCast = 4.0

// castElems is the cast rows' element count: 200 units of 16 on each of
// the 6 workers, long enough that the launch and the tails weigh under
// 2%.
const castElems = 6 * 16 * 200

// castRows measures the compiler's casts to FP8 (codegen.EmitCast, the
// kernel ipu-link emits, Interleaved as the planner lays out a cast's
// arrays) on one simulated tile: device cycles from the launch to the
// supervisor's halt, and the elements per cycle against the target. The
// outputs are checked bit for bit against numfmt's conversion. Each row
// also prints the ceiling the machine puts on any cast: a tile issues
// one instruction a cycle, and its widest load (ld128) brings 16 bytes,
// so the loads alone, with no conversion or store issued, take one
// cycle per 4 FP32 or 8 FP16 elements.
func castRows() error {
	p := arch.MustLookup("ipu21")
	for _, kind := range []codegen.CastKind{codegen.F32ToF8, codegen.F16ToF8} {
		in := 4
		if kind == codegen.F16ToF8 {
			in = 2
		}
		c := codegen.Cast{Kind: kind, N: castElems, X: dataA, Y: dataB, Format: numfmt.E4M3FNUZ, Saturate: true,
			Workers: codegen.Slots, Interleaved: true}
		x, want := castData(kind, in)
		cycles, instrs, got, err := runCast(p, c, x)
		if err != nil {
			return fmt.Errorf("cast %s: %w", kind, err)
		}
		if i := firstDiff(got, want); i >= 0 {
			return fmt.Errorf("cast %s: element %d is %#02x, want %#02x", kind, i, got[i], want[i])
		}
		rate := float64(castElems) / float64(cycles)
		fmt.Printf("%-16s %-18s %12d instrs %10d cycles  %.2f elements per cycle (%.2f issues per element; the loads alone bound any cast to %d per cycle)  (target >= %.0f: %s)\n",
			"cast "+kind.String(), "1 tile, 6 workers", instrs, cycles, rate, float64(instrs)/castElems, 16/in, targetCast, verdict(rate >= targetCast))
	}
	return nil
}

// castData returns castElems random inputs of kind (in bytes each,
// within FP8's range and beyond it, where the cast saturates) and the
// FP8 codes numfmt converts them to.
func castData(kind codegen.CastKind, in int) (x, want []byte) {
	r := rand.New(rand.NewPCG(5, 6))
	x = make([]byte, castElems*in)
	want = make([]byte, castElems)
	for i := range castElems {
		v := float32(r.NormFloat64() * 64)
		bits := math.Float32bits(v)
		if in == 4 {
			binary.LittleEndian.PutUint32(x[4*i:], bits)
			want[i] = numfmt.F32ToF8(bits, numfmt.E4M3FNUZ, 0, numfmt.Saturate)
			continue
		}
		h := numfmt.F32ToF16(bits)
		binary.LittleEndian.PutUint16(x[2*i:], h)
		want[i] = numfmt.F16ToF8(h, numfmt.E4M3FNUZ, 0, numfmt.Saturate)
	}
	return x, want
}

// runCast runs cast c on one tile over the input x (at c.X): a
// supervisor that launches it on its workers, joins them and halts. It
// returns the cycles from the launch's first issue to the halt's, the
// instructions issued and the output (at c.Y).
func runCast(p *arch.Preset, c codegen.Cast, x []byte) (cycles, instrs int64, out []byte, err error) {
	b := codegen.NewBuilder(p, codeBase)
	k, err := codegen.EmitCast(b, c)
	if err != nil {
		return 0, 0, nil, err
	}
	sup := b.Here()
	codegen.EmitLaunch(b, k.Entry, k.Workers)
	b.Join()
	b.Halt()
	code, err := b.Finish()
	if err != nil {
		return 0, 0, nil, err
	}
	entry, _ := b.Addr(sup)
	mem := make([]byte, p.Memory.Size())
	m := sim.New(p, func(int) []byte { return mem }, sim.Options{})
	img := sim.Image{Entry: entry, Segments: []sim.Segment{{Addr: codeBase, Data: code, Code: true}, {Addr: c.X, Data: x}}}
	if err := m.Load(0, img); err != nil {
		return 0, 0, nil, err
	}
	if err := m.Configure(0, sim.RegEntry, entry); err != nil {
		return 0, 0, nil, err
	}
	res, err := m.Run(nil, 0)
	if err != nil {
		return 0, 0, nil, err
	}
	for _, ph := range res.Phases {
		instrs += ph.Instructions
	}
	at := c.Y - p.Memory.Lo
	// res.Cycles is the halt's issue cycle + 1.
	return res.Cycles - 1, instrs, bytes.Clone(mem[at : at+castElems]), nil
}

// firstDiff returns the first index where a and b differ, or -1.
func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}
