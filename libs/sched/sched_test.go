package sched

import (
	"errors"
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"ipu.local/libs/arch"
	"ipu.local/libs/isa"
	"ipu.local/libs/sim"
)

type phaseCase struct {
	name  string
	arch  string
	phase []Transfer
	opt   Options
}

func phaseCases() []phaseCase {
	r := rand.New(rand.NewSource(1))
	var cs []phaseCase
	add := func(name, a string, ph []Transfer, opt Options) {
		cs = append(cs, phaseCase{name, a, ph, opt})
	}
	add("one word", "ipu21-tiny", []Transfer{{Src: 1, Dst: 2, Words: 1, SrcAddr: srcBase, DstAddr: dstBase}}, Options{})
	add("pairs 1:1", "ipu21-64", pairs(64, 8), Options{})
	add("pairs 1:1 no send2", "ipu21-64", pairs(64, 8), Options{NoSend2: true})
	add("gather 63 to 0 (dot64)", "ipu21-64", gather(64, 1), Options{})
	add("gather 63 to 0, 16 words", "ipu21-64", gather(64, 16), Options{})
	add("gather 63 to 0, 40 words", "ipu21-64", gather(64, 40), Options{})
	add("gather 63 to 0, 40 words, no send2", "ipu21-64", gather(64, 40), Options{NoSend2: true})
	add("broadcast 0 to 1..63", "ipu21-64", []Transfer{{Src: 0, Dst: 1, DstN: 63, Words: 32, SrcAddr: srcBase, DstAddr: dstBase}}, Options{})
	add("broadcast 17 to 0..16 and 18..63", "ipu21-64", []Transfer{
		{Src: 17, Dst: 0, DstN: 17, Words: 33, SrcAddr: srcBase, DstAddr: dstBase},
		{Src: 17, Dst: 18, DstN: 46, Words: 33, SrcAddr: srcBase, DstAddr: dstBase},
	}, Options{})
	add("strided broadcast 0 to every 7th tile", "ipu21-64", []Transfer{{Src: 0, Dst: 3, DstN: 9, Stride: 7, Words: 32, SrcAddr: srcBase, DstAddr: dstBase}}, Options{})
	add("grid 6x6: rows consecutive, columns strided", "ipu21-64", grid(6, 6, 16), Options{})
	add("grid 4x12: rows consecutive, columns strided, 5 words", "ipu21-64", grid(4, 12, 5), Options{})
	add("all-to-all 16, 1..64 words", "ipu21-64", allToAll(r, 16, 64), Options{})
	add("all-to-all 16, 1..64 words, no send2", "ipu21-64", allToAll(r, 16, 64), Options{NoSend2: true})
	add("all-to-all 16, 1..4 words", "ipu21-64", allToAll(r, 16, 4), Options{})
	add("all-to-all 16, early sync", "ipu21-64", allToAll(r, 16, 64), Options{EarlySync: true})
	add("all-to-all 8, 3 registers", "ipu21-64", allToAll(r, 8, 16), Options{Regs: 0x0007})
	for i := 0; i < 4; i++ {
		add("random 64 tiles "+string(rune('a'+i)), "ipu21-64", random(r, 64, 200, 48, 6), Options{})
	}
	add("random 4 tiles", "ipu21-tiny", random(r, 4, 12, 20, 3), Options{})
	// Supertile bus: tiles 2i and 2i+1 both send long even streams.
	var bus []Transfer
	bb := bump{}
	for i := 0; i < 8; i++ {
		for k := 0; k < 3; k++ {
			d := 16 + (i*3+k)%48
			bus = append(bus, Transfer{Src: i, Dst: d, Words: 64, SrcAddr: srcBase, DstAddr: bb.take(d, 1, 64)})
		}
	}
	add("supertile bus contention", "ipu21-64", bus, Options{})
	add("supertile pair, one sender", "ipu21-64", []Transfer{{Src: 4, Dst: 9, Words: 256, SrcAddr: srcBase, DstAddr: dstBase}}, Options{})
	// Cross-column latencies on the whole chip (only these tiles loaded).
	add("cross-column", "ipu21", []Transfer{
		{Src: 0, Dst: 1471, Words: 16, SrcAddr: srcBase, DstAddr: dstBase},
		{Src: 1471, Dst: 0, Words: 16, SrcAddr: srcBase, DstAddr: dstBase},
		{Src: 700, Dst: 1, Words: 9, SrcAddr: srcBase, DstAddr: dstBase},
		{Src: 46, Dst: 1000, Words: 5, SrcAddr: srcBase, DstAddr: dstBase},
		{Src: 1000, Dst: 1, Words: 7, SrcAddr: srcBase, DstAddr: dstBase + 0x100},
		{Src: 1400, Dst: 40, DstN: 60, Words: 12, SrcAddr: srcBase, DstAddr: dstBase + 0x200},
		{Src: 93, Dst: 1470, Words: 20, SrcAddr: srcBase, DstAddr: dstBase},
	}, Options{})
	var far []Transfer
	fb := bump{}
	for i := 0; i < 32; i++ {
		s, d := i*46, (31-i)*46+1
		far = append(far, Transfer{Src: s, Dst: d, Words: 3 + i, SrcAddr: srcBase, DstAddr: fb.take(d, 1, 3+i)})
		far = append(far, Transfer{Src: s, Dst: 1, Words: 2, SrcAddr: srcBase, DstAddr: fb.take(1, 1, 2)})
	}
	add("cross-column gather and swaps", "ipu21", far, Options{})
	return cs
}

