package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"image/png"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"ipu.local/formats/ipuexe"
	"ipu.local/formats/obj"
	"ipu.local/formats/plan"
	"ipu.local/formats/profile"
	"ipu.local/libs/arch"
	"ipu.local/libs/graph"
	"ipu.local/libs/link"
	"ipu.local/libs/onnx"
	"ipu.local/libs/pack"
	"ipu.local/libs/planner"
)

// artifacts are qk-early's plan, object and profile, made once per test
// binary: planned for 64 tiles in-process, linked and packed, then loaded
// and checked by the real ipu-load and ipu-check (built into a temporary
// directory), which write the profile.
type artifacts struct {
	dir, plan, object, profile string
	pl                         *plan.Plan
	prof                       *profile.Profile
	stats                      *link.Stats
}

var (
	fixtureOnce sync.Once
	fixture     *artifacts
	fixtureErr  error
)

func qkEarly(t *testing.T) *artifacts {
	t.Helper()
	fixtureOnce.Do(func() { fixture, fixtureErr = makeArtifacts() })
	if fixtureErr != nil {
		t.Fatal(fixtureErr)
	}
	return fixture
}

var update = flag.Bool("update", false, "rewrite testdata/qk-early-trace.json")

func TestMain(m *testing.M) {
	code := m.Run()
	if fixture != nil {
		os.RemoveAll(fixture.dir)
	}
	os.Exit(code)
}

func makeArtifacts() (*artifacts, error) {
	dir, err := os.MkdirTemp("", "ipu-report-test-")
	if err != nil {
		return nil, err
	}
	a := &artifacts{dir: dir, plan: filepath.Join(dir, "model.plan"), object: filepath.Join(dir, "model.ipuobj"), profile: filepath.Join(dir, "model.capnp")}
	build := exec.Command("go", "build", "-o", dir+string(os.PathSeparator), "../ipu-load", "../ipu-check")
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("building ipu-load and ipu-check: %v\n%s", err, out)
	}
	model := filepath.Join("..", "..", "testdata", "models", "qk-early.onnx")
	data, err := os.ReadFile(model)
	if err != nil {
		return nil, err
	}
	m, err := onnx.ReadModel(data)
	if err != nil {
		return nil, err
	}
	g, err := graph.Build(m)
	if err != nil {
		return nil, err
	}
	p, err := arch.Lookup("ipu21")
	if err != nil {
		return nil, err
	}
	pl, _, _, err := planner.Plan(g, p, planner.Options{Tiles: 64, Seed: 1, MaxAttempts: 2, ModelPath: "qk-early.onnx", ModelFingerprint: onnx.Fingerprint(data)})
	if err != nil {
		return nil, err
	}
	planBytes, err := plan.Marshal(pl)
	if err != nil {
		return nil, err
	}
	o, st, err := link.Link(pl, plan.Fingerprint(planBytes), link.Options{})
	if err != nil {
		return nil, err
	}
	objBytes, err := obj.Marshal(o)
	if err != nil {
		return nil, err
	}
	pkg, err := pack.Build(o, p)
	if err != nil {
		return nil, err
	}
	pkg.Object = obj.Fingerprint(objBytes)
	pkgBytes, err := ipuexe.Marshal(pkg)
	if err != nil {
		return nil, err
	}
	pkgPath, dev := filepath.Join(dir, "model.ipuexe"), filepath.Join(dir, "ipu0")
	for path, b := range map[string][]byte{a.plan: planBytes, a.object: objBytes, pkgPath: pkgBytes} {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			return nil, err
		}
	}
	for _, args := range [][]string{
		{filepath.Join(dir, "ipu-load"), "--device", dev, pkgPath},
		{filepath.Join(dir, "ipu-check"), "--device", dev, "--inferences", "1", "--profile", a.profile, pkgPath},
	} {
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("%s: %v\n%s", filepath.Base(args[0]), err, out)
		}
	}
	pb, err := os.ReadFile(a.profile)
	if err != nil {
		return nil, err
	}
	if a.prof, err = profile.Read(pb); err != nil {
		return nil, err
	}
	a.pl, a.stats = pl, st
	return a, nil
}

func runReport(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = run(append([]string{"ipu-report"}, args...), &o, &e)
	return code, o.String(), e.String()
}

type traceEvent struct {
	Name string         `json:"name"`
	Ph   string         `json:"ph"`
	Ts   float64        `json:"ts"`
	Dur  float64        `json:"dur"`
	Pid  int            `json:"pid"`
	Tid  int            `json:"tid"`
	Args map[string]any `json:"args"`
}

