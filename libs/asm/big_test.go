package asm

import (
	"fmt"
	"strings"
	"testing"
)

// bigSource is a program of n instructions (53000 fill the executable
// range) shared by every tile of ipu21, with a transfer and an entry of
// each tile's own.
func bigSource(n int) []byte {
	var b strings.Builder
	b.WriteString(".tile 0-1471\n.section t, code\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "l%d: addi $m1, $m2, %d\n", i, i%1000)
	}
	b.WriteString(".section d, data\n.zero 400000\n")
	for i := 0; i < 1472; i++ {
		fmt.Fprintf(&b, ".tile %d\n.xfer 0, %d, %d, 1, 4\n.entry l%d\n", i, i, (i+1)%1472, i%n)
	}
	return []byte(b.String())
}

func BenchmarkAssemble(b *testing.B) {
	src := bigSource(53000)
	b.ReportAllocs()
	b.SetBytes(int64(len(src)))
	for i := 0; i < b.N; i++ {
		if _, err := Assemble("big.s", src, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDisassembleObject(b *testing.B) {
	o, err := Assemble("big.s", bigSource(53000), Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		DisassembleObject(o)
	}
}

func TestRoundTripBig(t *testing.T) {
	if testing.Short() {
		t.Skip("large program")
	}
	o := mustAssemble(t, "big.s", bigSource(5000))
	roundTrip(t, "big", o)
}