// TestScheduleOnSim schedules every case, validates it, runs it on the
// simulator and checks that every destination got its words and that the
// superstep took exactly the planned cycles.
func TestScheduleOnSim(t *testing.T) {
	for _, c := range phaseCases() {
		t.Run(c.name, func(t *testing.T) {
			p := arch.MustLookup(c.arch)
			pl, err := Schedule(p, c.phase, c.opt)
			if err != nil {
				t.Fatal(err)
			}
			if err := Validate(p, c.phase, pl); err != nil {
				t.Fatal(err)
			}
			if pl.LowerBound > pl.Makespan {
				t.Fatalf("lower bound %d above makespan %d", pl.LowerBound, pl.Makespan)
			}
			r, err := runOnSim(t, p, c.phase, pl, nil)
			if err != nil {
				t.Fatalf("simulator: %v", err)
			}
			if err := checkDelivered(p, c.phase, r); err != nil {
				t.Fatal(err)
			}
			st := r.res.Phases[0]
			if st.Cycles != pl.Makespan {
				t.Errorf("simulated superstep %d cycles, plan says %d", st.Cycles, pl.Makespan)
			}
			for _, tc := range pl.Tiles {
				if st.TileCycles[tc.Tile] != tc.Cycles {
					t.Errorf("tile %d: simulated %d cycles, plan says %d", tc.Tile, st.TileCycles[tc.Tile], tc.Cycles)
				}
			}
			pairs := 0
			for _, ev := range pl.Events {
				if ev.Pair {
					pairs++
				}
			}
			t.Logf("%d transfers, makespan %d, lower bound %d, ratio %.3f, send2 %d", len(c.phase), pl.Makespan, pl.LowerBound,
				float64(pl.Makespan)/float64(pl.LowerBound), pairs)
		})
	}
}

