package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"slices"
	"time"

	"github.com/urfave/cli/v2"

	"ipu.local/formats/ipuexe"
	"ipu.local/formats/profile"
	"ipu.local/libs/artdiff"
	"ipu.local/libs/atomicfile"
	"ipu.local/libs/device"
	"ipu.local/libs/pack"
	"ipu.local/libs/par"
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

// readsImages reports whether check reads the package's images up
// front: for a profile only.
func (o *options) readsImages() bool { return o.profile != "" }

// heapPerPackageByte is the check's heap a package byte, about (the
// BERT-base FP16 layer's 40 MB package: 590 MB with the device's pages).
const heapPerPackageByte = 15

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
	// As ipu-link's: GOGC=100 against 400, alternating runs, one
	// inference: qk-early@1472 0.210-0.222 s against 0.235-0.240
	// (median of 8); the 12-layer encoder alike within the noise
	// (20.8-26.1 s against 22.3-24.7).
	app.Metadata = map[string]any{toolrun.GCPercentKey: 100, toolrun.HeapPerInputKey: int64(heapPerPackageByte)}
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

	// The images are read for a profile only (their symbols place the
	// tiles' profile buffers), or after a fault (explainFault): the
	// device runs the package of this fingerprint, whose images ipu-load
	// validated.
	pkg, fingerprint, err := readPackage(o.pkgPath, o.readsImages())
	if err != nil {
		return err
	}
	// A device that does not exist is refused before the host reference
	// is computed (seconds on a large model) and before its lock file is
	// made: a check leaves nothing behind.
	if err := deviceExists(o.dev); err != nil {
		return err
	}
	var hw deviceHold
	defer hw.release()
	// A device whose header says, read without the lock, that it cannot
	// run this package (not loaded, or loaded with another) is taken and
	// its session started once the package's model (or the test data) is
	// checked and before the reference is evaluated, so that its refusal
	// comes at once. A load running now may change that: under the lock
	// the session decides, and the reference follows if it starts.
	early := func() error {
		if runs(o.dev, fingerprint) {
			return nil
		}
		return hw.start(o, pkg, fingerprint, log)
	}
	refs, err := reference(o, pkg, log, out, early)
	if err != nil {
		return err
	}
	defer refs.wait()
	for i, t := range pkg.Host.Outputs {
		tol := refs.first.tolerances[i]
		log.Info("tolerance", slog.String("output", t.Name), slog.Float64("atol", tol.Abs),
			slog.String("derivation", tol.Derivation))
	}
	if hw.s == nil {
		if err := hw.start(o, pkg, fingerprint, log); err != nil {
			return err
		}
	}
	s := hw.s

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
	if err := hw.d.Close(); err != nil {
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
		t.hardwareErr = explainFault(err, fault, s, pkg, o, fingerprint)
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
		if err := writeProfile(s, o, pkg, fingerprint, res, log, out); err != nil {
			return err
		}
	}

	pass, err := compareOutputs(s, i, o.dev, pkg, ref, t, log)
	if err != nil {
		return err
	}
	verdictText := "PASS"
	if !pass {
		verdictText = "FAIL"
		t.numericFail = true
	}
	return trace.Result(out, "referenceInference", i, "numericalTest", verdictText)
}

// writeProfile builds the profile of the first inference's run res, logs
// the side each branch ran and writes the profile to --profile.
func writeProfile(s *device.Session, o *options, pkg *ipuexe.Package, fingerprint string, res *sim.RunResult,
	log *slog.Logger, out io.Writer) error {
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
	return trace.Result(out, "profile", o.profile, "tiles", p.Tiles, "samples", len(p.Samples))
}

// compareOutputs reads inference i's outputs and compares them with the
// reference's expected outputs, logging each mismatch and each output
// the run left unwritten; it reports whether all passed.
func compareOutputs(s *device.Session, i int, dev string, pkg *ipuexe.Package, ref *expected, t *tally,
	log *slog.Logger) (bool, error) {
	pass := true
	for k, ot := range pkg.Host.Outputs {
		got, err := s.ReadOutput(ot.Name)
		if err != nil {
			return false, fmt.Errorf("device %s: %w", dev, err)
		}
		r, err := verdict.Compare(ot.Name, ot.DType, ot.Accumulate, got, ref.outputs[k])
		if err != nil {
			return false, err
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
	return pass, nil
}

// readPackage reads and validates the package, returning its fingerprint:
// with its images, or with as many empty ones (ipuexe.ReadOptions.NoImages:
// 9 ms against 1 for qk-early, 0.56 s against 0.07 for the 12-layer
// encoder).
func readPackage(path string, images bool) (*ipuexe.Package, string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, "", fmt.Errorf("read package: %w", err)
	}
	if err := artdiff.NotKind(data, "package"); err != nil {
		return nil, "", fmt.Errorf("%s: %w", path, err)
	}
	toolrun.ExpectHeap(heapPerPackageByte * int64(len(data)))
	fingerprint := par.Background(func() string { return ipuexe.Fingerprint(data) })
	// Decompression is bounded by the memory of the package's architecture.
	pkg, err := ipuexe.ReadWith(data, ipuexe.ReadOptions{Limits: pack.Limits, NoImages: !images})
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", path, err)
	}
	for _, t := range pkg.Host.Outputs {
		if !verdict.Supported(t.DType) {
			return nil, "", fmt.Errorf("%s: output %q: element type %q cannot be checked", path, t.Name, t.DType)
		}
	}
	// The host model shares the file's bytes: a copy of it lets the
	// collector take the rest back (the 12-layer encoder's package is
	// 459 MB, its model 216 MB).
	pkg.Host.Model = bytes.Clone(pkg.Host.Model)
	return pkg, fingerprint(), nil
}

// deviceHold is a check's hold on the device: its lock, the open device
// and the session with the package.
type deviceHold struct {
	lock *device.Lock
	d    *device.Device
	s    *device.Session
}

// start takes the device's lock, opens it and starts the session with
// the package, its host pages attached.
func (hw *deviceHold) start(o *options, pkg *ipuexe.Package, fingerprint string, log *slog.Logger) error {
	lock, err := device.Acquire(o.lock, o.lockTimeout, log)
	if err != nil {
		return err
	}
	hw.lock = lock
	if hw.d, err = openDevice(o.dev); err != nil {
		return err
	}
	s, err := hw.d.NewSession(pkg, fingerprint, log)
	if err != nil {
		return err
	}
	if err := s.Attach(pkg.Host.Pages); err != nil {
		return fmt.Errorf("device %s: %w", o.dev, err)
	}
	hw.s = s
	return nil
}

// release closes the device and releases its lock, whichever start got.
func (hw *deviceHold) release() {
	if hw.d != nil {
		hw.d.Close()
	}
	if hw.lock != nil {
		hw.lock.Release()
	}
}

// runs reports whether the device's header, read without the lock, says
// it runs the package of fingerprint (a hint: the session decides).
func runs(path, fingerprint string) bool {
	d, err := device.Open(path)
	if err != nil {
		return false
	}
	defer d.Close()
	fp, _, err := d.Loaded()
	return err == nil && fp == fingerprint
}

// openDevice opens an existing device.
func openDevice(path string) (*device.Device, error) {
	if err := deviceExists(path); err != nil {
		return nil, err
	}
	return device.Open(path)
}

// deviceExists refuses a device path with nothing there.
func deviceExists(path string) error {
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("device %s does not exist: run ipu-load first", path)
	}
	return nil
}
