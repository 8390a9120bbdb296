package asm

import (
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"ipu.local/formats/obj"
	"ipu.local/libs/isa"
)

var update = flag.Bool("update", false, "rewrite golden files")

func mustAssemble(t testing.TB, name string, src []byte) *obj.Object {
	t.Helper()
	o, err := Assemble(name, src, Options{})
	if err != nil {
		t.Fatalf("assemble %s:\n%v", name, err)
	}
	return o
}

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var encodingComment = regexp.MustCompile(`//\s*([0-9a-f]{8})\s*$`)

// TestEncodings checks every line of encodings.s against the encoding
// written next to it, and that the file covers the whole table.
func TestEncodings(t *testing.T) {
	src := readFile(t, "testdata/encodings.s")
	o := mustAssemble(t, "encodings.s", src)
	if len(o.Tiles) != 1 || len(o.Tiles[0].Segments) != 1 {
		t.Fatalf("want one tile with one segment, got %+v", o.Tiles)
	}
	code := o.Tiles[0].Segments[0].Data
	covered := map[isa.Op]bool{}
	n := 0
	for i, line := range strings.Split(string(src), "\n") {
		m := encodingComment.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		want, _ := strconv.ParseUint(m[1], 16, 32)
		if 4*n+4 > len(code) {
			t.Fatalf("line %d: code ends after %d words", i+1, n)
		}
		got := binary.LittleEndian.Uint32(code[4*n:])
		if got != uint32(want) {
			t.Errorf("line %d: %s: got %08x, want %08x", i+1, strings.TrimSpace(line), got, want)
		}
		covered[isa.Op(got>>24)] = true
		n++
	}
	if 4*n != len(code) {
		t.Errorf("%d instruction lines but %d words of code", n, len(code)/4)
	}
	for _, in := range isa.Table() {
		if !covered[in.Op] {
			t.Errorf("encodings.s has no %s (opcode %#02x)", in.Name, uint8(in.Op))
		}
	}
}

// ignoreSource ignores what legitimately differs between an object and
// the one assembled from its disassembly.
var ignoreSource = cmp.Options{
	cmpopts.IgnoreFields(obj.Object{}, "Source"),
	cmpopts.EquateEmpty(),
	fastBytes,
}

// fastBytes compares non-empty byte slices as a whole: element by element
// through options, big segments take seconds.
var fastBytes = cmp.FilterValues(func(a, b []byte) bool { return len(a)+len(b) > 0 }, cmp.Comparer(bytes.Equal))

var ignoreSymbols = cmpopts.IgnoreFields(obj.Tile{}, "Symbols")

func roundTrip(t *testing.T, name string, o *obj.Object) *obj.Object {
	t.Helper()
	src := DisassembleObject(o)
	o2, err := Assemble(name+".dis", src, Options{})
	if err != nil {
		t.Fatalf("reassemble the disassembly of %s: %v\n%s", name, err, src)
	}
	if diff := cmp.Diff(o, o2, ignoreSource, ignoreSymbols); diff != "" {
		t.Fatalf("%s: round trip mismatch (-want +got):\n%s", name, diff)
	}
	return o2
}

