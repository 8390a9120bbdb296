package sim

import (
	"errors"
	"strings"
	"testing"

	"ipu.local/libs/isa"
)

// TestTileConfig checks the per-tile configuration registers the device
// enforces: with RequireConfig a tile starts without an executable range
// and outside the sync group; Load refuses code outside the range, a
// fetch outside it faults, a tile outside the sync group faults at sync,
// RegEntry is where Load starts the supervisor, and the state blob keeps
// the registers.
func TestTileConfig(t *testing.T) {
	cfg := func(r *rig, tile int, reg, v uint32) {
		t.Helper()
		if err := r.m.Configure(tile, reg, v); err != nil {
			t.Fatal(err)
		}
	}
	prog := codeBytes(assemble(sync_(), halt()))

	t.Run("unconfigured", func(t *testing.T) {
		r := newRig(t, "ipu21-tiny", Options{RequireConfig: true})
		err := r.m.Load(0, Image{Entry: codeBase, Segments: []Segment{{Addr: codeBase, Data: prog, Code: true}}})
		if err == nil || !strings.Contains(err.Error(), "outside the tile's executable range [0x4c000, 0x4c000) set by registers exec_lo (0x10) and exec_hi (0x11)") {
			t.Fatalf("Load error = %v", err)
		}
	})

	t.Run("values", func(t *testing.T) {
		r := newRig(t, "ipu21-tiny", Options{RequireConfig: true})
		for _, c := range []struct {
			reg, v uint32
			want   string
		}{
			{RegExecLo, codeBase + 2, "register exec_lo (0x10): value 0x4c002 is not a 4-aligned address"},
			{RegExecHi, 0x100000, "register exec_hi (0x11): value 0x100000 is not a 4-aligned address"},
			{RegSyncGroup, 2, "register sync_group (0x20): value 0x2 is neither 0 nor 1"},
			{RegEntry, codeBase + 2, "register entry (0x1): value 0x4c002 is not a 4-aligned address"},
			{0x12, 0, "unknown register 0x12"},
		} {
			if err := r.m.Configure(0, c.reg, c.v); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Configure(%s, %#x) = %v, want %q", RegName(c.reg), c.v, err, c.want)
			}
		}
	})

	t.Run("sync group", func(t *testing.T) {
		r := newRig(t, "ipu21-tiny", Options{RequireConfig: true})
		for tile := 0; tile < 2; tile++ {
			cfg(r, tile, RegExecLo, codeBase)
			cfg(r, tile, RegExecHi, codeBase+8)
		}
		cfg(r, 0, RegSyncGroup, 1)
		r.load(0, assemble(sync_(), halt()))
		r.load(1, assemble(sync_(), halt()))

		// The state blob keeps the registers.
		r2 := newRig(t, "ipu21-tiny", Options{RequireConfig: true})
		r2.mems = r.mems
		if err := r2.m.UnmarshalState(r.m.MarshalState()); err != nil {
			t.Fatal(err)
		}
		for _, m := range []*Machine{r.m, r2.m} {
			_, err := m.Run(nil, 0)
			var f *Fault
			if !errors.As(err, &f) || f.Kind != FaultSync || f.Tile != 1 ||
				!strings.Contains(f.Detail, "tile 1 is not a member of the sync group (register sync_group (0x20) is 0)") {
				t.Errorf("Run error = %v, want tile 1 outside the sync group", err)
			}
		}

		// Once a member, it syncs.
		r3 := newRig(t, "ipu21-tiny", Options{RequireConfig: true})
		for tile := 0; tile < 2; tile++ {
			cfg(r3, tile, RegExecLo, codeBase)
			cfg(r3, tile, RegExecHi, codeBase+8)
			cfg(r3, tile, RegSyncGroup, 1)
			r3.load(tile, assemble(sync_(), halt()))
		}
		if _, err := r3.m.Run(nil, 0); err != nil {
			t.Fatal(err)
		}
		if r3.m.Mark() != 1 {
			t.Errorf("mark = %d, want 1", r3.m.Mark())
		}
	})

	t.Run("fetch outside the range", func(t *testing.T) {
		r := newRig(t, "ipu21-tiny", Options{RequireConfig: true})
		cfg(r, 0, RegExecLo, codeBase)
		cfg(r, 0, RegExecHi, codeBase+4)
		// br +3 words: to codeBase+16, in the preset's executable range
		// but outside the tile's.
		r.load(0, assemble(I(isa.BR, 0, 0, 0, 3)))
		_, err := r.m.Run(nil, 0)
		var f *Fault
		if !errors.As(err, &f) || f.Kind != FaultFetch || f.PC != codeBase+16 ||
			!strings.Contains(f.Detail, "outside the tile's executable range [0x4c000, 0x4c004)") {
			t.Errorf("Run error = %v, want a fetch fault at %#x", err, codeBase+16)
		}
		// The range cannot shrink under loaded code.
		if err := r.m.Configure(0, RegExecHi, codeBase); err == nil {
			t.Error("exec_hi below the loaded code: no error")
		}
	})

	t.Run("exchange", func(t *testing.T) {
		r := newRig(t, "ipu21-tiny", Options{RequireConfig: true})
		cfg(r, 0, RegExecLo, codeBase)
		cfg(r, 0, RegExecHi, codeBase+0x100)
		cfg(r, 0, RegSyncGroup, 1)
		r.load(0, assemble(li(1, 0), li(2, dataBase), li(3, 4), recv(1, 2, 3), sync_(), halt()))
		_, err := r.m.Run(nil, 0)
		var f *Fault
		if !errors.As(err, &f) || f.Kind != FaultNotExchange || f.Tile != 0 || f.PC != codeBase+12 ||
			!strings.Contains(f.Detail, "tile 0 is not a member of the exchange (register exchange (0x21) is 0)") {
			t.Errorf("Run error = %v, want tile 0 outside the exchange at its recv", err)
		}
		if err := r.m.Configure(0, RegExchange, 2); err == nil {
			t.Error("exchange value 2: no error")
		}
	})

	t.Run("entry", func(t *testing.T) {
		r := newRig(t, "ipu21-tiny", Options{})
		cfg(r, 0, RegEntry, codeBase+4)
		r.load(0, assemble(halt(), nop(), halt()))
		if pc := r.m.Snapshot(0).Ctx[supCtx].PC; pc != codeBase+4 {
			t.Errorf("supervisor pc after load = %#x, want the entry register's %#x", pc, codeBase+4)
		}
	})
}
