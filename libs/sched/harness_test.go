package sched

import (
	"encoding/binary"
	"fmt"
	"math/rand"
	"testing"

	"ipu.local/libs/arch"
	"ipu.local/libs/isa"
	"ipu.local/libs/sim"
)

// Addresses the tests use: code at the start of the executable range,
// data above it.
const (
	codeBase = 0x4C000
	srcBase  = 0x60000 // senders' data
	dstBase  = 0x80000 // receive buffers
	dstTop   = 0xE8000
)

// pattern is the word the tests place at addr on tile t before the phase.
func pattern(t int, addr uint32) uint32 {
	return uint32(t)*0x9E3779B1 ^ (addr*0x85EBCA77 + 0x3C6EF372)
}

// simResult is what running a plan on the simulator gave.
type simResult struct {
	res *sim.RunResult
	mem map[int][]byte
}

// runOnSim loads every tile of pl (its code, then halt) into a machine
// with memory for those tiles only, fills the senders' source words with
// pattern, and runs. edit, when set, may change a tile's code first.
func runOnSim(tb testing.TB, p *arch.Preset, phase []Transfer, pl *Plan, edit func(tile int, code []isa.Inst) []isa.Inst) (*simResult, error) {
	tb.Helper()
	mem := map[int][]byte{}
	for _, tc := range pl.Tiles {
		mem[tc.Tile] = make([]byte, p.Memory.Size())
	}
	for _, x := range phase {
		m := mem[x.Src]
		for k := 0; k < x.Words; k++ {
			a := x.SrcAddr + 4*uint32(k)
			binary.LittleEndian.PutUint32(m[a-p.Memory.Lo:], pattern(x.Src, a))
		}
	}
	m := sim.New(p, func(t int) []byte { return mem[t] }, sim.Options{Parallel: 2})
	for _, tc := range pl.Tiles {
		code := append([]isa.Inst(nil), tc.Code...)
		if edit != nil {
			code = edit(tc.Tile, code)
		}
		code = append(code, isa.Inst{Op: isa.HALT})
		for _, i := range tc.TableLoads {
			// The patch table right after the halt.
			code[i].Imm += int32(codeBase + 4*len(code) - int(tc.TableAt))
		}
		b := make([]byte, 4*(len(code)+len(tc.Table)))
		for i, in := range code {
			binary.LittleEndian.PutUint32(b[4*i:], isa.MustEncode(in))
		}
		for i, w := range tc.Table {
			binary.LittleEndian.PutUint32(b[4*(len(code)+i):], w)
		}
		if err := m.Load(tc.Tile, sim.Image{Entry: codeBase, Segments: []sim.Segment{{Addr: codeBase, Data: b, Code: true}}}); err != nil {
			tb.Fatal(err)
		}
		if err := m.Configure(tc.Tile, sim.RegEntry, codeBase); err != nil {
			tb.Fatal(err)
		}
	}
	res, err := m.Run(nil, 0)
	return &simResult{res, mem}, err
}

// checkDelivered checks that every destination holds its sender's words.
func checkDelivered(p *arch.Preset, phase []Transfer, r *simResult) error {
	for i, x := range phase {
		for u := x.Dst; u <= x.Last(); u += x.Step() {
			for k := 0; k < x.Words; k++ {
				a := x.DstAddr + 4*uint32(k)
				got := binary.LittleEndian.Uint32(r.mem[u][a-p.Memory.Lo:])
				if want := pattern(x.Src, x.SrcAddr+4*uint32(k)); got != want {
					return fmt.Errorf("transfer %d: tile %d word %d at %#x = %#x, want %#x", i, u, k, a, got, want)
				}
			}
		}
	}
	return nil
}

// Phase generators.

// bump hands out receive buffers per tile.
type bump map[int]uint32

// take returns an address free on every tile of [lo, lo+n) for words.
func (b bump) take(lo, n, words int) uint32 {
	a := uint32(dstBase)
	for u := lo; u < lo+n; u++ {
		a = max(a, b[u])
	}
	for u := lo; u < lo+n; u++ {
		b[u] = a + 4*uint32(words)
	}
	return a
}

func pairs(n, words int) []Transfer {
	var ph []Transfer
	b := bump{}
	for i := 0; i < n/2; i++ {
		w := words + i%5
		ph = append(ph, Transfer{Src: i, Dst: i + n/2, Words: w, SrcAddr: srcBase, DstAddr: b.take(i+n/2, 1, w)})
	}
	return ph
}

func gather(n, words int) []Transfer {
	var ph []Transfer
	for s := 1; s < n; s++ {
		ph = append(ph, Transfer{Src: s, Dst: 0, Words: words, SrcAddr: srcBase, DstAddr: dstBase + 4*uint32(words*s)})
	}
	return ph
}

func allToAll(r *rand.Rand, n, maxWords int) []Transfer {
	var ph []Transfer
	b := bump{}
	for s := 0; s < n; s++ {
		for d := 0; d < n; d++ {
			if s == d {
				continue
			}
			w := 1 + r.Intn(maxWords)
			ph = append(ph, Transfer{Src: s, Dst: d, Words: w, SrcAddr: srcBase + 0x100*uint32(d), DstAddr: b.take(d, 1, w)})
		}
	}
	return ph
}

// random makes n transfers among tiles [0, tiles): single destinations,
// and multicasts of up to maxCast tiles now and then.
func random(r *rand.Rand, tiles, n, maxWords, maxCast int) []Transfer {
	var ph []Transfer
	b := bump{}
	for len(ph) < n {
		src := r.Intn(tiles)
		dn := 1
		if c := min(maxCast, tiles-1); c > 1 && r.Intn(8) == 0 {
			dn = 2 + r.Intn(c-1)
		}
		dst := r.Intn(tiles - dn + 1)
		if src >= dst && src < dst+dn {
			continue
		}
		w := 1 + r.Intn(maxWords)
		a := b.take(dst, dn, w)
		if a+4*uint32(w) > dstTop {
			continue
		}
		ph = append(ph, Transfer{Src: src, Dst: dst, DstN: dn, Words: w, SrcAddr: srcBase + 4*uint32(r.Intn(1024)), DstAddr: a})
	}
	return ph
}
