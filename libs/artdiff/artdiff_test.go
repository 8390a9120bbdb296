package artdiff

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"ipu.local/formats/ipuexe"
	"ipu.local/formats/obj"
	"ipu.local/libs/arch"
	"ipu.local/libs/pack"
	"ipu.local/libs/sim"
)

// testObject returns an object whose tiles 0-3 run the same program.
func testObject() *obj.Object {
	o := &obj.Object{
		Arch: "ipu21-tiny", Compiler: "0.1.0", Source: strings.Repeat("ab", 32),
		Host: obj.HostProgram{
			Phases: []obj.Phase{{Kind: obj.HostExchange, Name: "in"}, {Kind: obj.Compute, Name: "main"}, {Kind: obj.Exchange, Name: "x"}, {Kind: obj.HostExchange, Name: "out"}},
			Pages:  []obj.Page{{ID: 0, Bytes: 64}, {ID: 1, Bytes: 32}},
			Inputs: []obj.Tensor{
				{Name: "a", DType: "float", Shape: []int64{2, 4}, Page: 0, Offset: 0},
				{Name: "b", DType: "float", Shape: []int64{4}, Page: 0, Offset: 32},
			},
			Outputs: []obj.Tensor{{Name: "y", DType: "float", Shape: []int64{2}, Page: 1, Offset: 0, Accumulate: 4}},
		},
		Config: []obj.RegWrite{{Tile: obj.AllTiles, Reg: sim.RegWatchdog, Value: 100}, {Tile: 2, Reg: sim.RegFP8, Value: 7}, {Tile: 3, Reg: sim.RegFP8, Value: 8}},
	}
	for t := 0; t < 4; t++ {
		o.Tiles = append(o.Tiles, obj.Tile{
			Index: t, Entry: 0x4c000,
			Segments: []obj.Segment{
				{Name: "text", Kind: obj.Code, Addr: 0x4c000, Size: 8, Data: []byte{1, 2, 3, 4, 5, 6, 7, 8}},
				{Name: "data", Kind: obj.Data, Addr: 0x80000, Size: 8, Data: []byte{9, 9, 9, 9, 9, 9, 9, 9}},
				{Name: "bss", Kind: obj.BSS, Addr: 0x80100, Size: 64},
			},
			Symbols: []obj.Symbol{
				{Name: "main", Addr: 0x4c000, Size: 8, Code: true},
				{Name: "buf", Addr: 0x80100, Size: 64},
			},
			Exchange: []obj.Transfer{{Phase: 2, Cycle: 10, Dst: 1, DstCount: 1, Words: 4}, {Phase: 2, Cycle: 20, Dst: 2, DstCount: 2, Words: 1}},
		})
	}
	return o
}

