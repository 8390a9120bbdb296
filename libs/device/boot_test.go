package device

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// loadedDevice loads the one-tile test package on a fresh device and
// returns its path; open reopens it, and edit changes it (another
// process's view of the file) and closes it again.
func loadedDevice(t *testing.T) (path string, open func() *Device, edit func(func(d *Device))) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "ipu0")
	loadDevice(t, path, testPackage(t, "ipu21-tiny", 0), quietLog())
	open = func() *Device {
		t.Helper()
		d, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	edit = func(f func(d *Device)) {
		t.Helper()
		d := open()
		f(d)
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return path, open, edit
}

func needBootID(t *testing.T) {
	if durable() {
		t.Skip("the host has no boot id")
	}
}

// TestLoadAfterRestart: a load on a device powered on in an earlier boot
// of the host clears every tile, dirty or not (after a restart the dirty
// bits may not have reached the disk), and stamps this boot.
func TestLoadAfterRestart(t *testing.T) {
	needBootID(t)
	path, open, edit := loadedDevice(t)
	edit(func(d *Device) {
		// Tile 2's memory reached the disk, its dirty bit did not.
		copy(d.tileMem(2), "stale")
		d.setBoot([bootLen]byte{1})
	})
	pkg, log := testPackage(t, "ipu21-tiny", 0), quietLog()
	loadDevice(t, path, pkg, log)
	d := open()
	defer d.Close()
	if !bytes.Equal(d.tileMem(2), make([]byte, len(d.tileMem(2)))) {
		t.Errorf("tile 2 memory not cleared by the first power-on of this boot")
	}
	if d.staleBoot() {
		t.Errorf("header boot id %x, want this boot's %x", d.boot(), hostBoot())
	}
	if d.dirty(2) || !d.dirty(0) {
		t.Errorf("dirty bits: tile 0 %v tile 2 %v, want true false", d.dirty(0), d.dirty(2))
	}
	call(t, path, pkg, log, words(1, 2, 3, 4))
}

// TestDurableWithoutBootID: on a host without a boot id the device is
// flushed to disk as it changes, records no boot, and loads and runs as
// anywhere else.
func TestDurableWithoutBootID(t *testing.T) {
	saved := hostBoot
	hostBoot = func() [bootLen]byte { return [bootLen]byte{} }
	defer func() { hostBoot = saved }()
	if !durable() {
		t.Fatal("durable() = false without a boot id")
	}
	path, open, _ := loadedDevice(t)
	got := call(t, path, testPackage(t, "ipu21-tiny", 0), quietLog(), words(1, 2, 3, 4))
	if len(got) == 0 {
		t.Errorf("no output")
	}
	d := open()
	defer d.Close()
	if d.boot() != ([bootLen]byte{}) || d.staleBoot() {
		t.Errorf("boot id %x (stale %v), want none", d.boot(), d.staleBoot())
	}
	hostBoot = saved
	if !durable() && !d.staleBoot() {
		t.Errorf("a device loaded without a boot id is not stale on a host with one")
	}
}

// TestVersion1Device: a device file from before the boot id reads as one
// loaded in an earlier boot, and loading it makes it version 2.
func TestVersion1Device(t *testing.T) {
	needBootID(t)
	path, open, edit := loadedDevice(t)
	edit(func(d *Device) {
		copy(d.m[offMagic:], magicV1)
		d.setBoot([bootLen]byte{})
	})
	pkg, log := testPackage(t, "ipu21-tiny", 0), quietLog()
	d := open()
	if _, err := d.NewSession(pkg, testFingerprint, log); err == nil || !strings.Contains(err.Error(), "not loaded in this boot") {
		t.Errorf("session on a version 1 device: error %v, want it to ask for a load", err)
	}
	d.Close()
	loadDevice(t, path, pkg, log)
	d = open()
	if got := string(d.m[offMagic : offMagic+len(magic)]); got != magic {
		t.Errorf("magic after load %q, want %q", got, magic)
	}
	d.Close()
	call(t, path, pkg, log, words(1, 2, 3, 4))
}