// TestOffByOne moves one recv or send of a working plan by one cycle,
// earlier or later: the simulator must report the exchange fault, and
// Validate must reject the code.
func TestOffByOne(t *testing.T) {
	p := arch.MustLookup("ipu21-64")
	phase := allToAll(rand.New(rand.NewSource(7)), 8, 24)
	pl, err := Schedule(p, phase, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Candidate edits: a delay whose next instruction after loads is the
	// event of the given op.
	type spot struct{ tile, pc int }
	find := func(op isa.Op) []spot {
		var out []spot
		for _, tc := range pl.Tiles {
			for pc, in := range tc.Code {
				if in.Op != isa.DELAY {
					continue
				}
				k := pc + 1
				for k < len(tc.Code) && (tc.Code[k].Op == isa.LI || tc.Code[k].Op == isa.LIH) {
					k++
				}
				if k < len(tc.Code) && tc.Code[k].Op == op {
					out = append(out, spot{tc.Tile, pc})
				}
			}
		}
		return out
	}
	tests := []struct {
		name  string
		op    isa.Op
		delta int32
		kinds []sim.FaultKind
	}{
		{"recv one cycle late", isa.RECV, 1, []sim.FaultKind{sim.FaultNoListener, sim.FaultSilent}},
		{"recv one cycle early", isa.RECV, -1, []sim.FaultKind{sim.FaultSilent, sim.FaultNoListener}},
		{"send one cycle late", isa.SEND, 1, []sim.FaultKind{sim.FaultSilent, sim.FaultNoListener, sim.FaultTwoSenders}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spots := find(tt.op)
			if tt.op == isa.SEND {
				spots = append(spots, find(isa.SEND2)...)
			}
			tried := 0
			for _, s := range spots {
				if tried == 3 {
					break
				}
				if tt.delta < 0 && pl.Tile(s.tile).Code[s.pc].Imm == 0 {
					continue
				}
				tried++
				edit := func(tile int, code []isa.Inst) []isa.Inst {
					if tile == s.tile {
						code[s.pc].Imm += tt.delta
					}
					return code
				}
				_, err := runOnSim(t, p, phase, pl, edit)
				var f *sim.Fault
				if !errors.As(err, &f) {
					t.Fatalf("tile %d pc %d %+d: want an exchange fault, got %v", s.tile, s.pc, tt.delta, err)
				}
				ok := false
				for _, k := range tt.kinds {
					ok = ok || f.Kind == k
				}
				if !ok {
					t.Errorf("tile %d pc %d %+d: fault %v, want one of %v", s.tile, s.pc, tt.delta, f, tt.kinds)
				}
				bad := clonePlan(pl)
				bad.Tile(s.tile).Code = edit(s.tile, bad.Tile(s.tile).Code)
				if err := Validate(p, phase, bad); err == nil {
					t.Errorf("tile %d pc %d %+d: Validate accepts the shifted code", s.tile, s.pc, tt.delta)
				}
			}
			if tried == 0 {
				t.Fatal("no delay to perturb")
			}
		})
	}
}

func clonePlan(pl *Plan) *Plan {
	cp := *pl
	cp.Tiles = append([]TileCode(nil), pl.Tiles...)
	for i := range cp.Tiles {
		cp.Tiles[i].Code = append([]isa.Inst(nil), pl.Tiles[i].Code...)
	}
	return &cp
}