func TestObjects(t *testing.T) {
	tests := []struct {
		name   string
		change func(o *obj.Object)
		want   []string
	}{
		{"equal", func(o *obj.Object) {}, nil},
		{"header", func(o *obj.Object) { o.Compiler, o.Source = "0.2.0", "cd" }, []string{
			`header: compiler "0.1.0" -> "0.2.0"`,
			`header: source "` + strings.Repeat("ab", 32) + `" -> "cd"`,
		}},
		{"same change on every tile", func(o *obj.Object) {
			for i := range o.Tiles {
				o.Tiles[i].Segments[0].Data = []byte{1, 2, 3, 4, 5, 0, 7, 0}
			}
		}, []string{`tiles 0-3: segment "text": contents differ from 0x0004c004 (1 of 2 words)`}},
		{"tiles grouped by their changes", func(o *obj.Object) {
			o.Tiles[0].Entry = 0x4c004
			o.Tiles[2].Entry = 0x4c004
			o.Tiles[3].Segments[1].Data = []byte{9, 9, 9, 9, 9, 9, 9, 8}
		}, []string{
			`tiles 0,2: entry 0x0004c000 -> 0x0004c004`,
			`tile 3: segment "data": contents differ from 0x00080007 (1 of 8 bytes)`,
		}},
		{"segments", func(o *obj.Object) {
			s := o.Tiles[1].Segments
			s[0].Addr = 0x4c010 // moved, and its second byte changed
			s[0].Data = []byte{1, 0, 3, 4, 5, 6, 7, 8}
			s[1].Data = append(s[1].Data, 9, 9, 9, 9) // grown, same prefix
			s[1].Size = 12
			s[2] = obj.Segment{Name: "zero", Kind: obj.BSS, Addr: 0x80200, Size: 16}
		}, []string{
			`tile 1: segment "text": moved 0x0004c000 -> 0x0004c010, contents differ from offset 0x0 (1 of 2 words)`,
			`tile 1: segment "data": size 8 -> 12`,
			`tile 1: segment "bss" removed: bss 0x00080100 size 64`,
			`tile 1: segment "zero" added: bss 0x00080200 size 16`,
		}},
		{"segment kind", func(o *obj.Object) {
			s := &o.Tiles[0].Segments[2]
			s.Kind, s.Data = obj.Data, make([]byte, 64)
		}, []string{`tile 0: segment "bss": kind bss -> data`}},
		{"symbols", func(o *obj.Object) {
			t := &o.Tiles[3]
			t.Symbols = []obj.Symbol{
				{Name: "main", Addr: 0x4c000, Size: 4, Code: true},
				{Name: "loop", Addr: 0x4c004, Size: 4, Code: true},
				{Name: "buf", Addr: 0x80140, Size: 64, Code: true},
			}
		}, []string{
			`tile 3: symbol "main": size 8 -> 4`,
			`tile 3: symbol "loop" added: func 0x0004c004 size 4`,
			`tile 3: symbol "buf": moved 0x00080100 -> 0x00080140, data -> func`,
		}},
		{"transfers", func(o *obj.Object) {
			t := &o.Tiles[2]
			t.Exchange = []obj.Transfer{{Phase: 2, Cycle: 21, Dst: 2, DstCount: 2, Words: 1}, {Phase: 2, Cycle: 10, Dst: 1, DstCount: 1, Words: 4}}
		}, []string{
			`tile 2: transfer removed: phase 2 cycle 20 dst 2 count 2 words 1`,
			`tile 2: transfer added: phase 2 cycle 21 dst 2 count 2 words 1`,
		}},
		{"transfers reordered", func(o *obj.Object) {
			x := o.Tiles[2].Exchange
			x[0], x[1] = x[1], x[0]
		}, nil},
		{"tiles added and removed", func(o *obj.Object) {
			o.Tiles = o.Tiles[1:3]
			t := o.Tiles[0]
			t.Index = 7
			o.Tiles = append(o.Tiles, t)
		}, []string{
			`tiles 0,3: removed`,
			`tile 7: added`,
		}},
		{"host", func(o *obj.Object) {
			h := &o.Host
			h.Phases = []obj.Phase{{Kind: obj.HostExchange, Name: "in"}, {Kind: obj.Compute, Name: "pre"}, {Kind: obj.Compute, Name: "main"}, {Kind: obj.HostExchange, Name: "out"}}
			h.Pages = []obj.Page{{ID: 0, Bytes: 64}, {ID: 1, Bytes: 48}, {ID: 2, Bytes: 8}}
			h.Inputs = []obj.Tensor{
				{Name: "b", DType: "float16", Shape: []int64{4}, Page: 0, Offset: 32},
				{Name: "a", DType: "float", Shape: []int64{2, 5}, Page: 0, Offset: 0},
			}
			h.Outputs = []obj.Tensor{{Name: "z", DType: "float", Shape: []int64{2}, Page: 1}}
		}, []string{
			`host: phase 1 added: compute "pre"`,
			`host: phase 2 removed: exchange "x"`,
			`host: page 1: bytes 32 -> 48`,
			`host: page 2 added: bytes 8`,
			`host: input "a": position 0 -> 1, shape [2 4] -> [2 5]`,
			`host: input "b": position 1 -> 0, dtype "float" -> "float16"`,
			`host: output "y" removed: float [2] page 1 offset 0x0 accumulate 4`,
			`host: output "z" added: float [2] page 1 offset 0x0`,
		}},
		{"config", func(o *obj.Object) {
			o.Config = []obj.RegWrite{{Tile: obj.AllTiles, Reg: sim.RegWatchdog, Value: 200}, {Tile: 2, Reg: sim.RegFP8, Value: 7}, {Tile: 2, Reg: sim.RegFP8, Value: 9}, {Tile: 1, Reg: sim.RegFP8, Value: 1}}
		}, []string{
			`config: tile 1 reg 0x0002 added: value 0x00000001`,
			`config: tile 2 reg 0x0002: value 0x00000007 -> values 0x00000007,0x00000009`,
			`config: tile 3 reg 0x0002 removed: value 0x00000008`,
			`config: tile all reg 0x0100: value 0x00000064 -> value 0x000000c8`,
		}},
		{"config order", func(o *obj.Object) {
			c := o.Config
			c[0], c[2] = c[2], c[0]
		}, []string{`config: order of writes changed`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := testObject()
			tt.change(b)
			got := Objects(testObject(), b)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("lines mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func packObject(t *testing.T, o *obj.Object) *ipuexe.Package {
	t.Helper()
	p, err := arch.Lookup(o.Arch)
	if err != nil {
		t.Fatal(err)
	}
	pkg, err := pack.Build(o, p)
	if err != nil {
		t.Fatal(err)
	}
	pkg.Object = strings.Repeat("0", 64)
	return pkg
}

func TestPackages(t *testing.T) {
	tests := []struct {
		name   string
		change func(o *obj.Object)
		pkg    func(p *ipuexe.Package)
		want   []string
	}{
		{"equal", func(o *obj.Object) {}, nil, nil},
		{"tiles that change image", func(o *obj.Object) {
			o.Tiles[1].Segments[1].Data = []byte{9, 9, 9, 9, 9, 9, 9, 7}
			o.Tiles[2].Segments[1].Data = []byte{9, 9, 9, 9, 9, 9, 9, 7}
			o.Tiles = o.Tiles[:3] // tile 3 goes idle
		}, nil, []string{
			`tiles 1-2: segment "data": contents differ from 0x00080007 (1 of 8 bytes)`,
			`tile 3: image program -> idle`,
			`tile 3: segment "text" removed: code 0x0004c000 size 8`,
			`tile 3: segment "idle" added: code 0x0004c000 size 4`,
			`tile 3: segment "data" removed: data 0x00080000 size 8`,
			`tile 3: segment "bss" removed: bss 0x00080100 size 64`,
			`tile 3: symbol "main" removed: func 0x0004c000 size 8`,
			`tile 3: symbol "buf" removed: data 0x00080100 size 64`,
			`tile 3: transfer removed: phase 2 cycle 10 dst 1 count 1 words 4`,
			`tile 3: transfer removed: phase 2 cycle 20 dst 2 count 2 words 1`,
			`config: tile 3 reg 0x0001 removed: value 0x0004c000`,
			`config: tile 3 reg 0x0010 removed: value 0x0004c000`,
			`config: tile 3 reg 0x0011 removed: value 0x0004c008`,
			`config: tile 3 reg 0x0020 removed: value 0x00000001`,
			`config: tile 3 reg 0x0021 removed: value 0x00000001`,
		}},
		{"image numbering does not matter", nil, func(p *ipuexe.Package) {
			p.Images = append(p.Images, p.Images[0])
			p.TileImage[2] = uint32(len(p.Images) - 1)
		}, nil},
		{"header and tile count", nil, func(p *ipuexe.Package) {
			p.Compiler, p.Object = "0.2.0", strings.Repeat("1", 64)
			p.Tiles = 6
			p.TileImage = append(p.TileImage, 0, 0)
		}, []string{
			`header: compiler "0.1.0" -> "0.2.0"`,
			`header: tiles 4 -> 6`,
			`header: object "` + strings.Repeat("0", 64) + `" -> "` + strings.Repeat("1", 64) + `"`,
			`tiles 4-5: added`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := testObject()
			if tt.change != nil {
				tt.change(o)
			}
			b := packObject(t, o)
			if tt.pkg != nil {
				tt.pkg(b)
			}
			got := Packages(packObject(t, testObject()), b)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("lines mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCompare(t *testing.T) {
	objA, err := obj.Marshal(testObject())
	if err != nil {
		t.Fatal(err)
	}
	o := testObject()
	o.Tiles[0].Entry = 0x4c004
	objB, err := obj.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	pkg, err := ipuexe.Marshal(packObject(t, testObject()))
	if err != nil {
		t.Fatal(err)
	}
	bad := append([]byte(nil), objA...)
	bad[len(bad)-1] ^= 0xff

	tests := []struct {
		name string
		a, b File
		kind string
		want []string
		err  string
	}{
		{"equal objects", File{"a.ipuobj", objA}, File{"b.ipuobj", objA}, "object", nil, ""},
		{"objects", File{"a.ipuobj", objA}, File{"b.ipuobj", objB}, "object", []string{"tile 0: entry 0x0004c000 -> 0x0004c004"}, ""},
		{"equal packages", File{"a.ipuexe", pkg}, File{"b.ipuexe", pkg}, "package", nil, ""},
		{"kinds differ", File{"a.ipuobj", objA}, File{"b.ipuexe", pkg}, "", nil,
			"a.ipuobj is an object, b.ipuexe is a package: cannot compare artifacts of different kinds"},
		{"unknown kind", File{"a.ipuobj", objA}, File{"notes.txt", []byte("hello")}, "", nil,
			"notes.txt: not an artifact of a known kind (object, package, plan): unrecognised magic"},
		{"empty file", File{"empty", nil}, File{"a.ipuobj", objA}, "", nil,
			"empty: not an artifact of a known kind (object, package, plan): unrecognised magic"},
		{"corrupt", File{"a.ipuobj", objA}, File{"bad.ipuobj", bad}, "", nil, "bad.ipuobj: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Compare(tt.a, tt.b)
			if tt.err != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tt.err) {
					t.Fatalf("error %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.Kind.Name != tt.kind {
				t.Errorf("kind %q, want %q", r.Kind.Name, tt.kind)
			}
			if r.Equal() != (len(tt.want) == 0) {
				t.Errorf("Equal() = %v with %d lines", r.Equal(), len(r.Lines))
			}
			if diff := cmp.Diff(tt.want, r.Lines); diff != "" {
				t.Errorf("lines mismatch (-want +got):\n%s", diff)
			}
		})
	}
	var ke *KindError
	if _, err := Compare(File{"a", objA}, File{"b", pkg}); !errors.As(err, &ke) {
		t.Errorf("kinds differ: error %T, want *KindError", err)
	}
}

func TestDetect(t *testing.T) {
	objA, err := obj.Marshal(testObject())
	if err != nil {
		t.Fatal(err)
	}
	// A later format version is still recognised, so that the reader can
	// name the version it does not support.
	future := append([]byte(nil), objA...)
	future[len(obj.Magic)-1]++
	for _, tt := range []struct {
		name string
		data []byte
		want string
	}{
		{"object", objA, "object"},
		{"future object", future, "object"},
		{"package magic", []byte(ipuexe.Magic), "package"},
		{"text", []byte("{}"), ""},
		{"empty", nil, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := ""
			if k := Detect(tt.data); k != nil {
				got = k.Name
			}
			if got != tt.want {
				t.Errorf("Detect = %q, want %q", got, tt.want)
			}
		})
	}
	if _, err := Compare(File{"a", objA}, File{"f", future}); err == nil || !strings.HasPrefix(err.Error(), "f: ") {
		t.Errorf("future version: error %v, want one naming f", err)
	}
}

func TestFieldDiffs(t *testing.T) {
	type inner struct{ Name string }
	type s struct {
		Count  int
		Shape  []int64
		Addr   uint32
		Items  []inner
		Data   []byte
		Labels map[string]int
	}
	a := s{Count: 1, Shape: []int64{2, 3}, Addr: 16, Items: []inner{{"x"}}, Data: []byte{1}, Labels: map[string]int{}}
	b := s{Count: 2, Shape: []int64{2, 4}, Addr: 32, Items: []inner{{"y"}, {"z"}}, Data: []byte{1, 2}}
	want := []string{
		"count 1 -> 2",
		"shape [2 3] -> [2 4]",
		"addr 0x10 -> 0x20",
		`items[0].name "x" -> "y"`,
		`items[1] added: {z}`,
		"data 1 bytes -> 2 bytes",
	}
	if diff := cmp.Diff(want, fieldDiffs(a, b)); diff != "" {
		t.Errorf("lines mismatch (-want +got):\n%s", diff)
	}
	if got := fieldDiffs(s{}, s{Shape: []int64{}, Items: []inner{}}); len(got) != 0 {
		t.Errorf("nil and empty differ: %q", got)
	}
}

// BenchmarkPackagesFullChip compares two full-chip packages whose 1,472
// tiles each load their own 64 KiB image, differing in the last byte.
func BenchmarkPackagesFullChip(b *testing.B) {
	p, err := arch.Lookup("ipu21")
	if err != nil {
		b.Fatal(err)
	}
	build := func(last byte) *ipuexe.Package {
		pkg := &ipuexe.Package{Arch: p.Name, Tiles: p.Tiles, TileImage: make([]uint32, p.Tiles)}
		for t := 0; t < p.Tiles; t++ {
			data := make([]byte, 64<<10)
			data[0], data[1], data[len(data)-1] = byte(t), byte(t>>8), last
			pkg.Images = append(pkg.Images, ipuexe.Image{Entry: 0x4c000, Segments: []obj.Segment{
				{Name: "data", Kind: obj.Data, Addr: 0x80000, Size: uint32(len(data)), Data: data}}})
			pkg.TileImage[t] = uint32(t)
		}
		return pkg
	}
	x, y := build(1), build(2)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if got := Packages(x, y); len(got) != 1 {
			b.Fatalf("%d lines: %q", len(got), got[:min(len(got), 3)])
		}
	}
}
