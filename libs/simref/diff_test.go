package simref_test

import (
	"flag"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"ipu.local/libs/arch"
	"ipu.local/libs/sim"
)

var (
	long    = flag.Bool("long", false, "run many more random programs in the differential test")
	genOpts = flag.String("gen", "", "generator parts to switch off: comma-separated nohost, noexchange, noinject, noworkers")
	only    = flag.Int64("seed", 0, "run only this seed")
)

func parseGenOpts() {
	for _, f := range strings.Split(*genOpts, ",") {
		switch f {
		case "nohost":
			opts.noHost = true
		case "noexchange":
			opts.noExchange = true
		case "noinject":
			opts.noInject = true
		case "noworkers":
			opts.noWorkers = true
		}
	}
}

func newFast(p *arch.Preset, mem func(int) []byte) machine {
	return sim.New(p, mem, sim.Options{Parallel: 2})
}

// restoreFast moves the fast simulator's state into a new machine with
// MarshalState and UnmarshalState, as the device does between processes.
func restoreFast(m machine, p *arch.Preset, mem func(int) []byte) (machine, error) {
	state := m.(*sim.Machine).MarshalState()
	n := sim.New(p, mem, sim.Options{Parallel: 1})
	if err := n.UnmarshalState(state); err != nil {
		return nil, fmt.Errorf("unmarshal state: %w", err)
	}
	return n, nil
}

// compare runs prog on both simulators and returns the differences.
func compare(prog *program) (string, error) {
	return compareReport(prog, true)
}

// compareReport runs prog on both simulators; it reports the differences
// in full only when asked (cmp's reports of large values are slow), else
// a one-line summary.
func compareReport(prog *program, full bool) (string, error) {
	ref, err := execute(prog, newRef)
	if err != nil {
		return "", fmt.Errorf("reference: %w", err)
	}
	mk, swap := newFast, (func(machine, *arch.Preset, func(int) []byte) (machine, error))(nil)
	if prog.seed%2 == 1 {
		// Odd seeds also carry the fast simulator's state across a
		// MarshalState/UnmarshalState at every return to the host.
		swap = restoreFast
	}
	fast, err := executeSwapping(prog, mk, swap)
	if err != nil {
		return "", fmt.Errorf("fast: %w", err)
	}
	opts := cmp.Options{
		cmpopts.IgnoreFields(sim.Fault{}, "Detail"),
		cmpopts.EquateEmpty(),
	}
	// reflect.DeepEqual first: cmp is slow on the big snapshots.
	equal := func(a, b any) bool { return reflect.DeepEqual(a, b) || cmp.Equal(a, b, opts) }
	if !full {
		var parts []string
		if !equal(withoutDetails(ref.Runs), withoutDetails(fast.Runs)) {
			parts = append(parts, "runs")
		}
		if !equal(ref.Snaps, fast.Snaps) {
			parts = append(parts, "snapshots")
		}
		if memDiff(prog.preset, ref.mem, fast.mem) != "" {
			parts = append(parts, "memory")
		}
		if string(ref.host.b) != string(fast.host.b) {
			parts = append(parts, "host memory")
		}
		if len(parts) == 0 {
			return "", nil
		}
		return strings.Join(parts, ", ") + " differ", nil
	}
	var out string
	if d := cmp.Diff(ref.Runs, fast.Runs, opts); d != "" {
		out += "runs mismatch (-ref +fast):\n" + d
	}
	if d := cmp.Diff(ref.Snaps, fast.Snaps, opts); d != "" {
		out += "snapshots mismatch (-ref +fast):\n" + d
	}
	if d := memDiff(prog.preset, ref.mem, fast.mem); d != "" {
		out += "memory mismatch (ref, fast):\n" + d
	}
	if d := cmp.Diff(ref.host.b, fast.host.b); d != "" {
		out += "host memory mismatch (-ref +fast):\n" + d
	}
	return out, nil
}

// withoutDetails copies runs with the faults' Detail cleared: the two
// simulators word their details differently.
func withoutDetails(runs []runRecord) []runRecord {
	out := append([]runRecord(nil), runs...)
	for i := range out {
		if f := out[i].Fault; f != nil {
			g := *f
			g.Detail = ""
			out[i].Fault = &g
		}
	}
	return out
}

// TestDifferential runs random programs on the fast simulator and the
// reference interpreter and compares everything observable.
func TestDifferential(t *testing.T) {
	n := int64(600)
	if *long {
		n = 20000
	}
	if testing.Short() {
		n = 100
	}
	parseGenOpts()
	first := int64(1)
	if *only != 0 {
		first, n = *only, *only
	}
	failed := 0
	for seed := first; seed <= n; seed++ {
		prog := generate(seed, modeFor(seed))
		diff, err := compareReport(prog, false)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if diff != "" {
			failed++
			if failed <= 3 {
				diff, _ = compare(prog)
			}
			t.Errorf("seed %d (injected %q): %s", seed, prog.note, diff)
		}
	}
	if failed > 0 {
		t.Errorf("%d of %d programs differ", failed, n-first+1)
	}
}
