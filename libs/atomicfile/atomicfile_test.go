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
