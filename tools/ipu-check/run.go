package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"ipu.local/formats/ipuexe"
	"ipu.local/formats/obj"
	"ipu.local/formats/plan"
	"ipu.local/formats/profile"
	"ipu.local/libs/arch"
	"ipu.local/libs/atomicfile"
	"ipu.local/libs/device"
	"ipu.local/libs/onnx"
	"ipu.local/libs/pack"
	"ipu.local/libs/sim"
	"ipu.local/libs/toolrun"
	"ipu.local/libs/trace"
	"ipu.local/libs/verdict"
	"ipu.local/tools/internal/progress"
)

// Limits on the command line.
const (
	maxInferences      = 1 << 20
	defaultInferences  = 2
	defaultSample      = 1000
	defaultLockTimeout = 10 * time.Second
)

// precisions are the accepted --reference-precision values.
var precisions = []string{"device", "fp32", "fp64"}

// options is the checked command line.
type options struct {
	pkgPath      string
	dev          string
	lock         string
	lockTimeout  time.Duration
	data         string
	inferences   int
	precision    string
	threads      int
	seed         uint64
	profile      string
	samplePeriod int64
}

func run(args []string, stdout, stderr io.Writer) int {
	app := &cli.App{
		Name:      "ipu-check",
		Usage:     "run the application loaded on an IPU device and check its results",
		ArgsUsage: "IN.ipuexe",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "device", Usage: "device `PATH` (loaded by ipu-load)", Required: true},
			&cli.StringFlag{Name: "lock", Usage: "hardware ownership lock `FILE` (default: DEV.lock)"},
			&cli.DurationFlag{Name: "lock-timeout", Usage: "how long to wait for hardware ownership", Value: defaultLockTimeout},
			&cli.StringFlag{Name: "data", Usage: "`DIR` with input_N.pb and expected output_N.pb (ONNX backend test layout)"},
			&cli.IntFlag{Name: "inferences", Usage: "number of inferences to run and check", Value: defaultInferences},
			&cli.StringFlag{Name: "reference-precision", Usage: "host reference precision: device, fp32 or fp64", Value: "device"},
			&cli.IntFlag{Name: "threads", Usage: "host reference BLAS threads (0: one per CPU)"},
			&cli.Uint64Flag{Name: "seed", Usage: "seed of the generated inputs (without --data)", Value: defaultSeed},
			&cli.StringFlag{Name: "profile", Usage: "write the first inference's profile to `OUT.capnp`"},
			&cli.StringFlag{Name: "progress", Usage: "a progress bar of the inferences: `auto` (when stderr is a terminal), always or never", Value: progress.Auto},
			&cli.Int64Flag{Name: "sample-period", Usage: "cycles between PC samples in the profile", Value: defaultSample},
		},
		Action: func(c *cli.Context) error {
			o, err := parseOptions(c)
			if err != nil {
				return err
			}
			return check(c, o)
		},
	}
	return toolrun.Main(app, args, stdout, stderr)
}

// parseOptions checks the command line.
func parseOptions(c *cli.Context) (*options, error) {
	if c.NArg() != 1 {
		return nil, toolrun.Usagef("want exactly one package IN.ipuexe, got %d arguments", c.NArg())
	}
	o := &options{
		pkgPath:      c.Args().First(),
		dev:          c.String("device"),
		lock:         c.String("lock"),
		lockTimeout:  c.Duration("lock-timeout"),
		data:         c.String("data"),
		inferences:   c.Int("inferences"),
		precision:    c.String("reference-precision"),
		threads:      c.Int("threads"),
		seed:         c.Uint64("seed"),
		profile:      c.String("profile"),
		samplePeriod: c.Int64("sample-period"),
	}
	if err := progress.Check(c.String("progress")); err != nil {
		return nil, toolrun.Usagef("%v", err)
	}
	if o.lock == "" {
		o.lock = device.LockPath(o.dev)
	}
	if o.lockTimeout < 0 {
		return nil, toolrun.Usagef("--lock-timeout %s: must not be negative", o.lockTimeout)
	}
	if o.inferences < 1 || o.inferences > maxInferences {
		return nil, toolrun.Usagef("--inferences %d: want 1 to %d", o.inferences, maxInferences)
	}
	if !slices.Contains(precisions, o.precision) {
		return nil, toolrun.Usagef("--reference-precision %q: want device, fp32 or fp64", o.precision)
	}
	if o.threads < 0 {
		return nil, toolrun.Usagef("--threads %d: must not be negative", o.threads)
	}
	if o.samplePeriod < 1 {
		return nil, toolrun.Usagef("--sample-period %d: must be at least 1", o.samplePeriod)
	}
	return o, nil
}

