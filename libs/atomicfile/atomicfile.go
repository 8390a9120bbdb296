// Package atomicfile writes files so that a reader, or a tool killed
// half-way, never sees a partial file under the final name: the content
// goes to a temporary file in the same directory, is flushed to disk, and
// is renamed over the destination. A tool stopped by a signal removes
// the temporary file too (pending.go). A device or a named pipe (/dev/null,
// /dev/stdout) is written in place instead: renaming over it would
// replace it with a regular file.
package atomicfile

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// Write atomically replaces path with data.
func Write(path string, data []byte) error {
	return WriteFile(path, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// WriteFile atomically replaces path with what write writes. The file is
// created with mode 0644 less the umask. If write fails or panics, or any
// step after it fails, the temporary file is removed and path is left as
// it was; write's own error is returned unchanged.
//
// A symbolic link stays one: the file it leads to is replaced. A path
// that is not a regular file (a device such as /dev/null, a named pipe)
// is written in place, since a rename would put a regular file where it
// was; such a write is not atomic, and the file's own errors come back
// without its path (the caller names it: "no space left on device"). A
// directory is an error.
func WriteFile(path string, write func(w io.Writer) error) (err error) {
	if fi, err := os.Stat(path); err == nil && !fi.Mode().IsRegular() {
		if fi.IsDir() {
			return syscall.EISDIR // the caller names the path
		}
		// Opened as given: the kernel follows the links (/dev/stdout's
		// too, which lead to no path).
		return writeInPlace(path, write)
	}
	path = resolveLinks(path)
	f, forget, err := createTemp(path)
	if err != nil {
		return err
	}
	defer forget()
	tmp := f.Name()
	done := false
	defer func() {
		if !done { // an error, or a panic on its way up
			f.Close()
			os.Remove(tmp)
		}
	}()

	bw := bufio.NewWriterSize(f, 64<<10)
	if err := write(bw); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp, err)
	}
	if err := Publish(func() error { return os.Rename(tmp, path) }); err != nil {
		return err
	}
	done = true
	syncDir(filepath.Dir(path))
	return nil
}

// maxLinks bounds the symbolic links resolveLinks follows.
const maxLinks = 40

// resolveLinks follows the symbolic links at path, a missing last target
// included (a dangling link is written through, creating its target),
// and returns the path they lead to (path itself when it is no link, or
// when they do not resolve within maxLinks).
func resolveLinks(path string) string {
	p := path
	for range maxLinks {
		fi, err := os.Lstat(p)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			return p
		}
		target, err := os.Readlink(p)
		if err != nil {
			return path
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(p), target)
		}
		p = target
	}
	return path
}

// writeInPlace writes to a path that is not a regular file (a device, a
// named pipe) through an ordinary open. A failed write or close returns
// the system's error alone (no space left on device): the caller names
// the path.
func writeInPlace(path string, write func(w io.Writer) error) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(f, 64<<10)
	if err := write(bw); err != nil {
		f.Close()
		return bare(err, path)
	}
	if err := bw.Flush(); err != nil {
		f.Close()
		return bare(err, path)
	}
	return bare(f.Close(), path)
}

// bare is err without the operation and path of an *fs.PathError on
// path (the file's own error, passed up through write too).
func bare(err error, path string) error {
	var pe *fs.PathError
	if errors.As(err, &pe) && pe.Path == path {
		return pe.Err
	}
	return err
}

// createTemp creates a new file next to path, tracked as an unfinished
// output until forget (pending.go). os.CreateTemp is not used because it
// fixes the mode at 0600.
func createTemp(path string) (f *os.File, forget func(), err error) {
	dir, base := filepath.Split(path)
	prefix := filepath.Join(dir, "."+base+".tmp")
	for range 100 {
		name := prefix + strconv.FormatUint(uint64(rand.Uint32()), 36)
		forget, err := Create(func() (string, error) {
			var err error
			f, err = os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
			return name, err
		})
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			// Name the directory the user gave, not the temporary file.
			var pe *fs.PathError
			if errors.As(err, &pe) {
				d := filepath.Clean(dir)
				return nil, nil, fmt.Errorf("create %s: directory %s: %w", path, d, pe.Err)
			}
			return nil, nil, fmt.Errorf("create temporary file for %s: %w", path, err)
		}
		return f, forget, nil
	}
	return nil, nil, fmt.Errorf("create temporary file for %s: too many name collisions", path)
}

// syncDir makes the rename durable where the platform allows syncing a
// directory; the file itself is already complete, so failure is ignored.
func syncDir(dir string) {
	if dir == "" {
		dir = "."
	}
	d, err := os.Open(dir)
	if err != nil {
		return
	}
	d.Sync()
	d.Close()
}
