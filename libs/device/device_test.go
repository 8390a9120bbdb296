package device

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"ipu.local/formats/ipuexe"
	"ipu.local/formats/obj"
	"ipu.local/libs/arch"
	"ipu.local/libs/device/devicetest"
	"ipu.local/libs/isa"
	"ipu.local/libs/sim"
	"ipu.local/libs/trace"
)

const testFingerprint = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func testPackage(t testing.TB, archName string, busy ...int) *ipuexe.Package {
	t.Helper()
	return devicetest.Package(archName, busy...)
}

// busyImage is the image of the busy tiles.
func busyImage(pkg *ipuexe.Package) *ipuexe.Image {
	for i := range pkg.Images {
		if !pkg.Images[i].Idle {
			return &pkg.Images[i]
		}
	}
	return nil
}

var words = devicetest.Words

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// fixedLog logs in the seed format without times into buf.
func fixedLog(buf *bytes.Buffer) *slog.Logger {
	return trace.New(buf, trace.Options{Now: func() time.Time { return time.Time{} }})
}

func loadDevice(t *testing.T, path string, pkg *ipuexe.Package, log *slog.Logger) {
	t.Helper()
	d, err := Attach(path, pkg.Arch, log)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Load(pkg, testFingerprint, log, LoadOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
}

// call runs one session call on the device at path with input x and
// returns output y.
func call(t *testing.T, path string, pkg *ipuexe.Package, log *slog.Logger, x []byte) []byte {
	t.Helper()
	d, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	s, err := d.NewSession(pkg, testFingerprint, log)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Attach(pkg.Host.Pages); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteInput("x", x); err != nil {
		t.Fatal(err)
	}
	res, err := s.Call("run", 0, sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.AtHost || len(res.Phases) == 0 {
		t.Fatalf("call: AtHost %v after %d phases, want a host sync", res.AtHost, len(res.Phases))
	}
	y, err := s.ReadOutput("y")
	if err != nil {
		t.Fatal(err)
	}
	return y
}

func TestLoadAndRunAcrossProcesses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ipu0")
	pkg := testPackage(t, "ipu21-tiny", 0, 2, 3)
	var logBuf bytes.Buffer
	log := fixedLog(&logBuf)
	loadDevice(t, path, pkg, log)

	x := words(10, 20, 30, 40)
	// Each Open is a fresh mapping, as a new process would have: the
	// second call sees the counter the first one left in tile memory.
	for n := uint32(1); n <= 2; n++ {
		got := call(t, path, pkg, log, x)
		want := words(
			10+n, 20+n, 30+n, 40+n, // tile 0
			0, 0, 0, 0, // tile 1 is idle
			10+n+2, 20+n+2, 30+n+2, 40+n+2,
			10+n+3, 20+n+3, 30+n+3, 40+n+3,
		)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("call %d: output mismatch (-want +got):\n%s", n, diff)
		}
	}

	d, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	fp, mark, err := d.Loaded()
	if err != nil || fp != testFingerprint || mark == 0 {
		t.Errorf("Loaded() = %q, %d, %v; want the test fingerprint and a nonzero mark", fp, mark, err)
	}

	lines := messages(&logBuf)
	wantPrefixes := []string{
		`opening IPU device path="` + path + `"`,
		`IPU device attached path=` + path,
		`initializing IPU device`,
		`IPU device initialized`,
		// The watchdog and 5 registers for each of 3 busy tiles.
		fmt.Sprintf(`replaying device configuration register_writes=%d`, len(pkg.Config)),
		`loading application tile_count=4 final_mark=`,
		`application loaded and initial synchronization completed tile_count=4`,
		`starting host exchange session startup_mark=`,
		`attaching host exchange pages pages=2`,
		`host exchange session started`,
		`invoking host exchange call call="run" command=0 phases=`,
		`starting host exchange session startup_mark=`,
		`attaching host exchange pages pages=2`,
		`host exchange session started`,
		`invoking host exchange call call="run" command=0 phases=`,
	}
	if len(pkg.Config) != 1+5*3 {
		t.Errorf("package has %d register writes, want 16", len(pkg.Config))
	}
	if want := fmt.Sprintf("replaying device configuration register_writes=%d", len(pkg.Config)); len(lines) > 4 && lines[4] != want {
		t.Errorf("log line 4 = %q, want %q", lines[4], want)
	}
	if len(lines) != len(wantPrefixes) {
		t.Fatalf("got %d log lines, want %d:\n%s", len(lines), len(wantPrefixes), logBuf.String())
	}
	for i, w := range wantPrefixes {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("log line %d = %q, want prefix %q", i, lines[i], w)
		}
	}
}

