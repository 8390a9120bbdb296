package planner

import (
	"errors"
	"strings"
	"testing"

	"ipu.local/libs/arch"
)

// TestMemoryReserve: a reserve shrinks the memory the search fills (a
// reserve that leaves too little is out of memory, naming what it left),
// the state records it and a resumed search keeps it; a reserve beyond
// the tile is refused.
func TestMemoryReserve(t *testing.T) {
	g, p := load(t, "mlp-small"), arch.MustLookup("ipu21")
	usable := int64(p.UsableMemory().Size())
	opt := Options{Tiles: 4, Seed: 1, MaxAttempts: 2, ModelFingerprint: "fp", MemoryReserve: 4096}
	_, s, _, err := Plan(g, p, opt)
	if err != nil {
		t.Fatal(err)
	}
	if s.Reserve != 4096 {
		t.Fatalf("state reserve %d, want 4096", s.Reserve)
	}
	resumed := opt
	resumed.MemoryReserve, resumed.State = 0, s
	if _, s2, _, err := Plan(g, p, resumed); err != nil || s2.Reserve != 4096 {
		t.Fatalf("resumed: reserve %v, err %v; want 4096 kept", s2, err)
	}

	tight := opt
	tight.MemoryReserve = usable - 40000
	_, _, _, err = Plan(g, p, tight)
	var me *MemoryError
	if !errors.As(err, &me) || !strings.Contains(err.Error(), "usable 40000 bytes per tile") {
		t.Fatalf("error %v, want out of memory with 40000 usable bytes", err)
	}

	over := opt
	over.MemoryReserve = usable
	if _, _, _, err := Plan(g, p, over); err == nil || !strings.Contains(err.Error(), "memory reserve") {
		t.Fatalf("error %v, want the reserve refused", err)
	}
}
