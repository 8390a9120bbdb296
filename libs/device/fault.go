package device

import (
	"errors"
	"fmt"
	"runtime/debug"
	"syscall"
	"unsafe"
)

// FileError is a failure of the file system under the device file: a
// page of the mapping it could not provide (a full disk, a file cut
// short by another process), or disk space it could not reserve.
type FileError struct {
	Path string
	What string // the operation: "load", "call \"run\""...
	Off  int64  // the byte of the device file at fault, or -1
	Err  error  // the cause, when the system gave one
}

func (e *FileError) Error() string {
	if e.Off < 0 {
		return fmt.Sprintf("device %s: %s: %v", e.Path, e.What, e.Err)
	}
	return fmt.Sprintf("device %s: %s: the file system could not provide byte %#x of the device file (disk full, or the file was truncated)", e.Path, e.What, e.Off)
}

func (e *FileError) Unwrap() error { return e.Err }

// guard runs f, turning a fault on the mapped device file (SIGBUS: the
// file system could not back a page with disk) into a *FileError instead
// of a crash. Only the calling goroutine is covered; the tile memory a
// load writes and a run uses is reserved beforehand (reserve), so that
// the fault is a last resort.
func (d *Device) guard(what string, f func() error) (err error) {
	old := debug.SetPanicOnFault(true)
	defer debug.SetPanicOnFault(old)
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		fault, ok := r.(interface{ Addr() uintptr })
		if !ok || len(d.m) == 0 {
			panic(r)
		}
		base := uintptr(unsafe.Pointer(&d.m[0]))
		addr := fault.Addr()
		if addr < base || addr-base >= uintptr(len(d.m)) {
			panic(r) // not the device file's: a bug, not the host's fault
		}
		err = &FileError{Path: d.path, What: what, Off: int64(addr - base)}
	}()
	return f()
}

// reserve allocates disk blocks for the memory of the given tiles (in
// increasing order), so that a full disk is an error here, before
// anything is written through the mapping. A file system without
// fallocate is left to guard.
func (d *Device) reserve(tiles []int) error {
	const keepSize = 0x1 // FALLOC_FL_KEEP_SIZE
	for i := 0; i < len(tiles); {
		j := i + 1
		for j < len(tiles) && tiles[j] == tiles[j-1]+1 {
			j++
		}
		off := int64(d.g.memOffset + uint64(tiles[i])*d.g.tileStride)
		n := int64(j-i) * int64(d.g.tileStride)
		err := syscall.Fallocate(int(d.f.Fd()), keepSize, off, n)
		if errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.ENOSYS) {
			return nil
		}
		if err != nil {
			what := fmt.Sprintf("reserve the memory of tile %d", tiles[i])
			if j-i > 1 {
				what = fmt.Sprintf("reserve the memory of tiles %d-%d", tiles[i], tiles[j-1])
			}
			return &FileError{Path: d.path, What: what, Off: -1, Err: err}
		}
		i = j
	}
	return nil
}