// expected is the reference of one check: inputs and expected outputs in
// the package's order, with the tolerance of each output.
type expected struct {
	inputs     [][]byte
	outputs    [][]byte
	tolerances []verdict.Tolerance
}

// tally accumulates the verdicts of all inferences.
type tally struct {
	maxAbsError float64
	numericFail bool
	hardwareErr error
}

// check is ipu-check's work: package, reference, hardware, session,
// inferences, verdicts.
func check(c *cli.Context, o *options) error {
	log := toolrun.Logger(c)
	out := c.App.Writer

	pkg, fingerprint, err := readPackage(o.pkgPath)
	if err != nil {
		return err
	}
	refs, err := reference(o, pkg, log, out)
	if err != nil {
		return err
	}
	defer refs.wait()
	for i, t := range pkg.Host.Outputs {
		tol := refs.first.tolerances[i]
		log.Info("tolerance", slog.String("output", t.Name), slog.Float64("atol", tol.Abs),
			slog.String("derivation", tol.Derivation))
	}

	lock, err := device.Acquire(o.lock, o.lockTimeout, log)
	if err != nil {
		return err
	}
	defer lock.Release()
	d, err := openDevice(o.dev)
	if err != nil {
		return err
	}
	defer d.Close()

	s, err := d.NewSession(pkg, fingerprint, log)
	if err != nil {
		return err
	}
	if err := s.Attach(pkg.Host.Pages); err != nil {
		return fmt.Errorf("device %s: %w", o.dev, err)
	}

	var t tally
	bar := progress.New(c.String("progress"), c.App.ErrWriter, o.inferences, "inferences")
	for i := 1; i <= o.inferences && t.hardwareErr == nil; i++ {
		bar.Set(i-1, fmt.Sprintf("inference %d/%d", i, o.inferences))
		if err := inference(s, i, o, pkg, fingerprint, refs, &t, log, out); err != nil {
			bar.Finish()
			return err
		}
	}
	bar.Finish()

	numerical, hardware := "PASS", "PASS"
	if t.numericFail || t.hardwareErr != nil {
		numerical = "FAIL"
	}
	if t.hardwareErr != nil {
		hardware = "FAIL"
		fmt.Fprintf(c.App.ErrWriter, "%s: %s\n", c.App.Name, t.hardwareErr)
	}
	if err := trace.Result(out, "referenceMaximumAbsoluteError", verdict.FormatError(t.maxAbsError), "numericalTest", numerical); err != nil {
		return err
	}
	if err := trace.Result(out, "package", o.pkgPath, "tiles", pkg.Tiles, "hardwareTest", hardware); err != nil {
		return err
	}
	if err := d.Close(); err != nil {
		return err
	}
	if numerical == "FAIL" || hardware == "FAIL" {
		return cli.Exit("", 1) // reported by the verdict lines
	}
	return nil
}

