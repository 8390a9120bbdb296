package device

import (
	"bytes"
	"encoding/hex"
	"os"
	"sync"
)

// The device file lives as long as the host's page cache: every process
// maps the same pages, so a store or pwrite is visible to the next tool
// the moment it is made, and a killed process loses nothing it wrote.
// Only a host restart can lose or reorder writes, and a real device loses
// its memory when its host restarts too. So the header records the boot
// it was powered on in (the kernel's boot id), and a device loaded in an
// earlier boot is no longer loaded: nothing is flushed to disk (no fsync,
// no msync), and the next load clears every tile, since after a restart
// the dirty bits themselves may be stale.
//
// A host without a boot id (no /proc/sys/kernel/random/boot_id) keeps
// the file durable instead: the state blob is synced before the header
// that names it, and the header after each change.

// bootIDPath is where Linux publishes the boot id, a UUID new each boot.
const bootIDPath = "/proc/sys/kernel/random/boot_id"

// hostBoot is this boot's id, zero when the host has none.
var hostBoot = sync.OnceValue(func() [bootLen]byte {
	var id [bootLen]byte
	b, err := os.ReadFile(bootIDPath)
	if err != nil {
		return id
	}
	b = bytes.ReplaceAll(bytes.TrimSpace(b), []byte("-"), nil)
	if len(b) != 2*bootLen {
		return id
	}
	if _, err := hex.Decode(id[:], b); err != nil {
		return [bootLen]byte{}
	}
	return id
})

// durable reports whether the file is flushed to disk as it changes: on
// a host without a boot id.
func durable() bool { return hostBoot() == [bootLen]byte{} }

// boot returns the boot id the device was last powered on in (zero: a
// fresh device, or one a host without boot ids loaded).
func (d *Device) boot() [bootLen]byte {
	var id [bootLen]byte
	copy(id[:], d.m[offBoot:offBoot+bootLen])
	return id
}

func (d *Device) setBoot(id [bootLen]byte) { copy(d.m[offBoot:offBoot+bootLen], id[:]) }

// staleBoot reports whether the device was powered on before this boot
// of the host.
func (d *Device) staleBoot() bool { return d.boot() != hostBoot() }
