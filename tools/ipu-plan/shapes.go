package main

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"

	"ipu.local/libs/onnx"
	"ipu.local/libs/toolrun"
)

// parseDims reads --dim NAME=N bindings of symbolic input dimensions.
func parseDims(specs []string) (map[string]int64, error) {
	dims := map[string]int64{}
	for _, s := range specs {
		name, val, ok := strings.Cut(s, "=")
		n, err := strconv.ParseInt(val, 10, 64)
		if !ok || name == "" || err != nil || n < 0 {
			return nil, toolrun.Usagef("--dim %q: want NAME=N with N >= 0", s)
		}
		if old, dup := dims[name]; dup && old != n {
			return nil, toolrun.Usagef("--dim %s: bound to %d and %d", name, old, n)
		}
		dims[name] = n
	}
	return dims, nil
}

// inputShapes reads the shapes of DIR/input_N.pb for the model's graph
// inputs (those no initializer backs), in order: the shapes the program
// is compiled for when the model's are symbolic.
func inputShapes(m *onnx.Model, dir string) (map[string][]int64, error) {
	inits := map[string]bool{}
	for _, t := range m.Graph.Initializers {
		inits[t.Name] = true
	}
	shapes := map[string][]int64{}
	k := 0
	for _, in := range m.Graph.Inputs {
		if inits[in.Name] {
			continue
		}
		path := filepath.Join(dir, "input_"+strconv.Itoa(k)+".pb")
		k++
		t, err := onnx.ReadTensorFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("--input-shapes: %s: missing: the model's input %q needs it", path, in.Name)
		}
		if err != nil {
			return nil, fmt.Errorf("--input-shapes: %w", err)
		}
		shapes[in.Name] = t.Dims
	}
	return shapes, nil
}