func TestReloadClearsMemory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ipu0")
	log := quietLog()
	pkg := testPackage(t, "ipu21-tiny", 1)
	loadDevice(t, path, pkg, log)
	call(t, path, pkg, log, words(1, 2, 3, 4))

	// Load again: the counter on tile 1 starts over, and tile 1 is no
	// longer dirty once another package leaves it idle.
	loadDevice(t, path, pkg, log)
	got := call(t, path, pkg, log, words(1, 2, 3, 4))
	if diff := cmp.Diff(words(2+1, 3+1, 4+1, 5+1), got[16:32]); diff != "" {
		t.Errorf("after reload: tile 1 output mismatch (-want +got):\n%s", diff)
	}
	loadDevice(t, path, testPackage(t, "ipu21-tiny", 0), log)
	d, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.dirty(1) || !d.dirty(0) {
		t.Errorf("dirty bits: tile 0 %v tile 1 %v, want true false", d.dirty(0), d.dirty(1))
	}
	if !bytes.Equal(d.tileMem(1), make([]byte, len(d.tileMem(1)))) {
		t.Errorf("tile 1 memory not cleared by power-on")
	}
}

func TestSessionRefusals(t *testing.T) {
	log := quietLog()
	pkg := testPackage(t, "ipu21-tiny", 0)
	other := testPackage(t, "ipu2-tiny", 0)

	tests := []struct {
		name    string
		prepare func(t *testing.T, path string)
		want    string
	}{
		{
			name: "powered off",
			prepare: func(t *testing.T, path string) {
				if err := create(path, arch.MustLookup("ipu21-tiny")); err != nil {
					t.Fatal(err)
				}
			},
			want: "device DEV holds no application: run ipu-load",
		},
		{
			name: "crash mid-load",
			prepare: func(t *testing.T, path string) {
				d, err := Attach(path, pkg.Arch, log)
				if err != nil {
					t.Fatal(err)
				}
				defer d.Close()
				crash := errors.New("killed")
				func() {
					defer func() {
						if r := recover(); r != crash {
							t.Fatalf("recovered %v, want the simulated kill", r)
						}
					}()
					d.Load(pkg, testFingerprint, log, LoadOptions{AfterImages: func() { panic(crash) }})
				}()
			},
			want: "device DEV is not loaded: an earlier load did not finish; run ipu-load again",
		},
		{
			name: "crash mid-call",
			prepare: func(t *testing.T, path string) {
				loadDevice(t, path, pkg, log)
				d, err := Open(path)
				if err != nil {
					t.Fatal(err)
				}
				defer d.Close()
				d.setState(Running)
			},
			want: "device DEV is not loaded: an earlier call did not finish; run ipu-load again",
		},
		{
			name: "host restarted",
			prepare: func(t *testing.T, path string) {
				if durable() {
					t.Skip("the host has no boot id")
				}
				loadDevice(t, path, pkg, log)
				d, err := Open(path)
				if err != nil {
					t.Fatal(err)
				}
				defer d.Close()
				d.setBoot([bootLen]byte{1})
			},
			want: "device DEV was not loaded in this boot of the host (a board loses its application when its host restarts): run ipu-load again",
		},
		{
			name: "other package",
			prepare: func(t *testing.T, path string) {
				d, err := Attach(path, pkg.Arch, log)
				if err != nil {
					t.Fatal(err)
				}
				defer d.Close()
				if err := d.Load(pkg, "fedcba9876543210", log, LoadOptions{}); err != nil {
					t.Fatal(err)
				}
			},
			want: "device DEV runs package fedcba98..., not 01234567...: run ipu-load",
		},
		{
			name: "state checksum",
			prepare: func(t *testing.T, path string) {
				loadDevice(t, path, pkg, log)
				d, err := Open(path)
				if err != nil {
					t.Fatal(err)
				}
				defer d.Close()
				b := []byte{0}
				d.f.ReadAt(b, int64(d.g.stateOffset))
				b[0] ^= 0xff
				d.f.WriteAt(b, int64(d.g.stateOffset))
			},
			want: "device DEV: simulator state at byte 0x",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "ipu0")
			tt.prepare(t, path)
			d, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			_, err = d.NewSession(pkg, testFingerprint, log)
			want := strings.ReplaceAll(tt.want, "DEV", path)
			if err == nil || !strings.HasPrefix(err.Error(), want) {
				t.Errorf("NewSession error = %v, want %q", err, want)
			}
		})
	}

	t.Run("arch mismatch", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "ipu0")
		loadDevice(t, path, pkg, log)
		_, err := Attach(path, other.Arch, log)
		want := "device " + path + " is an ipu21-tiny device, package is for ipu2-tiny"
		if err == nil || err.Error() != want {
			t.Errorf("Attach error = %v, want %q", err, want)
		}
	})
}

