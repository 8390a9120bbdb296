package sim

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"ipu.local/libs/isa"
)

// ringProgram is a BSP program for every tile of a device with an even
// number of tiles: each round, six workers mix tile-dependent values into
// memory; after a sync every tile sends 8 words to the next tile and
// receives 8 from the previous one (even tiles send at 40, odd ones at 56:
// a supervisor cannot issue 10 cycles after its own send); after another
// sync the round ends at an hsync, and the host's command is added into
// the data.
func ringProgram(tiles int, tile int, workerPC int32) []uint32 {
	next := int32((tile + 1) % tiles)
	prev := int32((tile + tiles - 1) % tiles)
	xchg := []any{delay(4), send(4, 5, 6), delay(14), recv(7, 8, 6), delay(30)}
	if tile%2 == 1 {
		xchg = []any{delay(14), recv(7, 8, 6), send(4, 5, 6), nop(), delay(24)}
	}
	items := []any{
		label("round"),
		li(1, workerPC),
		li(2, dataBase),
		run(1, 2, 0), addi(2, 2, 64), run(1, 2, 1), addi(2, 2, 64), run(1, 2, 2),
		addi(2, 2, 64), run(1, 2, 3), addi(2, 2, 64), run(1, 2, 4), addi(2, 2, 64), run(1, 2, 5),
		op0(isa.JOIN),
		sync_(),
		li(4, next), li(5, dataBase), li(6, 8), li(7, prev), li(8, dataBase+0x1000),
	}
	items = append(items, xchg...)
	items = append(items,
		sync_(),
		hsync(9),
		add(10, 10, 9),
		stm(10, 8, 32),
		br("round"),
		// Worker: $m0 = its 64-byte block.
		label("worker"),
		get(1, isa.CSRTileID), get(2, isa.CSRContext), ldm(3, 0, 0),
		li(4, 5),
		label("loop"),
		add(3, 3, 1), I(isa.MUL, 3, 3, 2, 0), addi(3, 3, 7), I(isa.XOR, 3, 3, 1, 0),
		addi(4, 4, -1),
		brnz(4, "loop"),
		stm(3, 0, 0), ldm(5, 0, 0x1000), add(5, 5, 3), stm(5, 0, 4),
		I(isa.MTA, 0, 3, 0, 0), I(isa.CVTIF, 1, 0, 0, 0), I(isa.FMUL, 2, 1, 1, 0), I(isa.ST32, 2, 0, 0, 8),
		exit(),
	)
	return assemble(items...)
}

// ringWorker is the index of ringProgram's "worker" label.
const ringWorker = 30

func loadRing(t testing.TB, r *rig) {
	t.Helper()
	for tile := 0; tile < r.p.Tiles; tile++ {
		code := ringProgram(r.p.Tiles, tile, int32(pcOf(ringWorker)))
		r.load(tile, code, words(dataBase, uint32(tile*3+1), uint32(tile)))
	}
}

// runRing runs three host calls and returns everything observable.
type ringOutcome struct {
	Results []*RunResult
	Snaps   []TileSnapshot
	Mems    [][]byte
	Mark    int
}

func runRing(t testing.TB, r *rig, calls int) ringOutcome {
	t.Helper()
	var out ringOutcome
	for c := 0; c < calls; c++ {
		res, err := r.m.Run(nil, uint32(100+c))
		if err != nil {
			t.Fatalf("call %d: %v", c, err)
		}
		if !res.AtHost {
			t.Fatalf("call %d: not at host", c)
		}
		out.Results = append(out.Results, res)
	}
	for tile := 0; tile < r.p.Tiles; tile++ {
		out.Snaps = append(out.Snaps, r.m.Snapshot(tile))
		out.Mems = append(out.Mems, bytes.Clone(r.mems[tile]))
	}
	out.Mark = r.m.Mark()
	return out
}

// compareOutcomes compares two outcomes; memories byte by byte (cmp.Diff
// of megabytes is too slow).
func compareOutcomes(t *testing.T, what string, want, got ringOutcome) {
	t.Helper()
	for i := range want.Mems {
		if !bytes.Equal(want.Mems[i], got.Mems[i]) {
			t.Errorf("%s: tile %d memory differs", what, i)
		}
	}
	want.Mems, got.Mems = nil, nil
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s: mismatch (-want +got):\n%s", what, diff)
	}
}

