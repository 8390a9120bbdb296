package isa

import (
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Every word that decodes re-encodes to itself, and every table entry
// round-trips through Encode and Decode.
func TestEncodeDecodeRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	decoded := 0
	for i := 0; i < 1<<20; i++ {
		w := r.Uint32()
		if i < 256 {
			w = uint32(i) << 24 // every opcode with zero operands
		}
		in, err := Decode(w)
		if err != nil {
			continue
		}
		decoded++
		back, err := Encode(in)
		if err != nil {
			t.Fatalf("%08x decodes to %+v, which does not encode: %v", w, in, err)
		}
		if back != w {
			t.Fatalf("%08x decodes to %+v, which encodes to %08x", w, in, back)
		}
	}
	if decoded == 0 {
		t.Fatal("no random word decoded")
	}
}

func TestTable(t *testing.T) {
	names := map[string]int{}
	for _, in := range Table() {
		if in.Cycles < 1 {
			t.Errorf("%s: cycles %d", in.Name, in.Cycles)
		}
		if in.Doc == "" {
			t.Errorf("%s: no semantics", in.Name)
		}
		names[in.Name]++
		if got := Lookup(in.Op); got != in {
			t.Errorf("Lookup(%#x) = %v", in.Op, got)
		}
	}
	// Mnemonics shared by two entries differ in their operand kinds.
	for name, n := range names {
		if n > 1 {
			e := ByName(name)
			if cmp.Equal(e[0].Operands, e[1].Operands) {
				t.Errorf("%s: two entries with the same operands", name)
			}
		}
	}
}

func TestDecodeRejects(t *testing.T) {
	tests := []struct {
		name string
		word uint32
	}{
		{"unknown opcode", 0xff000000},
		{"reserved bits of nop", 0x00000001},
		{"reserved c field of add", uint32(ADD)<<24 | 0x100},
		{"odd register pair", uint32(V2ADD)<<24 | 1<<20},
		{"quad not a multiple of 4", uint32(LD128)<<24 | 2<<20},
		{"no such control register", uint32(GET)<<24 | NumCSR},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if in, err := Decode(tt.word); err == nil {
				t.Errorf("Decode(%08x) = %+v, want an error", tt.word, in)
			}
		})
	}
}