func TestRoundTripFiles(t *testing.T) {
	for _, name := range []string{"encodings.s", "program.s"} {
		t.Run(name, func(t *testing.T) {
			o := mustAssemble(t, name, readFile(t, filepath.Join("testdata", name)))
			o2 := roundTrip(t, name, o)
			// The labels of the source survive as symbols.
			if diff := cmp.Diff(o, o2, ignoreSource); diff != "" {
				t.Errorf("symbols mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// randomInst returns a random valid instruction.
func randomInst(r *rand.Rand) isa.Inst {
	table := isa.Table()
	in := table[r.Intn(len(table))]
	i := isa.Inst{Op: in.Op}
	reg := func(align int) uint8 { return uint8(r.Intn(16/align) * align) }
	for _, k := range in.Operands {
		switch k {
		case isa.MD, isa.AD:
			i.D = reg(1)
		case isa.AD2:
			i.D = reg(2)
		case isa.AD4:
			i.D = reg(4)
		case isa.MA, isa.AA, isa.MemOff, isa.MemInc:
			i.A = reg(1)
		case isa.AA2:
			i.A = reg(2)
		case isa.MB, isa.AB:
			i.B = reg(1)
		case isa.AB2:
			i.B = reg(2)
		case isa.MC, isa.AC:
			i.C = reg(1)
		case isa.AC2:
			i.C = reg(2)
		}
		switch k {
		case isa.Imm8:
			i.Imm = int32(r.Intn(256))
		case isa.Imm16, isa.Rel16, isa.MemOff, isa.MemInc:
			i.Imm = int32(r.Intn(1<<16) - 1<<15)
		case isa.Imm16U:
			i.Imm = int32(r.Intn(1 << 16))
		case isa.Imm20:
			i.Imm = int32(r.Intn(1 << 20))
		case isa.Rel20:
			i.Imm = int32(r.Intn(1<<20) - 1<<19)
		case isa.CSRImm:
			i.Imm = int32(r.Intn(isa.NumCSR))
		}
	}
	return i
}

// TestRoundTripRandom disassembles and reassembles random instructions.
func TestRoundTripRandom(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	const n = 10000
	code := make([]byte, 4*n)
	for k := 0; k < n; k++ {
		w, err := isa.Encode(randomInst(r))
		if err != nil {
			t.Fatal(err)
		}
		isa.PutWord(code[4*k:], w)
	}
	o := &obj.Object{Arch: "ipu21", Compiler: "0.1.0", Tiles: []obj.Tile{{
		Index: 7, Entry: 0x4c000,
		Segments: []obj.Segment{{Name: "text", Kind: obj.Code, Addr: 0x4c000, Size: uint32(len(code)), Data: code}},
	}}}
	roundTrip(t, "random", o)
}

// TestRoundTripObject covers what assembly written by hand rarely has:
// invalid words, odd sizes and addresses, names that need quotes.
func TestRoundTripObject(t *testing.T) {
	seg := func(name string, kind obj.SegKind, addr uint32, data []byte, size uint32) obj.Segment {
		if kind != obj.BSS {
			size = uint32(len(data))
		}
		return obj.Segment{Name: name, Kind: kind, Addr: addr, Size: size, Data: data}
	}
	o := &obj.Object{
		Arch: "ipu21-tiny", Compiler: "0.1.0",
		Tiles: []obj.Tile{
			{Index: 0, Entry: 0x4c004, Segments: []obj.Segment{
				seg("text 1", obj.Code, 0x4c000, []byte{0, 0, 0, 0, 0, 0, 0, 0xff, 1, 2, 3}, 0),
				seg(".data", obj.Data, 0x80001, []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22}, 0),
				seg("zeros", obj.BSS, 0x90000, nil, 100),
			}, Symbols: []obj.Symbol{
				{Name: "start", Addr: 0x4c000, Size: 4, Code: true},
				{Name: "bad name", Addr: 0x4c004},
				{Name: "mid", Addr: 0x80003},
				{Name: "inbss", Addr: 0x90010},
				{Name: "end", Addr: 0x90064},
			}, Exchange: []obj.Transfer{{Phase: 2, Cycle: 99, Dst: 3, DstCount: 1, Words: 5}}},
			{Index: 1, Entry: 0},
			{Index: 2, Entry: 0x4c004, Segments: []obj.Segment{seg("c", obj.Code, 0x4c002, []byte{1, 2, 3, 4, 5, 6}, 0)}},
			{Index: 3, Entry: 0x4c004, Segments: []obj.Segment{seg("text 1", obj.Code, 0x4c000, []byte{0, 0, 0, 0, 0, 0, 0, 0xff, 1, 2, 3}, 0)}},
		},
		Host: obj.HostProgram{
			Phases:  []obj.Phase{{Kind: obj.HostExchange, Name: "in \"quoted\""}, {Kind: obj.Compute, Name: ""}},
			Pages:   []obj.Page{{ID: 3, Bytes: 100}, {ID: 0, Bytes: 1 << 24}},
			Inputs:  []obj.Tensor{{Name: "a/b:0", DType: "float16", Shape: []int64{2, 0, 5}, Page: 3, Offset: 0}},
			Outputs: []obj.Tensor{{Name: "y", DType: "float8e4m3fnuz", Page: 0, Offset: 7, Accumulate: 64}},
		},
		Config: []obj.RegWrite{{Tile: obj.AllTiles, Reg: 0x100, Value: 5}, {Tile: 2, Reg: 0x1, Value: 0x4c000}, {Tile: 3, Reg: 0x77, Value: 0xffffffff}},
	}
	roundTrip(t, "object", o)
}

func TestGoldenDisassembly(t *testing.T) {
	o := mustAssemble(t, "program.s", readFile(t, "testdata/program.s"))
	o.Source = "(source)"
	got := DisassembleObject(o)
	path := "testdata/program.dis"
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want := readFile(t, path)
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("disassembly mismatch (-want +got), run with -update if intended:\n%s", diff)
	}
}

func TestDisassemble(t *testing.T) {
	word := func(ws ...uint32) []byte {
		b := make([]byte, 4*len(ws))
		for i, w := range ws {
			isa.PutWord(b[4*i:], w)
		}
		return b
	}
	tests := []struct {
		name string
		addr uint32
		code []byte
		want string
	}{
		{"empty", 0x4c000, nil, ""},
		{"add", 0x4c000, word(0x01123000), "0004c000  01123000  add $m1, $m2, $m3\n"},
		{"branch", 0x4c010, word(0x200ffffe), "0004c010  200ffffe  br 0x4c00c\n"},
		{"memory", 0x4c000, word(0x3212fff8, 0x30ff0000), "0004c000  3212fff8  ldm $m1, [$m2-=8]\n0004c004  30ff0000  ldm $mzero, [$mzero]\n"},
		{"unknown opcode", 0x4c000, word(0xff000000), "0004c000  ff000000  .word 0xff000000  // invalid: unknown opcode 0xff\n"},
		{"reserved bits", 0x4c000, word(0x00000001), "0004c000  00000001  .word 0x00000001  // invalid: nop: reserved bits set\n"},
		{"misaligned pair", 0x4c000, word(0x36100000), "0004c000  36100000  .word 0x36100000  // invalid: ld64: register $a1 is not a multiple of 2\n"},
		{"tail", 0x4c000, []byte{0, 0, 0, 0, 9, 8}, "0004c000  00000000  nop\n0004c004            .byte 0x09, 0x08\n"},
		{"rpti", 0x4c000, word(0x26000403), "0004c000  26000403  rpti 4, 3\n"},
		{"csr", 0x4c000, word(0xa6100005, 0xa7020003), "0004c000  a6100005  get $m1, tiles\n0004c004  a7020003  put fp8, $m2\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := Disassemble(&b, tc.addr, tc.code); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, b.String()); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDeterministic(t *testing.T) {
	src := readFile(t, "testdata/program.s")
	a := mustAssemble(t, "program.s", src)
	b := mustAssemble(t, "program.s", src)
	if diff := cmp.Diff(a, b, fastBytes); diff != "" {
		t.Errorf("two runs differ (-first +second):\n%s", diff)
	}
	if !bytes.Equal(DisassembleObject(a), DisassembleObject(b)) {
		t.Error("two disassemblies differ")
	}
}

// Example-style checks of the semantics the syntax document promises.
func TestSemantics(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want func(o *obj.Object) string // "" when as expected
	}{
		{"default tile 0 and entry", `
.section text, code
	nop
start:
	halt
`, func(o *obj.Object) string {
			return check(len(o.Tiles) == 1 && o.Tiles[0].Index == 0 && o.Tiles[0].Entry == 0x4c000 &&
				o.Tiles[0].Symbols[0] == obj.Symbol{Name: "start", Addr: 0x4c004, Size: 4, Code: true}, o)
		}},
		{"per-tile labels and subset blocks", `
.tile 0-2
.section text, code
	br next
.tile 1
.section extra, code
	nop
	nop
.tile 0-2
.section more, code
next:
	halt
`, func(o *obj.Object) string {
			if len(o.Tiles) != 3 {
				return fmt.Sprintf("tiles %d", len(o.Tiles))
			}
			// Tile 1's "more" comes after its "extra"; tiles 0 and 2 have it
			// right after "text" (aligned to 8).
			t0, t1 := o.Tiles[0], o.Tiles[1]
			return check(t0.Segments[1].Addr == 0x4c008 && t1.Segments[2].Addr == 0x4c010 &&
				binary.LittleEndian.Uint32(t0.Segments[0].Data) == 0x20000001 &&
				binary.LittleEndian.Uint32(t1.Segments[0].Data) == 0x20000003 &&
				cmp.Equal(o.Tiles[0].Segments, o.Tiles[2].Segments), o)
		}},
		{"data placement and align", `
.section d, data
	.byte 1
	.align 4
	.half -1
.section b, bss
	.space 3
.section d2, data
	.word 7
`, func(o *obj.Object) string {
			s := o.Tiles[0].Segments
			return check(len(s) == 3 && s[0].Addr == 0x80000 && s[0].Size == 6 &&
				bytes.Equal(s[0].Data, []byte{1, 0, 0, 0, 0xff, 0xff}) &&
				s[1].Addr == 0x80008 && s[1].Kind == obj.BSS && s[1].Size == 3 &&
				s[2].Addr == 0x80010, o)
		}},
		{"code align pads with nop", `
.section t, code, 0x4c004
	halt
	.align 16
	halt
`, func(o *obj.Object) string {
			s := o.Tiles[0].Segments[0]
			return check(s.Size == 16 && bytes.Equal(s.Data[4:12], make([]byte, 8)), o)
		}},
		{"floats", `
.section d, data
	.float 1.5, -2, 3
	.f16 1.0, 65504, 0.000000059604644775390625, 1.00048828125, 1.000488281250000000001
`, func(o *obj.Object) string {
			d := o.Tiles[0].Segments[0].Data
			return check(bytes.Equal(d, []byte{
				0, 0, 0xc0, 0x3f, 0, 0, 0, 0xc0, 0, 0, 0x40, 0x40,
				0x00, 0x3c, 0xff, 0x7b, 0x01, 0x00, 0x00, 0x3c, 0x01, 0x3c}), o)
		}},
		{"host and config", `
.arch ipu21-tiny
.equ P, 1
.page P, 32
.input in, float, [2, 2], P, 0
.output "out", int8, [], P, 16, 3
.phase compute, "c"
.config entry, 0x4c000, 3
.config 0x100, -1
`, func(o *obj.Object) string {
			want := obj.HostProgram{
				Phases:  []obj.Phase{{Kind: obj.Compute, Name: "c"}},
				Pages:   []obj.Page{{ID: 1, Bytes: 32}},
				Inputs:  []obj.Tensor{{Name: "in", DType: "float", Shape: []int64{2, 2}, Page: 1}},
				Outputs: []obj.Tensor{{Name: "out", DType: "int8", Page: 1, Offset: 16, Accumulate: 3}},
			}
			return check(cmp.Equal(want, o.Host, cmpopts.EquateEmpty()) && len(o.Tiles) == 0 &&
				cmp.Equal(o.Config, []obj.RegWrite{{Tile: 3, Reg: 1, Value: 0x4c000}, {Tile: obj.AllTiles, Reg: 0x100, Value: 0xffffffff}}), o)
		}},
		{"per-tile entry and transfers", `
.arch ipu21-tiny
.tile 0-3
.section t, code
a:	nop
b:	halt
.xfer 0, 5, 0, 4, 1
.tile 1
.entry b
.xfer 1, 6, 2, 1, 2
.tile 2-3
.xfer 2, 7, 3, 1, 3
`, func(o *obj.Object) string {
			x0 := obj.Transfer{Phase: 0, Cycle: 5, Dst: 0, DstCount: 4, Words: 1}
			return check(len(o.Tiles) == 4 && o.Tiles[1].Entry == 0x4c004 && o.Tiles[2].Entry == 0x4c000 &&
				cmp.Equal(o.Tiles[0].Exchange, []obj.Transfer{x0}) &&
				cmp.Equal(o.Tiles[1].Exchange, []obj.Transfer{x0, {Phase: 1, Cycle: 6, Dst: 2, DstCount: 1, Words: 2}}) &&
				cmp.Equal(o.Tiles[3].Exchange, []obj.Transfer{x0, {Phase: 2, Cycle: 7, Dst: 3, DstCount: 1, Words: 3}}), o)
		}},
		{"tile list", `
.arch ipu21-tiny
.tile 3, 0-1
.xfer 0, 1, 2, 2, 3
`, func(o *obj.Object) string {
			return check(len(o.Tiles) == 3 && o.Tiles[2].Index == 3 && o.Tiles[0].Exchange[0].DstCount == 2, o)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o, err := Assemble("t.s", []byte(tc.src), Options{})
			if err != nil {
				t.Fatal(err)
			}
			if msg := tc.want(o); msg != "" {
				t.Error(msg)
			}
			roundTrip(t, tc.name, o)
		})
	}
}

func check(ok bool, o *obj.Object) string {
	if ok {
		return ""
	}
	return fmt.Sprintf("unexpected object: %+v", o)
}

// TestErrors assembles each testdata/errors/*.s and matches its errors
// against the "// ERROR: substring" comments on the lines at fault.
func TestErrors(t *testing.T) {
	files, err := filepath.Glob("testdata/errors/*.s")
	if err != nil || len(files) == 0 {
		t.Fatalf("no error tests: %v", err)
	}
	wantRe := regexp.MustCompile(`// ERROR: (.*)$`)
	for _, path := range files {
		name := filepath.Base(path)
		t.Run(name, func(t *testing.T) {
			src := readFile(t, path)
			want := map[int][]string{}
			for i, line := range strings.Split(string(src), "\n") {
				if m := wantRe.FindStringSubmatch(line); m != nil {
					want[i+1] = append(want[i+1], strings.TrimSpace(m[1]))
				}
			}
			_, err := Assemble(name, src, Options{})
			if err == nil {
				t.Fatal("no error")
			}
			list, ok := err.(ErrorList)
			if !ok {
				t.Fatalf("error is %T, want ErrorList", err)
			}
			for _, e := range list {
				if e.File != name {
					t.Errorf("error names file %q: %v", e.File, e)
				}
				subs := want[e.Line]
				found := -1
				for k, sub := range subs {
					if strings.Contains(e.Msg, sub) {
						found = k
						break
					}
				}
				if found < 0 {
					t.Errorf("unexpected error: %v", e)
					continue
				}
				want[e.Line] = append(subs[:found], subs[found+1:]...)
			}
			for line, subs := range want {
				for _, sub := range subs {
					t.Errorf("%s:%d: missing error %q", name, line, sub)
				}
			}
		})
	}
}

func TestTooManyErrors(t *testing.T) {
	src := strings.Repeat("bogus\n", 20)
	_, err := Assemble("x.s", []byte(src), Options{})
	list, _ := err.(ErrorList)
	if len(list) != MaxErrors+1 || list[MaxErrors].Msg != "too many errors" {
		t.Fatalf("got %d errors:\n%v", len(list), err)
	}
	if got := list[0].Error(); got != "x.s:1:1: unknown instruction bogus" {
		t.Errorf("first error %q", got)
	}
}

func TestArchOption(t *testing.T) {
	src := []byte(".tile 100\n")
	if _, err := Assemble("x.s", src, Options{Arch: "ipu21-tiny"}); err == nil || !strings.Contains(err.Error(), "x.s:1:7: tile 100 outside the architecture") {
		t.Errorf("got %v", err)
	}
	o, err := Assemble("x.s", src, Options{})
	if err != nil || o.Arch != "ipu21" {
		t.Errorf("got %v, %v", o, err)
	}
	if _, err := Assemble("x.s", src, Options{Arch: "nope"}); err == nil || !strings.HasPrefix(err.Error(), "x.s: unknown architecture \"nope\"") {
		t.Errorf("got %v", err)
	}
}

func FuzzAssemble(f *testing.F) {
	for _, pattern := range []string{"testdata/*.s", "testdata/errors/*.s"} {
		files, _ := filepath.Glob(pattern)
		for _, path := range files {
			f.Add(readFile(f, path))
		}
	}
	f.Add([]byte(".tile 0-3\n.section a, data\n.zero 100000\n.tile 1\n.section b, code\nx: br x\n"))
	saved := maxOutputBytes
	maxOutputBytes = 4 << 20
	defer func() { maxOutputBytes = saved }()
	f.Fuzz(func(t *testing.T, src []byte) {
		o, err := Assemble("fuzz.s", src, Options{Arch: "ipu21-tiny"})
		if err != nil {
			if _, ok := err.(ErrorList); !ok {
				t.Fatalf("error is %T", err)
			}
			for _, line := range strings.Split(err.Error(), "\n") {
				if !strings.HasPrefix(line, "fuzz.s:") {
					t.Fatalf("error line without position: %q", line)
				}
			}
			return
		}
		dis := DisassembleObject(o)
		o2, err := Assemble("fuzz.dis", dis, Options{Arch: "ipu21-tiny"})
		if err != nil {
			t.Fatalf("reassemble: %v\n%s", err, dis)
		}
		if diff := cmp.Diff(o, o2, ignoreSource, ignoreSymbols); diff != "" {
			t.Fatalf("round trip mismatch (-want +got):\n%s", diff)
		}
	})
}
