package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--shards", "1,0"}, `--shards "1,0": want shard counts in [1, 4096]`},
		{[]string{"--attempts", "0"}, "--attempts 0: want at least 1"},
		{[]string{"--seeds", "0"}, "--seeds 0: want at least 1"},
		{[]string{"--model", "none.onnx"}, "--model: stat none.onnx: no such file or directory"},
		{[]string{"extra"}, `unexpected argument "extra"`},
		{[]string{"--objective", "speed"}, `--objective "speed": want inference or device`},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), tc.args, &stdout, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), tc.want) || strings.Count(stderr.String(), "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q; want 2 and one line with %q", tc.args, code, stderr.String(), tc.want)
		}
	}
}

func TestRegimes(t *testing.T) {
	c := config{attempts: 64}
	for _, tc := range []struct {
		regime string
		n      int
		want   int
	}{{sameTotal, 1, 64}, {sameTotal, 8, 8}, {sameTotal, 128, 1}, {samePerShard, 8, 64}} {
		if got := perShard(c, tc.regime, tc.n); got != tc.want {
			t.Errorf("perShard(%s, %d) = %d, want %d", tc.regime, tc.n, got, tc.want)
		}
	}
	mean, lo, hi := stats([]int64{3, 1, 2})
	if mean != 2 || lo != 1 || hi != 3 {
		t.Errorf("stats = %v %d %d", mean, lo, hi)
	}
	png, err := plotRows(config{tiles: 4, attempts: 2, seeds: 2, shards: []int{1, 2}},
		[]row{{sameTotal, 1, 2, []int64{10, 12}}, {sameTotal, 2, 1, []int64{9, 12}},
			{samePerShard, 1, 2, []int64{10, 12}}, {samePerShard, 2, 2, []int64{8, 11}}})
	if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Errorf("plotRows: %v", err)
	}
}

// TestPlanCost: a merged plan's figure is what its search minimised.
func TestPlanCost(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		plan string
		want int64
		err  string
	}{
		{`{"cost":{"final_cycles":100,"host_link_cycles":40},"search":{"objective":"inference"}}`, 140, ""},
		{`{"cost":{"final_cycles":100,"host_link_cycles":40},"search":{"objective":"device"}}`, 100, ""},
		{`{"cost":{"final_cycles":100},"search":{"objective":"fast"}}`, 0, `search.objective "fast"`},
		{`{"cost":{"host_link_cycles":40},"search":{"objective":"device"}}`, 0, "no cost.final_cycles"},
	} {
		path := filepath.Join(dir, "p.plan")
		if err := os.WriteFile(path, []byte(tc.plan), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := planCost(path)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want %q", tc.plan, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: %d, %v; want %d", tc.plan, got, err, tc.want)
		}
	}
}