func TestRingProgramShape(t *testing.T) {
	for tile := 0; tile < 2; tile++ {
		p := ringProgram(64, tile, 0)
		if got := isa.MustEncode(get(1, isa.CSRTileID)); p[ringWorker] != got {
			t.Fatalf("tile %d: word %d is %#x, want the worker's first instruction %#x", tile, ringWorker, p[ringWorker], got)
		}
	}
}

// TestDeterminism runs the same program with 1 and 4 goroutines and
// compares every observable.
func TestDeterminism(t *testing.T) {
	var outs []ringOutcome
	for _, par := range []int{1, 4, 3} {
		r := newRig(t, "ipu21-64", Options{Parallel: par, SamplePeriod: 50})
		loadRing(t, r)
		outs = append(outs, runRing(t, r, 3))
	}
	for i := 1; i < len(outs); i++ {
		compareOutcomes(t, fmt.Sprintf("run %d", i), outs[0], outs[i])
	}
	o := outs[0]
	if o.Mark != 3*3 {
		t.Errorf("mark = %d, want 9", o.Mark)
	}
	if len(o.Results[0].Samples) == 0 {
		t.Error("no samples")
	}
	// Tile 5 received tile 4's first 8 words.
	if got, want := o.Mems[5][dataBase+0x1000-0x4C000:][:32], o.Mems[4][dataBase-0x4C000:][:32]; !bytes.Equal(got, want) {
		t.Errorf("tile 5 received %x, want tile 4's %x", got, want)
	}
}

// TestMarshalRoundTrip stops at an hsync, saves the state, restores it on
// a fresh machine over a copy of memory and checks that both continue
// identically.
func TestMarshalRoundTrip(t *testing.T) {
	a := newRig(t, "ipu21-64", Options{Parallel: 2})
	loadRing(t, a)
	runRing(t, a, 2)
	state := a.m.MarshalState()
	if len(state) != a.m.stateSize() {
		t.Fatalf("state of %d bytes, stateSize says %d", len(state), a.m.stateSize())
	}

	b := newRig(t, "ipu21-64", Options{Parallel: 1})
	for i := range b.mems {
		copy(b.mems[i], a.mems[i])
	}
	if err := b.m.UnmarshalState(state); err != nil {
		t.Fatal(err)
	}
	if got := b.m.MarshalState(); !bytes.Equal(got, state) {
		t.Fatal("state differs after a round trip")
	}
	for tile := 0; tile < a.p.Tiles; tile++ {
		if diff := cmp.Diff(a.m.Snapshot(tile), b.m.Snapshot(tile)); diff != "" {
			t.Fatalf("tile %d snapshot: mismatch (-want +got):\n%s", tile, diff)
		}
	}
	compareOutcomes(t, "continued run", runRing(t, a, 2), runRing(t, b, 2))
}

