package device

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"ipu.local/libs/sim"
)

// A write of a tile's image that the file system refuses (a full disk)
// is a one-line FileError naming the device, the tile and the cause, not
// a crash, and the device stays marked loading: it refuses sessions until
// loaded again.
func TestLoadFileFault(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ipu0")
	pkg := testPackage(t, "ipu21-tiny", 0, 1)
	log := quietLog()
	d, err := Attach(path, pkg.Arch, log)
	if err != nil {
		t.Fatal(err)
	}
	size := int64(d.g.stateOffset)
	d.failWrites = syscall.ENOSPC
	err = d.Load(pkg, testFingerprint, log, LoadOptions{})
	var fe *FileError
	if !errors.As(err, &fe) {
		t.Fatalf("Load error = %v, want a *FileError", err)
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "device "+path+": write tile 0 memory [0x") || !strings.HasSuffix(msg, ": no space left on device") || strings.Contains(msg, "\n") {
		t.Errorf("error = %q", msg)
	}
	d.failWrites = nil
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}

	// Opened again: the device is not loaded.
	if fi, err := os.Stat(path); err != nil || fi.Size() < size {
		t.Fatalf("device file: %v, %v", fi, err)
	}
	d, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if st, err := d.State(); err != nil || st != Loading {
		t.Errorf("state = %v, %v; want loading", st, err)
	}
	if _, err := d.NewSession(pkg, testFingerprint, log); err == nil || !strings.Contains(err.Error(), "run ipu-load again") {
		t.Errorf("NewSession on a failed load: %v", err)
	}
	// Loaded again, it runs.
	if err := d.Load(pkg, testFingerprint, log, LoadOptions{}); err != nil {
		t.Fatal(err)
	}
	s, err := d.NewSession(pkg, testFingerprint, log)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Attach(pkg.Host.Pages); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Call("run", 0, sim.Options{}); err != nil {
		t.Fatal(err)
	}
}

// A fault outside the device file's mapping is not the host's doing: guard
// lets it through as the panic it is.
func TestGuardOtherFault(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ipu0")
	pkg := testPackage(t, "ipu21-tiny", 0)
	d, err := Attach(path, pkg.Arch, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	defer func() {
		if recover() == nil {
			t.Error("guard swallowed a fault outside the device file")
		}
	}()
	d.guard("test", func() error {
		var p *[4]byte
		_ = p[0] // a nil dereference: not the file's fault
		return nil
	})
}

// reserve reports what the file system refuses as a FileError naming the
// tiles and the cause.
func TestReserveError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ipu0")
	pkg := testPackage(t, "ipu21-tiny", 0)
	d, err := Attach(path, pkg.Arch, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.reserve(wholeTiles(d, 0, 1, 3)); err != nil {
		t.Fatal(err)
	}
	// A read-only descriptor cannot allocate: EBADF.
	ro, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	rw := d.f
	d.f = ro
	err = d.reserve(wholeTiles(d, 1, 2))
	d.f = rw
	if err == nil || err.Error() != "device "+path+": reserve the memory of tiles 1-2: bad file descriptor" {
		t.Errorf("reserve on a read-only file: %v", err)
	}
}

// Tile memory that fails under a run on the simulator's own goroutines
// (several tiles at once) is a device fault naming the tile, not a crash.
func TestCallFileFault(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ipu0")
	pkg := testPackage(t, "ipu21-tiny", 0, 1, 2, 3)
	log := quietLog()
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
	if err := s.Attach(pkg.Host.Pages); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteInput("x", words(1, 2, 3, 4)); err != nil {
		t.Fatal(err)
	}
	opt := sim.Options{Parallel: 2}
	if _, err := s.Call("run", 0, opt); err != nil {
		t.Fatal(err)
	}
	// Cut the tiles' memory off the file, keeping the header page.
	if err := os.Truncate(path, pageSize); err != nil {
		t.Fatal(err)
	}
	_, err = s.Call("run", 0, opt)
	if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "host memory fault at 0x") {
		t.Fatalf("Call on a file cut short: %v", err)
	}
	if !strings.HasPrefix(err.Error(), "device "+path+": call \"run\": ") {
		t.Errorf("error %q does not name the device and the call", err)
	}
}

// wholeTiles is the file spans of whole tiles' memory, adjacent tiles
// merged.
func wholeTiles(d *Device, tiles ...int) []fileSpan {
	var out []fileSpan
	for _, t := range tiles {
		off := int64(d.g.memOffset + uint64(t)*d.g.tileStride)
		if n := len(out); n > 0 && out[n-1].off+out[n-1].n == off {
			out[n-1].n += int64(d.g.tileStride)
			out[n-1].last = t
			continue
		}
		out = append(out, fileSpan{off: off, n: int64(d.g.tileStride), first: t, last: t})
	}
	return out
}