// inference runs inference i (from 1): its own inputs in, the outputs
// poisoned, one "run" call, outputs out and compared with its own
// expected outputs. A device fault is recorded in t, not returned.
func inference(s *device.Session, i int, o *options, pkg *ipuexe.Package, fingerprint string,
	refs *references, t *tally, log *slog.Logger, out io.Writer) error {
	ref, err := refs.get(i - 1)
	if err != nil {
		return err
	}
	if i < o.inferences {
		refs.prefetch(i) // the next inference's, while the device runs
	}
	for k, in := range pkg.Host.Inputs {
		if err := s.WriteInput(in.Name, ref.inputs[k]); err != nil {
			return fmt.Errorf("device %s: %w", o.dev, err)
		}
	}
	// Whatever the outputs hold after the run, the run wrote: an output
	// it skipped reads as NaN, not as an earlier inference's result.
	if err := s.PoisonOutputs(); err != nil {
		return fmt.Errorf("device %s: %w", o.dev, err)
	}
	var opt sim.Options
	if i == 1 && o.profile != "" {
		opt.SamplePeriod = o.samplePeriod
	}
	res, err := s.Call("run", 0, opt)
	var fault *sim.Fault
	if errors.As(err, &fault) {
		t.hardwareErr = explainFault(err, fault, s, pkg)
		return nil
	}
	if err != nil {
		return err
	}
	if !res.AtHost {
		t.hardwareErr = fmt.Errorf("device %s: call \"run\": every tile halted instead of waiting at a host sync", o.dev)
		return nil
	}
	if i == 1 && o.profile != "" {
		taken, err := branchesTaken(s, pkg)
		if err != nil {
			return fmt.Errorf("device %s: %w", o.dev, err)
		}
		counters, err := profileCounters(s, pkg)
		if err != nil {
			return fmt.Errorf("device %s: %w", o.dev, err)
		}
		p, err := buildProfile(pkg, fingerprint, res, o.samplePeriod, taken, counters)
		if err != nil {
			return err
		}
		for k, b := range p.Branches {
			side, r := "else", pkg.Host.Branches[k].Else
			if b.ThenRan {
				side, r = "then", pkg.Host.Branches[k].Then
			}
			log.Info("branch ran", slog.String("if", b.If), slog.String("side", side), slog.Int64("cycles", b.Cycles),
				slog.Int("phases", r[1]-r[0]))
		}
		if err := atomicfile.WriteFile(o.profile, func(w io.Writer) error { return profile.Write(w, p) }); err != nil {
			return fmt.Errorf("write profile: %w", err)
		}
		if err := trace.Result(out, "profile", o.profile, "tiles", p.Tiles, "samples", len(p.Samples)); err != nil {
			return err
		}
	}

	pass := true
	for k, ot := range pkg.Host.Outputs {
		got, err := s.ReadOutput(ot.Name)
		if err != nil {
			return fmt.Errorf("device %s: %w", o.dev, err)
		}
		r, err := verdict.Compare(ot.Name, ot.DType, ot.Accumulate, got, ref.outputs[k])
		if err != nil {
			return err
		}
		t.maxAbsError = max(t.maxAbsError, r.MaxAbsError)
		if first, n := device.Unwritten(ot, got); n > 0 {
			// Still the poison: the run did not write these elements
			// (a NaN expected there would otherwise match it).
			pass = false
			log.Error("output not written by the run", slog.Int("inference", i), slog.String("output", ot.Name),
				slog.Int("index", first), slog.Int("unwritten", n), slog.Int("elements", r.Elements))
		}
		if !r.Pass {
			pass = false
			log.Error("numerical mismatch", slog.Int("inference", i), slog.String("output", ot.Name),
				slog.Int("index", r.FirstBad), trace.Bare("got", r.Got), trace.Bare("want", r.Want),
				slog.Int("bad", r.Bad), slog.Int("elements", r.Elements),
				trace.Bare("max_abs_error", verdict.FormatError(r.MaxAbsError)), slog.Float64("atol", r.Tolerance.Abs))
		}
	}
	verdictText := "PASS"
	if !pass {
		verdictText = "FAIL"
		t.numericFail = true
	}
	return trace.Result(out, "referenceInference", i, "numericalTest", verdictText)
}