// TestUnmarshalRejects checks that damaged state is an error and leaves
// the machine as it was.
func TestUnmarshalRejects(t *testing.T) {
	r := newRig(t, "ipu21-tiny", Options{})
	r.load(0, assemble(hsync(1), halt()))
	if _, err := r.m.Run(nil, 0); err != nil {
		t.Fatal(err)
	}
	good := r.m.MarshalState()
	other := newRig(t, "ipu21-64", Options{})
	tests := []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"bad magic", append([]byte("XSIM"), good[4:]...)},
		{"bad version", append(append([]byte("ISIM"), 9), good[5:]...)},
		{"truncated", good[:len(good)-1]},
		{"trailing", append(bytes.Clone(good), 0)},
		{"other preset", other.m.MarshalState()},
	}
	for i := 5; i < len(good); i += 7 {
		b := bytes.Clone(good)
		b[i] ^= 0xFF
		tests = append(tests, struct {
			name string
			b    []byte
		}{"flipped byte", b})
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := r.m.UnmarshalState(tc.b)
			if err == nil && tc.name != "flipped byte" {
				t.Error("no error")
			}
			if err != nil && !bytes.Equal(r.m.MarshalState(), good) {
				t.Error("machine changed by a rejected state")
			}
			if err == nil {
				// A flip that still parses must still run without panicking.
				r.m.Run(nil, 0)
				if err := r.m.UnmarshalState(good); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestHostTransfers moves data in from the host and back out.
func TestHostTransfers(t *testing.T) {
	host := mapHost{1: make([]byte, 64), 2: make([]byte, 64)}
	for i := range host[1] {
		host[1][i] = byte(i * 3)
	}
	r := newRig(t, "ipu21-tiny", Options{})
	r.load(0, assemble(
		li(1, dataBase), li(2, 0), lih(2, 0x100), li(3, 64),
		I(isa.HIN, 1, 2, 3, 0),
		li(4, 0), lih(4, 0x200),
		I(isa.HOUT, 4, 1, 3, 0),
		hsync(5), halt()))
	res, err := r.m.Run(host, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(host[1], host[2]) {
		t.Errorf("host page 2 = %x, want %x", host[2], host[1])
	}
	if got := res.Phases[0].HostBytes; got != 128 {
		t.Errorf("host bytes = %d, want 128", got)
	}
	// lis at 0..18, hin at 24 takes ceil(64/16) = 4 slots: lis at 48, 54,
	// hout at 60 (4 slots), hsync at 84.
	if got := res.Phases[0].Cycles; got != 85 {
		t.Errorf("cycles = %d, want 85", got)
	}
}

// savedRig is a tiny device whose tiles 0 and 1 wait at hsync, tile 1
// after running a worker: a state to save.
func savedRig(tb testing.TB) *rig {
	tb.Helper()
	r := newRig(tb, "ipu21-tiny", Options{})
	r.load(0, assemble(hsync(1), halt()))
	r.load(1, assemble(li(1, int32(pcOf(3))), run(1, 2, 0), hsync(1), exit()))
	if _, err := r.m.Run(nil, 0); err != nil {
		tb.Fatal(err)
	}
	return r
}

// FuzzUnmarshalState feeds damaged state: an error or a machine that runs,
// never a panic.
func FuzzUnmarshalState(f *testing.F) {
	r := savedRig(f)
	f.Add(r.m.MarshalState())
	f.Fuzz(func(t *testing.T, b []byte) {
		catchPanics, maxSupersteps = false, 10
		defer func() { catchPanics, maxSupersteps = true, 0 }()
		if err := r.m.Configure(0, RegWatchdog, 1000); err != nil {
			t.Fatal(err)
		}
		m := New(r.p, func(t int) []byte { return r.mems[t] }, Options{Parallel: 1})
		if err := m.UnmarshalState(b); err != nil {
			return
		}
		if !bytes.Equal(m.MarshalState(), b) {
			t.Fatal("state changed in a round trip")
		}
		m.Run(nil, 1)
	})
}

// TestContextReadsAgree damages a saved state byte by byte, and cuts it
// short, and restores it reading the contexts at once and field by field:
// the same error (its byte offset included), or the same machine.
func TestContextReadsAgree(t *testing.T) {
	r := savedRig(t)
	good := r.m.MarshalState()
	restore := func(b []byte, fields bool) string {
		useFieldReads = fields
		defer func() { useFieldReads = false }()
		m := New(r.p, func(t int) []byte { return r.mems[t] }, Options{Parallel: 1})
		if err := m.UnmarshalState(b); err != nil {
			return err.Error()
		}
		return string(m.MarshalState())
	}
	check := func(what string, b []byte) {
		if a, f := restore(b, false), restore(b, true); a != f {
			t.Fatalf("%s: at once %q, field by field %q", what, a, f)
		}
	}
	check("intact", good)
	step := 1
	if testing.Short() {
		step = 5
	}
	for p := 0; p < len(good); p += step {
		for _, x := range []byte{0xFF, 0x41} {
			b := bytes.Clone(good)
			b[p] ^= x
			check(fmt.Sprintf("byte %d ^ %#x", p, x), b)
		}
		if p%4 == 0 && p+4 <= len(good) {
			// A signalling NaN: not canonical in an accumulator.
			b := bytes.Clone(good)
			binary.LittleEndian.PutUint32(b[p:], 0x7FA00000)
			check(fmt.Sprintf("word at %d a NaN", p), b)
		}
		check(fmt.Sprintf("cut at %d", p), good[:p])
	}
}
