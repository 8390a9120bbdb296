package sim

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"

	"ipu.local/libs/isa"
)

// wordsToCode turns arbitrary words into code that mostly decodes: a word
// with the top bit set becomes a valid instruction built from its bits
// (addresses biased into tile memory), the others stay as they are.
func wordsToCode(ws []uint32) []uint32 {
	table := isa.Table()
	out := make([]uint32, len(ws))
	for i, w := range ws {
		out[i] = w
		if w&0x80000000 == 0 {
			continue
		}
		info := table[int(w>>24&0x7F)%len(table)]
		in := isa.Inst{Op: info.Op, D: uint8(w >> 20 & 15), A: uint8(w >> 16 & 15), B: uint8(w >> 12 & 15), C: uint8(w >> 8 & 15)}
		switch info.Form {
		case isa.FormR:
			in.Imm = int32(w & 0xFF)
			if info.Op == isa.RUN || info.Op == isa.AMPST || info.Op == isa.AMPLD {
				in.Imm %= 7
			}
			if info.Op == isa.GET || info.Op == isa.PUT {
				in.Imm %= isa.NumCSR
			}
		case isa.FormI:
			in.Imm = int32(int16(w))
			for _, k := range info.Operands {
				if k == isa.Imm16U {
					in.Imm = int32(w & 0xFFFF)
				}
			}
			switch info.Class {
			case isa.ClassBranch:
				in.Imm %= 8
			case isa.ClassLoad, isa.ClassStore:
				in.Imm = int32(w&3)*16 - 16
			}
		case isa.FormJ:
			in.Imm = int32(w & 0xFFFFF)
			switch info.Op {
			case isa.LI, isa.ALI:
				in.Imm = int32(0x4C000 + (w&0xFFFFF)%0x9C000&^3)
			case isa.BR, isa.CALL:
				in.Imm = int32(w%16) - 8
			case isa.DELAY:
				in.Imm %= 64
			case isa.RPTI:
				in.Imm = int32(w>>8&0xF)<<8 | int32(w&3)
			}
		}
		in.D, in.A, in.B, in.C = in.D&^1, in.A&^1, in.B&^1, in.C&^1 // pairs
		if hasAD4(info) {
			in.D &^= 3
		}
		if e, err := isa.Encode(in); err == nil {
			out[i] = e
		}
	}
	return out
}

func hasAD4(info *isa.Info) bool {
	for _, k := range info.Operands {
		if k == isa.AD4 {
			return true
		}
	}
	return false
}

// runFuzz loads data as programs on a tiny device, runs a few calls and
// checks the state survives a round trip. It returns what it saw.
func runFuzz(t *testing.T, data []byte, parallel int) (results []*RunResult, errs []string, snaps []TileSnapshot) {
	t.Helper()
	return runFuzzWith(t, data, Options{Parallel: parallel, SamplePeriod: 97})
}

// runFuzzWith is runFuzz with the machine's options.
func runFuzzWith(t *testing.T, data []byte, opt Options) (results []*RunResult, errs []string, snaps []TileSnapshot) {
	t.Helper()
	r := newRig(t, "ipu21-tiny", opt)
	if err := r.m.Configure(0, RegWatchdog, 3000); err != nil {
		t.Fatal(err)
	}
	ws := make([]uint32, len(data)/4)
	for i := range ws {
		ws[i] = binary.LittleEndian.Uint32(data[4*i:])
	}
	code := wordsToCode(ws)
	for tile := 0; tile < 4; tile++ {
		body := code[len(code)*tile/4 : len(code)*(tile+1)/4]
		if len(body) == 0 {
			continue
		}
		// Prologue: addresses in $m1..$m12 (non-interleaved, then
		// interleaved), $m13 a pc in the body for run, $m14 a small count.
		var pro []any
		for i := uint8(1); i <= 12; i++ {
			base := int32(dataBase)
			if i > 6 {
				base = ilBase
			}
			pro = append(pro, li(i, base+64*int32(i)))
		}
		pro = append(pro, li(13, int32(pcOf(14+len(body)/2))), li(14, 4))
		part := append(assemble(pro...), body...)
		// Supervisor at the start; the same code is data too.
		r.load(tile, part, Segment{Addr: dataBase, Data: codeBytes(part)}, Segment{Addr: ilBase, Data: codeBytes(part)})
	}
	host := mapHost{0: make([]byte, 256)}
	for call := 0; call < 3; call++ {
		res, err := r.m.Run(host, uint32(call))
		results = append(results, res)
		if err != nil {
			var f *Fault
			if !errors.As(err, &f) {
				t.Fatalf("error %v is not a *Fault", err)
			}
			errs = append(errs, f.Error())
			break
		}
		if !res.AtHost {
			break
		}
	}
	st := r.m.MarshalState()
	m2 := New(r.p, func(t int) []byte { return r.mems[t] }, Options{})
	if err := m2.UnmarshalState(st); err != nil {
		t.Fatalf("unmarshal of marshalled state: %v", err)
	}
	if !bytes.Equal(m2.MarshalState(), st) {
		t.Fatal("state changed in a round trip")
	}
	for tile := 0; tile < 4; tile++ {
		snaps = append(snaps, r.m.Snapshot(tile))
	}
	return results, errs, snaps
}

func FuzzRun(f *testing.F) {
	f.Add(codeBytes(assemble(li(1, dataBase), ldm(2, 1, 0), addi(2, 2, 1), stm(2, 1, 0), hsync(3), br("x"), label("x"), sync_())))
	f.Add(codeBytes(sender(1, 4, false)))
	f.Add(codeBytes(receiver(0, T, 4)))
	f.Add(bytes.Repeat([]byte{0xFF, 0x12, 0x34, 0x85}, 64))
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 8; i++ {
		b := make([]byte, 4*(16+rng.IntN(200)))
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1<<14 {
			return
		}
		catchPanics, maxSupersteps = false, 50
		defer func() { catchPanics, maxSupersteps = true, 0 }()
		runFuzz(t, data, 2)
	})
}

// TestRandomPrograms runs random programs on 1 and 3 goroutines: no
// panic, and the same outcome.
func TestRandomPrograms(t *testing.T) {
	catchPanics, maxSupersteps = false, 50
	defer func() { catchPanics, maxSupersteps = true, 0 }()
	rng := rand.New(rand.NewPCG(7, 8))
	n := 150
	if testing.Short() {
		n = 30
	}
	for i := 0; i < n; i++ {
		b := make([]byte, 4*(8+rng.IntN(400)))
		for j := 0; j < len(b); j += 4 {
			w := rng.Uint32()
			if rng.IntN(10) != 0 {
				w |= 0x80000000
			}
			binary.LittleEndian.PutUint32(b[j:], w)
		}
		r1, e1, s1 := runFuzz(t, b, 1)
		r3, e3, s3 := runFuzz(t, b, 3)
		if diff := cmp.Diff([]any{r1, e1, s1}, []any{r3, e3, s3}); diff != "" {
			t.Fatalf("program %d: parallel runs differ: mismatch (-want +got):\n%s", i, diff)
		}
	}
}
