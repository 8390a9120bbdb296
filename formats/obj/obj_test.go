package obj_test

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

	"ipu.local/formats/obj"
	"ipu.local/formats/obj/wire"
)

var update = flag.Bool("update", false, "rewrite testdata golden dumps and seed objects")

// words encodes instruction words little-endian; 0xa5000000 is halt.
func words(ws ...uint32) []byte {
	b := make([]byte, 4*len(ws))
	for i, w := range ws {
		binary.LittleEndian.PutUint32(b[4*i:], w)
	}
	return b
}

func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i / 256)
	}
	return b
}

// samples are the objects of the golden and seed files, by name.
func samples() map[string]*obj.Object {
	return map[string]*obj.Object{
		"empty": {Arch: "ipu21-tiny", Compiler: "0.1.0"},
		"small": {
			Arch: "ipu21-tiny", Compiler: "0.1.0",
			Source: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
			Tiles: []obj.Tile{{
				Index: 0, Entry: 0x4c000,
				Segments: []obj.Segment{{Name: "text", Kind: obj.Code, Addr: 0x4c000, Size: 8, Data: words(0x10100001, 0xa5000000)}},
				Symbols:  []obj.Symbol{{Name: "main", Addr: 0x4c000, Size: 8, Code: true}},
			}},
			Config: []obj.RegWrite{{Tile: obj.AllTiles, Reg: 0x100, Value: 100000}},
		},
		"full": {
			Arch: "ipu21-tiny", Compiler: "0.1.0",
			Source: "2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae",
			Tiles: []obj.Tile{
				{
					Index: 0, Entry: 0x4c010,
					Segments: []obj.Segment{
						{Name: "text", Kind: obj.Code, Addr: 0x4c000, Size: 24, Data: words(1, 2, 3, 4, 0x10100001, 0xa5000000)},
						{Name: "table", Kind: obj.Data, Addr: 0x80000, Size: 4096, Data: pattern(4096)},
						{Name: "bss", Kind: obj.BSS, Addr: 0x81000, Size: 65536},
					},
					Symbols: []obj.Symbol{
						{Name: "helper", Addr: 0x4c000, Size: 16, Code: true},
						{Name: "main", Addr: 0x4c010, Size: 8, Code: true},
						{Name: "table", Addr: 0x80000, Size: 4096},
					},
					Exchange: []obj.Transfer{{Phase: 1, Cycle: 12, Dst: 1, DstCount: 2, Words: 4}},
				},
				{
					Index: 2, Entry: 0x4c000,
					Segments: []obj.Segment{{Name: "text", Kind: obj.Code, Addr: 0x4c000, Size: 4, Data: words(0xa5000000)}},
				},
			},
			Host: obj.HostProgram{
				Phases: []obj.Phase{{Kind: obj.HostExchange, Name: "load"}, {Kind: obj.Compute, Name: "matmul"}, {Kind: obj.Exchange, Name: "gather"}},
				Pages:  []obj.Page{{ID: 1, Bytes: 4096}, {ID: 2, Bytes: 64}},
				Inputs: []obj.Tensor{
					{Name: "x", DType: "float16", Shape: []int64{4, 16}, Page: 1},
					{Name: "scale", DType: "float", Page: 1, Offset: 0x80},
				},
				Outputs: []obj.Tensor{{Name: "y", DType: "float", Shape: []int64{4}, Page: 2}},
			},
			Config: []obj.RegWrite{{Tile: obj.AllTiles, Reg: 0x100, Value: 0}, {Tile: 2, Reg: 2, Value: 7}},
		},
		// blocks lays tensors out for matrix-product tiles: every order,
		// transposed and padded blocks, and a model.
		"blocks": {
			Arch: "ipu21-tiny", Compiler: "0.1.0",
			Source: "2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae",
			Host: obj.HostProgram{
				Phases: []obj.Phase{{Kind: obj.HostExchange, Name: "in"}, {Kind: obj.Compute, Name: "mm"}, {Kind: obj.HostExchange, Name: "out"}},
				Pages:  []obj.Page{{ID: 0, Bytes: 0x400}, {ID: 1, Bytes: 0x200}},
				Inputs: []obj.Tensor{
					{Name: "a", DType: "float16", Shape: []int64{6, 8}, Page: 0, Blocks: []obj.Block{
						{Offset: 0, R0: 0, R1: 6, C0: 0, C1: 8, Rows: 8, Cols: 8, Order: obj.APanel},
						{Offset: 0x80, R0: 0, R1: 8, C0: 0, C1: 6, Rows: 8, Cols: 16, Transpose: true, Order: obj.BPanel},
						{Offset: 0x180, R0: 2, R1: 4, C0: 3, C1: 5, Rows: 2, Cols: 2},
					}},
					{Name: "bias", DType: "float", Shape: []int64{20}, Page: 0, Offset: 0x200},
				},
				Outputs: []obj.Tensor{{Name: "y", DType: "float", Shape: []int64{4, 20}, Page: 1, Accumulate: 8, Blocks: []obj.Block{
					{Offset: 0, R0: 0, R1: 4, C0: 0, C1: 16, Rows: 4, Cols: 16, Order: obj.BPanel},
					{Offset: 0x100, R0: 16, R1: 20, C0: 0, C1: 4, Rows: 4, Cols: 4, Transpose: true, Order: obj.APanel},
				}}},
				Model: []byte(`{"values":[],"nodes":[]}`),
			},
		},
		// shared: tiles holding the same data (a copied weight) store it
		// once, the later ones as references.
		"shared": sharedObject(),
	}
}

