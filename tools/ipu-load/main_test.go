package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/rogpeppe/go-internal/testscript"

	"ipu.local/formats/ipuexe"
	"ipu.local/formats/obj"
	"ipu.local/libs/arch"
	"ipu.local/libs/device"
	"ipu.local/libs/device/devicetest"
	"ipu.local/libs/sim"
	"ipu.local/libs/trace"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"ipu-load": func() { os.Exit(run(os.Args, os.Stdout, os.Stderr)) },
		"mkpkg":    func() { os.Exit(mkpkg(os.Args[1:])) },
		"devstate": func() { os.Exit(devstate(os.Args[1:])) },
		"devrun":   func() { os.Exit(devrun(os.Args[1:])) },
	})
}

// TestScript runs testdata/script/*.txtar. Besides the programs of
// TestMain the scripts have:
//
//	holdlock FILE [DURATION]  flock FILE in the test process (released
//	                          after DURATION, or by releaselock, or at the
//	                          end of the script)
//	releaselock FILE
//	cmpstderr FILE            the last command's stderr, timestamps
//	                          stripped, equals FILE
//
// and the condition [tmpfs]: this process may mount a small tmpfs in a
// user and mount namespace of its own (unshare -r -m), to fill a disk.
func TestScript(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Condition: func(cond string) (bool, error) {
			if cond != "tmpfs" {
				return false, fmt.Errorf("unknown condition %q", cond)
			}
			return canMountTmpfs(), nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"holdlock":    holdLock,
			"releaselock": releaseLock,
			"cmpstderr":   cmpStderr,
		},
	})
}

// mkpkg ARCH OUT BUSY... writes a devicetest package for ARCH whose tiles
// BUSY run the test program; bss=BYTES adds a zero-filled segment of
// BYTES at the top of their memory.
//
// Arguments set=TILE:REG=VALUE change the value of the package's write of
// REG on TILE; add=TILE:REG=VALUE append a write (numbers in Go syntax).
func mkpkg(args []string) int {
	if len(args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: mkpkg ARCH OUT BUSY... [set=TILE:REG=VALUE] [add=TILE:REG=VALUE]")
		return 2
	}
	var busy []int
	var set, add []obj.RegWrite
	bss := 0
	for _, a := range args[2:] {
		if n, ok := strings.CutPrefix(a, "bss="); ok {
			var err error
			if bss, err = strconv.Atoi(n); err != nil {
				fmt.Fprintln(os.Stderr, "mkpkg:", a, err)
				return 2
			}
			continue
		}
		if kind, w, ok := strings.Cut(a, "="); ok {
			var tile, reg, val uint32
			if _, err := fmt.Sscanf(w, "%v:%v=%v", &tile, &reg, &val); err != nil {
				fmt.Fprintln(os.Stderr, "mkpkg:", a, err)
				return 2
			}
			rw := obj.RegWrite{Tile: tile, Reg: reg, Value: val}
			if kind == "set" {
				set = append(set, rw)
			} else {
				add = append(add, rw)
			}
			continue
		}
		n, err := strconv.Atoi(a)
		if err != nil {
			fmt.Fprintln(os.Stderr, "mkpkg:", err)
			return 2
		}
		busy = append(busy, n)
	}
	pkg := devicetest.Package(args[0], busy...)
	if bss > 0 {
		// A zero-filled segment of bss bytes at the top of tile memory.
		hi := arch.MustLookup(args[0]).Memory.Hi
		for i := range pkg.Images {
			if !pkg.Images[i].Idle {
				pkg.Images[i].Segments = append(pkg.Images[i].Segments, obj.Segment{Name: "big", Kind: obj.BSS, Addr: (hi - uint32(bss)) &^ 7, Size: uint32(bss)})
			}
		}
	}
	for _, s := range set {
		found := false
		for i, w := range pkg.Config {
			if w.Tile == s.Tile && w.Reg == s.Reg {
				pkg.Config[i].Value, found = s.Value, true
			}
		}
		if !found {
			fmt.Fprintf(os.Stderr, "mkpkg: no write of register %#x on tile %d\n", s.Reg, s.Tile)
			return 2
		}
	}
	pkg.Config = append(pkg.Config, add...)
	data, err := ipuexe.Marshal(pkg)
	if err == nil {
		err = os.WriteFile(args[1], data, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mkpkg:", err)
		return 1
	}
	return 0
}

// devstate DEV prints the device's load state and, when it can run
// nothing, why.
func devstate(args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: devstate DEV")
		return 2
	}
	d, err := device.Open(args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, "devstate:", err)
		return 1
	}
	defer d.Close()
	st, err := d.State()
	if err != nil {
		fmt.Fprintln(os.Stderr, "devstate:", err)
		return 1
	}
	fmt.Printf("state=%s\n", st)
	fp, mark, err := d.Loaded()
	if err != nil {
		fmt.Printf("not runnable: %v\n", err)
		return 0
	}
	fmt.Printf("package=%.8s mark=%d\n", fp, mark)
	return 0
}

