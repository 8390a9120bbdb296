package device

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"unsafe"

	"ipu.local/libs/arch"
	"ipu.local/libs/atomicfile"
)

// Layout constants of the device file (see the package doc).
const (
	pageSize = 4096

	magicPrefix = "IPUDEV"
	version     = "02"
	magic       = magicPrefix + version
	// magicV1 is the version before the boot id: its bytes 224-239 are
	// zero, so a version 1 device reads as one loaded in an earlier boot
	// (it must be loaded again, and the load makes it version 2).
	magicV1 = magicPrefix + "01"

	offMagic       = 0
	offArch        = 8
	offTiles       = 40
	offTileBytes   = 44
	offMemOffset   = 48
	offTileStride  = 56
	offStateOffset = 64
	offState       = 72
	offStateLen    = 76
	offStateCRC    = 80
	offPad         = 84
	offMark        = 88
	offFingerprint = 96
	offBoot        = 224
	offReserved    = 240
	offDirty       = 256

	archLen        = offTiles - offArch
	fingerprintLen = offBoot - offFingerprint
	bootLen        = offReserved - offBoot

	// maxTiles is the most tiles whose dirty bitmap fits the header page.
	maxTiles = (pageSize - offDirty) * 8
	// maxStateBytes bounds the simulator state blob read back from a file.
	maxStateBytes = 1 << 30
)

// State is the load state recorded in the device file.
type State uint32

const (
	PoweredOff State = iota // fresh, or never loaded since creation
	Loading                 // a load started and has not finished
	Loaded                  // an application waits at a host sync
	Running                 // a call started and has not finished
)

