package sim

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"ipu.local/libs/isa"
)

// faultKey is the part of a fault the tests pin down.
type faultKey struct {
	Kind    FaultKind
	Tile    int
	Context int
	PC      uint32
	Phase   int
	Cycle   int64
}

func keyOf(t *testing.T, err error) faultKey {
	t.Helper()
	var f *Fault
	if !errors.As(err, &f) {
		t.Fatalf("error %v is not a *Fault", err)
	}
	return faultKey{f.Kind, f.Tile, f.Context, f.PC, f.Phase, f.Cycle}
}

func pcOf(i int) uint32 { return codeBase + 4*uint32(i) }

// TestFaults runs one supervisor program per fault kind on tile 0 and
// checks the fault names the right place and cycle.
func TestFaults(t *testing.T) {
	sup := supCtx
	tests := []struct {
		name  string
		code  []any
		setup func(r *rig)
		host  Host
		want  faultKey
	}{
		{"out of range load", []any{li(1, 0), ldm(2, 1, 0)},
			nil, nil, faultKey{FaultAccess, 0, sup, pcOf(1), 0, 6}},
		{"out of range high", []any{li(1, 0xE7FFC), ldm(2, 1, 4)},
			nil, nil, faultKey{FaultAccess, 0, sup, pcOf(1), 0, 6}},
		{"misaligned load", []any{li(1, dataBase+2), ldm(2, 1, 0)},
			nil, nil, faultKey{FaultAlign, 0, sup, pcOf(1), 0, 6}},
		{"misaligned 64-bit store", []any{li(1, dataBase+4), I(isa.ST64, 0, 1, 0, 0)},
			nil, nil, faultKey{FaultAlign, 0, sup, pcOf(1), 0, 6}},
		{"128-bit access outside interleaved memory", []any{li(1, dataBase), I(isa.LD128, 0, 1, 0, 0)},
			nil, nil, faultKey{FaultAccess, 0, sup, pcOf(1), 0, 6}},
		{"fetch outside executable range", []any{li(1, 0x90000), I(isa.JR, 0, 1, 0, 0)},
			nil, nil, faultKey{FaultFetch, 0, sup, 0x90000, 0, 12}},
		{"fetch outside code segment", []any{li(1, 0x70000), I(isa.JR, 0, 1, 0, 0)},
			nil, nil, faultKey{FaultFetch, 0, sup, 0x70000, 0, 12}},
		{"misaligned pc", []any{li(1, codeBase+2), I(isa.JR, 0, 1, 0, 0)},
			nil, nil, faultKey{FaultFetch, 0, sup, codeBase + 2, 0, 12}},
		{"running off the code", []any{nop()},
			nil, nil, faultKey{FaultFetch, 0, sup, pcOf(1), 0, 6}},
		{"invalid opcode", []any{nop(), word(0xFF000000)},
			nil, nil, faultKey{FaultInvalid, 0, sup, pcOf(1), 0, 6}},
		{"reserved bits", []any{word(uint32(isa.NOP)<<24 | 1)},
			nil, nil, faultKey{FaultInvalid, 0, sup, pcOf(0), 0, 0}},
		{"worker instruction on supervisor", []any{op0(isa.AMPCLR)},
			nil, nil, faultKey{FaultInvalid, 0, sup, pcOf(0), 0, 0}},
		{"supervisor instruction on worker", []any{
			li(1, int32(pcOf(3))), run(1, 2, 4), sync_(),
			send(1, 2, 3)},
			nil, nil, faultKey{FaultInvalid, 0, 4, pcOf(3), 0, 10}},
		{"write to code", []any{li(1, codeBase), stm(2, 1, 4)},
			nil, nil, faultKey{FaultCodeWrite, 0, sup, pcOf(1), 0, 6}},
		{"put read-only csr", []any{I(isa.PUT, 0, 1, 0, isa.CSRTileID)},
			nil, nil, faultKey{FaultInvalid, 0, sup, pcOf(0), 0, 0}},
		{"run worker 6", []any{run(1, 2, 6)},
			nil, nil, faultKey{FaultInvalid, 0, sup, pcOf(0), 0, 0}},
		{"branch in repeat body", []any{rpti(2, 1), br("end"), label("end"), sync_()},
			nil, nil, faultKey{FaultInvalid, 0, sup, pcOf(1), 0, 6}},
		{"sync in repeat body", []any{rpti(2, 2), nop(), sync_()},
			nil, nil, faultKey{FaultInvalid, 0, sup, pcOf(2), 0, 12}},
		{"accumulator row 4", []any{
			li(1, int32(pcOf(3))), run(1, 2, 0), sync_(),
			li(2, ilBase), ampst(2, 4)},
			nil, nil, faultKey{FaultInvalid, 0, 0, pcOf(4), 0, 18}},
		{"amph b not interleaved", []any{
			li(1, int32(pcOf(3))), run(1, 2, 0), sync_(),
			li(2, dataBase), amph(2, 2)},
			nil, nil, faultKey{FaultAccess, 0, 0, pcOf(4), 0, 18}},
		{"send2 odd", []any{li(3, 3), send2(1, 2, 3)},
			nil, nil, faultKey{FaultInvalid, 0, sup, pcOf(1), 0, 6}},
		{"send to a tile beyond the device", []any{li(1, 4), li(3, 1), send(1, 2, 3)},
			nil, nil, faultKey{FaultInvalid, 0, sup, pcOf(2), 0, 12}},
		{"recv into code", []any{li(1, 0), li(2, codeBase), li(3, 1), recv(1, 2, 3)},
			nil, nil, faultKey{FaultCodeWrite, 0, sup, pcOf(3), 0, 18}},
		{"hin outside host pages", []any{li(1, dataBase), li(2, 0), li(3, 16), I(isa.HIN, 1, 2, 3, 0)},
			nil, mapHost{}, faultKey{FaultHost, 0, sup, pcOf(3), 0, 18}},
		{"hin without host", []any{li(1, dataBase), li(2, 0), li(3, 16), I(isa.HIN, 1, 2, 3, 0)},
			nil, nil, faultKey{FaultHost, 0, sup, pcOf(3), 0, 18}},
		{"hout outside host pages", []any{li(1, 0), li(2, dataBase), li(3, 16), I(isa.HOUT, 1, 2, 3, 0), sync_()},
			nil, mapHost{}, faultKey{FaultHost, 0, sup, pcOf(3), 0, 18}},
		{"hout misaligned", []any{li(1, 2), li(2, dataBase), li(3, 16), I(isa.HOUT, 1, 2, 3, 0), sync_()},
			nil, mapHost{}, faultKey{FaultAlign, 0, sup, pcOf(3), 0, 18}},
		{"watchdog", []any{label("l"), br("l")},
			func(r *rig) {
				if err := r.m.Configure(0, RegWatchdog, 100); err != nil {
					t.Fatal(err)
				}
			}, nil, faultKey{FaultWatchdog, 0, -1, pcOf(0), 0, 100}},
		{"watchdog on a worker", []any{
			li(1, int32(pcOf(3))), run(1, 2, 3), sync_(),
			label("l"), br("l")},
			func(r *rig) {
				if err := r.m.Configure(0, RegWatchdog, 1000); err != nil {
					t.Fatal(err)
				}
			}, nil, faultKey{FaultWatchdog, 0, -1, pcOf(2), 0, 1000}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, "ipu21-tiny", Options{Parallel: 1})
			if tc.setup != nil {
				tc.setup(r)
			}
			r.load(0, assemble(tc.code...))
			_, err := r.m.Run(tc.host, 0)
			if err == nil {
				t.Fatal("no fault")
			}
			if diff := cmp.Diff(tc.want, keyOf(t, err)); diff != "" {
				t.Errorf("fault %v: mismatch (-want +got):\n%s", err, diff)
			}
			// A faulted device refuses to run until loaded again.
			if _, err := r.m.Run(tc.host, 0); err == nil || keyOf(t, err).Kind != FaultNotRunnable {
				t.Errorf("second run: got %v, want %s", err, FaultNotRunnable)
			}
		})
	}
}

