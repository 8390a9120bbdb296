package sim

import (
	"errors"
	"testing"

	"ipu.local/libs/arch"
	"ipu.local/libs/isa"
)

// A program that syncs forever faults after MaxSupersteps instead of
// hanging the host.
func TestMaxSupersteps(t *testing.T) {
	p := arch.MustLookup("ipu21-tiny")
	mem := make([]byte, p.Memory.Size())
	m := New(p, func(int) []byte { return mem }, Options{MaxSupersteps: 25})
	code := make([]byte, 8)
	isa.PutWord(code, isa.MustEncode(isa.Inst{Op: isa.SYNC}))
	isa.PutWord(code[4:], isa.MustEncode(isa.Inst{Op: isa.BR, Imm: -2}))
	if err := m.Load(0, Image{Entry: p.Executable.Lo, Segments: []Segment{{Addr: p.Executable.Lo, Data: code, Code: true}}}); err != nil {
		t.Fatal(err)
	}
	if err := m.Configure(0, RegEntry, p.Executable.Lo); err != nil {
		t.Fatal(err)
	}
	res, err := m.Run(nil, 0)
	var f *Fault
	if !errors.As(err, &f) || f.Kind != FaultWatchdog {
		t.Fatalf("Run = %v, want a watchdog fault", err)
	}
	if len(res.Phases) != 25 {
		t.Errorf("ran %d supersteps, want 25", len(res.Phases))
	}
}
