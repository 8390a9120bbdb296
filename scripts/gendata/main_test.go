package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// The committed test data must be exactly what the generator writes.
func TestCommittedDataIsGenerated(t *testing.T) {
	dir := t.TempDir()
	if err := dot64(dir); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"input_0.pb", "input_1.pb", "output_0.pb"} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join("..", "..", "testdata", "asm", "dot64", "test_data_set_0", name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from the generator's output: run make gendata", name)
		}
	}
}
