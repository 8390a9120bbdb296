package sim

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"ipu.local/libs/isa"
	"ipu.local/libs/numfmt"
)

// benchProgram is a supervisor that, each round, runs the six workers on
// body and waits at an hsync; body must end with exit and receives its
// worker's 256-byte scratch block in $m0 (non-interleaved) and $m1
// (interleaved, set by the body's prologue if needed).
func benchProgram(body []any) []uint32 {
	items := []any{
		label("round"),
		li(1, 0), // patched: worker pc
		li(2, dataBase),
	}
	for w := int32(0); w < 6; w++ {
		items = append(items, run(1, 2, w), addi(2, 2, 256))
	}
	items = append(items, sync_(), hsync(3), br("round"))
	start := len(items) - 1 // labels take no word
	items = append(items, body...)
	code := assemble(items...)
	code[0] = isa.MustEncode(li(1, int32(pcOf(start))))
	return code
}

const benchIters = 4000

// intLoop: 3 instructions per iteration (add, addi, brnz).
func intLoop() []any {
	return []any{
		li(1, benchIters),
		label("loop"),
		add(2, 2, 1),
		addi(1, 1, -1),
		brnz(1, "loop"),
		stm(2, 0, 0),
		exit(),
	}
}

// f16v4Loop: a repeat loop of f16v4 multiply-adds and adds.
func f16v4Loop() []any {
	return []any{
		I(isa.ALI, 2, 0, 0, 0x3C00), I(isa.ALIH, 2, 0, 0, 0x3C01), I(isa.ALI, 3, 0, 0, 0x3800), I(isa.ALIH, 3, 0, 0, 0xB800),
		li(1, benchIters),
		I(isa.RPT, 0, 1, 0, 4),
		I(isa.H4FMA, 0, 2, 2, 0),
		I(isa.H4ADD, 4, 0, 2, 0),
		I(isa.H4MUL, 6, 4, 2, 0),
		I(isa.H4FMA, 0, 6, 2, 0),
		I(isa.ST64, 0, 0, 0, 0),
		exit(),
	}
}

// ampLoop: amph over 64 k values, then the accumulator rows stored.
func ampLoop() []any {
	items := []any{
		op0(isa.AMPCLR),
		li(3, benchIters/64),
		label("outer"),
		add(1, 0, 15), li(2, ilBase),
		rpti(64, 1),
		amph(1, 2),
		addi(3, 3, -1),
		brnz(3, "outer"),
		li(2, ilBase+0x8000),
	}
	for row := int32(0); row < 4; row++ {
		items = append(items, ampst(2, row), addi(2, 2, 64))
	}
	return append(items, exit())
}

func benchLoop(b *testing.B, preset string, body []any) {
	r := newRig(b, preset, Options{})
	code := benchProgram(body)
	for tile := 0; tile < r.p.Tiles; tile++ {
		r.load(tile, code)
	}
	b.ReportAllocs()
	b.ResetTimer()
	measure(b, r.m)
}

func BenchmarkIntLoop(b *testing.B) {
	b.Run("tiles=1", func(b *testing.B) { benchOneTile(b, intLoop()) })
	b.Run("tiles=64", func(b *testing.B) { benchLoop(b, "ipu21-64", intLoop()) })
}

func BenchmarkF16v4Loop(b *testing.B) {
	b.Run("tiles=1", func(b *testing.B) { benchOneTile(b, f16v4Loop()) })
	b.Run("tiles=64", func(b *testing.B) { benchLoop(b, "ipu21-64", f16v4Loop()) })
}

// BenchmarkF16v4Stream: scripts/bench's f16v4 kernel on one tile, a
// stream body (ld64p, fma into a private accumulator by an invariant
// pair, max into a private pair) over 512 vectors of FP16 data in
// [-0.5, 0.5), 20 passes per worker and Run.
func BenchmarkF16v4Stream(b *testing.B) {
	r := newRig(b, "ipu21-tiny", Options{Parallel: 1})
	rnd := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, 512*8+8)
	for i := 0; i < 512*8; i += 2 {
		binary.LittleEndian.PutUint16(data[i:], numfmt.F32ToF16(math.Float32bits(float32(rnd.Float64()-0.5))))
	}
	for i, c := range []uint16{0x3400, 0xB800, 0x3600, 0x3000} { // 0.25, -0.5, 0.375, 0.125
		binary.LittleEndian.PutUint16(data[512*8+i*2:], c)
	}
	body := []any{
		li(4, dataBase+0x2000+512*8), I(isa.LD64, 2, 4, 0, 0), li(1, 20),
		label("pass"), li(2, dataBase+0x2000), rpti(512, 3),
		I(isa.LD64P, 0, 2, 0, 8), I(isa.H4FMA, 4, 0, 2, 0), I(isa.H4MAX, 6, 6, 0, 0),
		addi(1, 1, -1), brnz(1, "pass"),
		I(isa.ST64, 4, 0, 0, 0), I(isa.ST64, 6, 0, 0, 8), exit(),
	}
	r.load(0, benchProgram(body), Segment{Addr: dataBase + 0x2000, Data: data})
	b.ReportAllocs()
	b.ResetTimer()
	measure(b, r.m)
}

func BenchmarkAMPLoop(b *testing.B) {
	b.Run("tiles=1", func(b *testing.B) { benchOneTile(b, ampLoop()) })
	b.Run("tiles=64", func(b *testing.B) { benchLoop(b, "ipu21-64", ampLoop()) })
}

// measure runs b.N calls of m and reports simulated instructions per
// second of wall time (sim-instr/s) and per second of CPU time summed over
// the host cores (sim-instr/cpu-s), the per-core rate.
func measure(b *testing.B, m *Machine) {
	var instrs int64
	start, cpu0 := time.Now(), cpuTime()
	for i := 0; i < b.N; i++ {
		res, err := m.Run(nil, 0)
		if err != nil {
			b.Fatal(err)
		}
		for _, p := range res.Phases {
			instrs += p.Instructions
		}
	}
	b.ReportMetric(float64(instrs)/time.Since(start).Seconds(), "sim-instr/s")
	if cpu := cpuTime() - cpu0; cpu > 0 {
		b.ReportMetric(float64(instrs)/cpu.Seconds(), "sim-instr/cpu-s")
	}
}

// benchOneTile runs body on one tile of a tiny device.
func benchOneTile(b *testing.B, body []any) {
	r := newRig(b, "ipu21-tiny", Options{Parallel: 1})
	r.load(0, benchProgram(body))
	b.ReportAllocs()
	b.ResetTimer()
	measure(b, r.m)
}
