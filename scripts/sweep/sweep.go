package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// SweepFile is a sweep file as written: the models and the grid of
// ipu-plan options.
type SweepFile struct {
	Models []ModelSpec `json:"models"`
	// Grid maps an ipu-plan flag (with its dashes) to the values it
	// takes: numbers or strings, or true/false for a switch (present or
	// absent).
	Grid map[string][]json.RawMessage `json:"grid"`
}

// ModelSpec names a model and, optionally, an ONNX test data set that
// ipu-check compares against. Paths are relative to the sweep file's
// directory.
type ModelSpec struct {
	Path string `json:"path"`
	Data string `json:"data,omitempty"`
}

// Config is one configuration of a sweep: a model and the ipu-plan
// options of one point of the grid.
type Config struct {
	ID      string   `json:"id"`
	Model   string   `json:"model"`          // as the sweep file names it
	Data    string   `json:"data,omitempty"` // as the sweep file names it
	Options string   `json:"options"`        // the plan options, one string
	Args    []string `json:"plan_args"`      // the plan options, as arguments

	modelPath string // resolved
	dataPath  string // resolved, "" without data
}

// reserved are the ipu-plan flags the driver sets itself.
var reserved = map[string]bool{"-o": true, "--log-format": true}

// loadSweep reads and expands a sweep file into its configurations, in
// the order of the models, then of the grid's flags sorted by name, each
// flag's values in the order given (the last flag varies fastest).
func loadSweep(path string) ([]Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("sweep file: %w", err)
	}
	var sf SweepFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sf); err != nil {
		return nil, fmt.Errorf("sweep file %s: %s", path, oneLine(err.Error()))
	}
	return expand(sf, filepath.Dir(path), path)
}

// expand turns a sweep into its configurations; base resolves the
// model and data paths, name names the file in errors.
func expand(sf SweepFile, base, name string) ([]Config, error) {
	if len(sf.Models) == 0 {
		return nil, fmt.Errorf("sweep file %s: no models", name)
	}
	points, err := gridPoints(sf.Grid)
	if err != nil {
		return nil, fmt.Errorf("sweep file %s: %w", name, err)
	}
	var configs []Config
	seen := map[string]string{}
	for i, m := range sf.Models {
		if m.Path == "" {
			return nil, fmt.Errorf("sweep file %s: models[%d]: no path", name, i)
		}
		mp := resolve(base, m.Path)
		model, err := os.ReadFile(mp)
		if err != nil {
			return nil, fmt.Errorf("sweep file %s: models[%d]: %s", name, i, pathErr(err))
		}
		dataFP, dp := "", ""
		if m.Data != "" {
			dp = resolve(base, m.Data)
			if dataFP, err = dirFingerprint(dp); err != nil {
				return nil, fmt.Errorf("sweep file %s: models[%d] data: %s", name, i, pathErr(err))
			}
		}
		modelFP := sha256.Sum256(model)
		for _, args := range points {
			c := Config{Model: m.Path, Data: m.Data, Args: args, Options: strings.Join(args, " "),
				modelPath: mp, dataPath: dp}
			c.ID = configID(m.Path, hex.EncodeToString(modelFP[:]), dataFP, args)
			if prev, ok := seen[c.ID]; ok {
				return nil, fmt.Errorf("sweep file %s: configuration %s (%s) given twice (%s)", name, c.ID, c.Options, prev)
			}
			seen[c.ID] = c.Model + " " + c.Options
			configs = append(configs, c)
		}
	}
	return configs, nil
}

// gridPoints is the cartesian product of the grid, as argument lists.
func gridPoints(grid map[string][]json.RawMessage) ([][]string, error) {
	flags := make([]string, 0, len(grid))
	for f := range grid {
		flags = append(flags, f)
	}
	slices.Sort(flags)
	points := [][]string{nil}
	for _, f := range flags {
		if !strings.HasPrefix(f, "-") || strings.TrimLeft(f, "-") == "" || strings.ContainsAny(f, " =") {
			return nil, fmt.Errorf("grid: %q is not a flag (write it as --name)", f)
		}
		if reserved[f] {
			return nil, fmt.Errorf("grid: %s is set by the sweep driver", f)
		}
		values := grid[f]
		if len(values) == 0 {
			return nil, fmt.Errorf("grid: %s has no values", f)
		}
		var next [][]string
		for _, p := range points {
			for j, raw := range values {
				arg, err := flagArgs(f, raw)
				if err != nil {
					return nil, fmt.Errorf("grid: %s[%d]: %w", f, j, err)
				}
				next = append(next, append(slices.Clip(p), arg...))
			}
		}
		points = next
	}
	return points, nil
}

// flagArgs renders one value of flag f as arguments.
func flagArgs(f string, raw json.RawMessage) ([]string, error) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, errors.New(oneLine(err.Error()))
	}
	switch v := v.(type) {
	case bool:
		if v {
			return []string{f}, nil
		}
		return nil, nil
	case json.Number:
		return []string{f, v.String()}, nil
	case string:
		return []string{f, v}, nil
	}
	return nil, fmt.Errorf("value %s is not a number, string or boolean", oneLine(string(raw)))
}

// configID is a configuration's stable id: the model's base name and a
// hash of the model's bytes, its data set's and the options.
func configID(model, modelFP, dataFP string, args []string) string {
	h := sha256.New()
	fmt.Fprintf(h, "model %s\ndata %s\n", modelFP, dataFP)
	for _, a := range args {
		fmt.Fprintf(h, "arg %s\n", strconv.Quote(a))
	}
	base := strings.TrimSuffix(filepath.Base(model), filepath.Ext(model))
	if base == "model" { // a case folder: CASE/model.onnx
		base = filepath.Base(filepath.Dir(model))
	}
	return sanitize(base) + "-" + hex.EncodeToString(h.Sum(nil))[:12]
}

// sanitize keeps a name usable as a directory name.
func sanitize(s string) string {
	b := []byte(s)
	for i, c := range b {
		ok := c == '-' || c == '_' || c == '.' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !ok {
			b[i] = '_'
		}
	}
	if len(b) == 0 || b[0] == '.' {
		return "m" + string(b)
	}
	return string(b)
}

// resolve makes p, relative to base, absolute: the tools run in the
// configurations' directories.
func resolve(base, p string) string {
	if !filepath.IsAbs(p) {
		p = filepath.Join(base, filepath.FromSlash(p))
	}
	if abs, err := filepath.Abs(p); err == nil {
		return abs
	}
	return p
}

// dirFingerprint hashes the relative paths and bytes of every regular
// file under dir, in sorted order.
func dirFingerprint(dir string) (string, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return "", err
	}
	if !st.IsDir() {
		return "", fmt.Errorf("%s is not a directory", dir)
	}
	h := sha256.New()
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		sum := sha256.Sum256(b)
		fmt.Fprintf(h, "%s %x\n", filepath.ToSlash(rel), sum)
		return nil
	})
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// pathErr is an error without Go's "open" prefix noise, on one line.
func pathErr(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Path + ": " + pe.Err.Error()
	}
	return oneLine(err.Error())
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
