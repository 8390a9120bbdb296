package pack

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"ipu.local/formats/ipuexe"
	"ipu.local/formats/obj"
	"ipu.local/libs/arch"
	"ipu.local/libs/isa"
	"ipu.local/libs/sim"
)

func code(ins ...isa.Inst) []byte {
	b := make([]byte, 4*len(ins))
	for i, in := range ins {
		isa.PutWord(b[4*i:], isa.MustEncode(in))
	}
	return b
}

func program(entry uint32) obj.Tile {
	text := code(isa.Inst{Op: isa.HALT}, isa.Inst{Op: isa.HALT})
	return obj.Tile{
		Entry: entry,
		Segments: []obj.Segment{
			{Name: "text", Kind: obj.Code, Addr: 0x4c000, Size: uint32(len(text)), Data: text},
			{Name: "bss", Kind: obj.BSS, Addr: 0x80000, Size: 256},
		},
		Symbols: []obj.Symbol{{Name: "main", Addr: 0x4c000, Size: 8, Code: true}},
	}
}

func at(i int, t obj.Tile) obj.Tile { t.Index = i; return t }

func TestBuild(t *testing.T) {
	p := arch.MustLookup("ipu21-tiny")
	o := &obj.Object{
		Arch: "ipu21-tiny", Compiler: "0.1.0", Source: "src",
		Tiles:  []obj.Tile{at(0, program(0x4c000)), at(2, program(0x4c000)), at(3, program(0x4c004))},
		Host:   obj.HostProgram{Phases: []obj.Phase{{Kind: obj.Compute, Name: "main"}}},
		Config: []obj.RegWrite{{Tile: obj.AllTiles, Reg: sim.RegWatchdog, Value: 1000}},
	}
	// Tile 3 sends to tile 2: both are in the exchange, tile 0 is not.
	xfer := []obj.Transfer{{Phase: 0, Cycle: 0, Dst: 2, DstCount: 1, Words: 1}}
	o.Tiles[2].Exchange = xfer
	got, err := Build(o, p)
	if err != nil {
		t.Fatal(err)
	}
	progImage := func(entry uint32) ipuexe.Image {
		pt := program(entry)
		img := ipuexe.Image{Entry: pt.Entry, Segments: pt.Segments, Symbols: pt.Symbols}
		if entry == 0x4c004 {
			img.Exchange = xfer
		}
		return img
	}
	want := &ipuexe.Package{
		Arch: "ipu21-tiny", Compiler: "0.1.0", Tiles: 4,
		Images: []ipuexe.Image{
			progImage(0x4c000),
			{Idle: true, Entry: 0x4c000, Segments: []obj.Segment{{Name: "idle", Kind: obj.Code, Addr: 0x4c000, Size: 4, Data: code(isa.Inst{Op: isa.HALT})}}},
			progImage(0x4c004),
		},
		TileImage: []uint32{0, 1, 0, 2},
		Config: []obj.RegWrite{
			{Tile: obj.AllTiles, Reg: sim.RegWatchdog, Value: 1000},
			{Tile: 0, Reg: sim.RegExecLo, Value: 0x4c000},
			{Tile: 0, Reg: sim.RegExecHi, Value: 0x4c008},
			{Tile: 0, Reg: sim.RegEntry, Value: 0x4c000},
			{Tile: 0, Reg: sim.RegSyncGroup, Value: 1},
			{Tile: 0, Reg: sim.RegExchange, Value: 0},
			{Tile: 2, Reg: sim.RegExecLo, Value: 0x4c000},
			{Tile: 2, Reg: sim.RegExecHi, Value: 0x4c008},
			{Tile: 2, Reg: sim.RegEntry, Value: 0x4c000},
			{Tile: 2, Reg: sim.RegSyncGroup, Value: 1},
			{Tile: 2, Reg: sim.RegExchange, Value: 1},
			{Tile: 3, Reg: sim.RegExecLo, Value: 0x4c000},
			{Tile: 3, Reg: sim.RegExecHi, Value: 0x4c008},
			{Tile: 3, Reg: sim.RegEntry, Value: 0x4c004},
			{Tile: 3, Reg: sim.RegSyncGroup, Value: 1},
			{Tile: 3, Reg: sim.RegExchange, Value: 1},
		},
		Host: o.Host,
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}

	// The package is complete once the caller records the object.
	got.Object = strings.Repeat("0", 64)
	var b1, b2 bytes.Buffer
	if err := ipuexe.Write(&b1, got); err != nil {
		t.Fatalf("Write: %v", err)
	}
	again, err := Build(o, p)
	if err != nil {
		t.Fatal(err)
	}
	again.Object = got.Object
	if err := ipuexe.Write(&b2, again); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b1.Bytes(), b2.Bytes()) {
		t.Errorf("two builds of one object give different packages")
	}
}