// order lists the samples in a fixed order.
var order = []string{"empty", "small", "full", "blocks", "shared"}

var equate = cmpopts.EquateEmpty()

func marshal(t testing.TB, o *obj.Object) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := obj.Write(&b, o); err != nil {
		t.Fatalf("Write: %v", err)
	}
	return b.Bytes()
}

func TestRoundTrip(t *testing.T) {
	s := samples()
	for _, name := range order {
		t.Run(name, func(t *testing.T) {
			data := marshal(t, s[name])
			got, err := obj.Read(data)
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			if diff := cmp.Diff(s[name], got, equate); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
			if again := marshal(t, got); !bytes.Equal(again, data) {
				t.Errorf("writing the object read back gives different bytes")
			}
		})
	}
}

// TestSeeds checks that the committed seed files are what Write produces
// today (-update rewrites them); they are FuzzRead's seed corpus.
func TestSeeds(t *testing.T) {
	s := samples()
	for _, name := range order {
		t.Run(name, func(t *testing.T) {
			checkGolden(t, filepath.Join("testdata", name+".ipuobj"), marshal(t, s[name]))
		})
	}
}

func disasm(w io.Writer, addr uint32, code []byte) {
	for i := 0; i+4 <= len(code); i += 4 {
		fmt.Fprintf(w, "%08x: .word 0x%08x\n", addr+uint32(i), binary.LittleEndian.Uint32(code[i:]))
	}
}

// usableMemory is the ipu21 presets' usable tile memory (libs/arch
// UsableMemory; formats may not import libs).
const usableMemory = 0xe8000 - 0x4c000 - 1104