func TestCorruptHeader(t *testing.T) {
	tests := []struct {
		name  string
		patch func(h []byte)
		want  string
	}{
		{"magic", func(h []byte) { copy(h, "NOTADEV!") }, `not a device file (magic "NOTADEV!")`},
		{"version", func(h []byte) { copy(h[6:], "99") }, `unsupported device file version "99" (this build reads "02")`},
		{"arch", func(h []byte) { clear(h[offArch:offTiles]); copy(h[offArch:], "ipu9") }, `corrupt header field arch: unknown architecture "ipu9"`},
		{"arch bytes", func(h []byte) { h[offArch] = 0xff }, `corrupt header field arch: byte 0 is 0xff, not printable ASCII`},
		{"tiles", func(h []byte) { binary.LittleEndian.PutUint32(h[offTiles:], 5) }, `corrupt header field tiles: is 5, architecture ipu21-tiny has 4`},
		{"tile bytes", func(h []byte) { binary.LittleEndian.PutUint32(h[offTileBytes:], 1) }, `corrupt header field tile_bytes: is 1, architecture ipu21-tiny has 638976`},
		{"stride", func(h []byte) { binary.LittleEndian.PutUint64(h[offTileStride:], 1) }, `corrupt header field tile_stride: is 1`},
		{"state offset", func(h []byte) { binary.LittleEndian.PutUint64(h[offStateOffset:], 1<<62) }, `corrupt header field state_offset`},
		{"state", func(h []byte) { binary.LittleEndian.PutUint32(h[offState:], 9) }, `corrupt header field state: unknown state 9`},
		{"fingerprint", func(h []byte) { copy(h[offFingerprint:], "ab\x00cd") }, `corrupt header field fingerprint: byte 3 after the terminating NUL is 0x63`},
		{"reserved", func(h []byte) { h[offReserved+1] = 1 }, `corrupt header field reserved: byte 0xf1 is 0x1, want 0`},
		{"dirty", func(h []byte) { h[offDirty] = 0x10 }, `corrupt header field dirty: bits set for tiles beyond tile 3`},
		{"state len", func(h []byte) { binary.LittleEndian.PutUint32(h[offStateLen:], 1<<31) }, `corrupt header field state_len`},
		{"mark", func(h []byte) { binary.LittleEndian.PutUint64(h[offMark:], 1<<63) }, `corrupt header field mark: 9223372036854775808 is out of range`},
		{"state beyond file", func(h []byte) { binary.LittleEndian.PutUint32(h[offStateLen:], 4096) }, `file is 2560000 bytes, header needs 2564096`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "ipu0")
			if err := create(path, arch.MustLookup("ipu21-tiny")); err != nil {
				t.Fatal(err)
			}
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			h := make([]byte, pageSize)
			f.ReadAt(h, 0)
			tt.patch(h)
			f.WriteAt(h, 0)
			f.Close()
			_, err = Open(path)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Open error = %v, want it to contain %q", err, tt.want)
			}
			if _, err := Attach(path, "ipu21-tiny", quietLog()); err == nil {
				t.Errorf("Attach accepted the corrupt device")
			}
		})
	}

	t.Run("truncated", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "ipu0")
		if err := create(path, arch.MustLookup("ipu21-tiny")); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(path, 8192); err != nil {
			t.Fatal(err)
		}
		_, err := Open(path)
		if err == nil || !strings.Contains(err.Error(), "file is 8192 bytes, header needs 2560000") {
			t.Errorf("Open error = %v", err)
		}
	})
}

