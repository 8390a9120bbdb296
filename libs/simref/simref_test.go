package simref_test

import (
	"encoding/binary"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"ipu.local/libs/arch"
	"ipu.local/libs/isa"
	"ipu.local/libs/sim"
	"ipu.local/libs/simref"
)

// outcome is what a unit test checks after Run.
type outcome struct {
	fault   *sim.Fault // Detail is ignored
	cycles  []int64    // TileCycles of each phase's first tiles (nil: not checked)
	m       map[int]map[uint8]uint32
	a       map[int]map[uint8]uint32
	words   map[int]map[uint32]uint32 // tile -> address -> 32-bit word
	atHost  bool
	mark    int
	phases  int
	noPhase bool
}

type unitCase struct {
	name  string
	tiles map[int]*prog
	setup func(mem [][]byte)
	want  outcome
	check func(t *testing.T, m *simref.Machine) // more checks after Run
}

func runCase(t *testing.T, tc unitCase) {
	t.Helper()
	p := arch.MustLookup("ipu21-tiny")
	mem := memories(p)
	m := simref.New(p, func(i int) []byte { return mem[i] })
	if err := m.Configure(0, sim.RegWatchdog, 20000); err != nil {
		t.Fatal(err)
	}
	for ti, pr := range tc.tiles {
		if err := m.Load(ti, pr.image()); err != nil {
			t.Fatal(err)
		}
	}
	if tc.setup != nil {
		tc.setup(mem)
	}
	res, err := m.Run(newHost(), 0)
	var f *sim.Fault
	if err != nil {
		var ok bool
		if f, ok = err.(*sim.Fault); !ok {
			t.Fatalf("Run: %v", err)
		}
	}
	if diff := cmp.Diff(tc.want.fault, f, cmpopts.IgnoreFields(sim.Fault{}, "Detail")); diff != "" {
		t.Errorf("fault mismatch (-want +got):\n%s", diff)
	}
	if tc.want.cycles != nil {
		var got []int64
		for _, ph := range res.Phases {
			got = append(got, ph.TileCycles[0])
		}
		if diff := cmp.Diff(tc.want.cycles, got); diff != "" {
			t.Errorf("tile 0 cycles per phase mismatch (-want +got):\n%s", diff)
		}
	}
	for ti, regs := range tc.want.m {
		s := m.Snapshot(ti)
		got := map[uint8]uint32{}
		for r := range regs {
			got[r] = s.Ctx[6].M[r]
		}
		if diff := cmp.Diff(regs, got); diff != "" {
			t.Errorf("tile %d supervisor $m mismatch (-want +got):\n%s", ti, diff)
		}
	}
	for ti, regs := range tc.want.a {
		s := m.Snapshot(ti)
		got := map[uint8]uint32{}
		for r := range regs {
			got[r] = s.Ctx[6].A[r]
		}
		if diff := cmp.Diff(regs, got); diff != "" {
			t.Errorf("tile %d supervisor $a mismatch (-want +got):\n%s", ti, diff)
		}
	}
	for ti, words := range tc.want.words {
		got := map[uint32]uint32{}
		for addr := range words {
			got[addr] = binary.LittleEndian.Uint32(mem[ti][addr-p.Memory.Lo:])
		}
		if diff := cmp.Diff(words, got); diff != "" {
			t.Errorf("tile %d memory mismatch (-want +got):\n%s", ti, diff)
		}
	}
	if tc.check != nil {
		tc.check(t, m)
	}
	if f == nil {
		if res.AtHost != tc.want.atHost {
			t.Errorf("AtHost = %v, want %v", res.AtHost, tc.want.atHost)
		}
		if m.Mark() != tc.want.mark {
			t.Errorf("Mark = %d, want %d", m.Mark(), tc.want.mark)
		}
	}
}

