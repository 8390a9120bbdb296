// Command gendata writes the test data of the hand-written assembly
// programs in the ONNX backend test layout (input_N.pb, output_N.pb):
//
//	go run ./scripts/gendata -out testdata/asm
//
// dot64: x and y are 16384 FP16 values drawn from a fixed seed, uniform
// in [-1, 1) and rounded to FP16; the expected dot product is computed in
// FP64 (exact products, FP64 sums) and stored as FP32.
package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"

	"ipu.local/libs/numfmt"
	"ipu.local/libs/onnx"
)

func main() {
	out := flag.String("out", "testdata/asm", "folder holding the programs' data folders")
	flag.Parse()
	if err := dot64(filepath.Join(*out, "dot64", "test_data_set_0")); err != nil {
		fmt.Fprintln(os.Stderr, "gendata:", err)
		os.Exit(1)
	}
}

const dot64N = 16384

func dot64(dir string) error {
	r := rand.New(rand.NewPCG(64, 2026))
	x := make([]uint16, dot64N)
	y := make([]uint16, dot64N)
	for i := range x {
		x[i] = numfmt.F64ToF16(2*r.Float64() - 1)
		y[i] = numfmt.F64ToF16(2*r.Float64() - 1)
	}
	var sum float64
	for i := range x {
		sum += numfmt.F16ToF64(x[i]) * numfmt.F16ToF64(y[i])
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	files := []struct {
		name string
		t    *onnx.Tensor
	}{
		{"input_0.pb", half("x", x)},
		{"input_1.pb", half("y", y)},
		{"output_0.pb", float("dot", []float32{float32(sum)})},
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f.name), onnx.EncodeTensor(f.t), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func half(name string, v []uint16) *onnx.Tensor {
	raw := make([]byte, 2*len(v))
	for i, h := range v {
		binary.LittleEndian.PutUint16(raw[2*i:], h)
	}
	return &onnx.Tensor{Name: name, DType: onnx.Float16, Dims: []int64{int64(len(v))}, Raw: raw}
}

func float(name string, v []float32) *onnx.Tensor {
	raw := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(f))
	}
	return &onnx.Tensor{Name: name, DType: onnx.Float, Dims: []int64{int64(len(v))}, Raw: raw}
}
