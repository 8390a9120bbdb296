package sim

import (
	"testing"
	"time"

	"ipu.local/libs/isa"
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