func TestLoadErrors(t *testing.T) {
	log := quietLog()
	tests := []struct {
		name  string
		patch func(p *ipuexe.Package)
		want  string
	}{
		{"unknown register", func(p *ipuexe.Package) {
			p.Config = append(p.Config, obj.RegWrite{Tile: 1, Reg: 0x77})
		}, "configuration write 11 (tile 1 register unknown (0x77) value 0x0): configure: unknown register 0x77"},
		{"tile out of range", func(p *ipuexe.Package) {
			p.Config = append(p.Config, obj.RegWrite{Tile: 9, Reg: sim.RegFP8})
		}, "configuration write 11 (tile 9 register fp8 (0x2) value 0x0): tile 9 out of range (device has 4)"},
		{"sync group value out of range", func(p *ipuexe.Package) {
			setConfig(p, 1, sim.RegSyncGroup, 2)
		}, "configuration write 9 (tile 1 register sync_group (0x20) value 0x2): configure: register sync_group (0x20): value 0x2 is neither 0 nor 1"},
		{"executable range outside the preset's", func(p *ipuexe.Package) {
			setConfig(p, 0, sim.RegExecHi, 0x100000)
		}, "configuration write 2 (tile 0 register exec_hi (0x11) value 0x100000): configure: register exec_hi (0x11): value 0x100000 is not a 4-aligned address in the executable range"},
		{"entry misaligned", func(p *ipuexe.Package) {
			setConfig(p, 1, sim.RegEntry, 0x4c002)
		}, "configuration write 8 (tile 1 register entry (0x1) value 0x4c002)"},
		{"executable range too small", func(p *ipuexe.Package) {
			setConfig(p, 1, sim.RegExecHi, 0x4c008)
		}, "tile 1: load image 0: load: tile 1 code segment 0 [0x4c000, 0x4c0"},
		{"executable range missing", func(p *ipuexe.Package) {
			p.Config = p.Config[:6] // tile 1 has no configuration
		}, "tile 1: load image 0: load: tile 1 code segment 0 [0x4c000, 0x4c0"},
		{"not in the sync group", func(p *ipuexe.Package) {
			setConfig(p, 1, sim.RegSyncGroup, 0)
		}, "startup program: device fault: sync mismatch: tile 1 context supervisor"},
		{"sync group membership missing", func(p *ipuexe.Package) {
			p.Config = append(p.Config[:9:9], p.Config[10:]...) // tile 1's sync-group write dropped
		}, "tile 1 is not a member of the sync group (register sync_group (0x20) is 0)"},
		{"image index", func(p *ipuexe.Package) { p.TileImage[2] = 7 }, "package tile 2: image 7 of 2"},
		{"segment outside memory", func(p *ipuexe.Package) {
			busyImage(p).Segments[1].Addr = 0xE8000
		}, `image 0 segment 1 "buf": [0xe8000, +512) outside tile memory`},
		{"startup fault", func(p *ipuexe.Package) {
			code := make([]byte, 4)
			isa.PutWord(code, isa.MustEncode(isa.Inst{Op: isa.HIN, D: 1, A: 2, B: 3}))
			busyImage(p).Segments[0].Data, busyImage(p).Segments[0].Size = code, 4
		}, "startup program: device fault"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "ipu0")
			pkg := testPackage(t, "ipu21-tiny", 0, 1)
			tt.patch(pkg)
			d, err := Attach(path, pkg.Arch, log)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			err = d.Load(pkg, testFingerprint, log, LoadOptions{})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Load error = %v, want it to contain %q", err, tt.want)
			}
			if _, _, err := d.Loaded(); err == nil {
				t.Errorf("device reports loaded after a failed load")
			}
		})
	}
}

// setConfig sets the value of the package's write of reg on tile.
func setConfig(p *ipuexe.Package, tile int, reg, value uint32) {
	for i, w := range p.Config {
		if w.Tile == uint32(tile) && w.Reg == reg {
			p.Config[i].Value = value
			return
		}
	}
	panic(fmt.Sprintf("no write of register %#x on tile %d", reg, tile))
}

// TestFetchOutsideExecutableRange runs a package whose tile 1 jumps past
// its code into a data word that lies in the preset's executable range
// but outside the tile's configured one: the fetch faults, naming the
// registers.
func TestFetchOutsideExecutableRange(t *testing.T) {
	log := quietLog()
	pkg := testPackage(t, "ipu21-tiny", 0, 1)
	img := busyImage(pkg)
	code := make([]byte, 4)
	isa.PutWord(code, isa.MustEncode(isa.Inst{Op: isa.BR, Imm: 3}))
	img.Segments[0].Data, img.Segments[0].Size = code, 4
	img.Symbols[0].Size = 4
	img.Segments = append(img.Segments, obj.Segment{Name: "data", Kind: obj.Data, Addr: 0x4c010, Size: 4, Data: code})
	for _, tile := range []int{0, 1} {
		setConfig(pkg, tile, sim.RegExecHi, 0x4c004)
	}
	path := filepath.Join(t.TempDir(), "ipu0")
	d, err := Attach(path, pkg.Arch, log)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	err = d.Load(pkg, testFingerprint, log, LoadOptions{})
	want := "fetch outside executable range: tile 0 context supervisor pc 0x4c010"
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "outside the tile's executable range [0x4c000, 0x4c004) set by registers exec_lo (0x10) and exec_hi (0x11)") {
		t.Fatalf("Load error = %v, want %q and the registers", err, want)
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("error is not one line: %q", err)
	}
}