// readPackage reads and validates the package, returning its fingerprint.
func readPackage(path string) (*ipuexe.Package, string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, "", fmt.Errorf("read package: %w", err)
	}
	// Decompression is bounded by the memory of the package's architecture.
	pkg, err := ipuexe.ReadWith(data, ipuexe.ReadOptions{Limits: pack.Limits})
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", path, err)
	}
	for _, t := range pkg.Host.Outputs {
		if !verdict.Supported(t.DType) {
			return nil, "", fmt.Errorf("%s: output %q: element type %q cannot be checked", path, t.Name, t.DType)
		}
	}
	return pkg, ipuexe.Fingerprint(data), nil
}

// dataSetPrefix names the data sets of an ONNX backend test case.
const dataSetPrefix = "test_data_set_"

// readDataSets reads the test data of --data DIR for n inferences. DIR is
// either one data set (it holds input_0.pb ...) or a test case holding
// data sets DIR/test_data_set_0, DIR/test_data_set_1 ..., numbered from 0
// without gaps; inference k is checked against set k modulo their
// number. The sets an inference uses are read, and checked, before
// anything runs.
func readDataSets(dir string, pkg *ipuexe.Package, n int, log *slog.Logger) ([]*expected, error) {
	setDirs, err := dataSets(dir)
	if err != nil {
		return nil, err
	}
	if setDirs == nil {
		ref, err := readData(dir, pkg)
		if err != nil {
			return nil, err
		}
		return []*expected{ref}, nil
	}
	sets := make([]*expected, 0, min(n, len(setDirs)))
	for _, d := range setDirs[:min(n, len(setDirs))] {
		ref, err := readData(d, pkg)
		if err != nil {
			return nil, err
		}
		sets = append(sets, ref)
	}
	log.Debug("test data sets", trace.Bare("path", dir), slog.Int("sets", len(setDirs)), slog.Int("read", len(sets)))
	return sets, nil
}

// dataSets lists the data sets of a test case DIR in order, or returns
// nil when DIR has none (it is then a data set itself).
func dataSets(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("--data %s: %w", dir, err)
	}
	found := map[int]bool{}
	last := -1
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), dataSetPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		k, err := strconv.Atoi(rest)
		if err != nil || k < 0 || strconv.Itoa(k) != rest {
			return nil, fmt.Errorf("%s: not a data set name (want %sN, N from 0)", filepath.Join(dir, e.Name()), dataSetPrefix)
		}
		found[k] = true
		last = max(last, k)
	}
	if len(found) == 0 {
		return nil, nil
	}
	if _, err := os.Stat(filepath.Join(dir, "input_0.pb")); err == nil {
		return nil, fmt.Errorf("%s: a data set beside %s: give the set or the case, not both", filepath.Join(dir, "input_0.pb"), filepath.Join(dir, dataSetPrefix+"0"))
	}
	var dirs []string
	for k := 0; k <= last; k++ {
		d := filepath.Join(dir, dataSetPrefix+strconv.Itoa(k))
		if !found[k] {
			return nil, fmt.Errorf("%s: missing: data sets are numbered from 0 without gaps, and %s exists", d, filepath.Join(dir, dataSetPrefix+strconv.Itoa(last)))
		}
		dirs = append(dirs, d)
	}
	return dirs, nil
}

// readData reads DIR/input_N.pb and DIR/output_N.pb for the package's
// inputs and outputs, checking each against the package's tensor.
func readData(dir string, pkg *ipuexe.Package) (*expected, error) {
	downcast, err := downcastNames(pkg)
	if err != nil {
		return nil, err
	}
	ref := &expected{}
	for i, t := range pkg.Host.Inputs {
		raw, err := readTensor(filepath.Join(dir, "input_"+strconv.Itoa(i)+".pb"), "input", t, downcast[t.Name])
		if err != nil {
			return nil, err
		}
		ref.inputs = append(ref.inputs, raw)
	}
	for i, t := range pkg.Host.Outputs {
		path := filepath.Join(dir, "output_"+strconv.Itoa(i)+".pb")
		raw, err := readTensor(path, "output", t, downcast[t.Name])
		if err != nil {
			return nil, err
		}
		tol, err := verdict.ForExpected(t.DType, t.Accumulate, raw)
		if err != nil {
			return nil, fmt.Errorf("%s: package output %q: %w", path, t.Name, err)
		}
		ref.outputs = append(ref.outputs, raw)
		ref.tolerances = append(ref.tolerances, tol)
	}
	// A file beyond the package's tensors means the data is for another
	// model.
	for _, extra := range []string{
		"input_" + strconv.Itoa(len(pkg.Host.Inputs)) + ".pb",
		"output_" + strconv.Itoa(len(pkg.Host.Outputs)) + ".pb",
	} {
		if _, err := os.Stat(filepath.Join(dir, extra)); err == nil {
			return nil, fmt.Errorf("%s: the package has %d inputs and %d outputs", filepath.Join(dir, extra),
				len(pkg.Host.Inputs), len(pkg.Host.Outputs))
		}
	}
	return ref, nil
}

