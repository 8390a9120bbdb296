package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestBestOf: a model's best is its passing configuration with the
// fewest inference cycles, the host link's included: fewer final_cycles
// bought with copies over the host link lose; the first wins a tie;
// failed and unknown results do not count.
func TestBestOf(t *testing.T) {
	results := []Result{
		{ID: "a", Model: "m", FinalCycles: 100, HostLinkCycles: 900, Verdict: "PASS"},
		{ID: "b", Model: "m", FinalCycles: 150, HostLinkCycles: 50, Verdict: "PASS"},
		{ID: "c", Model: "m", FinalCycles: 120, HostLinkCycles: 80, Verdict: "PASS"},
		{ID: "d", Model: "m", FinalCycles: 10, Verdict: "FAIL"},
		{ID: "e", Model: "n", Verdict: "ERROR"},
		{ID: "f", Model: "n", FinalCycles: 70, Verdict: "PASS"},
		{ID: "g", Model: "n", FinalCycles: 60, HostLinkCycles: 10, Verdict: "PASS"},
	}
	want := []Best{
		{Model: "m", ID: "b", FinalCycles: 150, InferenceCycles: 200, Configs: 4, Passed: 3},
		{Model: "n", ID: "f", FinalCycles: 70, InferenceCycles: 70, Configs: 3, Passed: 2},
	}
	if d := cmp.Diff(want, bestOf(results)); d != "" {
		t.Errorf("best (-want +got):\n%s", d)
	}
}
