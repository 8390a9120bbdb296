package atomicfile

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var errBroken = errors.New("broken writer")

// dirNames lists the names in dir.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{}
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func TestWriteFile(t *testing.T) {
	tests := []struct {
		name      string
		existing  string // content before, "" for no file
		write     func(w io.Writer) error
		wantErr   error
		wantPanic bool
		wantFile  string // content after, "" for no file
	}{
		{
			name:     "new file",
			write:    func(w io.Writer) error { _, err := io.WriteString(w, "hello\n"); return err },
			wantFile: "hello\n",
		},
		{
			name:     "replaces existing",
			existing: "old",
			write:    func(w io.Writer) error { _, err := io.WriteString(w, "new"); return err },
			wantFile: "new",
		},
		{
			name: "failing writer leaves nothing",
			write: func(w io.Writer) error {
				io.WriteString(w, strings.Repeat("x", 200<<10)) // past the buffer: bytes reach the temp file
				return errBroken
			},
			wantErr: errBroken,
		},
		{
			name:     "failing writer keeps existing",
			existing: "old",
			write: func(w io.Writer) error {
				io.WriteString(w, "partial")
				return errBroken
			},
			wantErr:  errBroken,
			wantFile: "old",
		},
		{
			name:     "panicking writer keeps existing",
			existing: "old",
			write: func(w io.Writer) error {
				io.WriteString(w, strings.Repeat("y", 100<<10))
				panic("boom")
			},
			wantPanic: true,
			wantFile:  "old",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "model.plan")
			if tt.existing != "" {
				if err := os.WriteFile(path, []byte(tt.existing), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var err error
			panicked := func() (p bool) {
				defer func() { p = recover() != nil }()
				err = WriteFile(path, tt.write)
				return false
			}()
			if panicked != tt.wantPanic {
				t.Errorf("panicked = %v, want %v", panicked, tt.wantPanic)
			}
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("err = %v, want %v", err, tt.wantErr)
			}
			wantNames := []string{}
			if tt.wantFile != "" {
				wantNames = append(wantNames, "model.plan")
				got, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tt.wantFile, string(got)); diff != "" {
					t.Errorf("content mismatch (-want +got):\n%s", diff)
				}
			}
			if diff := cmp.Diff(wantNames, dirNames(t, dir)); diff != "" {
				t.Errorf("directory mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMode(t *testing.T) {
	umask := syscall.Umask(0)
	syscall.Umask(umask)
	path := filepath.Join(t.TempDir(), "x.ipuexe")
	if err := Write(path, []byte("data")); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := fs.FileMode(0o644) &^ fs.FileMode(umask); fi.Mode().Perm() != want {
		t.Errorf("mode %v, want %v", fi.Mode().Perm(), want)
	}
}

func TestMissingDirectory(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "nope", "x.plan")
	err := Write(path, []byte("data"))
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("err = %v, want an error naming %s", err, path)
	}
	if diff := cmp.Diff([]string{}, dirNames(t, dir)); diff != "" {
		t.Errorf("directory mismatch (-want +got):\n%s", diff)
	}
}

func TestRelativePath(t *testing.T) {
	t.Chdir(t.TempDir())
	if err := Write("rel.json", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"rel.json"}, dirNames(t, ".")); diff != "" {
		t.Errorf("directory mismatch (-want +got):\n%s", diff)
	}
}

// TestSymlink: writing through a symbolic link replaces the file it
// leads to and leaves the link a link.
func TestSymlink(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real.plan")
	link := filepath.Join(dir, "link.plan")
	if err := os.WriteFile(real, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("real.plan", link); err != nil {
		t.Fatal(err)
	}
	if err := Write(link, []byte("new")); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("link.plan is no longer a symbolic link (%v, %v)", fi, err)
	}
	if got, err := os.ReadFile(real); err != nil || string(got) != "new" {
		t.Errorf("real.plan = %q, %v; want %q", got, err, "new")
	}
	if diff := cmp.Diff([]string{"link.plan", "real.plan"}, dirNames(t, dir)); diff != "" {
		t.Errorf("directory mismatch (-want +got):\n%s", diff)
	}
}

