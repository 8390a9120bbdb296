// Package device is the simulated IPU device: a device file that holds the
// whole machine (every tile's memory, the simulator's registers and
// contexts, the loaded package's fingerprint and sync mark), an exclusive
// ownership lock, loading an application, and the host exchange session
// that runs it.
//
// The file is memory-mapped (MAP_SHARED), so ipu-load and a later ipu-check
// in another process see the same machine, as they would see one board.
// A device that does not exist is created powered off and sparse: a tile
// nothing was loaded on costs no disk.
//
// # Device file
//
// All integers are little-endian. Offsets are from the start of the file.
//
//	header {                                   // one 4096-byte page
//		Magic       [8]byte   // 0    "IPUDEV02": format, version in the last two bytes
//		                      //      (version 01, without Boot, reads as Boot zero)
//		Arch        [32]byte  // 8    architecture preset name, NUL-padded
//		Tiles       uint32    // 40   tiles on the device (the preset's)
//		TileBytes   uint32    // 44   memory bytes per tile (preset Memory.Size())
//		MemOffset   uint64    // 48   tile 0's memory: 4096
//		TileStride  uint64    // 56   TileBytes rounded up to 4096
//		StateOffset uint64    // 64   MemOffset + Tiles*TileStride
//		State       uint32    // 72   0 powered off, 1 loading, 2 loaded, 3 running
//		StateLen    uint32    // 76   bytes of the simulator state blob
//		StateCRC    uint32    // 80   CRC-32C (Castagnoli) of the blob
//		_           uint32    // 84   zero
//		Mark        uint64    // 88   syncs completed since load (sim Mark), < 2^62
//		Fingerprint [128]byte // 96   loaded package's fingerprint, NUL-padded ASCII
//		Boot        [16]byte  // 224  the host's boot id at the last power-on
//		                      //      (zero: none, see States and crash safety)
//		_           [16]byte  // 240  zero
//		Dirty       [...]byte // 256  (Tiles+7)/8 bytes: bit t%8 of byte t/8 set
//		                      //      when tile t's memory may be non-zero
//		_           [...]byte //      zero to 4096
//	}
//	memory [Tiles] {                           // at MemOffset + t*TileStride
//		Bytes [TileBytes]byte // tile address Memory.Lo at index 0
//		_     [TileStride-TileBytes]byte
//	}
//	state [StateLen]byte                       // at StateOffset: sim MarshalState
//
// The header and the tile memories are mapped; the simulator works on the
// mapped tile memories directly, but a load writes the tile images (and
// clears the dirty tiles' data) with pwrite (sim.UseFile): a page written
// through a shared mapping first faults into the process, about 20 us a
// page where a hypervisor keeps the page tables, and the page cache that
// pwrite fills is the one the mapping shows. The state blob follows the
// memories so it can grow with the file; it is read and written with
// pread and pwrite.
//
// # States and crash safety
//
// Every process maps the same pages of the host's page cache, so each
// store and pwrite is visible to the next tool at once, in the order it
// was made, and a killed process loses nothing it wrote. Loading first
// writes State=loading, so a loader killed at any later point leaves a
// device that refuses sessions until the next load. Only after the images
// are written, the startup program has run to the first host sync and the
// state blob is saved does the header become State=loaded with the
// fingerprint and mark. A call likewise marks the device running while it
// changes memory and loaded again once the new state blob is saved; a
// process killed inside a call leaves a device that asks to be loaded
// again. A device fault inside a call restores the loaded state (the blob
// still describes the device waiting at its last host sync; tile memory
// keeps what the failed call wrote) and is returned as the error.
//
// Only a host restart can lose or reorder writes that reached the page
// cache, and a board loses its application when its host restarts too.
// Power-on records the host's boot id (/proc/sys/kernel/random/boot_id)
// in the header; a device powered on in another boot refuses sessions
// until it is loaded again, and that load clears every tile, dirty or
// not. So nothing is flushed to disk (no fsync, no msync): on the 12-layer
// encoder the fsync after a load took 0.9 s. A host without a boot id
// keeps the file durable instead: the state blob is synced before the
// header that names it, and the header after each change.
//
// Power-on clears only the tiles marked dirty. A run of consecutive dirty
// tiles whose data (SEEK_DATA) all lies in the pages the package being
// loaded reserves, as when a package is loaded again, is cleared in
// place (written with zeros): qk-early's reload takes 43 ms instead of
// 130, the 12-layer encoder's 2.75 s instead of 3.28. Any other run is
// one hole punched in the file (fallocate), which also returns its disk
// space (clear.go).
//
// Nothing in the file is trusted: every header field is checked against
// the architecture preset and the file size before use, and the state
// blob against its length and checksum. A corrupt header is an error
// naming the field.
//
// # Ownership
//
// Acquire takes an exclusive flock on a lock file (by default the device
// path plus ".lock"), polling until a timeout, and writes the owner's pid
// into it so that a waiting process can say who holds the device.
package device