// downcastNames returns the DOUBLE tensors the package's model computes
// as float (ipu-plan --downcast-fp64).
func downcastNames(pkg *ipuexe.Package) (map[string]bool, error) {
	if len(pkg.Host.Model) == 0 {
		return nil, nil
	}
	pg, err := plan.ReadGraph(pkg.Host.Model)
	if err != nil {
		return nil, fmt.Errorf("model section: %w", err)
	}
	names := map[string]bool{}
	for _, n := range pg.Downcast {
		names[n] = true
	}
	return names, nil
}

// readTensor reads one test-data tensor and checks its element type and
// shape against the package's tensor t. With downcast, t is a DOUBLE
// tensor computed as float: its data is double, rounded here once to
// float.
func readTensor(path, kind string, t obj.Tensor, downcast bool) ([]byte, error) {
	tp, err := onnx.ReadTensorFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: missing: the package's %s %q needs it", path, kind, t.Name)
	}
	if err != nil {
		return nil, err
	}
	if downcast && tp.DType == onnx.Double && t.DType == "float" {
		if err := roundToFloat(tp); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	if tp.DType.String() != t.DType {
		return nil, fmt.Errorf("%s: field data_type: %s, package %s %q is %s", path, tp.DType, kind, t.Name, t.DType)
	}
	if !slices.Equal(tp.Dims, t.Shape) {
		return nil, fmt.Errorf("%s: field dims: %v, package %s %q has shape %v", path, dims(tp.Dims), kind, t.Name, dims(t.Shape))
	}
	return tp.Raw, nil
}

// dims prints a shape as [2 3] (a scalar as []).
func dims(d []int64) string {
	if d == nil {
		d = []int64{}
	}
	return fmt.Sprint(d)
}

// openDevice opens an existing device.
func openDevice(path string) (*device.Device, error) {
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("device %s does not exist: run ipu-load first", path)
	}
	return device.Open(path)
}

// branchesTaken reads which side each branch of the package took in the
// last call: the condition word the tiles branched on, which the
// program keeps where it was.
func branchesTaken(s *device.Session, pkg *ipuexe.Package) ([]bool, error) {
	var out []bool
	for _, b := range pkg.Host.Branches {
		w, err := s.ReadTile(b.CondTile, b.CondAddr, int(b.CondBytes))
		if err != nil {
			return nil, fmt.Errorf("branch If %q: condition: %w", b.If, err)
		}
		out = append(out, b.Taken(w))
	}
	return out, nil
}

// profileCounters reads every tile's profile buffer (obj.ProfileSymbol)
// back from the device after a run: by tile, the words its supervisor
// stored, one per compute phase of the package (nil for a tile without
// the buffer).
func profileCounters(s *device.Session, pkg *ipuexe.Package) ([][]uint32, error) {
	out := make([][]uint32, pkg.Tiles)
	for t := 0; t < pkg.Tiles && t < len(pkg.TileImage); t++ {
		img := pkg.Images[pkg.TileImage[t]]
		for _, sym := range img.Symbols {
			if sym.Name != obj.ProfileSymbol {
				continue
			}
			b, err := s.ReadTile(t, sym.Addr, int(sym.Size))
			if err != nil {
				return nil, fmt.Errorf("tile %d: profile buffer: %w", t, err)
			}
			w := make([]uint32, len(b)/4)
			for k := range w {
				w[k] = binary.LittleEndian.Uint32(b[4*k:])
			}
			out[t] = w
		}
	}
	return out, nil
}

