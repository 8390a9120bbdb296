package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// SearchResult is one search of a search sweep, its shards merged: the
// plan of the shards' best validated incumbent (ipu-plan --merge, in
// DIR/<search>/model.plan), which is the plan its best shard wrote, and
// that shard's outcome through the rest of the pipeline.
type SearchResult struct {
	Search      string
	Model       string
	Options     string // the search's options, without --shard
	Shards      int
	Planned     int    // shards whose state was there to merge
	BestShard   int    // -1: none
	BestID      string // the best shard's configuration
	FinalCycles int64
	Verdict     string // the best shard's verdict, or ERROR
	Error       string
}

// searchesHeader are searches.csv's columns.
var searchesHeader = []string{"search", "model", "options", "shards", "planned", "best_shard", "best_id",
	"final_cycles", "verdict", "error"}

// mergeSearches merges each search's shards, in the order of the
// configurations, each through bin/ipu-plan --merge into
// DIR/<search>/model.plan, its log DIR/<search>/merge.log. It returns
// nil for a sweep without searches.
func (e *engine) mergeSearches(ctx context.Context, configs []Config, results []Result) []SearchResult {
	var out []SearchResult
	index := map[string]int{}
	var shards [][]int // by search: the configurations
	for i, c := range configs {
		if c.Search == "" {
			continue
		}
		j, ok := index[c.Search]
		if !ok {
			j = len(out)
			index[c.Search] = j
			out = append(out, SearchResult{Search: c.Search, Model: c.Model, Options: searchOptions(c), Shards: c.Shards, BestShard: -1})
			shards = append(shards, nil)
		}
		shards[j] = append(shards[j], i)
	}
	for j := range out {
		e.merge(ctx, &out[j], configs, results, shards[j])
	}
	return out
}

// searchOptions are a shard's options without its --shard.
func searchOptions(c Config) string {
	args := c.Args
	if n := len(args); n >= 2 && args[n-2] == "--shard" {
		args = args[:n-2]
	}
	return strings.Join(args, " ")
}

// merge merges one search: the states of its shards that planned and
// are recorded (a shard interrupted after planning is not), the merged
// plan compared with theirs to name the best shard.
func (e *engine) merge(ctx context.Context, s *SearchResult, configs []Config, results []Result, idx []int) {
	fail := func(msg string) { s.Verdict, s.Error = "ERROR", oneLine(msg) }
	var states []string
	for _, i := range idx {
		st := filepath.Join(e.out, configs[i].ID, "state.json")
		if _, recorded := e.done(configs[i]); recorded && fileExists(st) {
			states = append(states, st)
		}
	}
	s.Planned = len(states)
	if len(states) == 0 {
		fail("sweep: no shard planned")
		return
	}
	dir := filepath.Join(e.out, s.Search)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fail("sweep: " + pathErr(err))
		return
	}
	logf, err := os.Create(filepath.Join(dir, "merge.log"))
	if err != nil {
		fail("sweep: " + pathErr(err))
		return
	}
	defer logf.Close()
	c0 := configs[idx[0]]
	args := append([]string{"--merge", c0.modelPath}, states...)
	args = append(append(args, "-o", "model.plan"), c0.MergeArgs...)
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	if _, stderr, err := e.exec(ctx, dir, logf, "ipu-plan", args); err != nil {
		fail(toolError("ipu-plan", stderr, err))
		return
	}
	merged, err := os.ReadFile(filepath.Join(dir, "model.plan"))
	if err != nil {
		fail("sweep: " + pathErr(err))
		return
	}
	for _, i := range idx {
		p, err := os.ReadFile(filepath.Join(e.out, configs[i].ID, "model.plan"))
		if err == nil && bytes.Equal(p, merged) {
			r := results[i]
			s.BestShard, s.BestID, s.FinalCycles, s.Verdict, s.Error = configs[i].Shard, r.ID, r.FinalCycles, r.Verdict, r.Error
			return
		}
	}
	fail("sweep: the merged plan is none of the shards' plans")
}

func fileExists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}

// searchesCSV renders DIR/searches.csv.
func searchesCSV(searches []SearchResult) ([]byte, error) {
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	if err := w.Write(searchesHeader); err != nil {
		return nil, err
	}
	for _, s := range searches {
		best := ""
		if s.BestShard >= 0 {
			best = strconv.Itoa(s.BestShard)
		}
		row := []string{s.Search, s.Model, s.Options, strconv.Itoa(s.Shards), strconv.Itoa(s.Planned), best, s.BestID,
			num(s.FinalCycles), s.Verdict, s.Error}
		if err := w.Write(row); err != nil {
			return nil, err
		}
	}
	w.Flush()
	return buf.Bytes(), w.Error()
}

// writeSearches writes DIR/searches.csv and says what each search gave.
func writeSearches(out string, searches []SearchResult, log func(string)) error {
	b, err := searchesCSV(searches)
	if err != nil {
		return err
	}
	for _, s := range searches {
		msg := fmt.Sprintf("search %s %s %s: %d/%d shards planned", s.Search, s.Model, s.Options, s.Planned, s.Shards)
		if s.BestShard >= 0 {
			msg += fmt.Sprintf(", best shard %d final_cycles=%d %s", s.BestShard, s.FinalCycles, s.Verdict)
		}
		if s.Error != "" {
			msg += " (" + s.Error + ")"
		}
		log(msg)
	}
	return writeAtomic(filepath.Join(out, "searches.csv"), b)
}
