package ipuexe_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"ipu.local/formats/ipuexe"
	"ipu.local/formats/obj"
	"ipu.local/formats/obj/wire"
)

var update = flag.Bool("update", false, "rewrite testdata golden dumps and seed packages")

const fp = "2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae"

func words(ws ...uint32) []byte {
	b := make([]byte, 4*len(ws))
	for i, w := range ws {
		binary.LittleEndian.PutUint32(b[4*i:], w)
	}
	return b
}

func idle() ipuexe.Image {
	return ipuexe.Image{Idle: true, Entry: 0x4c000, Segments: []obj.Segment{{Name: "idle", Kind: obj.Code, Addr: 0x4c000, Size: 4, Data: words(0xa5000000)}}}
}

func table() []byte {
	b := make([]byte, 4096)
	for i := range b {
		b[i] = byte(i / 256)
	}
	return b
}

var order = []string{"tiny", "full", "shared"}

func samples() map[string]*ipuexe.Package {
	prog := ipuexe.Image{
		Entry:    0x4c000,
		Segments: []obj.Segment{{Name: "text", Kind: obj.Code, Addr: 0x4c000, Size: 8, Data: words(0x10100001, 0xa5000000)}},
		Symbols:  []obj.Symbol{{Name: "main", Addr: 0x4c000, Size: 8, Code: true}},
	}
	big := ipuexe.Image{
		Entry: 0x4c004,
		Segments: []obj.Segment{
			{Name: "text", Kind: obj.Code, Addr: 0x4c000, Size: 12, Data: words(1, 0x10100001, 0xa5000000)},
			{Name: "table", Kind: obj.Data, Addr: 0x80000, Size: 4096, Data: table()},
			{Name: "bss", Kind: obj.BSS, Addr: 0x81000, Size: 1024},
		},
		Symbols:  []obj.Symbol{{Name: "main", Addr: 0x4c004, Size: 8, Code: true}, {Name: "table", Addr: 0x80000, Size: 4096}},
		Exchange: []obj.Transfer{{Phase: 1, Cycle: 30, Dst: 4, DstCount: 4, Words: 16}},
	}
	// moved holds big's table at another address: the package stores it
	// as a reference to big's.
	moved := ipuexe.Image{Entry: 0x4c000, Segments: []obj.Segment{prog.Segments[0], {Name: "table", Kind: obj.Data, Addr: 0x90000, Size: 4096, Data: table()}}}
	return map[string]*ipuexe.Package{
		"shared": {
			Arch: "ipu21-tiny", Compiler: "0.1.0", Tiles: 4, Object: fp,
			Images:    []ipuexe.Image{big, moved, idle()},
			TileImage: []uint32{0, 1, 2, 1},
		},
		"tiny": {
			Arch: "ipu21-tiny", Compiler: "0.1.0", Tiles: 4, Object: fp,
			Images:    []ipuexe.Image{prog, idle()},
			TileImage: []uint32{0, 1, 0, 1},
			Config:    []obj.RegWrite{{Tile: 0, Reg: 1, Value: 0x4c000}, {Tile: 2, Reg: 1, Value: 0x4c000}},
		},
		"full": {
			Arch: "ipu21-64", Compiler: "0.1.0", Tiles: 64, Object: fp,
			Images:    []ipuexe.Image{big, prog, idle()},
			TileImage: append([]uint32{0, 0, 0, 0, 1, 1, 2, 0}, repeat(2, 56)...),
			Config:    []obj.RegWrite{{Tile: obj.AllTiles, Reg: 0x100, Value: 5000}, {Tile: 0, Reg: 1, Value: 0x4c004}},
			Host: obj.HostProgram{
				Phases: []obj.Phase{{Kind: obj.HostExchange, Name: "in"}, {Kind: obj.Compute, Name: "mm"}, {Kind: obj.Exchange, Name: "x"}, {Kind: obj.HostExchange, Name: "out"}},
				Pages:  []obj.Page{{ID: 1, Bytes: 256}},
				Inputs: []obj.Tensor{{Name: "a", DType: "float8e4m3fnuz", Shape: []int64{8, 16}, Page: 1, Blocks: []obj.Block{
					{R0: 0, R1: 16, C0: 0, C1: 8, Rows: 16, Cols: 8, Transpose: true, Order: obj.APanel},
				}}},
				Outputs: []obj.Tensor{{Name: "c", DType: "float", Shape: []int64{8}, Page: 1, Offset: 128}},
				Model:   []byte(`{"values":[],"nodes":[]}`),
			},
		},
	}
}