// buildProfile turns the first inference's run into the profile artifact.
// taken says which side each of the package's branches took; counters
// are the tiles' profile buffers (profileCounters), which give each
// compute phase's TileCounters.
func buildProfile(pkg *ipuexe.Package, fingerprint string, res *sim.RunResult, samplePeriod int64, taken []bool, counters [][]uint32) (*profile.Profile, error) {
	preset, err := arch.Lookup(pkg.Arch)
	if err != nil {
		return nil, fmt.Errorf("profile: %w", err)
	}
	p := &profile.Profile{
		Arch:         pkg.Arch,
		Fingerprint:  fingerprint,
		Tiles:        pkg.Tiles,
		ClockHz:      preset.ClockHz,
		SamplePeriod: samplePeriod,
		TotalCycles:  res.Cycles,
		Inferences:   1,
	}
	// The run call's supersteps are the package's phases on the path the
	// branches took, in order, when the counts agree; otherwise their
	// kinds are unknown.
	path := pkg.Host.PhasePath(taken)
	named := len(res.Phases) == len(path)
	for k, b := range pkg.Host.Branches {
		pb := profile.Branch{If: b.If, ThenRan: taken[k]}
		lo, hi := b.Else[0], b.Else[1]
		if taken[k] {
			lo, hi = b.Then[0], b.Then[1]
		}
		for j, i := range path {
			if named && i >= lo && i < hi {
				pb.Cycles += res.Phases[j].Cycles + res.Phases[j].SyncCycles
			}
		}
		p.Branches = append(p.Branches, pb)
	}
	for j, ph := range res.Phases {
		pp := profile.Phase{
			Index:         ph.Phase,
			Cycles:        ph.Cycles,
			SyncCycles:    ph.SyncCycles,
			TileCycles:    ph.TileCycles,
			ExchangeBytes: ph.ExchangeBytes,
			HostBytes:     ph.HostBytes,
			Instructions:  ph.Instructions,
		}
		if named {
			i := path[j]
			pp.Kind = phaseKind(pkg.Host.Phases[i].Kind)
			pp.Name = pkg.Host.Phases[i].Name
			pp.TileCounters = phaseCounters(pkg, i, counters)
		}
		p.Phases = append(p.Phases, pp)
	}
	for _, sm := range res.Samples {
		p.Samples = append(p.Samples, profile.Sample{Tile: sm.Tile, Phase: sm.Phase, Cycle: sm.Cycle, PC: sm.PC})
	}
	return p, nil
}

// phaseCounters is package phase i's word of every tile's profile
// buffer (nil when i is not a compute phase or no tile has the word).
func phaseCounters(pkg *ipuexe.Package, i int, counters [][]uint32) []int64 {
	if pkg.Host.Phases[i].Kind != obj.Compute {
		return nil
	}
	w := 0
	for _, ph := range pkg.Host.Phases[:i] {
		if ph.Kind == obj.Compute {
			w++
		}
	}
	var out []int64
	for t, ws := range counters {
		if w >= len(ws) {
			continue
		}
		if out == nil {
			out = make([]int64, len(counters))
		}
		out[t] = int64(ws[w])
	}
	return out
}

func phaseKind(k obj.PhaseKind) profile.Kind {
	switch k {
	case obj.Compute:
		return profile.KindCompute
	case obj.Exchange:
		return profile.KindExchange
	case obj.HostExchange:
		return profile.KindHost
	}
	return profile.KindUnknown
}

// roundToFloat rounds a DOUBLE tensor's elements to float (to nearest,
// ties to even) in place.
func roundToFloat(t *onnx.Tensor) error {
	x, err := t.Float64s()
	if err != nil {
		return err
	}
	raw := make([]byte, 4*len(x))
	for i, v := range x {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(float32(v)))
	}
	t.DType, t.Raw = onnx.Float, raw
	return nil
}