func TestBuildFullChip(t *testing.T) {
	p := arch.MustLookup("ipu21")
	o := &obj.Object{Arch: "ipu21", Tiles: []obj.Tile{at(1471, program(0x4c000))}}
	pkg, err := Build(o, p)
	if err != nil {
		t.Fatal(err)
	}
	if pkg.Tiles != 1472 || len(pkg.TileImage) != 1472 || len(pkg.Images) != 2 {
		t.Fatalf("tiles %d, tilemap %d, images %d; want 1472, 1472, 2", pkg.Tiles, len(pkg.TileImage), len(pkg.Images))
	}
	if !pkg.Images[0].Idle || pkg.TileImage[1471] != 1 || pkg.TileImage[0] != 0 {
		t.Errorf("idle image first, tile 1471's program second: got tilemap ends %v", pkg.TileImage[1468:])
	}
	// The idle image's only instruction is halt.
	in, err := isa.Decode(isa.Word(pkg.Images[0].Segments[0].Data))
	if err != nil || in.Op != isa.HALT {
		t.Errorf("idle code decodes to %v, %v; want halt", in, err)
	}
}

func TestBuildChecks(t *testing.T) {
	base := func() *obj.Object {
		return &obj.Object{Arch: "ipu21-tiny", Tiles: []obj.Tile{at(0, program(0x4c000)), at(1, program(0x4c004))}}
	}
	tests := []struct {
		name   string
		change func(o *obj.Object)
		want   string
	}{
		{"arch", func(o *obj.Object) { o.Arch = "ipu2" }, `object is for architecture "ipu2", packing for "ipu21-tiny"`},
		{"tile range", func(o *obj.Object) { o.Tiles[1].Index = 4 }, "tile 4: out of range (ipu21-tiny has 4 tiles)"},
		{"below memory", func(o *obj.Object) { o.Tiles[0].Segments[0].Addr = 0x1000; o.Tiles[0].Entry = 0x1000 }, `tile 0 segment 0 "text": [0x1000, 0x1008) outside tile memory [0x4c000, 0xe8000)`},
		{"at the top of memory", func(o *obj.Object) { o.Tiles[1].Segments[1].Addr = 0xe7f00 }, ""},
		{"above memory by one", func(o *obj.Object) { o.Tiles[1].Segments[1].Addr = 0xe7f04 }, `tile 1 segment 1 "bss": [0xe7f04, 0xe8004) outside tile memory`},
		{"code not executable", func(o *obj.Object) {
			s := &o.Tiles[0].Segments
			(*s)[0].Addr, (*s)[1].Addr, o.Tiles[0].Entry = 0x90000, 0x80000, 0x90000
			(*s)[0], (*s)[1] = (*s)[1], (*s)[0]
		}, `tile 0 segment 1 "text": code [0x90000, 0x90008) outside the executable range [0x4c000, 0x80000)`},
		{"misaligned", func(o *obj.Object) { o.Tiles[1].Segments[1].Addr = 0x80002 }, `tile 1 segment 1 "bss": addr 0x80002 not 4-aligned`},
		{"code size", func(o *obj.Object) {
			s := &o.Tiles[0].Segments[0]
			s.Data, s.Size = s.Data[:6], 6
		}, `tile 0 segment 0 "text": code size 6 not a multiple of 4`},
		{"overlap", func(o *obj.Object) { o.Tiles[0].Segments[1].Addr = 0x4c004; o.Tiles[0].Segments[1].Kind = obj.BSS }, `tile 0: segment 1 "bss": addr 0x4c004 overlaps segment 0 "text"`},
		{"entry outside code", func(o *obj.Object) { o.Tiles[1].Entry = 0x4c008 }, "tile 1: entry 0x4c008 not inside a code segment"},
		{"entry misaligned", func(o *obj.Object) { o.Tiles[1].Entry = 0x4c002 }, "tile 1: entry 0x4c002 not 4-aligned"},
		{"unknown register", func(o *obj.Object) { o.Config = []obj.RegWrite{{Tile: 0, Reg: 0x77}} }, "config write 0 (tile 0 reg 0x77): unknown register"},
		{"config tile", func(o *obj.Object) { o.Config = []obj.RegWrite{{Tile: 9, Reg: sim.RegFP8}} }, "config write 0 (tile 9 reg 0x2): tile out of range"},
		{"entry disagrees", func(o *obj.Object) { o.Config = []obj.RegWrite{{Tile: 1, Reg: sim.RegEntry, Value: 0x4c000}} }, "value 0x4c000 disagrees with the tile's entry 0x4c004"},
		{"packer's register", func(o *obj.Object) { o.Config = []obj.RegWrite{{Tile: 0, Reg: sim.RegSyncGroup, Value: 1}} }, "config write 0 (tile 0 reg 0x20): register sync_group (0x20) is set by the packer"},
		{"entry for idle tile", func(o *obj.Object) { o.Config = []obj.RegWrite{{Tile: 3, Reg: sim.RegEntry, Value: 0x4c000}} }, "config write 0 (tile 3 reg 0x1): tile has no program"},
	}
	p := arch.MustLookup("ipu21-tiny")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := base()
			tt.change(o)
			_, err := Build(o, p)
			if tt.want == "" {
				if err != nil {
					t.Errorf("Build: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// Limits are the preset's tiles and tile memory; an unknown architecture
// is an error.
func TestLimits(t *testing.T) {
	p := arch.MustLookup("ipu21")
	l, err := Limits("ipu21")
	if err != nil || l.Tiles != p.Tiles || l.TileMemory != p.Memory.Size() {
		t.Errorf("Limits(ipu21) = %+v, %v; want %d tiles of %d bytes", l, err, p.Tiles, p.Memory.Size())
	}
	if _, err := Limits("ipu99"); err == nil {
		t.Error("Limits of an unknown architecture succeeded")
	}
}

// TestExchangeMembership checks that a tile whose code receives is in the
// exchange although the object lists no transfer, and one without
// exchange code or transfers is not.
func TestExchangeMembership(t *testing.T) {
	p := arch.MustLookup("ipu21-tiny")
	recv := program(0x4c000)
	text := code(isa.Inst{Op: isa.RECV, D: 1, A: 2, B: 3}, isa.Inst{Op: isa.HALT})
	recv.Segments[0].Data = text
	o := &obj.Object{
		Arch: "ipu21-tiny", Compiler: "0.1.0", Source: "src",
		Tiles: []obj.Tile{at(0, program(0x4c000)), at(1, recv)},
		Host:  obj.HostProgram{Phases: []obj.Phase{{Kind: obj.Compute, Name: "main"}}},
	}
	got, err := Build(o, p)
	if err != nil {
		t.Fatal(err)
	}
	member := map[uint32]uint32{}
	for _, w := range got.Config {
		if w.Reg == sim.RegExchange {
			member[w.Tile] = w.Value
		}
	}
	if diff := cmp.Diff(map[uint32]uint32{0: 0, 1: 1}, member); diff != "" {
		t.Errorf("exchange membership (-want +got):\n%s", diff)
	}
}
