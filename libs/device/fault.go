package device

import (
	"errors"
	"fmt"
	"runtime/debug"
	"sort"
	"syscall"
	"unsafe"

	"ipu.local/formats/ipuexe"
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

// fileSpan is a byte range of the device file holding tile memory, and
// the tiles it covers (for messages).
type fileSpan struct {
	off, n      int64
	first, last int
}

// usedSpans returns the pages of the device file that the package's
// segments (code, data and BSS) cover on its busy tiles, in file order,
// adjacent pages merged.
func (d *Device) usedSpans(pkg *ipuexe.Package, busy []int) []fileSpan {
	var out []fileSpan
	lo := d.g.preset.Memory.Lo
	for _, t := range busy {
		base := int64(d.g.memOffset + uint64(t)*d.g.tileStride)
		var rs [][2]int64
		for _, s := range pkg.Images[pkg.TileImage[t]].Segments {
			if s.Size == 0 {
				continue
			}
			a := int64(s.Addr-lo) &^ (pageSize - 1)
			b := (int64(s.Addr-lo) + int64(s.Size) + pageSize - 1) &^ (pageSize - 1)
			rs = append(rs, [2]int64{base + a, base + min(b, int64(d.g.tileStride))})
		}
		sort.Slice(rs, func(i, j int) bool { return rs[i][0] < rs[j][0] })
		for _, r := range rs {
			if n := len(out); n > 0 && r[0] <= out[n-1].off+out[n-1].n {
				last := &out[n-1]
				last.n = max(last.off+last.n, r[1]) - last.off
				last.last = t
				continue
			}
			out = append(out, fileSpan{off: r[0], n: r[1] - r[0], first: t, last: t})
		}
	}
	return out
}

// reserve allocates disk blocks for the given spans of tile memory, so
// that a full disk is an error here, before anything is written through
// the mapping. Memory a program writes outside them (none of its
// segments) is left to guard. A file system without fallocate is left
// to guard.
func (d *Device) reserve(spans []fileSpan) error {
	const keepSize = 0x1 // FALLOC_FL_KEEP_SIZE
	for _, sp := range spans {
		err := syscall.Fallocate(int(d.f.Fd()), keepSize, sp.off, sp.n)
		if errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.ENOSYS) {
			return nil
		}
		if err != nil {
			what := fmt.Sprintf("reserve the memory of tile %d", sp.first)
			if sp.last > sp.first {
				what = fmt.Sprintf("reserve the memory of tiles %d-%d", sp.first, sp.last)
			}
			return &FileError{Path: d.path, What: what, Off: -1, Err: err}
		}
	}
	return nil
}