func TestUnits(t *testing.T) {
	tests := []unitCase{
		{
			name: "alu timing",
			tiles: map[int]*prog{0: newProg().
				i(isa.LI, m1, 0, 5).
				i(isa.ADDI, m2, m1, -7).
				r(isa.SUB, m3, m1, m2).
				r(isa.SAR, m4, m2, m1).
				i(isa.SHRI, m5, m2, 28).
				i(isa.CMPLTI, m6, m2, -1).
				i(isa.LIH, m7, 0, 0xabcd).
				op(isa.HALT)},
			want: outcome{
				cycles: []int64{7*6 + 1},
				m:      map[int]map[uint8]uint32{0: {m1: 5, m2: 0xfffffffe, m3: 7, m4: 0xffffffff, m5: 0xf, m6: 1, m7: 0xabcd0000, 15: 0}},
			},
		},
		{
			name: "mzero ignores writes",
			tiles: map[int]*prog{0: newProg().
				i(isa.LI, 15, 0, 5).
				i(isa.ADDI, m1, 15, 1).
				op(isa.HALT)},
			want: outcome{m: map[int]map[uint8]uint32{0: {m1: 1, 15: 0}}},
		},
		{
			name: "worker run and join",
			tiles: map[int]*prog{0: newProg().
				li(m1, codeBase+24).           // 0, 6
				i(isa.LI, m2, 0, 9).           // 12
				add(isa.RUN, 0, m1, m2, 0, 0). // 18: worker 0 may issue from 24
				op(isa.JOIN).                  // 24 is slot 0: supervisor tries at 25..29, then 31..., until the exit
				op(isa.HALT).
				label("worker").
				i(isa.ADDI, m3, m0, 1). // 24
				op(isa.EXIT)},          // 30: supervisor joins at 31, halts at 37
			want: outcome{cycles: []int64{38}},
		},
		{
			name: "rpt",
			tiles: map[int]*prog{0: newProg().
				i(isa.LI, m1, 0, 3).
				i(isa.RPT, 0, m1, 2).
				i(isa.ADDI, m2, m2, 1).
				i(isa.ADDI, m3, m3, 2).
				i(isa.RPTI, 0, 0, 0<<8|1).
				i(isa.ADDI, m4, m4, 1).
				op(isa.HALT)},
			want: outcome{
				cycles: []int64{(2+6+1)*6 + 1},
				m:      map[int]map[uint8]uint32{0: {m2: 3, m3: 6, m4: 0}},
			},
		},
		{
			name: "branch in rpt body",
			tiles: map[int]*prog{0: newProg().
				i(isa.RPTI, 0, 0, 2<<8|1).
				label("l").
				br(isa.BR, 0, 0, "l").
				op(isa.HALT)},
			want: outcome{fault: &sim.Fault{Kind: sim.FaultInvalid, Tile: 0, Context: 6, PC: codeBase + 4, Cycle: 6}},
		},
		{
			name: "loop with brnz",
			tiles: map[int]*prog{0: newProg().
				i(isa.LI, m1, 0, 4).
				label("top").
				i(isa.ADDI, m2, m2, 3).
				i(isa.ADDI, m1, m1, -1).
				br(isa.BRNZ, 0, m1, "top").
				op(isa.HALT)},
			want: outcome{m: map[int]map[uint8]uint32{0: {m1: 0, m2: 12}}},
		},
		{
			name: "load store",
			tiles: map[int]*prog{0: newProg().
				li(m1, dataBase).
				i(isa.LI, m2, 0, 0x1234).
				i(isa.STM, m2, m1, 8).
				i(isa.LDMP, m3, m1, 8).
				i(isa.LDM, m4, m1, 0).
				i(isa.LD128, a4, m1, -8).
				op(isa.HALT)},
			setup: func(mem [][]byte) {
				binary.LittleEndian.PutUint32(mem[0][dataBase-0x4C000:], 0x55)
			},
			want: outcome{
				m:     map[int]map[uint8]uint32{0: {m1: dataBase + 8, m3: 0x55, m4: 0x1234}},
				a:     map[int]map[uint8]uint32{0: {a4: 0x55, a6: 0x1234}},
				words: map[int]map[uint32]uint32{0: {dataBase + 8: 0x1234}},
			},
		},
		{
			name: "misaligned load",
			tiles: map[int]*prog{0: newProg().
				li(m1, dataBase+2).
				i(isa.LDM, m3, m1, 0).
				op(isa.HALT)},
			want: outcome{fault: &sim.Fault{Kind: sim.FaultAlign, Tile: 0, Context: 6, PC: codeBase + 8, Cycle: 12}},
		},
		{
			name: "ld128 outside interleaved",
			tiles: map[int]*prog{0: newProg().
				li(m1, 0x70000).
				i(isa.LD128, a0, m1, 0).
				op(isa.HALT)},
			want: outcome{fault: &sim.Fault{Kind: sim.FaultAccess, Tile: 0, Context: 6, PC: codeBase + 8, Cycle: 12}},
		},
		{
			name: "store to code",
			tiles: map[int]*prog{0: newProg().
				li(m1, codeBase).
				i(isa.STM, m1, m1, 4).
				op(isa.HALT)},
			want: outcome{fault: &sim.Fault{Kind: sim.FaultCodeWrite, Tile: 0, Context: 6, PC: codeBase + 8, Cycle: 12}},
		},
		{
			name: "run off the code",
			tiles: map[int]*prog{0: newProg().
				op(isa.NOP)},
			want: outcome{fault: &sim.Fault{Kind: sim.FaultFetch, Tile: 0, Context: 6, PC: codeBase + 4, Cycle: 6}},
		},
		{
			name: "worker-only instruction on supervisor",
			tiles: map[int]*prog{0: newProg().
				op(isa.AMPCLR)},
			want: outcome{fault: &sim.Fault{Kind: sim.FaultInvalid, Tile: 0, Context: 6, PC: codeBase, Cycle: 0}},
		},
		{
			name: "put read-only",
			tiles: map[int]*prog{0: newProg().
				add(isa.PUT, 0, m1, 0, 0, isa.CSRTileID)},
			want: outcome{fault: &sim.Fault{Kind: sim.FaultInvalid, Tile: 0, Context: 6, PC: codeBase, Cycle: 0}},
		},
		{
			name: "delay",
			tiles: map[int]*prog{0: newProg().
				i(isa.DELAY, 0, 0, 5).                    // 0
				add(isa.GET, m1, 0, 0, 0, isa.CSRCycles). // 11
				op(isa.HALT)},                            // 17
			want: outcome{cycles: []int64{18}, m: map[int]map[uint8]uint32{0: {m1: 11}}},
		},
		{
			name: "supersteps",
			tiles: map[int]*prog{
				0: newProg().op(isa.SYNC).add(isa.GET, m1, 0, 0, 0, isa.CSRPhase).op(isa.SYNC).op(isa.HALT),
				1: newProg().op(isa.NOP).op(isa.SYNC).op(isa.SYNC).op(isa.HALT),
			},
			want: outcome{cycles: []int64{1, 7, 1}, mark: 2, m: map[int]map[uint8]uint32{0: {m1: 1}}},
		},
		{
			name: "sync mismatch",
			tiles: map[int]*prog{
				0: newProg().op(isa.SYNC),
				1: newProg().i(isa.HSYNC, m1, 0, 0),
			},
			want: outcome{fault: &sim.Fault{Kind: sim.FaultSync, Tile: 1, Context: 6, PC: codeBase, Cycle: 0}},
		},
		{
			name: "hsync",
			tiles: map[int]*prog{
				0: newProg().i(isa.HSYNC, m1, 0, 0).op(isa.HALT),
			},
			want: outcome{atHost: true, mark: 1},
		},
		{
			name: "exchange",
			tiles: map[int]*prog{
				// Tile 0 sends 3 words at cycle 30 to tiles 1 and 2; they
				// arrive at 40, 41, 42 (latency 10 within a column).
				0: newProg().
					li(m1, dataBase).          // 0, 6
					i(isa.LI, m2, 0, 3).       // 12
					li(m3, 1|2<<16).           // 18, 24
					r(isa.SEND, m3, m1, m2).   // 30
					op(isa.SYNC).op(isa.HALT), // 36
				1: recvProg(16), // recv at 40
				2: recvProg(16),
			},
			setup: fillSend,
			want: outcome{
				mark:  1,
				words: map[int]map[uint32]uint32{1: {dataBase + 0x100: 100, dataBase + 0x104: 101, dataBase + 0x108: 102}, 2: {dataBase + 0x108: 102}},
			},
		},
		{
			name: "exchange early recv",
			tiles: map[int]*prog{
				0: newProg().li(m1, dataBase).i(isa.LI, m2, 0, 3).li(m3, 1|2<<16).r(isa.SEND, m3, m1, m2).op(isa.SYNC).op(isa.HALT),
				1: recvProg(9), // recv at 33: nothing arrives before 40
				2: recvProg(16),
			},
			setup: fillSend,
			want:  outcome{fault: &sim.Fault{Kind: sim.FaultSilent, Tile: 1, Context: 6, PC: codeBase + 16, Cycle: 33}},
		},
		{
			name: "exchange late recv",
			tiles: map[int]*prog{
				0: newProg().li(m1, dataBase).i(isa.LI, m2, 0, 3).li(m3, 1|2<<16).r(isa.SEND, m3, m1, m2).op(isa.SYNC).op(isa.HALT),
				1: recvProg(16),
				2: recvProg(17), // recv at 41: the first word finds nobody
			},
			setup: fillSend,
			// NoListener names the sender and its send.
			want: outcome{fault: &sim.Fault{Kind: sim.FaultNoListener, Tile: 0, Context: 6, PC: codeBase + 20, Cycle: 40}},
		},
		{
			name: "ldm post-increment into its base",
			tiles: map[int]*prog{0: newProg().
				li(m1, dataBase).
				i(isa.LDMP, m1, m1, 8).
				op(isa.HALT)},
			want: outcome{m: map[int]map[uint8]uint32{0: {m1: dataBase + 8}}},
		},
		{
			name: "put keeps the defined fp8 bits",
			tiles: map[int]*prog{0: newProg().
				li(m1, 0xffffffff).
				add(isa.PUT, 0, m1, 0, 0, isa.CSRFP8).
				add(isa.GET, m2, 0, 0, 0, isa.CSRFP8).
				op(isa.HALT)},
			want: outcome{m: map[int]map[uint8]uint32{0: {m2: 0x1ffff}}},
		},
		{
			name: "halt leaves workers frozen",
			tiles: map[int]*prog{0: newProg().
				li(m1, codeBase+4*4).
				r(isa.RUN, 0, m1, m2). // 12: the worker issues at 18, 24, ...
				op(isa.HALT).          // 19
				label("w").
				br(isa.BR, 0, 0, "w")},
			want: outcome{cycles: []int64{20}},
			check: func(t *testing.T, m *simref.Machine) {
				s := m.Snapshot(0)
				if !s.Halted || !s.Ctx[0].Running || s.Ctx[6].Running {
					t.Errorf("halted %v, worker 0 running %v, supervisor running %v; want true, true, false", s.Halted, s.Ctx[0].Running, s.Ctx[6].Running)
				}
			},
		},
		{
			name: "watchdog",
			tiles: map[int]*prog{0: newProg().
				op(isa.NOP).
				label("l").
				br(isa.BR, 0, 0, "l")},
			want: outcome{fault: &sim.Fault{Kind: sim.FaultWatchdog, Tile: 0, Context: -1, PC: codeBase + 4, Cycle: 20000}},
		},
		{
			name: "words arrive after the receiver's barrier",
			tiles: map[int]*prog{
				0: newProg().li(m1, dataBase).i(isa.LI, m2, 0, 3).li(m3, 1|2<<16).r(isa.SEND, m3, m1, m2).op(isa.SYNC).op(isa.HALT),
				1: newProg().
					li(m1, dataBase+0x100).
					i(isa.LI, m2, 0, 3).
					i(isa.DELAY, 0, 0, 16).
					r(isa.RECV, 15, m1, m2). // 40
					op(isa.SYNC).            // 46: the words came at 40, 41, 42
					op(isa.HALT),
				2: newProg().
					li(m1, dataBase+0x100).
					i(isa.LI, m2, 0, 3).
					i(isa.DELAY, 0, 0, 16).
					r(isa.RECV, 15, m1, m2).
					op(isa.SYNC).
					op(isa.HALT),
			},
			setup: fillSend,
			want:  outcome{mark: 1, words: map[int]map[uint32]uint32{2: {dataBase + 0x108: 102}}},
		},
		{
			name: "bus conflict",
			tiles: map[int]*prog{
				// Tiles 0 and 1 share a bus; two send2 at cycle 18 need 4
				// slots: the later in tile order faults.
				0: newProg().li(m1, dataBase).i(isa.LI, m2, 0, 4).i(isa.LI, m3, 0, 2).r(isa.SEND2, m3, m1, m2).op(isa.SYNC),
				1: newProg().li(m1, dataBase).i(isa.LI, m2, 0, 4).i(isa.LI, m3, 0, 3).r(isa.SEND2, m3, m1, m2).op(isa.SYNC),
			},
			want: outcome{fault: &sim.Fault{Kind: sim.FaultBus, Tile: 1, Context: 6, PC: codeBase + 16, Cycle: 24}},
		},
		{
			name: "two senders",
			tiles: map[int]*prog{
				0: newProg().li(m1, dataBase).i(isa.LI, m2, 0, 4).i(isa.LI, m3, 0, 1).r(isa.SEND, m3, m1, m2).op(isa.SYNC),
				2: newProg().li(m1, dataBase).i(isa.LI, m2, 0, 4).i(isa.LI, m3, 0, 1).r(isa.SEND, m3, m1, m2).op(isa.SYNC),
				// The words of both arrive from cycle 34.
				1: newProg().li(m1, dataBase).i(isa.LI, m2, 0, 4).i(isa.DELAY, 0, 0, 10).r(isa.RECV, 15, m1, m2).op(isa.SYNC),
			},
			want: outcome{fault: &sim.Fault{Kind: sim.FaultTwoSenders, Tile: 1, Context: 6, PC: codeBase + 16, Cycle: 34}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { runCase(t, tc) })
	}
}

// recvProg listens to tile 0 for 3 words at dataBase+0x100, issuing the
// recv in cycle 24 + delay.
func recvProg(delay int32) *prog {
	return newProg().
		li(m1, dataBase+0x100).    // 0, 6
		i(isa.LI, m2, 0, 3).       // 12
		i(isa.DELAY, 0, 0, delay). // 18
		r(isa.RECV, 15, m1, m2).   // 24 + delay; $m15 = 0 is tile 0
		op(isa.SYNC).
		op(isa.HALT)
}

func fillSend(mem [][]byte) {
	for k := uint32(0); k < 3; k++ {
		binary.LittleEndian.PutUint32(mem[0][dataBase-0x4C000+4*k:], 100+k)
	}
}
