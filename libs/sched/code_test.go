package sched

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"ipu.local/libs/arch"
	"ipu.local/libs/asm"
	"ipu.local/libs/isa"
)

// listing renders a plan's code, one tile after the other, with each
// instruction's issue cycle as Validate's replay counts it.
func listing(pl *Plan) string {
	var b strings.Builder
	for _, tc := range pl.Tiles {
		fmt.Fprintf(&b, "tile %d, %d cycles\n", tc.Tile, tc.Cycles)
		for i, in := range tc.Code {
			fmt.Fprintf(&b, "\t%s\n", asm.FormatInst(codeBase+4*uint32(i), in))
		}
	}
	return b.String()
}

// TestCode pins the code of small phases: register reuse ($mzero for 0,
// one register for equal values), delays to the arrival cycle, a send
// stalled by its busy port instead of a delay, li+lih for a wide
// multicast, send2 for an even transfer.
func TestCode(t *testing.T) {
	tests := []struct {
		name  string
		arch  string
		phase []Transfer
		opt   Options
		show  int // tiles listed (0: all)
		want  string
	}{
		{"one word", "ipu21-tiny", []Transfer{{Src: 1, Dst: 2, Words: 1, SrcAddr: srcBase, DstAddr: dstBase}}, Options{}, 0, `
tile 1, 25 cycles
	li $m0, 2
	li $m1, 0x60000
	li $m2, 1
	send $m0, $m1, $m2
	sync
tile 2, 35 cycles
	li $m0, 1
	li $m1, 0x80000
	delay 10
	recv $m0, $m1, $m0
	sync
`},
		// Send 0 issues at 18 and holds the port until 34; send 1 needs
		// one load and is reached at 30, so it stalls to 34. Tiles sync
		// after their last word: tile 0 at 50 when its port frees.
		{"stalled send", "ipu21-tiny", []Transfer{
			{Src: 0, Dst: 1, Words: 16, SrcAddr: srcBase, DstAddr: dstBase},
			{Src: 0, Dst: 2, Words: 16, SrcAddr: srcBase, DstAddr: dstBase},
		}, Options{NoSend2: true}, 0, `
tile 0, 51 cycles
	li $m0, 1
	li $m1, 0x60000
	li $m2, 16
	send $m0, $m1, $m2
	li $m3, 2
	send $m3, $m1, $m2
	delay 4
	sync
tile 1, 45 cycles
	li $m0, 0x80000
	li $m1, 16
	delay 10
	recv $mzero, $m0, $m1
	delay 4
	sync
tile 2, 61 cycles
	li $m0, 0x80000
	li $m1, 16
	delay 26
	recv $mzero, $m0, $m1
	delay 4
	sync
`},
		// 20<<16 | 1 takes li and lih; the 2 cycles of a send2 of 4 words
		// end before the sync can issue. Tiles 2..20 run tile 1's code.
		{"wide multicast with send2", "ipu21-64", []Transfer{{Src: 0, Dst: 1, DstN: 20, Words: 4, SrcAddr: srcBase, DstAddr: dstBase}}, Options{}, 2, `
tile 0, 31 cycles
	li $m0, 1
	lih $m0, 20
	li $m1, 0x60000
	li $m2, 4
	send2 $m0, $m1, $m2
	sync
tile 1, 41 cycles
	li $m0, 0x80000
	li $m1, 4
	delay 16
	recv $mzero, $m0, $m1
	sync
`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := arch.MustLookup(tt.arch)
			pl, err := Schedule(p, tt.phase, tt.opt)
			if err != nil {
				t.Fatal(err)
			}
			if err := Validate(p, tt.phase, pl); err != nil {
				t.Fatal(err)
			}
			shown := pl.Tiles
			if tt.show > 0 {
				shown = shown[:tt.show]
			}
			got := listing(&Plan{Tiles: shown})
			if diff := cmp.Diff(strings.TrimPrefix(tt.want, "\n"), got); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestNextBus checks the supertile bus arbitration: a plain send fits
// beside the partner's plain send (two slots), a send2 waits for it to end,
// and anything waits for the partner's send2.
func TestNextBus(t *testing.T) {
	p := arch.MustLookup("ipu21-tiny")
	s := newScheduler(p, nil, Options{}, strategies[0])
	s.tiles[1] = newTile(1, nil)
	s.tiles[1].sends = []busUse{{20, 50, 1}, {60, 70, 2}}
	tests := []struct {
		t, dur int64
		slots  int
		want   int64
	}{
		{10, 16, 1, 10},
		{10, 16, 2, 70},
		{10, 10, 2, 10},
		{45, 10, 2, 50},
		{45, 16, 2, 70},
		{55, 10, 1, 70},
		{55, 5, 1, 55},
		{50, 10, 2, 50},
		{50, 11, 2, 70},
	}
	for _, tt := range tests {
		if got := s.nextBus(0, tt.t, tt.dur, tt.slots); got != tt.want {
			t.Errorf("nextBus(from %d, %d cycles, %d slots) = %d, want %d", tt.t, tt.dur, tt.slots, got, tt.want)
		}
	}
}

// TestValidateRejects tampers with a good plan in ways the simulator
// would not notice or would fault on, and expects Validate to say what is
// wrong.
func TestValidateRejects(t *testing.T) {
	p := arch.MustLookup("ipu21-tiny")
	phase := []Transfer{
		{Src: 0, Dst: 1, Words: 16, SrcAddr: srcBase, DstAddr: dstBase},
		{Src: 0, Dst: 2, Words: 16, SrcAddr: srcBase, DstAddr: dstBase},
	}
	good, err := Schedule(p, phase, Options{NoSend2: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := Validate(p, phase, good); err != nil {
		t.Fatal(err)
	}
	// Tile 0: li, li, li, send, li, send, delay, sync; tile 1: li, li,
	// delay, recv, delay, sync.
	tests := []struct {
		name   string
		tamper func(pl *Plan)
		want   string
	}{
		{"makespan", func(pl *Plan) { pl.Makespan++ }, "replay takes 61 cycles, plan says 62"},
		{"tile cycles", func(pl *Plan) { pl.Tiles[1].Cycles-- }, "tile 1: replay takes 45 cycles, plan says 44"},
		{"event", func(pl *Plan) { pl.Events[1].Send++ }, "transfer 1: no send on tile 0 at cycle 35"},
		{"arrival", func(pl *Plan) { pl.Events[0].Arrive[0]-- }, "transfer 0: arrival at tile 1 at cycle 27, latency says 28"},
		{"missing tile", func(pl *Plan) { pl.Tiles = pl.Tiles[:2] }, "tile 2: words arrive at a tile with no code"},
		{"no sync", func(pl *Plan) { c := &pl.Tiles[1].Code; *c = (*c)[:len(*c)-1] }, "tile 1 code does not end with sync"},
		{"early sync", func(pl *Plan) { pl.Tiles[1].Code[4].Imm = 0 }, "tile 1: syncs at cycle 40 before its last word arrives at 43"},
		{"port still busy", func(pl *Plan) { pl.Tiles[0].Code[6].Imm = 0 }, "tile 0: syncs at cycle 46 before its port frees at 50"},
		{"not exchange code", func(pl *Plan) { pl.Tiles[2].Code[0] = isa.Inst{Op: isa.ADD, D: 1, A: 1, B: 1} }, "tile 2 pc 0: add is not exchange code"},
		{"huge recv", func(pl *Plan) {
			pl.Tiles[1].Code[1] = isa.Inst{Op: isa.LIH, D: 1, Imm: 0x4000}
		}, "tile 1 pc 3: recv of 1073741824 words"},
		{"window cut", func(pl *Plan) { pl.Tiles[1].Code[1].Imm = 20 }, "tile 1 pc 3: listening to tile 0, no word at cycle 44 (16 of 20 arrived)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pl := clonePlan(good)
			pl.Events = append([]Event(nil), good.Events...)
			for i := range pl.Events {
				pl.Events[i].Arrive = append([]int64(nil), good.Events[i].Arrive...)
			}
			tt.tamper(pl)
			err := Validate(p, phase, pl)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want %q", err, tt.want)
			}
		})
	}
}
