package codegen

import (
	"encoding/binary"
	"math"
	"math/rand"
	"testing"

	"ipu.local/libs/arch"
	"ipu.local/libs/sim"
)

// Addresses the tests use.
const (
	codeBase = 0x4C000
	nonIlBuf = 0x60000 // non-interleaved data
	ilBuf    = 0x80000 // interleaved data
)

// tile is a one-tile machine with its memory.
type tile struct {
	p   *arch.Preset
	mem []byte
	m   *sim.Machine
}

func newTile() *tile {
	p := arch.MustLookup("ipu21-tiny")
	t := &tile{p: p, mem: make([]byte, p.Memory.Size())}
	t.m = sim.New(p, func(i int) []byte {
		if i == 0 {
			return t.mem
		}
		return make([]byte, p.Memory.Size())
	}, sim.Options{Parallel: 1})
	return t
}

func (t *tile) put(addr uint32, b []byte) { copy(t.mem[addr-t.p.Memory.Lo:], b) }

func (t *tile) get(addr uint32, n int) []byte {
	out := make([]byte, n)
	copy(out, t.mem[addr-t.p.Memory.Lo:])
	return out
}

func (t *tile) putF32(addr uint32, v []float32) {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	t.put(addr, b)
}

func (t *tile) getBits(addr uint32, n int) []uint32 {
	b := t.get(addr, 4*n)
	out := make([]uint32, n)
	for i := range out {
		out[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	return out
}

// runKernel builds a program: the kernel (emitted by emit at codeBase),
// then the supervisor: delay (when phase > 0, to start the launch in slot
// phase), launch, join, halt. It runs it and returns the measured kernel
// cycles: from the launch's first issue to the halt's issue.
func (t *tile) runKernel(tb testing.TB, phase int, emit func(b *Builder) (Kernel, error)) (Kernel, int64) {
	tb.Helper()
	ks, cycles := t.runChain(tb, phase, emit)
	return ks[0], cycles
}

// runChain builds a program: the kernels (emitted by emits at codeBase,
// in order), then the supervisor: delay (when phase > 0), then for each
// kernel its launch and a join, then halt. It runs it and returns the
// kernels and the measured cycles from the first launch's first issue to
// the halt's issue.
func (t *tile) runChain(tb testing.TB, phase int, emits ...func(b *Builder) (Kernel, error)) ([]Kernel, int64) {
	tb.Helper()
	b := NewBuilder(t.p, codeBase)
	var ks []Kernel
	for _, emit := range emits {
		k, err := emit(b)
		if err != nil {
			tb.Fatal(err)
		}
		ks = append(ks, k)
	}
	sup := b.Here()
	start := int64(0)
	if phase > 0 {
		b.Delay(phase)
		start = int64(Slots + phase)
	}
	for _, k := range ks {
		EmitLaunch(b, k.Entry, k.Workers)
		b.Join()
	}
	b.Halt()
	code, err := b.Finish()
	if err != nil {
		tb.Fatal(err)
	}
	entry, _ := b.Addr(sup)
	t.m.Reset()
	if err := t.m.Load(0, sim.Image{Entry: entry, Segments: []sim.Segment{{Addr: codeBase, Data: code, Code: true}}}); err != nil {
		tb.Fatal(err)
	}
	if err := t.m.Configure(0, sim.RegEntry, entry); err != nil {
		tb.Fatal(err)
	}
	res, err := t.m.Run(nil, 0)
	if err != nil {
		tb.Fatal(err)
	}
	// res.Cycles is the halt's issue cycle + 1.
	return ks, res.Cycles - 1 - start
}

// rng returns the tests' deterministic random source.
func rng(seed int64) *rand.Rand { return rand.New(rand.NewSource(seed)) }

// randF32 returns n values uniform in [lo, hi).
func randF32(r *rand.Rand, n int, lo, hi float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(lo + (hi-lo)*r.Float64())
	}
	return v
}

func f32bits(v []float32) []uint32 {
	out := make([]uint32, len(v))
	for i, x := range v {
		out[i] = math.Float32bits(x)
	}
	return out
}