func TestScheduleErrors(t *testing.T) {
	p := arch.MustLookup("ipu21-tiny")
	ok := Transfer{Src: 0, Dst: 1, Words: 4, SrcAddr: srcBase, DstAddr: dstBase}
	with := func(f func(*Transfer)) []Transfer {
		x := ok
		f(&x)
		return []Transfer{x}
	}
	tests := []struct {
		name  string
		phase []Transfer
		opt   Options
		want  string
	}{
		{"source tile", with(func(x *Transfer) { x.Src = 4 }), Options{}, "transfer 0: source tile 4 outside the 4 tiles"},
		{"destination range", with(func(x *Transfer) { x.DstN = 4 }), Options{}, "transfer 0: destination tiles [1, 5) outside"},
		{"negative count", with(func(x *Transfer) { x.DstN = -1 }), Options{}, "transfer 0: -1 destination tiles"},
		{"to itself", with(func(x *Transfer) { x.Dst, x.DstN = 0, 2 }), Options{}, "transfer 0: tile 0 sends to itself"},
		{"to itself, strided", with(func(x *Transfer) { x.Src, x.Dst, x.DstN, x.Stride = 3, 1, 2, 2 }), Options{}, "transfer 0: tile 3 sends to itself"},
		{"strided range", with(func(x *Transfer) { x.DstN, x.Stride = 2, 3 }), Options{}, "transfer 0: destination tiles 1 to 4 every 3 outside"},
		{"negative stride", with(func(x *Transfer) { x.Stride = -1 }), Options{}, "transfer 0: destination stride -1"},
		{"no words", with(func(x *Transfer) { x.Words = 0 }), Options{}, "transfer 0: 0 words"},
		{"misaligned", with(func(x *Transfer) { x.SrcAddr++ }), Options{}, "transfer 0: source address 0x60001 not 4-byte aligned"},
		{"outside memory", with(func(x *Transfer) { x.DstAddr = 0xE7FFC; x.Words = 2 }), Options{}, "transfer 0: destination [0xe7ffc, 0xe8004) outside tile memory"},
		{"overlap", []Transfer{ok, {Src: 2, Dst: 1, Words: 1, SrcAddr: srcBase, DstAddr: dstBase + 12}}, Options{}, "transfers 0 and 1 both write tile 1 at 0x8000c"},
		{"two registers", []Transfer{ok}, Options{Regs: 0x0005}, "register set 0x5 has 2 registers, need 3"},
		{"mzero", []Transfer{ok}, Options{Regs: 0x8007}, "includes $m15"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Schedule(p, tt.phase, tt.opt)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want %q", err, tt.want)
			}
			if _, err := Bound(p, tt.phase, tt.opt); err == nil {
				t.Fatal("Bound accepts the phase")
			}
		})
	}
}