func TestCallFault(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ipu0")
	log := quietLog()
	pkg := testPackage(t, "ipu21-tiny", 0)
	loadDevice(t, path, pkg, log)
	d, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	s, err := d.NewSession(pkg, testFingerprint, log)
	if err != nil {
		t.Fatal(err)
	}
	// No pages attached: the tile's hin faults.
	_, err = s.Call("run", 0, sim.Options{})
	var f *sim.Fault
	if !errors.As(err, &f) || f.Kind != sim.FaultHost {
		t.Fatalf("Call error = %v, want a host access fault", err)
	}
	// The device is still loaded at its last sync: a good call works.
	if err := s.Attach(pkg.Host.Pages); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteInput("x", words(1, 1, 1, 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Call("run", 0, sim.Options{}); err != nil {
		t.Fatalf("call after a fault: %v", err)
	}
	if _, err := s.Call("stop", 0, sim.Options{}); err == nil || err.Error() != `unknown host exchange call "stop" (known: run)` {
		t.Errorf("unknown call: error %v", err)
	}
	if err := s.WriteInput("x", words(1)); err == nil || err.Error() != `input "x": 4 bytes, want 16 (int32 [4])` {
		t.Errorf("short input: error %v", err)
	}
	if _, err := s.ReadOutput("z"); err == nil || err.Error() != `package has no output "z"` {
		t.Errorf("unknown output: error %v", err)
	}
}

// TestSparse loads a full-size device with two busy tiles: the file's
// apparent size is every tile's memory, its disk usage a few pages.
func TestSparse(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ipu0")
	log := quietLog()
	pkg := testPackage(t, "ipu21", 0, 1471)
	loadDevice(t, path, pkg, log)
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	p := arch.MustLookup("ipu21")
	if min := int64(p.Tiles) * int64(p.Memory.Size()); st.Size < min {
		t.Fatalf("device is %d bytes, want at least %d", st.Size, min)
	}
	if used := st.Blocks * 512; used > 4<<20 {
		t.Errorf("device uses %d bytes of disk for %d apparent bytes, want a sparse file", used, st.Size)
	}
}

func TestLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ipu0.lock")
	var buf bytes.Buffer
	log := fixedLog(&buf)
	l, err := Acquire(path, time.Second, log)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = Acquire(path, 100*time.Millisecond, quietLog())
	want := "hardware ownership not acquired within 100ms: " + path + " is held by another process (pid " + strconv.Itoa(os.Getpid()) + ")"
	if err == nil || err.Error() != want {
		t.Errorf("second Acquire error = %v, want %q", err, want)
	}
	if waited := time.Since(start); waited < 100*time.Millisecond {
		t.Errorf("second Acquire gave up after %v, before its timeout", waited)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	l2, err := Acquire(path, 0, quietLog())
	if err != nil {
		t.Fatalf("Acquire after release: %v", err)
	}
	l2.Release()
	wantLog := []string{"waiting for hardware ownership path=" + path, "acquired hardware ownership path=" + path}
	if diff := cmp.Diff(wantLog, messages(&buf)); diff != "" {
		t.Errorf("log mismatch (-want +got):\n%s", diff)
	}
}

// messages returns the logged lines without time and level.
func messages(buf *bytes.Buffer) []string {
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		l = strings.TrimSpace(l)
		if i := strings.Index(l, "INFO "); i >= 0 {
			l = l[i+len("INFO "):]
		}
		lines = append(lines, l)
	}
	return lines
}

// FuzzParseHeader checks that no header page, however corrupt, panics the
// reader, and that what it accepts describes its preset exactly.
func FuzzParseHeader(f *testing.F) {
	for _, name := range []string{"ipu21-tiny", "ipu2"} {
		g := geometryOf(arch.MustLookup(name))
		f.Add(newHeader(g), int64(g.stateOffset))
	}
	f.Add([]byte("IPUDEV01"), int64(8))
	f.Fuzz(func(t *testing.T, h []byte, size int64) {
		g, err := parseHeader("dev", h, size)
		if err != nil {
			return
		}
		if want := geometryOf(g.preset); g != want || uint64(size) < g.stateOffset {
			t.Errorf("accepted geometry %+v for a file of %d bytes", g, size)
		}
	})
}
