package onnx

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// entry is an external_data entry (StringStringEntryProto).
func entry(k, v string) []byte {
	return proto{}.bytes(1, []byte(k)).bytes(2, []byte(v))
}

// externalModel writes, in a new folder, a model whose initializers w
// (float [2, 3]) and m (bool [4]) lie in data/weights.bin (w at offset 8,
// m right after it), and returns the model file's path and the tensors'
// bytes.
func externalModel(t *testing.T) (string, []byte, []byte) {
	t.Helper()
	dir := t.TempDir()
	w := le32(1, 2, 3, 4, 5, 6)
	mb := []byte{1, 0, 0, 1}
	b := NewModel(13)
	b.AddInput("x", Float, []int64{2, 3})
	b.AddInitializer(&Tensor{Name: "w", DType: Float, Dims: []int64{2, 3}, External: &External{Location: "data/weights.bin", Offset: 8, Length: 24}})
	b.AddInitializer(&Tensor{Name: "m", DType: Bool, Dims: []int64{4}, External: &External{Location: "data/weights.bin", Offset: 32, Length: 4}})
	b.AddNode("Add", "add", []string{"x", "w"}, []string{"y"})
	b.AddOutput("y", Float, []int64{2, 3})
	if err := os.Mkdir(filepath.Join(dir, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	file := append(append(make([]byte, 8), w...), mb...)
	if err := os.WriteFile(filepath.Join(dir, "data", "weights.bin"), file, 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "model.onnx")
	if err := os.WriteFile(path, b.Marshal(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, w, mb
}

func TestExternalData(t *testing.T) {
	path, w, mb := externalModel(t)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m, err := ReadModel(data)
	if err != nil {
		t.Fatal(err)
	}
	if !m.HasExternal() {
		t.Error("HasExternal is false")
	}
	init := m.Graph.Initializers
	if init[0].Raw != nil || *init[0].External != (External{Location: "data/weights.bin", Offset: 8, Length: 24}) {
		t.Fatalf("before LoadExternal: %+v, %+v", init[0], init[0].External)
	}
	if err := m.LoadExternal(filepath.Dir(path)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(init[0].Raw, w) || !bytes.Equal(init[1].Raw, mb) {
		t.Errorf("loaded %v and %v, want %v and %v", init[0].Raw, init[1].Raw, w, mb)
	}
	// ReadModelFile loads it too.
	m2, err := ReadModelFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(m2.Graph.Initializers[0].Raw, w) {
		t.Errorf("ReadModelFile: %v", m2.Graph.Initializers[0].Raw)
	}
}

// TestExternalDataErrors: each fault gets an error that names the tensor
// or the field, and the file.
func TestExternalDataErrors(t *testing.T) {
	for _, c := range []struct {
		name  string
		ext   []byte // the external_data entries
		prep  func(t *testing.T, dir string)
		want  string
		fatal bool // ReadModel refuses it (else LoadExternal)
	}{
		{name: "absolute", ext: entry("location", "/etc/passwd"), fatal: true,
			want: `field graph.initializer[0].external_data at byte 0x`},
		{name: "leaves the folder", ext: entry("location", "../w.bin"), fatal: true,
			want: `location "../w.bin" is not a file inside the model's folder`},
		{name: "no location", ext: entry("offset", "0"), fatal: true, want: "no location"},
		{name: "length", ext: append(entry("location", "w.bin"), entry("length", "7")...), fatal: true,
			want: "length 7, want 24 for [2 3] float"},
		{name: "offset", ext: append(entry("location", "w.bin"), entry("offset", "-1")...), fatal: true,
			want: `offset "-1": want a byte count`},
		{name: "key twice", ext: append(entry("location", "w.bin"), entry("location", "v.bin")...), fatal: true,
			want: `key "location" given twice`},
		{name: "missing file", ext: entry("location", "w.bin"),
			want: `graph initializer "w": external data: openat w.bin: no such file or directory`},
		{name: "beyond the file", ext: append(entry("location", "w.bin"), entry("offset", "8")...),
			prep: func(t *testing.T, dir string) { write(t, filepath.Join(dir, "w.bin"), make([]byte, 30)) },
			want: `graph initializer "w": external data w.bin: 24 bytes at offset 8, beyond the file's 30`},
		{name: "symbolic link out", ext: entry("location", "w.bin"),
			prep: func(t *testing.T, dir string) {
				out := filepath.Join(t.TempDir(), "secret.bin")
				write(t, out, make([]byte, 24))
				if err := os.Symlink(out, filepath.Join(dir, "w.bin")); err != nil {
					t.Skip(err)
				}
			},
			want: `graph initializer "w": external data: openat w.bin: path escapes from parent`},
	} {
		t.Run(c.name, func(t *testing.T) {
			var ext proto
			for len(c.ext) > 0 {
				// c.ext is a run of entries: split them back into fields.
				n := entryLen(c.ext)
				ext = ext.bytes(13, c.ext[:n])
				c.ext = c.ext[n:]
			}
			tensor := proto{}.bytes(1, packedVarints(2, 3)).varint(2, 1).bytes(8, []byte("w"))
			tensor = append(tensor, ext...)
			tensor = tensor.varint(14, 1)
			graph := proto{}.bytes(5, tensor).bytes(12, proto{}.bytes(1, []byte("w")))
			model := proto{}.varint(1, 8).bytes(7, graph).bytes(8, proto{}.varint(2, 13))
			m, err := ReadModel(model)
			if c.fatal {
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("ReadModel: got %v, want %q", err, c.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			if c.prep != nil {
				c.prep(t, dir)
			}
			err = m.LoadExternal(dir)
			if err == nil || err.Error() != c.want {
				t.Errorf("LoadExternal: got %v\nwant %s", err, c.want)
			}
			if m.Graph.Initializers[0].Raw != nil {
				t.Error("a tensor got data")
			}
		})
	}
}

// entryLen returns the length of the first entry of a run: its fields 1
// and 2, each a tag byte, a length byte and the payload (the tests'
// values are short).
func entryLen(b []byte) int {
	n := 0
	for k := 0; k < 2; k++ {
		n += 2 + int(b[n+1])
	}
	return n
}

func write(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}