func repeat(v uint32, n int) []uint32 {
	s := make([]uint32, n)
	for i := range s {
		s[i] = v
	}
	return s
}

var equate = cmpopts.EquateEmpty()

func marshal(t testing.TB, p *ipuexe.Package) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := ipuexe.Write(&b, p); err != nil {
		t.Fatalf("Write: %v", err)
	}
	return b.Bytes()
}

func TestRoundTrip(t *testing.T) {
	s := samples()
	for _, name := range order {
		t.Run(name, func(t *testing.T) {
			data := marshal(t, s[name])
			got, err := ipuexe.Read(data)
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			if diff := cmp.Diff(s[name], got, equate); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
			if !bytes.Equal(marshal(t, got), data) {
				t.Errorf("writing the package read back gives different bytes")
			}
		})
	}
}

func TestSeeds(t *testing.T) {
	s := samples()
	for _, name := range order {
		t.Run(name, func(t *testing.T) {
			checkGolden(t, filepath.Join("testdata", name+".ipuexe"), marshal(t, s[name]))
		})
	}
}

func disasm(w io.Writer, addr uint32, code []byte) {
	for i := 0; i+4 <= len(code); i += 4 {
		fmt.Fprintf(w, "%08x: .word 0x%08x\n", addr+uint32(i), binary.LittleEndian.Uint32(code[i:]))
	}
}

func TestDumpGolden(t *testing.T) {
	s := samples()
	for _, name := range order {
		for _, dis := range []bool{false, true} {
			file := name + ".golden"
			opt := ipuexe.DumpOptions{}
			if dis {
				file = name + ".disasm.golden"
				opt.Disasm = disasm
			}
			t.Run(file, func(t *testing.T) {
				p, err := ipuexe.Read(marshal(t, s[name]))
				if err != nil {
					t.Fatal(err)
				}
				var b bytes.Buffer
				if err := ipuexe.Dump(&b, p, opt); err != nil {
					t.Fatal(err)
				}
				checkGolden(t, filepath.Join("testdata", file), b.Bytes())
			})
		}
	}
}

func checkGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update)", err)
	}
	if !bytes.Equal(want, got) {
		if diff := cmp.Diff(string(want), string(got)); diff != "" {
			t.Errorf("%s: mismatch (-want +got):\n%s", path, diff)
		} else {
			t.Errorf("%s: bytes differ", path)
		}
	}
}