// TestReport runs ipu-report on qk-early's plan, object and profile and
// checks every file it writes.
func TestReport(t *testing.T) {
	a := qkEarly(t)
	out := filepath.Join(t.TempDir(), "report")
	code, _, stderr := runReport("--plan", a.plan, "--object", a.object, "--profile", a.profile, "-o", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}

	t.Run("trace", func(t *testing.T) { checkTrace(t, a, filepath.Join(out, "trace.json")) })

	for _, name := range []string{"memory.png", "timeline.png", "tiles.png", "liveness.png"} {
		f, err := os.Open(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if b := img.Bounds(); b.Dx() < 600 || b.Dy() < 200 {
			t.Errorf("%s: %dx%d pixels", name, b.Dx(), b.Dy())
		}
	}

	html, err := os.ReadFile(filepath.Join(out, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	page := string(html)
	for _, want := range []string{
		"<title>ipu-report: qk-early.onnx</title>",
		"<th>final_cycles</th><td>" + group(a.pl.Cost.FinalCycles) + "</td>",
		"<th>compute_bound</th><td>" + group(a.pl.Cost.ComputeBound) + "</td>",
		fmt.Sprintf("<th>ratio</th><td>%.2f", float64(a.pl.Cost.FinalCycles)/float64(a.pl.Cost.ComputeBound)),
		"<th>tiles</th><td>64</td>",
		"<th>host bytes</th>",
		"<th>cycles</th><td>PASS",
		"<th>memory</th><td>PASS",
		"Worst tiles' memory",
		"<td>s_MatMul</td>",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("index.html lacks %q", want)
		}
	}
	if strings.Contains(strings.ToLower(page), "<script") {
		t.Error("index.html has a script")
	}
	// Every resource is embedded or a file of the report.
	refs := regexp.MustCompile(`(?:src|href)="([^"]*)"`).FindAllStringSubmatch(page, -1)
	imgs := 0
	for _, m := range refs {
		ref := m[1]
		switch {
		case strings.HasPrefix(ref, "data:image/png;base64,"):
			imgs++
		case strings.Contains(ref, ":") || strings.HasPrefix(ref, "/") || strings.Contains(ref, ".."):
			t.Errorf("index.html refers to %q, not a local file", ref)
		default:
			if _, err := os.Stat(filepath.Join(out, ref)); err != nil {
				t.Errorf("index.html refers to %q: %v", ref, err)
			}
		}
	}
	if imgs != 4 {
		t.Errorf("index.html embeds %d images, want 4", imgs)
	}
	if strings.Contains(page, "url(") || strings.Contains(page, "@import") {
		t.Error("index.html's style loads something")
	}
}

// checkTrace checks trace.json against the profile: the tile tracks
// cover every tile that ran once, each has one slice per superstep it
// worked in and one per sync, with the cycles in args and the duration
// at the preset's clock.
func checkTrace(t *testing.T, a *artifacts, path string) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		TraceEvents []traceEvent `json:"traceEvents"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatalf("trace.json: %v", err)
	}
	clock := arch.MustLookup("ipu21").ClockHz
	procs := map[int]string{}
	threads := map[[2]int]string{}
	slices := map[[2]int][]traceEvent{}
	for _, e := range doc.TraceEvents {
		switch e.Ph {
		case "M":
			switch e.Name {
			case "process_name":
				procs[e.Pid] = e.Args["name"].(string)
			case "thread_name":
				threads[[2]int{e.Pid, e.Tid}] = e.Args["name"].(string)
			}
		case "X":
			c, ok := e.Args["cycles"].(float64)
			if !ok {
				t.Fatalf("slice %q has no cycles arg", e.Name)
			}
			if want := c * 1e6 / clock; math.Abs(e.Dur-want) > 1e-9*max(1, want) {
				t.Errorf("slice %q: dur %g us, %g cycles at %g Hz is %g", e.Name, e.Dur, c, clock, want)
			}
			k := [2]int{e.Pid, e.Tid}
			if _, ok := threads[k]; !ok {
				t.Errorf("slice %q on an unnamed track %v", e.Name, k)
			}
			slices[k] = append(slices[k], e)
		default:
			t.Errorf("unexpected event phase %q", e.Ph)
		}
	}
	if procs[pidTiles] != "tiles" || procs[pidNodes] != "nodes" || procs[pidSupersteps] != "supersteps" {
		t.Fatalf("processes %v", procs)
	}
	ran := map[int]bool{}
	for _, ph := range a.prof.Phases {
		for tile, c := range ph.TileCycles {
			if c > 0 {
				ran[tile] = true
			}
		}
	}
	covered := 0
	for k, name := range threads {
		if k[0] != pidTiles || strings.HasPrefix(name, "idle") {
			continue
		}
		ss := slices[k]
		if len(ss) == 0 {
			t.Fatalf("track %q has no slices", name)
		}
		tile := int(ss[0].Args["tile"].(float64))
		count := int(ss[0].Args["count"].(float64))
		covered += count
		work, syncs := 0, 0
		for _, ph := range a.prof.Phases {
			if ph.TileCycles[tile] > 0 {
				work++
			}
			if ph.SyncCycles > 0 {
				syncs++
			}
		}
		got := 0
		for _, s := range ss {
			if s.Name != "sync" {
				got++
				if int64(s.Args["cycles"].(float64)) <= 0 {
					t.Errorf("track %q: slice %q of no cycles", name, s.Name)
				}
			}
		}
		if got != work || len(ss)-got != syncs {
			t.Errorf("track %q: %d work and %d sync slices, want %d and %d", name, got, len(ss)-got, work, syncs)
		}
	}
	if covered != len(ran) {
		t.Errorf("tile tracks cover %d tiles, %d ran", covered, len(ran))
	}
	// The superstep track's slices add up to the profile's cycles.
	var total, sum int64
	for _, ph := range a.prof.Phases {
		total += ph.Cycles + ph.SyncCycles
	}
	ss := slices[[2]int{pidSupersteps, 1}]
	if len(ss) != len(a.prof.Phases) {
		t.Errorf("%d superstep slices, %d supersteps", len(ss), len(a.prof.Phases))
	}
	for _, s := range ss {
		sum += int64(s.Args["cycles"].(float64))
	}
	if sum != total {
		t.Errorf("superstep slices add up to %d cycles, the profile has %d", sum, total)
	}
	nodes := 0
	for k := range threads {
		if k[0] == pidNodes {
			nodes++
		}
	}
	if nodes == 0 {
		t.Error("no node track")
	}
}

// TestBadInput: a truncated plan, an object of another plan, a missing
// file: one line on stderr, exit 1, and no report directory (nor a
// temporary one) left behind.
func TestBadInput(t *testing.T) {
	a := qkEarly(t)
	dir := t.TempDir()
	planBytes, err := os.ReadFile(a.plan)
	if err != nil {
		t.Fatal(err)
	}
	truncated := filepath.Join(dir, "truncated.plan")
	if err := os.WriteFile(truncated, planBytes[:len(planBytes)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	other := *a.pl
	other.Seed++
	otherBytes, err := plan.Marshal(&other)
	if err != nil {
		t.Fatal(err)
	}
	otherPlan := filepath.Join(dir, "other.plan")
	if err := os.WriteFile(otherPlan, otherBytes, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"truncated plan", []string{"--plan", truncated}, "truncated.plan: "},
		{"object of another plan", []string{"--plan", otherPlan, "--object", a.object}, "model.ipuobj: linked from "},
		{"missing profile", []string{"--profile", filepath.Join(dir, "none.capnp")}, "none.capnp: no such file"},
		{"plan as profile", []string{"--profile", a.plan}, "model.plan: a plan (written by ipu-plan), not a profile (written by ipu-check --profile)"},
		{"object as plan", []string{"--plan", a.object}, "model.ipuobj: an object (written by ipu-link or ipu-as), not a plan (written by ipu-plan)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(dir, "out", "report")
			code, _, stderr := runReport(append(tc.args, "-o", out)...)
			if code != 1 {
				t.Errorf("exit %d, want 1", code)
			}
			if strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "ipu-report: ") || !strings.Contains(stderr, tc.want) {
				t.Errorf("stderr %q, want one line with %q", stderr, tc.want)
			}
			if ents, err := os.ReadDir(filepath.Join(dir, "out")); err == nil && len(ents) > 0 {
				t.Errorf("left behind %s", ents[0].Name())
			}
		})
	}
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{{"-o", t.TempDir()}, {"--plan", "x.plan"}, {"--plan", "x.plan", "-o", "d", "extra"}} {
		code, _, stderr := runReport(args...)
		if code != 2 || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q", args, code, stderr)
		}
	}
}

// TestPartial: each artifact alone makes the files it can.
func TestPartial(t *testing.T) {
	a := qkEarly(t)
	for _, tc := range []struct {
		flag, path string
		want       []string
	}{
		{"--plan", a.plan, []string{"index.html", "liveness.png"}},
		{"--object", a.object, []string{"index.html", "memory.png"}},
		{"--profile", a.profile, []string{"index.html", "tiles.png", "timeline.png", "trace.json"}},
	} {
		out := filepath.Join(t.TempDir(), "r")
		if code, _, stderr := runReport(tc.flag, tc.path, "-o", out); code != 0 {
			t.Fatalf("%s: exit %d: %s", tc.flag, code, stderr)
		}
		ents, err := os.ReadDir(out)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range ents {
			got = append(got, e.Name())
		}
		if strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("%s: files %v, want %v", tc.flag, got, tc.want)
		}
	}
}

// TestTraceGolden compares qk-early's trace with testdata/qk-early-trace.json
// (go test -run TestTraceGolden -update rewrites it after a deliberate
// change of the compiler's cycles or of the trace).
func TestTraceGolden(t *testing.T) {
	a := qkEarly(t)
	out := filepath.Join(t.TempDir(), "r")
	if code, _, stderr := runReport("--profile", a.profile, "--plan", a.plan, "-o", out); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	got, err := os.ReadFile(filepath.Join(out, "trace.json"))
	if err != nil {
		t.Fatal(err)
	}
	// The package's fingerprint changes with any change of the code the
	// compiler emits; the trace's structure and cycles are what is pinned.
	got = regexp.MustCompile(`"fingerprint":"[0-9a-f]+"`).ReplaceAll(got, []byte(`"fingerprint":"*"`))
	golden := filepath.Join("testdata", "qk-early-trace.json")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("trace.json differs from %s (-update rewrites it):\n%s", golden, firstDiff(string(want), string(got)))
	}
}

// firstDiff shows where two texts first differ.
func firstDiff(a, b string) string {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	lo := max(0, i-80)
	return fmt.Sprintf("want ...%s...\ngot  ...%s...", a[lo:min(len(a), i+80)], b[lo:min(len(b), i+80)])
}

// TestTraceLarge: 1472 tiles, each with its own cycles, over 200
// supersteps: the tile tracks are merged to within a few percent and the
// trace stays far under 20 MB, still covering every tile that ran.
func TestTraceLarge(t *testing.T) {
	p := arch.MustLookup("ipu21")
	prof := &profile.Profile{Arch: p.Name, Tiles: p.Tiles, ClockHz: p.ClockHz, Inferences: 1}
	for i := 0; i < 200; i++ {
		ph := profile.Phase{Index: i, Kind: profile.KindCompute, Name: fmt.Sprintf("compute:n%d", i/4), SyncCycles: 90, TileCycles: make([]int64, p.Tiles)}
		if i%2 == 1 {
			ph.Kind, ph.Name = profile.KindExchange, fmt.Sprintf("exchange:n%d", i/4)
		}
		for tile := 0; tile < 1400; tile++ {
			ph.TileCycles[tile] = 10000 + int64((tile*7919+i*104729)%5000)
			ph.Cycles = max(ph.Cycles, ph.TileCycles[tile])
		}
		prof.Phases = append(prof.Phases, ph)
	}
	in := &inputs{prof: prof, preset: p}
	r, err := build(in)
	if err != nil {
		t.Fatal(err)
	}
	data, err := r.traceJSON()
	if err != nil {
		t.Fatal(err)
	}
	if len(data) > 20<<20 {
		t.Errorf("trace.json is %d bytes", len(data))
	}
	var doc struct {
		TraceEvents []traceEvent `json:"traceEvents"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	covered, tracks := map[int]int{}, 0
	for _, e := range doc.TraceEvents {
		if e.Ph == "M" && e.Name == "thread_name" && e.Pid == pidTiles {
			tracks++
			if name := e.Args["name"].(string); !strings.HasPrefix(name, "idle") && strings.Contains(name, "(x") && !strings.Contains(name, "within") && !strings.Contains(name, "band") {
				t.Errorf("track %q: not marked as merged within a tolerance", name)
			}
		}
		if e.Ph == "X" && e.Pid == pidTiles && e.Name != "sync" && e.Args["superstep"].(float64) == 0 {
			covered[e.Tid] = int(e.Args["count"].(float64))
		}
	}
	n := 0
	for _, c := range covered {
		n += c
	}
	if n != 1400 {
		t.Errorf("tile tracks cover %d tiles, 1400 ran", n)
	}
	t.Logf("%d tile tracks, %d events, %d bytes", tracks, len(doc.TraceEvents), len(data))
}