// TestSyncMismatch checks that tiles at sync and at hsync in one
// superstep fault at the lowest tile at hsync.
func TestSyncMismatch(t *testing.T) {
	r := newRig(t, "ipu21-tiny", Options{})
	r.load(0, assemble(nop(), sync_()))
	r.load(1, assemble(hsync(1)))
	r.load(2, assemble(sync_()))
	r.load(3, assemble(nop(), nop(), hsync(1)))
	_, err := r.m.Run(nil, 0)
	want := faultKey{FaultSync, 1, supCtx, pcOf(0), 0, 0}
	if diff := cmp.Diff(want, keyOf(t, err)); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}

// TestEarliestFault checks that of several tiles' faults the earliest
// cycle wins, then the lowest tile.
func TestEarliestFault(t *testing.T) {
	r := newRig(t, "ipu21-tiny", Options{Parallel: 4})
	r.load(0, assemble(nop(), nop(), word(0xFF000000)))
	r.load(1, assemble(nop(), word(0xFF000000)))
	r.load(2, assemble(nop(), word(0xFF000000)))
	r.load(3, assemble(nop(), nop(), nop(), word(0xFF000000)))
	_, err := r.m.Run(nil, 0)
	want := faultKey{FaultInvalid, 1, supCtx, pcOf(1), 0, 6}
	if diff := cmp.Diff(want, keyOf(t, err)); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}

// TestLoadErrors checks that bad images are errors, not faults.
func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name string
		tile int
		segs []Segment
	}{
		{"tile out of range", 4, nil},
		{"segment below memory", 0, []Segment{{Addr: 0x1000, Data: make([]byte, 4)}}},
		{"segment past memory", 0, []Segment{{Addr: 0xE7FFC, Data: make([]byte, 8)}}},
		{"code outside executable", 0, []Segment{{Addr: 0x7FFFC, Data: make([]byte, 8), Code: true}}},
		{"code misaligned", 0, []Segment{{Addr: codeBase + 2, Data: make([]byte, 4), Code: true}}},
		{"code length", 0, []Segment{{Addr: codeBase, Data: make([]byte, 6), Code: true}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, "ipu21-tiny", Options{})
			if err := r.m.Load(tc.tile, Image{Entry: codeBase, Segments: tc.segs}); err == nil {
				t.Error("no error")
			}
		})
	}
	r := newRig(t, "ipu21-tiny", Options{})
	if err := r.m.Configure(0, 0x7777, 1); err == nil {
		t.Error("unknown register: no error")
	}
	if err := r.m.Configure(9, RegEntry, codeBase); err == nil {
		t.Error("tile out of range: no error")
	}
	if _, err := r.m.Run(nil, 0); err == nil || keyOf(t, err).Kind != FaultNotRunnable {
		t.Errorf("run of an empty device: got %v, want %s", err, FaultNotRunnable)
	}
}