func TestRanges(t *testing.T) {
	tests := []struct {
		in   []int
		want string
	}{
		{nil, "none"},
		{[]int{5}, "5"},
		{[]int{0, 1, 2, 3}, "0-3"},
		{[]int{0, 1, 3, 5, 6, 7, 9}, "0-1,3,5-7,9"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := ipuexe.Ranges(tt.in); got != tt.want {
				t.Errorf("Ranges(%v) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestWriteRejects(t *testing.T) {
	tests := []struct {
		name   string
		change func(p *ipuexe.Package)
		want   string
	}{
		{"no tiles", func(p *ipuexe.Package) { p.Tiles = 0 }, "tile count 0 out of range"},
		{"fingerprint", func(p *ipuexe.Package) { p.Object = "ABC" }, `object fingerprint "ABC" is not a lowercase hex SHA-256`},
		{"tilemap length", func(p *ipuexe.Package) { p.TileImage = p.TileImage[:3] }, "tilemap has 3 tiles, want 4"},
		{"image out of range", func(p *ipuexe.Package) { p.TileImage[3] = 9 }, "tile 3: image 9 out of range (2 images)"},
		{"first-use order", func(p *ipuexe.Package) { p.TileImage = []uint32{1, 0, 1, 0} }, "tile 0: uses image 1 before image 0 is used"},
		{"unused image", func(p *ipuexe.Package) { p.TileImage = []uint32{0, 0, 0, 0} }, "image 1: used by no tile"},
		{"duplicate image", func(p *ipuexe.Package) { p.Images[1] = p.Images[0] }, "image 1: same as image 0"},
		{"bad segment", func(p *ipuexe.Package) { p.Images[0].Segments[0].Size = 3 }, `image 0: segment 0 "text": size 3 but 8 bytes of data`},
		{"config tile", func(p *ipuexe.Package) { p.Config[0].Tile = 4 }, "register write 0: tile 4 out of range (4 tiles)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := samples()["tiny"]
			tt.change(p)
			err := ipuexe.Write(io.Discard, p)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "ipuexe: ") {
				t.Errorf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func section(data []byte, i int) (ent, off, n int) {
	ent = wire.HeaderSize + wire.EntrySize*i
	return ent, int(binary.LittleEndian.Uint64(data[ent+8:])), int(binary.LittleEndian.Uint64(data[ent+16:]))
}

// patch writes b at byte at of section sec and recomputes that section's
// CRC, so that only the decoder sees the damage.
func patch(data []byte, sec, at int, b []byte) []byte {
	out := append([]byte(nil), data...)
	ent, off, n := section(out, sec)
	copy(out[off+at:], b)
	binary.LittleEndian.PutUint32(out[ent+4:], wire.CRC(out[off:off+n]))
	return out
}

func le32(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }

// Section indices.
const (
	secMeta = iota
	secImages
	secTilemap
	secConfig
	secHost
)

func TestReadCorrupt(t *testing.T) {
	tiny := marshal(t, samples()["tiny"])
	_, imagesOff, _ := section(tiny, secImages)
	// Offsets in the meta section: compiler, arch, then tiles.
	tilesAt := 4 + len("0.1.0") + 4 + len("ipu21-tiny")
	tests := []struct {
		name    string
		data    []byte
		section string
		want    string
	}{
		{"empty file", nil, "header", "truncated: file is 0 bytes"},
		{"bad magic", append([]byte(obj.Magic), tiny[8:]...), "header", `bad magic "\x89IPUOBJ" (want "\x89IPUEXE")`},
		{"unknown version", append(append([]byte(ipuexe.Magic[:7]), 7), tiny[8:]...), "header", "package format version 7 not supported (want 1)"},
		{"truncated table", tiny[:50], "table", "truncated"},
		{"truncated images", tiny[:imagesOff+10], "images", "section length"},
		{"truncated end", tiny[:len(tiny)-3], "host", "exceeds file size"},
		{"bad crc", func() []byte { b := append([]byte(nil), tiny...); b[imagesOff+12] ^= 1; return b }(), "images", "crc mismatch (want 0x"},
		{"tile count", patch(tiny, secMeta, tilesAt, le32(0)), "meta", "tile count 0 out of range"},
		{"fingerprint", patch(tiny, secMeta, tilesAt+4+4, []byte("X")), "meta", "object fingerprint"},
		{"huge image count", patch(tiny, secImages, 0, le32(0xffffffff)), "images", "image count 4294967295 exceeds file size"},
		{"more images than tiles", patch(tiny, secImages, 0, le32(5)), "images", "5 images for 4 tiles"},
		{"huge image length", patch(tiny, secImages, 4, le32(0xffffffff)), "images", "image 0: length 4294967295 exceeds the limit"},
		{"wrong image length", patch(tiny, secImages, 4, le32(3)), "images", "image 0: zstd"},
		{"huge frame length", patch(tiny, secImages, 8, le32(0xfffffff0)), "images", "image length 4294967280 exceeds file size"},
		{"garbage frame", patch(tiny, secImages, 12, []byte{1, 2, 3, 4}), "images", "image 0: zstd"},
		{"tilemap count", patch(tiny, secTilemap, 0, le32(3)), "tilemap", "tilemap has 3 tiles, want 4"},
		{"tilemap image", patch(tiny, secTilemap, 4+4*3, le32(7)), "tilemap", "tile 3: image 7 out of range (2 images)"},
		{"tilemap order", patch(tiny, secTilemap, 4, le32(1)), "tilemap", "tile 0: uses image 1 before image 0"},
		{"config tile", patch(tiny, secConfig, 4, le32(4)), "config", "register write 0: tile 4 out of range"},
		{"config count", patch(tiny, secConfig, 0, le32(1<<30)), "config", "register write count 1073741824 exceeds file size"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := ipuexe.Read(tt.data)
			if err == nil {
				t.Fatalf("Read succeeded (%d tiles), want error containing %q", p.Tiles, tt.want)
			}
			msg := err.Error()
			var fe *ipuexe.FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("error %q is not a *FormatError", msg)
			}
			if fe.Section != tt.section {
				t.Errorf("error %q: section %q, want %q", msg, fe.Section, tt.section)
			}
			if !strings.Contains(msg, tt.want) || strings.Contains(msg, "\n") {
				t.Errorf("error %q, want one line containing %q", msg, tt.want)
			}
			wantPrefix := "ipuexe: section " + tt.section + " at byte 0x"
			if tt.section == "header" {
				wantPrefix = "ipuexe: header at byte 0x"
			}
			if !strings.HasPrefix(msg, wantPrefix) {
				t.Errorf("error %q, want prefix %q", msg, wantPrefix)
			}
		})
	}
}

// TestReadNoImages: ReadOptions.NoImages still bounds the images'
// lengths and frames and checks the tilemap against their count, but
// does not decompress or check them.
func TestReadNoImages(t *testing.T) {
	for _, name := range order {
		checkRead(t, marshal(t, samples()[name]))
	}
	tiny := marshal(t, samples()["tiny"])
	for _, tt := range []struct {
		name string
		data []byte
		want string // "" when it reads
	}{
		{"huge image length", patch(tiny, secImages, 4, le32(0xffffffff)), "image 0: length 4294967295 exceeds the limit"},
		{"huge frame length", patch(tiny, secImages, 8, le32(0xfffffff0)), "image length 4294967280 exceeds file size"},
		{"tilemap image", patch(tiny, secTilemap, 4+4*3, le32(7)), "tile 3: image 7 out of range (2 images)"},
		{"garbage frame", patch(tiny, secImages, 12, []byte{1, 2, 3, 4}), ""},
	} {
		_, err := ipuexe.ReadWith(tt.data, ipuexe.ReadOptions{NoImages: true})
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v, want no error (frames not decompressed)", tt.name, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: error %v, want one containing %q", tt.name, err, tt.want)
		}
	}
}

func FuzzRead(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join("testdata", "*.ipuexe"))
	if len(seeds) == 0 {
		f.Fatal("no seed packages in testdata (run go test -update)")
	}
	for _, s := range seeds {
		b, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkRead(t, data)
		// Most mutations only break a CRC; repair them so that the
		// section decoders see the damage too.
		checkRead(t, fixCRCs(data))
	})
}

func fixCRCs(data []byte) []byte {
	out := append([]byte(nil), data...)
	for i := 0; i < 8; i++ {
		ent := wire.HeaderSize + wire.EntrySize*i
		if ent+wire.EntrySize > len(out) {
			break
		}
		off := binary.LittleEndian.Uint64(out[ent+8:])
		n := binary.LittleEndian.Uint64(out[ent+16:])
		if off <= uint64(len(out)) && n <= uint64(len(out))-off {
			binary.LittleEndian.PutUint32(out[ent+4:], wire.CRC(out[off:off+n]))
		}
	}
	return out
}

func checkRead(t *testing.T, data []byte) {
	// Without its images, a package reads when it reads with them, and
	// the same but for them.
	q, qerr := ipuexe.ReadWith(data, ipuexe.ReadOptions{NoImages: true})
	p, err := ipuexe.Read(data)
	if err == nil {
		if qerr != nil {
			t.Fatalf("read without images: %v; with them: ok", qerr)
		}
		want := *p
		want.Images = make([]ipuexe.Image, len(p.Images))
		if diff := cmp.Diff(&want, q, equate); diff != "" {
			t.Fatalf("read without images: mismatch (-want +got):\n%s", diff)
		}
	}
	if err != nil {
		var fe *ipuexe.FormatError
		if !errors.As(err, &fe) || strings.Contains(err.Error(), "\n") {
			t.Fatalf("error %q is not a one-line *FormatError", err)
		}
		return
	}
	var b bytes.Buffer
	if err := ipuexe.Write(&b, p); err != nil {
		t.Fatalf("Write of a read package: %v", err)
	}
	p2, err := ipuexe.Read(b.Bytes())
	if err != nil {
		t.Fatalf("Read of a rewritten package: %v", err)
	}
	if diff := cmp.Diff(p, p2, equate); diff != "" {
		t.Fatalf("mismatch (-want +got):\n%s", diff)
	}
	if err := ipuexe.Dump(io.Discard, p, ipuexe.DumpOptions{}); err != nil {
		t.Fatal(err)
	}
}
