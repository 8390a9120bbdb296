package main

import (
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"ipu.local/formats/ipuexe"
	"ipu.local/formats/obj"
	"ipu.local/formats/obj/wire"
	"ipu.local/libs/isa"
	"ipu.local/libs/sim"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"ipu-pack": func() { os.Exit(run(os.Args, os.Stdout, os.Stderr)) },
		"mkobj":    func() { os.Exit(mkobj(os.Args[1:])) },
		"pkginfo":  func() { os.Exit(pkginfo(os.Args[1:])) },
	})
}

// TestScript runs testdata/script/*.txtar, with the programs of TestMain:
//
//	mkobj [-flip SECTION] [-arch NAME] ARCH OUT TILE...
//	    write an object for ARCH whose TILEs run a small program (tile
//	    t's program stores t, so tiles with the same number... differ);
//	    -flip damages one byte of SECTION, -arch overrides the recorded
//	    architecture name
//	pkginfo PKG OBJ
//	    print the package's header, images and tilemap summary, and
//	    whether it records OBJ's fingerprint
func TestScript(t *testing.T) {
	testscript.Run(t, testscript.Params{Dir: "testdata/script"})
}

// testObject returns an object for arch whose tiles busy run the same
// program, except tile 3, whose program differs (so that the package has
// two program images besides the idle one).
func testObject(archName string, busy []int) *obj.Object {
	o := &obj.Object{
		Arch: archName, Compiler: "0.1.0",
		Source: obj.Fingerprint([]byte("mkobj")),
		Host:   obj.HostProgram{Phases: []obj.Phase{{Kind: obj.Compute, Name: "main"}}},
		Config: []obj.RegWrite{{Tile: obj.AllTiles, Reg: sim.RegWatchdog, Value: 100000}},
	}
	for _, t := range busy {
		halt := isa.MustEncode(isa.Inst{Op: isa.HALT})
		ws := []uint32{halt, halt}
		if t == 3 {
			ws = append(ws, halt)
		}
		code := make([]byte, 4*len(ws))
		for i, w := range ws {
			isa.PutWord(code[4*i:], w)
		}
		o.Tiles = append(o.Tiles, obj.Tile{
			Index: t, Entry: 0x4c004,
			Segments: []obj.Segment{
				{Name: "text", Kind: obj.Code, Addr: 0x4c000, Size: uint32(len(code)), Data: code},
				{Name: "data", Kind: obj.Data, Addr: 0x80000, Size: 1024, Data: bytes.Repeat([]byte{1, 2, 3, 4}, 256)},
				{Name: "bss", Kind: obj.BSS, Addr: 0x80400, Size: 4096},
			},
			Symbols: []obj.Symbol{{Name: "main", Addr: 0x4c004, Size: 4, Code: true}},
		})
	}
	return o
}