func (s State) String() string {
	switch s {
	case PoweredOff:
		return "powered-off"
	case Loading:
		return "loading"
	case Loaded:
		return "loaded"
	case Running:
		return "running"
	}
	return fmt.Sprintf("state(%d)", uint32(s))
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// HeaderError says which header field of a device file is wrong.
type HeaderError struct {
	Path  string
	Field string
	Msg   string
}

func (e *HeaderError) Error() string {
	return fmt.Sprintf("device %s: corrupt header field %s: %s", e.Path, e.Field, e.Msg)
}

// geometry is the immutable part of a header, checked once at open.
type geometry struct {
	preset      *arch.Preset
	tiles       int
	tileBytes   uint64
	memOffset   uint64
	tileStride  uint64
	stateOffset uint64
}

func geometryOf(p *arch.Preset) geometry {
	tileBytes := uint64(p.Memory.Size())
	stride := (tileBytes + pageSize - 1) / pageSize * pageSize
	return geometry{
		preset:      p,
		tiles:       p.Tiles,
		tileBytes:   tileBytes,
		memOffset:   pageSize,
		tileStride:  stride,
		stateOffset: pageSize + uint64(p.Tiles)*stride,
	}
}

// newHeader returns the header page of a fresh powered-off device.
func newHeader(g geometry) []byte {
	h := make([]byte, pageSize)
	copy(h[offMagic:], magic)
	copy(h[offArch:offArch+archLen], g.preset.Name)
	le := binary.LittleEndian
	le.PutUint32(h[offTiles:], uint32(g.tiles))
	le.PutUint32(h[offTileBytes:], uint32(g.tileBytes))
	le.PutUint64(h[offMemOffset:], g.memOffset)
	le.PutUint64(h[offTileStride:], g.tileStride)
	le.PutUint64(h[offStateOffset:], g.stateOffset)
	le.PutUint32(h[offState:], uint32(PoweredOff))
	return h
}

// parseHeader checks every field of a header page against the preset it
// names and the file size, and returns the geometry.
func parseHeader(path string, h []byte, size int64) (geometry, error) {
	bad := func(field, format string, args ...any) (geometry, error) {
		return geometry{}, &HeaderError{Path: path, Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	m := h[:min(len(h), len(magic))]
	if !bytes.HasPrefix(m, []byte(magicPrefix)) {
		return geometry{}, fmt.Errorf("device %s: not a device file (magic %q)", path, m)
	}
	if string(m) != magic && string(m) != magicV1 {
		return geometry{}, fmt.Errorf("device %s: unsupported device file version %q (this build reads %q)", path, m[len(magicPrefix):], version)
	}
	if len(h) < pageSize {
		return geometry{}, fmt.Errorf("device %s: file is %d bytes, shorter than its %d-byte header", path, size, pageSize)
	}
	name, err := cString(h[offArch : offArch+archLen])
	if err != nil {
		return bad("arch", "%v", err)
	}
	p, err := arch.Lookup(name)
	if err != nil {
		return bad("arch", "%v", err)
	}
	want := geometryOf(p)
	le := binary.LittleEndian
	checks := []struct {
		field string
		got   uint64
		want  uint64
	}{
		{"tiles", uint64(le.Uint32(h[offTiles:])), uint64(want.tiles)},
		{"tile_bytes", uint64(le.Uint32(h[offTileBytes:])), want.tileBytes},
		{"mem_offset", le.Uint64(h[offMemOffset:]), want.memOffset},
		{"tile_stride", le.Uint64(h[offTileStride:]), want.tileStride},
		{"state_offset", le.Uint64(h[offStateOffset:]), want.stateOffset},
	}
	for _, c := range checks {
		if c.got != c.want {
			return bad(c.field, "is %d, architecture %s has %d", c.got, name, c.want)
		}
	}
	if want.tiles > maxTiles {
		return bad("tiles", "%d tiles do not fit the dirty bitmap (at most %d)", want.tiles, maxTiles)
	}
	if st := State(le.Uint32(h[offState:])); st > Running {
		return bad("state", "unknown state %d", uint32(st))
	}
	if _, err := cString(h[offFingerprint : offFingerprint+fingerprintLen]); err != nil {
		return bad("fingerprint", "%v", err)
	}
	if v := le.Uint32(h[offPad:]); v != 0 {
		return bad("reserved", "byte %#x is %#x, want 0", offPad, v)
	}
	if v := le.Uint64(h[offMark:]); v >= 1<<62 {
		return bad("mark", "%d is out of range", v)
	}
	for i, b := range h[offReserved:offDirty] {
		if b != 0 {
			return bad("reserved", "byte %#x is %#x, want 0", offReserved+i, b)
		}
	}
	dirtyEnd := offDirty + (want.tiles+7)/8
	if r := want.tiles % 8; r != 0 && h[dirtyEnd-1]>>r != 0 {
		return bad("dirty", "bits set for tiles beyond tile %d", want.tiles-1)
	}
	for i, b := range h[dirtyEnd:pageSize] {
		if b != 0 {
			return bad("reserved", "byte %#x is %#x, want 0", dirtyEnd+i, b)
		}
	}
	stateLen := uint64(le.Uint32(h[offStateLen:]))
	if stateLen > maxStateBytes {
		return bad("state_len", "%d bytes is more than the limit of %d", stateLen, maxStateBytes)
	}
	if uint64(size) < want.stateOffset+stateLen {
		return geometry{}, fmt.Errorf("device %s: file is %d bytes, header needs %d", path, size, want.stateOffset+stateLen)
	}
	return want, nil
}

// cString returns the NUL-padded printable ASCII string in b.
func cString(b []byte) (string, error) {
	n := bytes.IndexByte(b, 0)
	if n < 0 {
		n = len(b)
	}
	for i, c := range b[:n] {
		if c <= 0x20 || c >= 0x7f {
			return "", fmt.Errorf("byte %d is %#x, not printable ASCII", i, c)
		}
	}
	for i, c := range b[n:] {
		if c != 0 {
			return "", fmt.Errorf("byte %d after the terminating NUL is %#x", n+i, c)
		}
	}
	return string(b[:n]), nil
}

// create makes a fresh powered-off device at path, atomically: a killed
// creator leaves no half-written device under the final name, and one
// stopped by a signal no temporary file either (atomicfile.Create). The file is
// sized with ftruncate only, so tile memory costs no disk.
func create(path string, p *arch.Preset) error {
	g := geometryOf(p)
	var tmp *os.File
	forget, err := atomicfile.Create(func() (string, error) {
		var err error
		tmp, err = os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
		if err != nil {
			return "", err
		}
		return tmp.Name(), nil
	})
	if err != nil {
		return fmt.Errorf("create device %s: %w", path, err)
	}
	defer forget()
	ok := false
	defer func() {
		if !ok {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err := tmp.Truncate(int64(g.stateOffset)); err != nil {
		return fmt.Errorf("create device %s: %w", path, err)
	}
	if _, err := tmp.WriteAt(newHeader(g), 0); err != nil {
		return fmt.Errorf("create device %s: %w", path, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		return fmt.Errorf("create device %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("create device %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("create device %s: %w", path, err)
	}
	if err := atomicfile.Publish(func() error { return os.Rename(tmp.Name(), path) }); err != nil {
		return fmt.Errorf("create device %s: %w", path, err)
	}
	ok = true
	return nil
}

// openFile opens and maps the device at path after checking its header.
func openFile(path string) (*Device, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("open device: %w", err)
	}
	d, err := mapFile(path, f)
	if err != nil {
		f.Close()
		return nil, err
	}
	return d, nil
}

func mapFile(path string, f *os.File) (*Device, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("device %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("device %s: not a regular file", path)
	}
	h := make([]byte, pageSize)
	n, err := f.ReadAt(h, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("device %s: read header: %w", path, err)
	}
	g, err := parseHeader(path, h[:n], fi.Size())
	if err != nil {
		return nil, err
	}
	if g.stateOffset > uint64(^uint(0)>>1) {
		return nil, fmt.Errorf("device %s: %d bytes do not fit the address space", path, g.stateOffset)
	}
	m, err := syscall.Mmap(int(f.Fd()), 0, int(g.stateOffset), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("device %s: map: %w", path, err)
	}
	// Tiles touch a few scattered pages of their memory: without this
	// hint every fault on a hole would read ahead (zero-fill) dozens of
	// pages nobody uses. A kernel that ignores the hint only costs time.
	_ = syscall.Madvise(m, syscall.MADV_RANDOM)
	return &Device{path: path, f: f, m: m, g: g}, nil
}

// Device is an open device file.
type Device struct {
	path string
	f    *os.File
	m    []byte // header page and every tile's memory
	g    geometry
	// failWrites, set by tests, is the error every write of tile memory
	// to the file gets (a full disk).
	failWrites error
}

// writeAt writes b at off of the file (or fails as failWrites says).
func (d *Device) writeAt(b []byte, off int64) (int, error) {
	if d.failWrites != nil {
		return 0, d.failWrites
	}
	return d.f.WriteAt(b, off)
}

// Path is the device's path as given.
func (d *Device) Path() string { return d.path }

// Arch is the device's architecture preset.
func (d *Device) Arch() *arch.Preset { return d.g.preset }

// Close unmaps and closes the device file.
func (d *Device) Close() error {
	if d.m == nil {
		return nil
	}
	err := syscall.Munmap(d.m)
	d.m = nil
	if cerr := d.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("close device %s: %w", d.path, err)
	}
	return nil
}

// State returns the load state recorded in the file. A value another
// process corrupted since open reads as an error.
func (d *Device) State() (State, error) {
	s := State(binary.LittleEndian.Uint32(d.m[offState:]))
	if s > Running {
		return 0, &HeaderError{Path: d.path, Field: "state", Msg: fmt.Sprintf("unknown state %d", uint32(s))}
	}
	return s, nil
}

func (d *Device) setState(s State) {
	binary.LittleEndian.PutUint32(d.m[offState:], uint32(s))
}

func (d *Device) mark() int { return int(binary.LittleEndian.Uint64(d.m[offMark:]) & (1<<62 - 1)) }

func (d *Device) setMark(n int) { binary.LittleEndian.PutUint64(d.m[offMark:], uint64(n)) }

func (d *Device) fingerprint() (string, error) {
	s, err := cString(d.m[offFingerprint : offFingerprint+fingerprintLen])
	if err != nil {
		return "", &HeaderError{Path: d.path, Field: "fingerprint", Msg: err.Error()}
	}
	return s, nil
}

func (d *Device) setFingerprint(fp string) {
	b := d.m[offFingerprint : offFingerprint+fingerprintLen]
	clear(b)
	copy(b, fp)
}

// tileMem is tile t's memory inside the mapping.
func (d *Device) tileMem(t int) []byte {
	off := d.g.memOffset + uint64(t)*d.g.tileStride
	return d.m[off : off+d.g.tileBytes : off+d.g.tileBytes]
}

func (d *Device) dirty(t int) bool { return d.m[offDirty+t/8]&(1<<(t%8)) != 0 }

func (d *Device) setDirty(t int) { d.m[offDirty+t/8] |= 1 << (t % 8) }

// syncHeader flushes the header page to the file when the file is kept
// durable (see boot.go); otherwise the page cache every process maps is
// the device.
func (d *Device) syncHeader() error {
	if !durable() {
		return nil
	}
	return d.msync(d.m[:pageSize])
}

func (d *Device) msync(b []byte) error {
	_, _, errno := syscall.Syscall(syscall.SYS_MSYNC, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), syscall.MS_SYNC)
	if errno != 0 {
		return fmt.Errorf("device %s: msync: %w", d.path, errno)
	}
	return nil
}

// readState returns the simulator state blob, checked against its length
// and checksum.
func (d *Device) readState() ([]byte, error) {
	le := binary.LittleEndian
	n := uint64(le.Uint32(d.m[offStateLen:]))
	if n > maxStateBytes {
		return nil, &HeaderError{Path: d.path, Field: "state_len", Msg: fmt.Sprintf("%d bytes is more than the limit of %d", n, maxStateBytes)}
	}
	fi, err := d.f.Stat()
	if err != nil {
		return nil, fmt.Errorf("device %s: %w", d.path, err)
	}
	if uint64(fi.Size()) < d.g.stateOffset+n {
		return nil, fmt.Errorf("device %s: file is %d bytes, simulator state needs %d", d.path, fi.Size(), d.g.stateOffset+n)
	}
	b := make([]byte, n)
	if _, err := d.f.ReadAt(b, int64(d.g.stateOffset)); err != nil {
		return nil, fmt.Errorf("device %s: read simulator state: %w", d.path, err)
	}
	if got, want := crc32.Checksum(b, castagnoli), le.Uint32(d.m[offStateCRC:]); got != want {
		return nil, fmt.Errorf("device %s: simulator state at byte %#x: checksum %08x, header says %08x", d.path, d.g.stateOffset, got, want)
	}
	return b, nil
}

// writeState stores the simulator state blob and its length and checksum
// (on a durable file the blob reaches the disk first); the caller
// flushes the header.
func (d *Device) writeState(b []byte) error {
	if uint64(len(b)) > maxStateBytes {
		return fmt.Errorf("device %s: simulator state of %d bytes exceeds the limit of %d", d.path, len(b), maxStateBytes)
	}
	if _, err := d.f.WriteAt(b, int64(d.g.stateOffset)); err != nil {
		return fmt.Errorf("device %s: write simulator state: %w", d.path, err)
	}
	if err := d.f.Truncate(int64(d.g.stateOffset) + int64(len(b))); err != nil {
		return fmt.Errorf("device %s: write simulator state: %w", d.path, err)
	}
	if durable() {
		if err := d.f.Sync(); err != nil {
			return fmt.Errorf("device %s: write simulator state: %w", d.path, err)
		}
	}
	le := binary.LittleEndian
	le.PutUint32(d.m[offStateLen:], uint32(len(b)))
	le.PutUint32(d.m[offStateCRC:], crc32.Checksum(b, castagnoli))
	return nil
}

// tileFile writes the tiles' memory in the device file with system calls
// (sim.TileFile): the simulator's load need not map those pages in the
// process.
type tileFile struct{ d *Device }

// span returns the file offset of tile's memory at addr, for n bytes.
func (f tileFile) span(tile int, addr uint32, n int) (int64, error) {
	lo := f.d.g.preset.Memory.Lo
	if tile < 0 || tile >= f.d.g.tiles || addr < lo || uint64(addr-lo)+uint64(n) > f.d.g.tileBytes {
		return 0, fmt.Errorf("[%#x, +%d) outside tile %d's memory", addr, n, tile)
	}
	return int64(f.d.g.memOffset + uint64(tile)*f.d.g.tileStride + uint64(addr-lo)), nil
}

func (f tileFile) WriteTile(tile int, addr uint32, src []byte) error {
	off, err := f.span(tile, addr, len(src))
	if err != nil {
		return err
	}
	if _, err := f.d.writeAt(src, off); err != nil {
		return &FileError{Path: f.d.path, What: fmt.Sprintf("write tile %d memory [%#x, +%d)", tile, addr, len(src)), Off: -1, Err: err}
	}
	return nil
}