// devrun DEV PKG X0 X1 X2 X3 runs one call of the devicetest package on
// the device with input x and prints output y.
func devrun(args []string) int {
	if len(args) != 6 {
		fmt.Fprintln(os.Stderr, "usage: devrun DEV PKG X0 X1 X2 X3")
		return 2
	}
	err := func() error {
		data, err := os.ReadFile(args[1])
		if err != nil {
			return err
		}
		pkg, err := ipuexe.Read(data)
		if err != nil {
			return err
		}
		var x []uint32
		for _, a := range args[2:] {
			n, err := strconv.ParseUint(a, 10, 32)
			if err != nil {
				return err
			}
			x = append(x, uint32(n))
		}
		d, err := device.Open(args[0])
		if err != nil {
			return err
		}
		defer d.Close()
		log := trace.New(os.Stderr, trace.Options{})
		s, err := d.NewSession(pkg, ipuexe.Fingerprint(data), log)
		if err != nil {
			return err
		}
		if err := s.Attach(pkg.Host.Pages); err != nil {
			return err
		}
		if err := s.WriteInput("x", devicetest.Words(x...)); err != nil {
			return err
		}
		if _, err := s.Call("run", 0, sim.Options{}); err != nil {
			return err
		}
		y, err := s.ReadOutput("y")
		if err != nil {
			return err
		}
		fmt.Print("y =")
		for i := 0; i+4 <= len(y); i += 4 {
			fmt.Printf(" %d", int32(uint32(y[i])|uint32(y[i+1])<<8|uint32(y[i+2])<<16|uint32(y[i+3])<<24))
		}
		fmt.Println()
		return nil
	}()
	if err != nil {
		fmt.Fprintln(os.Stderr, "devrun:", err)
		return 1
	}
	return 0
}

// heldLocks are the lock files holdlock holds, by absolute path.
var heldLocks sync.Map

func holdLock(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 1 || len(args) > 2 {
		ts.Fatalf("usage: holdlock FILE [DURATION]")
	}
	path := ts.MkAbs(args[0])
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	ts.Check(err)
	ts.Check(syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB))
	_, err = f.WriteString(strconv.Itoa(os.Getpid()) + "\n")
	ts.Check(err)
	heldLocks.Store(path, f)
	release := func() {
		if f, ok := heldLocks.LoadAndDelete(path); ok {
			f.(*os.File).Close()
		}
	}
	ts.Defer(release)
	if len(args) == 2 {
		d, err := time.ParseDuration(args[1])
		ts.Check(err)
		time.AfterFunc(d, release)
	}
}

func releaseLock(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: releaselock FILE")
	}
	f, ok := heldLocks.LoadAndDelete(ts.MkAbs(args[0]))
	if !ok {
		ts.Fatalf("releaselock: %s is not held", args[0])
	}
	f.(*os.File).Close()
}

var timestamp = regexp.MustCompile(`(?m)^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z +`)

func cmpStderr(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: cmpstderr FILE")
	}
	got := timestamp.ReplaceAllString(ts.ReadFile("stderr"), "")
	want := ts.ReadFile(args[0])
	if diff := cmp.Diff(want, got); diff != "" {
		ts.Fatalf("stderr mismatch (-want +got):\n%s", diff)
	}
}

// TestExitStatus checks the statuses of the pipeline contract, which
// scripts cannot see.
func TestExitStatus(t *testing.T) {
	dir := t.TempDir()
	pkg := filepath.Join(dir, "app.ipuexe")
	if code := mkpkg([]string{"ipu21-tiny", pkg, "0"}); code != 0 {
		t.Fatal("mkpkg failed")
	}
	dev := filepath.Join(dir, "ipu0")
	held, err := device.Acquire(dev+".held", 0, trace.New(&bytes.Buffer{}, trace.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release()

	tests := []struct {
		name   string
		args   []string
		status int
		stderr string // last line
	}{
		{"ok", []string{"--device", dev, pkg}, 0, "application loaded and initial synchronization completed tile_count=4"},
		{"no device flag", []string{pkg}, 2, `ipu-load: required flag "device" not set (run ipu-load --help)`},
		{"two packages", []string{"--device", dev, pkg, pkg}, 2, "ipu-load: want exactly one package IN.ipuexe, got 2 arguments (run ipu-load --help)"},
		{"missing package", []string{"--device", dev, filepath.Join(dir, "none.ipuexe")}, 1, "ipu-load: read package: open " + filepath.Join(dir, "none.ipuexe") + ": no such file or directory"},
		{"lock held", []string{"--device", dev, "--lock", dev + ".held", "--lock-timeout", "50ms", pkg}, 1,
			fmt.Sprintf("ipu-load: hardware ownership not acquired within 50ms: %s.held is held by another process (pid %d)", dev, os.Getpid())},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			status := run(append([]string{"ipu-load"}, tt.args...), &stdout, &stderr)
			lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
			last := timestamp.ReplaceAllString(lines[len(lines)-1], "")
			last = strings.TrimPrefix(last, "INFO ")
			if status != tt.status || last != tt.stderr {
				t.Errorf("status %d, last stderr line %q; want %d, %q", status, last, tt.status, tt.stderr)
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout %q, want nothing", stdout.String())
			}
		})
	}
}

var tmpfsOnce struct {
	sync.Once
	ok bool
}

// canMountTmpfs reports whether `unshare -r -m` can mount a 128 KiB tmpfs
// here (a user namespace, and the unshare program).
func canMountTmpfs() bool {
	tmpfsOnce.Do(func() {
		dir, err := os.MkdirTemp("", "tmpfs")
		if err != nil {
			return
		}
		defer os.Remove(dir)
		cmd := exec.Command("unshare", "-r", "-m", "mount", "-t", "tmpfs", "-o", "size=128k", "tmpfs", dir)
		tmpfsOnce.ok = cmd.Run() == nil
	})
	return tmpfsOnce.ok
}
