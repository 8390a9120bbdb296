package obj_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"ipu.local/formats/obj"
)

// memTile is a tile whose segments hold code, constants and variables
// bytes.
func memTile(index int, code, constants, variables uint32) obj.Tile {
	t := obj.Tile{Index: index, Entry: 0x4c000}
	if code > 0 {
		t.Segments = append(t.Segments, obj.Segment{Name: "text", Kind: obj.Code, Addr: 0x4c000, Size: code, Data: make([]byte, code)})
	}
	if constants > 0 {
		t.Segments = append(t.Segments, obj.Segment{Name: "data", Kind: obj.Data, Addr: 0x80000, Size: constants, Data: make([]byte, constants)})
	}
	if variables > 0 {
		t.Segments = append(t.Segments, obj.Segment{Name: "bss", Kind: obj.BSS, Addr: 0x90000, Size: variables})
	}
	return t
}

// symTile is a tile of 100 code bytes (a kernel, host command tables,
// the supervisor program with two pieces of exchange code), 200 bytes of
// constants and 300 of variables, the profile buffer among them.
func symTile() obj.Tile {
	t := memTile(4, 100, 200, 300)
	t.Symbols = []obj.Symbol{
		{Name: "kernel", Addr: 0x4c000, Size: 40, Code: true},
		{Name: obj.HostCommandsSymbol, Addr: 0x4c028, Size: 12, Code: true},
		{Name: "rt_main", Addr: 0x4c034, Size: 48, Code: true},
		{Name: obj.ExchangeCodeSymbol, Addr: 0x4c038, Size: 4},
		{Name: obj.ExchangeCodeSymbol, Addr: 0x4c040, Size: 4},
		{Name: "data", Addr: 0x80000, Size: 200},
		{Name: "bss", Addr: 0x90000, Size: 292},
		{Name: obj.ProfileSymbol, Addr: 0x90124, Size: 8},
	}
	return t
}

// TestMemory checks the categories the symbols carve out of the
// segments, and that symbols of more bytes than their segments hold
// move at most those.
func TestMemory(t *testing.T) {
	got := obj.Memory(&obj.Object{Tiles: []obj.Tile{symTile(), memTile(5, 8, 0, 0)}})
	want := []obj.TileMemory{
		{Tile: 4, Code: 80, ExchangeCode: 20, Constants: 200, Variables: 292, Profile: 8},
		{Tile: 5, Code: 8},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
	big := memTile(6, 8, 0, 16)
	big.Symbols = []obj.Symbol{{Name: obj.ExchangeCodeSymbol, Addr: 0x4c000, Size: 64}, {Name: obj.ProfileSymbol, Addr: 0x90000, Size: 64}}
	got = obj.Memory(&obj.Object{Tiles: []obj.Tile{big}})
	if w := (obj.TileMemory{Tile: 6, ExchangeCode: 8, Profile: 16}); got[0] != w || got[0].Used() != 24 {
		t.Errorf("got %+v, want %+v", got[0], w)
	}
}

func TestDumpMemory(t *testing.T) {
	tests := []struct {
		name   string
		tiles  []obj.Tile
		usable int64
		want   string
	}{
		{"no tiles", nil, 1000, "memory tiles 0 usable 1000 bytes per tile\n"},
		{"shared figures, worst eight, over", []obj.Tile{
			memTile(0, 100, 200, 300), memTile(1, 100, 200, 300), memTile(2, 100, 200, 300),
			memTile(3, 8, 0, 0), memTile(5, 100, 200, 300), memTile(6, 400, 400, 400),
			memTile(7, 8, 0, 0), memTile(8, 8, 0, 0), memTile(9, 8, 0, 16), memTile(10, 16, 0, 0),
		}, 1000, `memory tiles 10 usable 1000 bytes per tile
  tiles 0-2,5: code 100 exchange 0 constants 200 variables 300 profile 0 stacks 0 used 600 free 400
  tiles 3,7-8: code 8 exchange 0 constants 0 variables 0 profile 0 stacks 0 used 8 free 992
  tile 6: code 400 exchange 0 constants 400 variables 400 profile 0 stacks 0 used 1200 over 200
  tile 9: code 8 exchange 0 constants 0 variables 16 profile 0 stacks 0 used 24 free 976
  tile 10: code 16 exchange 0 constants 0 variables 0 profile 0 stacks 0 used 16 free 984
  worst tile 6: used 1200 (120.0%) over 200
  worst tile 0: used 600 (60.0%) free 400
  worst tile 1: used 600 (60.0%) free 400
  worst tile 2: used 600 (60.0%) free 400
  worst tile 5: used 600 (60.0%) free 400
  worst tile 9: used 24 (2.4%) free 976
  worst tile 10: used 16 (1.6%) free 984
  worst tile 3: used 8 (0.8%) free 992
  total: code 848 exchange 0 constants 1200 variables 1616 profile 0 stacks 0 used 3664 of 10000 (36.6%)
  largest: tile 6 used 1200 of 1000 (120.0%) over 200
`},
		{"categories from symbols", []obj.Tile{symTile()}, 1000, `memory tiles 1 usable 1000 bytes per tile
  tile 4: code 80 exchange 20 constants 200 variables 292 profile 8 stacks 0 used 600 free 400
  worst tile 4: used 600 (60.0%) free 400
  total: code 80 exchange 20 constants 200 variables 292 profile 8 stacks 0 used 600 of 1000 (60.0%)
  largest: tile 4 used 600 of 1000 (60.0%)
`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := &obj.Object{Arch: "ipu21-tiny", Tiles: tt.tiles}
			var b bytes.Buffer
			obj.DumpMemory(&b, "", o, tt.usable)
			if diff := cmp.Diff(tt.want, b.String()); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
			var d bytes.Buffer
			if err := obj.Dump(&d, o, obj.DumpOptions{UsableMemory: tt.usable}); err != nil {
				t.Fatal(err)
			}
			if !strings.HasSuffix(d.String(), "\n\n"+tt.want) {
				t.Errorf("Dump does not end with the memory report:\n%s", d.String())
			}
		})
	}
}
