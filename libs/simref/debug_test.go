package simref_test

import (
	"encoding/binary"
	"flag"
	"fmt"
	"testing"

	"ipu.local/libs/arch"
	"ipu.local/libs/isa"
	"ipu.local/libs/simref"
)

var dumpTile = flag.Int("dump", -1, "TestDump: tile whose code to print (with -seed)")

// TestDump prints a generated program's code, for debugging mismatches.
func TestDump(t *testing.T) {
	if *dumpTile < 0 || *only == 0 {
		t.Skip("needs -dump and -seed")
	}
	parseGenOpts()
	prog := generate(*only, modeFor(*only))
	img := prog.images[*dumpTile]
	for _, s := range img.Segments {
		if !s.Code {
			continue
		}
		for i := 0; i+4 <= len(s.Data); i += 4 {
			w := binary.LittleEndian.Uint32(s.Data[i:])
			in, err := isa.Decode(w)
			txt := fmt.Sprintf("%v d=%d a=%d b=%d c=%d imm=%d", in.Op, in.D, in.A, in.B, in.C, in.Imm)
			if err != nil {
				txt = err.Error()
			}
			fmt.Printf("%#x: %08x  %s\n", s.Addr+uint32(i), w, txt)
		}
	}
}

var traceTile = flag.Int("trace", -1, "TestTrace: tile whose issues to print (with -seed)")

// TestTrace prints every instruction a tile issues on the reference, with
// the context's registers after it.
func TestTrace(t *testing.T) {
	if *traceTile < 0 || *only == 0 {
		t.Skip("needs -trace and -seed")
	}
	parseGenOpts()
	prog := generate(*only, modeFor(*only))
	_, err := execute(prog, func(p *arch.Preset, mem func(int) []byte) machine {
		m := simref.New(p, mem)
		m.Trace = func(tile, ctx int, cycle int64, pc uint32, in isa.Inst) {
			if tile != *traceTile {
				return
			}
			s := m.Snapshot(tile).Ctx[ctx]
			fmt.Printf("c%d %6d %#x %-10v d=%d a=%d b=%d c=%d imm=%d  m=%x a=%x\n", ctx, cycle, pc, in.Op, in.D, in.A, in.B, in.C, in.Imm, s.M, s.A)
		}
		return m
	})
	if err != nil {
		t.Fatal(err)
	}
}