func mkobj(args []string) int {
	fs := flag.NewFlagSet("mkobj", flag.ContinueOnError)
	flip := fs.String("flip", "", "damage one byte of this section")
	name := fs.String("arch", "", "record this architecture name")
	if err := fs.Parse(args); err != nil || fs.NArg() < 2 {
		fmt.Fprintln(os.Stderr, "usage: mkobj [-flip SECTION] [-arch NAME] ARCH OUT TILE...")
		return 2
	}
	var busy []int
	for _, a := range fs.Args()[2:] {
		n, err := strconv.Atoi(a)
		if err != nil {
			fmt.Fprintln(os.Stderr, "mkobj:", err)
			return 2
		}
		busy = append(busy, n)
	}
	o := testObject(fs.Arg(0), busy)
	if *name != "" {
		o.Arch = *name
	}
	data, err := obj.Marshal(o)
	if err == nil && *flip != "" {
		err = flipByte(data, *flip)
	}
	if err == nil {
		err = os.WriteFile(fs.Arg(1), data, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mkobj:", err)
		return 1
	}
	return 0
}

// flipByte inverts the last byte of the named section (leaving its CRC).
func flipByte(data []byte, section string) error {
	for i, s := range []string{"meta", "tiles", "host", "config"} {
		if s != section {
			continue
		}
		ent := wire.HeaderSize + wire.EntrySize*i
		off := binary.LittleEndian.Uint64(data[ent+8:])
		n := binary.LittleEndian.Uint64(data[ent+16:])
		if n == 0 {
			return fmt.Errorf("section %s is empty", section)
		}
		data[off+n-1] ^= 0xff
		return nil
	}
	return fmt.Errorf("no section %q", section)
}

func pkginfo(args []string) int {
	if len(args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: pkginfo PKG OBJ")
		return 2
	}
	err := func() error {
		data, err := os.ReadFile(args[0])
		if err != nil {
			return err
		}
		p, err := ipuexe.Read(data)
		if err != nil {
			return err
		}
		od, err := os.ReadFile(args[1])
		if err != nil {
			return err
		}
		fmt.Printf("arch=%s compiler=%s tiles=%d images=%d\n", p.Arch, p.Compiler, p.Tiles, len(p.Images))
		users := make([][]int, len(p.Images))
		for t, i := range p.TileImage {
			users[i] = append(users[i], t)
		}
		for i, img := range p.Images {
			fmt.Printf("image %d idle=%v entry=%#x segments=%d tiles=%s\n", i, img.Idle, img.Entry, len(img.Segments), ipuexe.Ranges(users[i]))
		}
		var cfg []string
		for _, w := range p.Config {
			cfg = append(cfg, fmt.Sprintf("%d:%#x=%#x", int32(w.Tile), w.Reg, w.Value))
		}
		fmt.Printf("config %s\n", strings.Join(cfg, " "))
		fmt.Printf("object matches=%v\n", p.Object == obj.Fingerprint(od))
		return nil
	}()
	if err != nil {
		fmt.Fprintln(os.Stderr, "pkginfo:", err)
		return 1
	}
	return 0
}

// TestExitStatus checks the statuses of the pipeline contract, which
// scripts cannot see, and that a failed run leaves no output.
func TestExitStatus(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.ipuobj")
	if code := mkobj([]string{"ipu21-tiny", good, "0"}); code != 0 {
		t.Fatal("mkobj failed")
	}
	bad := filepath.Join(dir, "bad.ipuobj")
	if code := mkobj([]string{"-flip", "tiles", "ipu21-tiny", bad, "0"}); code != 0 {
		t.Fatal("mkobj failed")
	}
	out := filepath.Join(dir, "out.ipuexe")
	missing := filepath.Join(dir, "none.ipuobj")
	tests := []struct {
		name   string
		args   []string
		status int
		stderr string // last line, a prefix
	}{
		{"ok", []string{good, "-o", out}, 0, "application package written"},
		{"no output flag", []string{good}, 2, `ipu-pack: required flag "o" not set (run ipu-pack --help)`},
		{"no input", []string{"-o", out}, 2, "ipu-pack: want exactly one object IN.ipuobj, got 0 arguments (run ipu-pack --help)"},
		{"two inputs", []string{good, good, "-o", out}, 2, "ipu-pack: want exactly one object IN.ipuobj, got 2 arguments"},
		{"missing input", []string{missing, "-o", out}, 1, "ipu-pack: read object: open " + missing + ": no such file or directory"},
		{"corrupt input", []string{bad, "-o", out}, 1, "ipu-pack: " + bad + ": obj: section tiles at byte 0x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			os.Remove(out)
			var stdout, stderr bytes.Buffer
			status := run(append([]string{"ipu-pack"}, tt.args...), &stdout, &stderr)
			lines := strings.Split(strings.TrimRight(stderr.String(), "\n"), "\n")
			last := lines[len(lines)-1]
			if tt.status == 0 {
				last = last[strings.Index(last, "INFO ")+5:]
			}
			if status != tt.status || !strings.HasPrefix(last, tt.stderr) {
				t.Errorf("status %d, stderr %q; want %d, %q", status, stderr.String(), tt.status, tt.stderr)
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout %q, want nothing", stdout.String())
			}
			if tt.status != 0 {
				if len(lines) != 1 {
					t.Errorf("stderr has %d lines, want 1:\n%s", len(lines), stderr.String())
				}
				if _, err := os.Stat(out); err == nil {
					t.Errorf("%s written by a failed run", out)
				}
			}
		})
	}
}
