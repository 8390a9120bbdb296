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

	"ipu.local/libs/onnx"
)

// SweepFile is a sweep file as written: the models and the grid of
// ipu-plan options.
type SweepFile struct {
	// Type is "grid" (the default: a configuration per model and grid
	// point) or "search": each model and grid point is one plan search
	// split in Shards shards (ipu-plan --shard I/N, a configuration each),
	// merged by the collect step (ipu-plan --merge).
	Type   string      `json:"type,omitempty"`
	Shards int         `json:"shards,omitempty"`
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
	// A search sweep's shard: the search's id, the shard, the shard
	// count, and the search's options that ipu-plan --merge takes.
	Search    string   `json:"search,omitempty"`
	Shard     int      `json:"shard,omitempty"`
	Shards    int      `json:"shards,omitempty"`
	MergeArgs []string `json:"merge_args,omitempty"`

	modelPath string // resolved
	dataPath  string // resolved, "" without data
}

// reserved are the ipu-plan flags the driver sets itself.
var reserved = map[string]bool{"-o": true, "--log-format": true, "--merge": true}

// searchReserved are the flags a search sweep's driver sets too.
var searchReserved = map[string]bool{"--shard": true, "--state": true}

// notMerged are the search options that ipu-plan --merge takes from the
// shards' states instead.
var notMerged = map[string]bool{"--tiles": true, "--seed": true, "--max-attempts": true, "--progress": true}

// maxShards bounds a search sweep's shards (ipu-plan's limit).
const maxShards = 4096

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
	search := false
	switch sf.Type {
	case "", "grid":
		if sf.Shards != 0 {
			return nil, fmt.Errorf("sweep file %s: shards: only a sweep of type \"search\" has shards", name)
		}
	case "search":
		if sf.Shards < 1 || sf.Shards > maxShards {
			return nil, fmt.Errorf("sweep file %s: shards: %d out of range [1, %d]", name, sf.Shards, maxShards)
		}
		search = true
	default:
		return nil, fmt.Errorf("sweep file %s: type: %q is not grid or search", name, sf.Type)
	}
	points, err := gridPoints(sf.Grid, search)
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
		modelFP, err := modelFingerprint(mp, model)
		if err != nil {
			return nil, fmt.Errorf("sweep file %s: models[%d]: %s", name, i, err)
		}
		for _, groups := range points {
			args := slices.Concat(groups...)
			c := Config{Model: m.Path, Data: m.Data, Args: args, Options: strings.Join(args, " "),
				modelPath: mp, dataPath: dp}
			c.ID = configID(m.Path, modelFP, dataFP, args)
			shards := []Config{c}
			if search {
				shards = searchShards(c, groups, sf.Shards, modelFP, dataFP)
			}
			for _, c := range shards {
				if prev, ok := seen[c.ID]; ok {
					return nil, fmt.Errorf("sweep file %s: configuration %s (%s) given twice (%s)", name, c.ID, c.Options, prev)
				}
				seen[c.ID] = c.Model + " " + c.Options
				configs = append(configs, c)
			}
		}
	}
	return configs, nil
}

// searchShards are the configurations of one search, c, split in n
// shards: c's options and --shard I/N, each with the search's id (c's)
// and the options that ipu-plan --merge takes.
func searchShards(c Config, groups [][]string, n int, modelFP, dataFP string) []Config {
	var merge []string
	for _, g := range groups {
		if len(g) > 0 && !notMerged[g[0]] {
			merge = append(merge, g...)
		}
	}
	var out []Config
	for i := range n {
		s := c
		s.Args = append(slices.Clip(c.Args), "--shard", fmt.Sprintf("%d/%d", i, n))
		s.Options = strings.Join(s.Args, " ")
		s.ID = configID(c.Model, modelFP, dataFP, s.Args)
		s.Search, s.Shard, s.Shards, s.MergeArgs = c.ID, i, n, merge
		out = append(out, s)
	}
	return out
}

// gridPoints is the cartesian product of the grid, as argument lists:
// a group of arguments per flag (none for a switch that is off).
func gridPoints(grid map[string][]json.RawMessage, search bool) ([][][]string, error) {
	flags := make([]string, 0, len(grid))
	for f := range grid {
		flags = append(flags, f)
	}
	slices.Sort(flags)
	points := [][][]string{nil}
	for _, f := range flags {
		if !strings.HasPrefix(f, "-") || strings.TrimLeft(f, "-") == "" || strings.ContainsAny(f, " =") {
			return nil, fmt.Errorf("grid: %q is not a flag (write it as --name)", f)
		}
		if reserved[f] || search && searchReserved[f] {
			return nil, fmt.Errorf("grid: %s is set by the sweep driver", f)
		}
		values := grid[f]
		if len(values) == 0 {
			return nil, fmt.Errorf("grid: %s has no values", f)
		}
		var next [][][]string
		for _, p := range points {
			for j, raw := range values {
				arg, err := flagArgs(f, raw)
				if err != nil {
					return nil, fmt.Errorf("grid: %s[%d]: %w", f, j, err)
				}
				next = append(next, append(slices.Clip(p), arg))
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

// modelFingerprint is the fingerprint ipu-plan records for the model at
// path, whose file holds data: its hash, and that of the data of its
// tensors in other files (onnx.FingerprintModel), so that a changed
// weights file changes the configurations' ids. A file ReadModel refuses
// gets the hash of its bytes: ipu-plan reports the fault in each job.
func modelFingerprint(path string, data []byte) (string, error) {
	m, err := onnx.ReadModel(data)
	if err != nil {
		return onnx.Fingerprint(data), nil
	}
	if err := m.LoadExternal(filepath.Dir(path)); err != nil {
		return "", err
	}
	return onnx.FingerprintModel(data, m), nil
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
