package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestLine(t *testing.T) {
	tests := []struct {
		r    Result
		want string
	}{
		{Result{Folder: "ort", Case: "attention", Status: Pass}, "PASS        ort/attention"},
		{Result{Folder: "ort", Case: "x", Status: Fail, Detail: "ipu-check: tile 3: fault"},
			"FAIL        ort/x: ipu-check: tile 3: fault"},
		{Result{Folder: "onnx-pytorch", Case: "test_ELU", Status: Unsupported, Detail: "Elu"},
			"UNSUPPORTED onnx-pytorch/test_ELU: Elu"},
		{Result{Folder: "ort", Case: "y", Status: NotLowered, Detail: "operator Gelu is not lowered"},
			"NOT-LOWERED ort/y: operator Gelu is not lowered"},
	}
	for _, tt := range tests {
		t.Run(tt.r.Name(), func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.r.Line()); diff != "" {
				t.Errorf("line mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSummary(t *testing.T) {
	tests := []struct {
		name string
		t    Tally
		want string
	}{
		{"all pass", Tally{Cases: 9, Pass: 9},
			"x: 9 cases: 9 pass, 0 fail, 0 unsupported, 0 not lowered; pass rate 100.0% (9/9 supported)"},
		{"mixed", Tally{Cases: 7, Pass: 2, Fail: 1, Unsupported: 3, NotLowered: 1},
			"x: 7 cases: 2 pass, 1 fail, 3 unsupported, 1 not lowered; pass rate 50.0% (2/4 supported)"},
		{"thirds", Tally{Cases: 3, Pass: 1, Fail: 2},
			"x: 3 cases: 1 pass, 2 fail, 0 unsupported, 0 not lowered; pass rate 33.3% (1/3 supported)"},
		{"nothing supported", Tally{Cases: 2, Unsupported: 2},
			"x: 2 cases: 0 pass, 0 fail, 2 unsupported, 0 not lowered; pass rate n/a (0/0 supported)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.t.Summary("x")); diff != "" {
				t.Errorf("summary mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSummaries(t *testing.T) {
	results := []Result{
		{Folder: "a", Case: "1", Status: Pass},
		{Folder: "a", Case: "2", Status: NotLowered},
		{Folder: "b", Case: "1", Status: Unsupported},
		{Folder: "b", Case: "2", Status: Fail},
		{Folder: "b", Case: "3", Status: Pass},
	}
	want := []string{
		"a: 2 cases: 1 pass, 0 fail, 0 unsupported, 1 not lowered; pass rate 50.0% (1/2 supported)",
		"b: 3 cases: 1 pass, 1 fail, 1 unsupported, 0 not lowered; pass rate 50.0% (1/2 supported)",
		"total: 5 cases: 2 pass, 1 fail, 1 unsupported, 1 not lowered; pass rate 50.0% (2/4 supported)",
	}
	if diff := cmp.Diff(want, summaries(results)); diff != "" {
		t.Errorf("summaries mismatch (-want +got):\n%s", diff)
	}
}