func TestDumpGolden(t *testing.T) {
	s := samples()
	for _, name := range order {
		for _, dis := range []bool{false, true} {
			file := name + ".golden"
			opt := obj.DumpOptions{}
			if dis {
				// As ipu-dump writes it: disassembly and the memory report.
				file = name + ".disasm.golden"
				opt.Disasm = disasm
				opt.UsableMemory = usableMemory
			}
			t.Run(file, func(t *testing.T) {
				// Dump what Read returns, so the golden shows the file's content.
				o, err := obj.Read(marshal(t, s[name]))
				if err != nil {
					t.Fatal(err)
				}
				var b bytes.Buffer
				if err := obj.Dump(&b, o, opt); err != nil {
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

func TestWriteRejects(t *testing.T) {
	code := func(addr uint32, n int) obj.Segment {
		return obj.Segment{Name: "text", Kind: obj.Code, Addr: addr, Size: uint32(4 * n), Data: make([]byte, 4*n)}
	}
	tests := []struct {
		name string
		o    obj.Object
		want string
	}{
		{"unsorted tiles", obj.Object{Tiles: []obj.Tile{{Index: 3}, {Index: 1}}}, "tile 1: tiles not in increasing index order (after tile 3)"},
		{"duplicate tile", obj.Object{Tiles: []obj.Tile{{Index: 3}, {Index: 3}}}, "tile 3: tiles not in increasing index order"},
		{"negative tile", obj.Object{Tiles: []obj.Tile{{Index: -1}}}, "tile -1: index out of range"},
		{"overlap", obj.Object{Tiles: []obj.Tile{{Segments: []obj.Segment{code(0x4c000, 4), code(0x4c008, 1)}}}}, `tile 0: segment 1 "text": addr 0x4c008 overlaps segment 0 "text" (ends at 0x4c010)`},
		{"unsorted segments", obj.Object{Tiles: []obj.Tile{{Segments: []obj.Segment{code(0x4c100, 1), code(0x4c000, 1)}}}}, "not in address order"},
		{"size mismatch", obj.Object{Tiles: []obj.Tile{{Segments: []obj.Segment{{Name: "d", Kind: obj.Data, Addr: 0x80000, Size: 8, Data: []byte{1}}}}}}, `segment 0 "d": size 8 but 1 bytes of data`},
		{"bss with data", obj.Object{Tiles: []obj.Tile{{Segments: []obj.Segment{{Name: "b", Kind: obj.BSS, Size: 1, Data: []byte{1}}}}}}, "bss segment carries 1 bytes"},
		{"unknown kind", obj.Object{Tiles: []obj.Tile{{Segments: []obj.Segment{{Name: "x", Kind: 9}}}}}, "unknown kind 9"},
		{"too large", obj.Object{Tiles: []obj.Tile{{Segments: []obj.Segment{{Name: "b", Kind: obj.BSS, Size: obj.MaxTileMemory + 1}}}}}, "exceeds tile memory"},
		{"wraps", obj.Object{Tiles: []obj.Tile{{Segments: []obj.Segment{{Name: "b", Kind: obj.BSS, Addr: 0xffffff00, Size: 0x200}}}}}, "wraps the address space"},
		{"symbols unsorted", obj.Object{Tiles: []obj.Tile{{Symbols: []obj.Symbol{{Name: "b", Addr: 8}, {Name: "a", Addr: 4}}}}}, `symbol 1 "a": not in address order`},
		{"negative cycle", obj.Object{Tiles: []obj.Tile{{Exchange: []obj.Transfer{{Cycle: -1}}}}}, "transfer 0: cycle -1 is negative"},
		{"host phase kind", obj.Object{Host: obj.HostProgram{Phases: []obj.Phase{{Kind: 7, Name: "p"}}}}, `host phase 0 "p": unknown kind 7`},
		{"negative dim", obj.Object{Host: obj.HostProgram{Inputs: []obj.Tensor{{Name: "x", Shape: []int64{-2}}}}}, `host input 0 "x": dimension 0 is -2`},
		{"branch sides apart", obj.Object{Host: obj.HostProgram{Phases: make([]obj.Phase, 5), Branches: []obj.Branch{{If: "g", CondBytes: 4, Then: [2]int{1, 2}, Else: [2]int{3, 4}}}}},
			`host branch 0 (If "g"): phases then [1, 2) else [3, 4) are not consecutive ranges`},
		{"branch past the phases", obj.Object{Host: obj.HostProgram{Phases: make([]obj.Phase, 3), Branches: []obj.Branch{{If: "g", CondBytes: 4, Then: [2]int{1, 2}, Else: [2]int{2, 4}}}}},
			"within the 3 phases"},
		{"branch condition size", obj.Object{Host: obj.HostProgram{Phases: make([]obj.Phase, 3), Branches: []obj.Branch{{If: "g", CondBytes: 3, Then: [2]int{0, 1}, Else: [2]int{1, 2}}}}},
			`host branch 0 (If "g"): condition of 3 bytes`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := obj.Write(io.Discard, &tt.o)
			if err == nil {
				t.Fatalf("Write succeeded, want error containing %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "obj: ") {
				t.Errorf("error %q, want it to contain %q", err, tt.want)
			}
		})
	}
}

// section returns the table entry offset, file offset and length of
// section i (0-based).
func section(data []byte, i int) (ent, off, n int) {
	ent = wire.HeaderSize + wire.EntrySize*i
	return ent, int(binary.LittleEndian.Uint64(data[ent+8:])), int(binary.LittleEndian.Uint64(data[ent+16:]))
}

// patch returns a copy of data with b written at section sec's byte at,
// and that section's CRC recomputed, so that only the decoder sees the
// damage.
func patch(data []byte, sec, at int, b []byte) []byte {
	out := append([]byte(nil), data...)
	ent, off, n := section(out, sec)
	copy(out[off+at:], b)
	binary.LittleEndian.PutUint32(out[ent+4:], wire.CRC(out[off:off+n]))
	return out
}

func le32(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }

func TestReadCorrupt(t *testing.T) {
	small := marshal(t, samples()["small"])
	full := marshal(t, samples()["full"])
	_, tilesOff, tilesLen := section(small, 1)
	// Offsets inside the small object's tiles section.
	const (
		nSegAt   = 4 + 4 + 4          // NTile, Index, Entry
		nameAt   = nSegAt + 4         // name length
		kindAt   = nameAt + 4 + 4     // after "text"
		sizeAt   = kindAt + 1 + 1 + 4 // after kind, enc, addr
		storedAt = sizeAt + 4
	)
	tests := []struct {
		name    string
		data    []byte
		section string
		want    string
	}{
		{"empty file", nil, "header", "truncated: file is 0 bytes"},
		{"bad magic", append([]byte("\x7fELF\x02\x01\x01\x00"), small[8:]...), "header", `bad magic "\x7fELF\x02\x01\x01" (want "\x89IPUOBJ")`},
		{"unknown version", append(append([]byte(obj.Magic[:7]), 7), small[8:]...), "header", "object format version 7 not supported (want 1)"},
		{"truncated in header", small[:10], "header", "truncated: file is 10 bytes, the header needs 16"},
		{"truncated table", small[:40], "table", "truncated: file is 40 bytes"},
		{"truncated tiles", small[:tilesOff+tilesLen/2], "tiles", "exceeds file size"},
		{"truncated end", small[:len(small)-1], "config", "exceeds file size"},
		{"trailing bytes", append(append([]byte(nil), small...), 0), "config", "1 unexpected bytes after the last section"},
		{"bad crc", func() []byte { b := append([]byte(nil), small...); b[tilesOff+kindAt-1] ^= 0x20; return b }(), "tiles", "crc mismatch"},
		{"huge segment length", patch(small, 1, storedAt, le32(0xffffffff)), "tiles", "tile 0: segment length 4294967295 exceeds file size (33 bytes left)"},
		{"huge segment count", patch(small, 1, nSegAt, le32(0xffffffff)), "tiles", "tile 0: segment count 4294967295 exceeds file size"},
		{"huge segment size", patch(small, 1, sizeAt, le32(0xfffffff0)), "tiles", "exceeds tile memory"},
		{"huge name", patch(small, 1, nameAt, le32(0x7fffffff)), "tiles", "segment name length 2147483647 exceeds file size"},
		{"unknown segment kind", patch(small, 1, kindAt, []byte{5}), "tiles", `segment 0 "text": unknown kind 5`},
		{"size mismatch", patch(small, 1, sizeAt, le32(4)), "tiles", "size 4 but 8 bytes of data"},
		{"huge tile count", patch(small, 1, 0, le32(0x10000000)), "tiles", "tile count 268435456 exceeds file size"},
		{"tile index", patch(small, 1, 4, le32(99999)), "tiles", "tile 99999: index out of range"},
		{"segments exceed tile memory", func() []byte {
			two := marshal(t, &obj.Object{Tiles: []obj.Tile{{Segments: []obj.Segment{
				{Name: "b1", Kind: obj.BSS, Addr: 0x80000, Size: 300000},
				{Name: "b2", Kind: obj.BSS, Addr: 0xd0000, Size: 300000},
			}}}})
			_, off, n := section(two, 1)
			i := bytes.Index(two[off:off+n], []byte("b2"))
			return patch(two, 1, i+2+1+1+4, le32(400000))
		}(), "tiles", `tile 0: segment 1 "b2": segments total 700000 bytes, more than tile memory (638976 bytes)`},
		{"zstd garbage", func() []byte {
			// The full object's 4 KiB table is compressed; scramble its frame.
			_, off, n := section(full, 1)
			i := bytes.Index(full[off:off+n], []byte("table"))
			return patch(full, 1, i+len("table")+1+1+4+4+4+8, []byte{0xde, 0xad, 0xbe, 0xef})
		}(), "tiles", `segment 1 "table": zstd:`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := obj.Read(tt.data)
			if err == nil {
				t.Fatalf("Read succeeded (%d tiles), want error containing %q", len(o.Tiles), tt.want)
			}
			msg := err.Error()
			var fe *obj.FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("error %q is not a *FormatError", msg)
			}
			if fe.Section != tt.section {
				t.Errorf("error %q: section %q, want %q", msg, fe.Section, tt.section)
			}
			if !strings.Contains(msg, tt.want) || strings.Contains(msg, "\n") {
				t.Errorf("error %q, want one line containing %q", msg, tt.want)
			}
			wantPrefix := "obj: section " + tt.section + " at byte 0x"
			if tt.section == "header" {
				wantPrefix = "obj: header at byte 0x"
			}
			if !strings.HasPrefix(msg, wantPrefix) {
				t.Errorf("error %q, want prefix %q", msg, wantPrefix)
			}
		})
	}
}

func TestFingerprint(t *testing.T) {
	if got, want := obj.Fingerprint([]byte("test")), "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"; got != want {
		t.Errorf("Fingerprint = %s, want %s", got, want)
	}
}

func FuzzRead(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join("testdata", "*.ipuobj"))
	if len(seeds) == 0 {
		f.Fatal("no seed objects in testdata (run go test -update)")
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

// fixCRCs returns a copy of data with the CRC of every table entry that
// lies inside the file recomputed.
func fixCRCs(data []byte) []byte {
	out := append([]byte(nil), data...)
	for i := 0; ; i++ {
		ent := wire.HeaderSize + wire.EntrySize*i
		if i >= 8 || ent+wire.EntrySize > len(out) {
			return out
		}
		off := binary.LittleEndian.Uint64(out[ent+8:])
		n := binary.LittleEndian.Uint64(out[ent+16:])
		if off <= uint64(len(out)) && n <= uint64(len(out))-off {
			binary.LittleEndian.PutUint32(out[ent+4:], wire.CRC(out[off:off+n]))
		}
	}
}

func checkRead(t *testing.T, data []byte) {
	o, err := obj.Read(data)
	if err != nil {
		var fe *obj.FormatError
		if !errors.As(err, &fe) || strings.Contains(err.Error(), "\n") {
			t.Fatalf("error %q is not a one-line *FormatError", err)
		}
		return
	}
	// What Read accepts, Write accepts, and reads back the same.
	var b bytes.Buffer
	if err := obj.Write(&b, o); err != nil {
		t.Fatalf("Write of a read object: %v", err)
	}
	o2, err := obj.Read(b.Bytes())
	if err != nil {
		t.Fatalf("Read of a rewritten object: %v", err)
	}
	if diff := cmp.Diff(o, o2, equate); diff != "" {
		t.Fatalf("mismatch (-want +got):\n%s", diff)
	}
	if err := obj.Dump(io.Discard, o, obj.DumpOptions{}); err != nil {
		t.Fatal(err)
	}
}

// Branches go through the host program; an object without them has the
// bytes it had before branches existed (the list is left out).
func TestBranchesRoundTrip(t *testing.T) {
	o := samples()["full"]
	before := marshal(t, o)
	o.Host.Phases = []obj.Phase{{Kind: obj.HostExchange, Name: "fetch"}, {Kind: obj.Exchange, Name: "branch:g"}, {Kind: obj.Compute, Name: "then:g"},
		{Kind: obj.Compute, Name: "else:g"}, {Kind: obj.Compute, Name: "else-end:g"}, {Kind: obj.HostExchange, Name: "result"}}
	o.Host.Branches = []obj.Branch{{If: "g", CondTile: 3, CondAddr: 0x80010, CondBytes: 4, Then: [2]int{2, 3}, Else: [2]int{3, 5}}}
	got, err := obj.Read(marshal(t, o))
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	if diff := cmp.Diff(o, got, equate); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{0, 1, 2, 5}, got.Host.PhasePath([]bool{true})); diff != "" {
		t.Errorf("then path: mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{0, 1, 3, 4, 5}, got.Host.PhasePath([]bool{false})); diff != "" {
		t.Errorf("else path: mismatch (-want +got):\n%s", diff)
	}
	for _, tc := range []struct {
		word []byte
		want bool
	}{{[]byte{0, 0, 0x80, 0x3f}, true}, {[]byte{0, 0, 0, 0}, false}, {[]byte{0, 0, 0, 0x80}, false}} {
		if got := o.Host.Branches[0].Taken(tc.word); got != tc.want {
			t.Errorf("Taken(% x) = %v, want %v", tc.word, got, tc.want)
		}
	}
	o.Host.Branches = nil
	o.Host.Phases = samples()["full"].Host.Phases
	if !bytes.Equal(marshal(t, o), before) {
		t.Errorf("an object without branches changed its bytes")
	}
}
