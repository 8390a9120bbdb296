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
  tiles 0-2,5: code 100 constants 200 variables 300 used 600 free 400
  tiles 3,7-8: code 8 constants 0 variables 0 used 8 free 992
  tile 6: code 400 constants 400 variables 400 used 1200 over 200
  tile 9: code 8 constants 0 variables 16 used 24 free 976
  tile 10: code 16 constants 0 variables 0 used 16 free 984
  worst tile 6: used 1200 (120.0%) over 200
  worst tile 0: used 600 (60.0%) free 400
  worst tile 1: used 600 (60.0%) free 400
  worst tile 2: used 600 (60.0%) free 400
  worst tile 5: used 600 (60.0%) free 400
  worst tile 9: used 24 (2.4%) free 976
  worst tile 10: used 16 (1.6%) free 984
  worst tile 3: used 8 (0.8%) free 992
  total: code 848 constants 1200 variables 1616 used 3664 of 10000 (36.6%)
  largest: tile 6 used 1200 of 1000 (120.0%) over 200
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