// TestDanglingSymlink: a link to a file not there yet creates the file
// and stays a link.
func TestDanglingSymlink(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.plan")
	if err := os.Symlink(filepath.Join("sub", "real.plan"), link); err != nil {
		t.Fatal(err)
	}
	if err := Write(link, []byte("new")); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("link.plan is no longer a symbolic link (%v, %v)", fi, err)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "sub", "real.plan")); err != nil || string(got) != "new" {
		t.Errorf("sub/real.plan = %q, %v; want %q", got, err, "new")
	}
}

// TestNamedPipe: a path that is not a regular file is written in place,
// not replaced by a regular file (as root, a rename over /dev/null
// would do that).
func TestNamedPipe(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "out.fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	want := strings.Repeat("plan data\n", 20000) // past the pipe's and the writer's buffers
	got := make(chan string, 1)
	go func() {
		b, err := os.ReadFile(fifo)
		if err != nil {
			got <- "read: " + err.Error()
			return
		}
		got <- string(b)
	}()
	if err := Write(fifo, []byte(want)); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(fifo)
	if err != nil || fi.Mode()&fs.ModeNamedPipe == 0 {
		// The reader waits for a writer of the pipe that is gone.
		t.Fatalf("out.fifo is no longer a named pipe (%v, %v)", fi, err)
	}
	if g := <-got; g != want {
		t.Errorf("read %d bytes from the pipe, want %d", len(g), len(want))
	}
	if diff := cmp.Diff([]string{"out.fifo"}, dirNames(t, dir)); diff != "" {
		t.Errorf("directory mismatch (-want +got):\n%s", diff)
	}
}

// TestDevFull: a full device's error reaches the caller. Not as root:
// there a regression would replace /dev/full with a regular file.
func TestDevFull(t *testing.T) {
	fi, err := os.Stat("/dev/full")
	if err != nil || fi.Mode()&fs.ModeCharDevice == 0 {
		t.Skip("no /dev/full")
	}
	if os.Geteuid() == 0 {
		t.Skip("as root (TestNamedPipe covers the path)")
	}
	err = Write("/dev/full", []byte("data"))
	if !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("err = %v, want no space left on device", err)
	}
}

func TestDirectory(t *testing.T) {
	dir := t.TempDir()
	err := Write(dir, []byte("data"))
	if !errors.Is(err, syscall.EISDIR) {
		t.Errorf("err = %v, want is a directory", err)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Errorf("%s is no longer a directory (%v)", dir, err)
	}
}

// TestPendingForgotten checks that WriteFile tracks its temporary file
// only while it writes: a finished, a failed and a panicking write leave
// nothing for RemovePending (pending.go).
func TestPendingForgotten(t *testing.T) {
	dir := t.TempDir()
	tracked := func() int {
		pending.Lock()
		defer pending.Unlock()
		return len(pending.paths)
	}
	during := 0
	err := WriteFile(filepath.Join(dir, "ok"), func(w io.Writer) error {
		during = tracked()
		_, err := io.WriteString(w, "x")
		return err
	})
	if err != nil || during != 1 {
		t.Fatalf("WriteFile: %v, %d paths tracked while writing, want 1", err, during)
	}
	if err := WriteFile(filepath.Join(dir, "fail"), func(io.Writer) error { return errBroken }); !errors.Is(err, errBroken) {
		t.Fatalf("WriteFile: %v, want %v", err, errBroken)
	}
	func() {
		defer func() { recover() }()
		WriteFile(filepath.Join(dir, "panic"), func(io.Writer) error { panic("boom") })
	}()
	if n := tracked(); n != 0 {
		t.Errorf("%d paths still tracked after the writes", n)
	}
	if diff := cmp.Diff([]string{"ok"}, dirNames(t, dir)); diff != "" {
		t.Errorf("directory (-want +got):\n%s", diff)
	}
}
