package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"ipu.local/formats/ipuexe"
	"ipu.local/formats/obj"
	"ipu.local/formats/plan"
	"ipu.local/libs/onnx"
	"ipu.local/libs/trace"
	"ipu.local/libs/verdict"
)

// This file holds the reading of the test data: the ONNX backend data
// sets of --data, their tensors and their conversion to the package's
// input and output types.

// dataSetPrefix names the data sets of an ONNX backend test case.
const dataSetPrefix = "test_data_set_"

// readDataSets reads the test data of --data DIR for n inferences. DIR is
// either one data set (it holds input_0.pb ...) or a test case holding
// data sets DIR/test_data_set_0, DIR/test_data_set_1 ..., numbered from 0
// without gaps; inference k is checked against set k modulo their
// number. The sets an inference uses are read, and checked, before
// anything runs.
func readDataSets(dir string, pkg *ipuexe.Package, n int, log *slog.Logger) ([]*expected, error) {
	setDirs, err := dataSets(dir)
	if err != nil {
		return nil, err
	}
	if setDirs == nil {
		ref, err := readData(dir, pkg)
		if err != nil {
			return nil, err
		}
		return []*expected{ref}, nil
	}
	sets := make([]*expected, 0, min(n, len(setDirs)))
	for _, d := range setDirs[:min(n, len(setDirs))] {
		ref, err := readData(d, pkg)
		if err != nil {
			return nil, err
		}
		sets = append(sets, ref)
	}
	log.Debug("test data sets", trace.Bare("path", dir), slog.Int("sets", len(setDirs)), slog.Int("read", len(sets)))
	return sets, nil
}

// dataSets lists the data sets of a test case DIR in order, or returns
// nil when DIR has none (it is then a data set itself).
func dataSets(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("--data %s: %w", dir, err)
	}
	found := map[int]bool{}
	last := -1
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), dataSetPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		k, err := strconv.Atoi(rest)
		if err != nil || k < 0 || strconv.Itoa(k) != rest {
			return nil, fmt.Errorf("%s: not a data set name (want %sN, N from 0)", filepath.Join(dir, e.Name()), dataSetPrefix)
		}
		found[k] = true
		last = max(last, k)
	}
	if len(found) == 0 {
		return nil, nil
	}
	if _, err := os.Stat(filepath.Join(dir, "input_0.pb")); err == nil {
		return nil, fmt.Errorf("%s: a data set beside %s: give the set or the case, not both", filepath.Join(dir, "input_0.pb"), filepath.Join(dir, dataSetPrefix+"0"))
	}
	var dirs []string
	for k := 0; k <= last; k++ {
		d := filepath.Join(dir, dataSetPrefix+strconv.Itoa(k))
		if !found[k] {
			return nil, fmt.Errorf("%s: missing: data sets are numbered from 0 without gaps, and %s exists", d, filepath.Join(dir, dataSetPrefix+strconv.Itoa(last)))
		}
		dirs = append(dirs, d)
	}
	return dirs, nil
}

// readData reads DIR/input_N.pb and DIR/output_N.pb for the package's
// inputs and outputs, checking each against the package's tensor.
func readData(dir string, pkg *ipuexe.Package) (*expected, error) {
	downcast, err := downcastNames(pkg)
	if err != nil {
		return nil, err
	}
	ref := &expected{}
	for i, t := range pkg.Host.Inputs {
		raw, err := readTensor(filepath.Join(dir, "input_"+strconv.Itoa(i)+".pb"), "input", t, downcast[t.Name])
		if err != nil {
			return nil, err
		}
		ref.inputs = append(ref.inputs, raw)
	}
	for i, t := range pkg.Host.Outputs {
		path := filepath.Join(dir, "output_"+strconv.Itoa(i)+".pb")
		raw, err := readTensor(path, "output", t, downcast[t.Name])
		if err != nil {
			return nil, err
		}
		tol, err := verdict.ForExpected(t.DType, t.Accumulate, raw)
		if err != nil {
			return nil, fmt.Errorf("%s: package output %q: %w", path, t.Name, err)
		}
		ref.outputs = append(ref.outputs, raw)
		ref.tolerances = append(ref.tolerances, tol)
	}
	// A file beyond the package's tensors means the data is for another
	// model.
	for _, extra := range []string{
		"input_" + strconv.Itoa(len(pkg.Host.Inputs)) + ".pb",
		"output_" + strconv.Itoa(len(pkg.Host.Outputs)) + ".pb",
	} {
		if _, err := os.Stat(filepath.Join(dir, extra)); err == nil {
			return nil, fmt.Errorf("%s: the package has %d inputs and %d outputs", filepath.Join(dir, extra),
				len(pkg.Host.Inputs), len(pkg.Host.Outputs))
		}
	}
	return ref, nil
}

// downcastNames returns the DOUBLE tensors the package's model computes
// as float (ipu-plan --downcast-fp64).
func downcastNames(pkg *ipuexe.Package) (map[string]bool, error) {
	if len(pkg.Host.Model) == 0 {
		return nil, nil
	}
	pg, err := plan.ReadGraph(pkg.Host.Model)
	if err != nil {
		return nil, fmt.Errorf("model section: %w", err)
	}
	names := map[string]bool{}
	for _, n := range pg.Downcast {
		names[n] = true
	}
	return names, nil
}

// readTensor reads one test-data tensor and checks its element type and
// shape against the package's tensor t. With downcast, t is a DOUBLE
// tensor computed as float: its data is double, rounded here once to
// float.
func readTensor(path, kind string, t obj.Tensor, downcast bool) ([]byte, error) {
	tp, err := onnx.ReadTensorFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: missing: the package's %s %q needs it", path, kind, t.Name)
	}
	if err != nil {
		return nil, err
	}
	if downcast && tp.DType == onnx.Double && t.DType == "float" {
		if err := roundToFloat(tp); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	if tp.DType.String() != t.DType {
		return nil, fmt.Errorf("%s: field data_type: %s, package %s %q is %s", path, tp.DType, kind, t.Name, t.DType)
	}
	if !slices.Equal(tp.Dims, t.Shape) {
		return nil, fmt.Errorf("%s: field dims: %v, package %s %q has shape %v", path, dims(tp.Dims), kind, t.Name, dims(t.Shape))
	}
	return tp.Raw, nil
}

// dims prints a shape as [2 3] (a scalar as []).
func dims(d []int64) string {
	if d == nil {
		d = []int64{}
	}
	return fmt.Sprint(d)
}

// roundToFloat rounds a DOUBLE tensor's elements to float (to nearest,
// ties to even) in place.
func roundToFloat(t *onnx.Tensor) error {
	x, err := t.Float64s()
	if err != nil {
		return err
	}
	raw := make([]byte, 4*len(x))
	for i, v := range x {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(float32(v)))
	}
	t.DType, t.Raw = onnx.Float, raw
	return nil
}
