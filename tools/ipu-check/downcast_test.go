package main

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"ipu.local/formats/obj"
	"ipu.local/libs/onnx"
)

// A DOUBLE tensor computed as float reads its double test data rounded
// once to float; without the downcast the type mismatch is an error.
func TestReadTensorDowncast(t *testing.T) {
	dir := t.TempDir()
	x := []float64{1.0 / 3, -2.5, 1e300, 0x1.000001p0} // the last is a tie: rounds to even
	raw := make([]byte, 8*len(x))
	for i, v := range x {
		binary.LittleEndian.PutUint64(raw[8*i:], math.Float64bits(v))
	}
	path := filepath.Join(dir, "input_0.pb")
	if err := os.WriteFile(path, onnx.EncodeTensor(&onnx.Tensor{Name: "x", DType: onnx.Double, Dims: []int64{4}, Raw: raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	want := obj.Tensor{Name: "x", DType: "float", Shape: []int64{4}}
	got, err := readTensor(path, "input", want, true)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range x {
		g := math.Float32frombits(binary.LittleEndian.Uint32(got[4*i:]))
		if g != float32(v) {
			t.Errorf("element %d: %v, want %v", i, g, float32(v))
		}
	}
	if g := math.Float32frombits(binary.LittleEndian.Uint32(got[12:])); g != 1 {
		t.Errorf("tie: %v, want 1 (to even)", g)
	}
	if _, err := readTensor(path, "input", want, false); err == nil || !strings.Contains(err.Error(), "field data_type: double") {
		t.Errorf("without downcast: %v", err)
	}
}
