package main

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"time"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"

	"ipu.local/libs/graph"
	"ipu.local/libs/hostref"
	"ipu.local/libs/onnx"
)

// refModel is the 2048^3 FP16 MatMul of the compiler's figures.
const refModel = "testdata/models/matmul2048.onnx"

// targetRef: the device-precision reference's time against native sgemm
// on the same shape and cores (issue 10).
const targetRef = 3.0

// refRow times the host reference of refModel at device precision (the
// device's accumulation order, on every core) against gonum's sgemm of
// the same operands on the same cores, each its best of reps, and prints
// the ratio of their CPU times (of their wall times when the host gives
// no CPU time).
func refRow(reps int) error {
	data, err := os.ReadFile(refModel)
	if err != nil {
		return fmt.Errorf("host reference: %w", err)
	}
	m, err := onnx.ReadModel(data)
	if err != nil {
		return fmt.Errorf("%s: %w", refModel, err)
	}
	g, err := graph.Build(m)
	if err != nil {
		return fmt.Errorf("%s: %w", refModel, err)
	}
	if len(g.Inputs) != 2 || len(g.Inputs[0].Shape) != 2 || len(g.Inputs[1].Shape) != 2 {
		return fmt.Errorf("%s: want a product of two matrices", refModel)
	}
	rows, inner, cols := int(g.Inputs[0].Shape[0]), int(g.Inputs[0].Shape[1]), int(g.Inputs[1].Shape[1])
	ins := hostref.GenerateInputs(g, 1)
	cores := runtime.GOMAXPROCS(0)
	var ref timing
	var vals [][]float64
	for rep := 0; rep < reps; rep++ {
		runtime.GC()
		start, cpu0 := time.Now(), cpuTime()
		vals, err = hostref.EvalValues(g, ins, hostref.Options{Precision: hostref.Device, Threads: cores})
		if err != nil {
			return fmt.Errorf("host reference: %w", err)
		}
		if el := since(start, cpu0); el.better(ref) {
			ref = el
		}
	}
	a, b := to32(vals[g.Inputs[0].Index]), to32(vals[g.Inputs[1].Index])
	c := blas32.General{Rows: rows, Cols: cols, Stride: cols, Data: make([]float32, rows*cols)}
	var nat timing
	for rep := 0; rep < reps; rep++ {
		runtime.GC()
		start, cpu0 := time.Now(), cpuTime()
		blas32.Gemm(blas.NoTrans, blas.NoTrans, 1,
			blas32.General{Rows: rows, Cols: inner, Stride: inner, Data: a},
			blas32.General{Rows: inner, Cols: cols, Stride: cols, Data: b}, 0, c)
		if el := since(start, cpu0); el.better(nat) {
			nat = el
		}
	}
	if err := sameProduct(vals[g.Outputs[0].Index], c.Data); err != nil {
		return err
	}
	ratio := ref.wall.Seconds() / nat.wall.Seconds()
	if ref.cpu > 0 && nat.cpu > 0 {
		ratio = ref.cpu.Seconds() / nat.cpu.Seconds()
	}
	label := fmt.Sprintf("%dx%dx%d, %d cores", rows, inner, cols, cores)
	fmt.Printf("%-16s %-18s device precision %8.3f ms; native gonum sgemm %8.3f ms; reference/native = %.2fx (target <= %.0fx: %s)\n",
		"host reference", label, float64(ref.wall.Microseconds())/1000, float64(nat.wall.Microseconds())/1000,
		ratio, targetRef, verdict(ratio <= targetRef))
	return nil
}

func to32(v []float64) []float32 {
	f := make([]float32, len(v))
	for i, x := range v {
		f[i] = float32(x)
	}
	return f
}

// sameProduct checks that the reference and sgemm computed the same
// product, so that the two timings compare the same work: FP16 operands
// multiply exactly in FP32, and the two differ only by the order and
// rounding of their sums, which on these inputs stays far below the
// bound (a wrong operand, layout or transposition does not).
func sameProduct(ref []float64, nat []float32) error {
	if len(ref) != len(nat) {
		return fmt.Errorf("host reference output: %d values, sgemm %d", len(ref), len(nat))
	}
	for i, v := range ref {
		if d := math.Abs(v - float64(nat[i])); d > 1e-3*(1+math.Abs(float64(nat[i]))) {
			return fmt.Errorf("host reference output %d: %v, sgemm %v", i, v, nat[i])
		}
	}
	return nil
}