// TestMayAlias: made-up addresses may make two transfers write the same
// bytes (a cost model's before placement): with MayAlias, Schedule and
// Bound accept them; the other checks stay.
func TestMayAlias(t *testing.T) {
	p := arch.MustLookup("ipu21-tiny")
	ok := Transfer{Src: 0, Dst: 1, Words: 4, SrcAddr: srcBase, DstAddr: dstBase}
	phase := []Transfer{ok, {Src: 2, Dst: 1, Words: 1, SrcAddr: srcBase, DstAddr: dstBase + 12}}
	if _, err := Schedule(p, phase, Options{MayAlias: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := Bound(p, phase, Options{MayAlias: true}); err != nil {
		t.Fatal(err)
	}
	bad := ok
	bad.SrcAddr++
	if _, err := Bound(p, []Transfer{bad}, Options{MayAlias: true}); err == nil {
		t.Fatal("MayAlias accepts a misaligned address")
	}
}

func TestEmptyPhase(t *testing.T) {
	pl, err := Schedule(arch.MustLookup("ipu21-tiny"), nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&Plan{Events: []Event{}}, pl); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}

// TestDeterministic schedules one phase twice.
func TestDeterministic(t *testing.T) {
	p := arch.MustLookup("ipu21")
	ph := random(rand.New(rand.NewSource(3)), p.Tiles, 800, 64, 16)
	a, err := Schedule(p, ph, Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Schedule(p, ph, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}

// TestLargePhase schedules a 1472-tile phase of about 3000 transfers,
// validates it (too large to simulate with every tile's memory) and
// reports the time it took and the ratio.
func TestLargePhase(t *testing.T) {
	p := arch.MustLookup("ipu21")
	for _, c := range []struct {
		name    string
		maxCast int
	}{{"unicast", 1}, {"with multicast", 16}} {
		t.Run(c.name, func(t *testing.T) {
			ph := random(rand.New(rand.NewSource(11)), p.Tiles, 3000, 64, c.maxCast)
			start := time.Now()
			pl, err := Schedule(p, ph, Options{})
			el := time.Since(start)
			if err != nil {
				t.Fatal(err)
			}
			if err := Validate(p, ph, pl); err != nil {
				t.Fatal(err)
			}
			t.Logf("%d transfers on %d tiles: scheduled in %v, makespan %d, lower bound %d, ratio %.3f",
				len(ph), len(pl.Tiles), el, pl.Makespan, pl.LowerBound, float64(pl.Makespan)/float64(pl.LowerBound))
		})
	}
}

// TestRandomValidate schedules many small random phases under random
// options and validates each.
func TestRandomValidate(t *testing.T) {
	r := rand.New(rand.NewSource(5))
	n := 300
	if testing.Short() {
		n = 50
	}
	worst := 0.0
	for i := 0; i < n; i++ {
		p := arch.MustLookup([]string{"ipu21-tiny", "ipu21-64", "ipu21"}[r.Intn(3)])
		tiles := min(p.Tiles, 4+r.Intn(60))
		ph := random(r, tiles, 1+r.Intn(40), 1+r.Intn(40), 1+r.Intn(6))
		opt := Options{NoSend2: r.Intn(3) == 0, EarlySync: r.Intn(3) == 0}
		if r.Intn(4) == 0 {
			opt.Regs = uint16(r.Intn(0x8000)) | 0x0007
		}
		pl, err := Schedule(p, ph, opt)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if err := Validate(p, ph, pl); err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if pl.LowerBound > pl.Makespan {
			t.Fatalf("case %d: lower bound %d above makespan %d", i, pl.LowerBound, pl.Makespan)
		}
		worst = max(worst, float64(pl.Makespan)/float64(pl.LowerBound))
		if i%25 == 0 {
			res, err := runOnSim(t, p, ph, pl, nil)
			if err != nil {
				t.Fatalf("case %d: simulator: %v", i, err)
			}
			if err := checkDelivered(p, ph, res); err != nil {
				t.Fatalf("case %d: %v", i, err)
			}
			if res.res.Phases[0].Cycles != pl.Makespan {
				t.Fatalf("case %d: simulated %d cycles, plan says %d", i, res.res.Phases[0].Cycles, pl.Makespan)
			}
		}
	}
	t.Logf("%d phases, worst ratio %.3f", n, worst)
}

// BenchmarkSchedule1472 schedules 1472-tile phases: about 3000 random
// transfers of 1..64 words, unicast or with multicasts to up to 16 tiles
// (one in 8), and a gather of one word from every tile to tile 0.
func BenchmarkSchedule1472(b *testing.B) {
	p := arch.MustLookup("ipu21")
	for _, c := range []struct {
		name  string
		phase []Transfer
	}{
		{"unicast", random(rand.New(rand.NewSource(11)), p.Tiles, 3000, 64, 1)},
		{"multicast", random(rand.New(rand.NewSource(11)), p.Tiles, 3000, 64, 16)},
		{"gather", gather(p.Tiles, 1)},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Schedule(p, c.phase, Options{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// grid is the operand exchange of a product on a rows x cols grid of
// tiles (tile r*cols+c) fed from the tiles after it: the block of row r
// goes to the row's tiles (consecutive), the block of column c to the
// column's (every cols-th tile), words each.
func grid(rows, cols, words int) []Transfer {
	var ph []Transfer
	src := rows * cols
	for r := range rows {
		// (srcBase+0x40: a source address equal to a destination
		// operand shares its register, which a shifted copy cannot.)
		ph = append(ph, Transfer{Src: src, Dst: r * cols, DstN: cols, Words: words, SrcAddr: srcBase + 0x40, DstAddr: dstBase})
		src++
	}
	for c := range cols {
		ph = append(ph, Transfer{Src: src, Dst: c, DstN: rows, Stride: cols, Words: words, SrcAddr: srcBase + 0x40, DstAddr: dstBase + 4*uint32(words)})
		src++
	}
	return ph
}
