package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"

	"github.com/rogpeppe/go-internal/testscript"
)

func readJSON(ts *testscript.TestScript, path string) map[string]json.RawMessage {
	var m map[string]json.RawMessage
	ts.Check(json.Unmarshal([]byte(ts.ReadFile(path)), &m))
	return m
}

func cmpJSON(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 3 {
		ts.Fatalf("usage: cmpjson FIELD A B")
	}
	a, b := readJSON(ts, args[1])[args[0]], readJSON(ts, args[2])[args[0]]
	same := bytes.Equal(a, b)
	if same == neg {
		ts.Fatalf("%s: %s in %s, %s in %s", args[0], a, args[1], b, args[2])
	}
}

func bestShard(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) == 0 {
		ts.Fatalf("usage: bestshard STATE...")
	}
	best, bestCycles := -1, int64(0)
	for _, path := range args {
		var s struct {
			Shard     int   `json:"shard"`
			Validated int64 `json:"validated_cycles"`
		}
		ts.Check(json.Unmarshal([]byte(ts.ReadFile(path)), &s))
		if best < 0 || s.Validated < bestCycles || s.Validated == bestCycles && s.Shard < best {
			best, bestCycles = s.Shard, s.Validated
		}
	}
	ts.Setenv("BEST_PLAN", fmt.Sprintf("s%d.plan", best))
}

func unvalidate(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: unvalidate IN OUT")
	}
	m := readJSON(ts, args[0])
	delete(m, "validated_cycles")
	b, err := json.Marshal(m)
	ts.Check(err)
	ts.Check(os.WriteFile(ts.MkAbs(args[1]), b, 0o644))
}
