package main

import (
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"slices"
	"time"

	"ipu.local/formats/ipuexe"
	"ipu.local/formats/obj"
	"ipu.local/formats/plan"
	"ipu.local/libs/graph"
	"ipu.local/libs/hostref"
	"ipu.local/libs/onnx"
	"ipu.local/libs/toolrun"
	"ipu.local/libs/trace"
	"ipu.local/libs/verdict"
)

// defaultSeed seeds the generated reference inputs.
const defaultSeed = 1

// references gives each inference what it is checked against: its own
// inputs and expected outputs. Inference 0's are prepared up front, as
// the log's "prepared reference inputs" and "evaluated host reference"
// lines say; a later inference's come from the next data set (--data) or
// from inputs generated from its own seed (inferenceSeed) and a host
// reference evaluation of them, made while the device runs the inference
// before it.
type references struct {
	first *expected
	// With --data: the data sets, inference k checked against
	// sets[k%len(sets)]; sets[0] is first.
	sets []*expected
	// Without --data: the host reference of a later inference.
	host    *hostModel
	pending map[int]chan refResult
}

// hostModel is what a host reference evaluation needs.
type hostModel struct {
	o         *options
	pkg       *ipuexe.Package
	g         *graph.Graph
	precision hostref.Precision
	threads   int
	log       *slog.Logger
}

type refResult struct {
	ref *expected
	err error
}

// reference prepares what the inferences are checked against: the test
// data of --data, or else a host reference evaluation of the model the
// package carries. before, when not nil, runs once the package's model
// or the test data are read and checked, before the model is evaluated
// (check's early look at the device); its error is reference's.
func reference(o *options, pkg *ipuexe.Package, log *slog.Logger, out io.Writer, before func() error) (*references, error) {
	if before == nil {
		before = func() error { return nil }
	}
	if o.data == "" {
		if len(pkg.Host.Model) == 0 {
			return nil, toolrun.Usagef("package carries no model (an assembly program): give --data DIR")
		}
		return hostReference(o, pkg, log, out, before)
	}
	log.Debug("reference from test data; --seed, --reference-precision and --threads do not apply",
		slog.Uint64("seed", o.seed), slog.String("reference_precision", o.precision), slog.Int("threads", o.threads))
	start := time.Now()
	sets, err := readDataSets(o.data, pkg, o.inferences, log)
	if err != nil {
		return nil, err
	}
	if err := before(); err != nil {
		return nil, err
	}
	log.Info("prepared reference inputs", trace.Elapsed(start))
	return &references{first: sets[0], sets: sets}, nil
}

// inferenceSeed is the seed of inference k's generated inputs (k from
// 0): --seed itself for the first, so that a single inference checks what
// it always did, and a SplitMix64 mix of the seed and k for the others,
// so that no two inferences of a check share their inputs.
func inferenceSeed(seed uint64, k int) uint64 {
	if k == 0 {
		return seed
	}
	z := seed + uint64(k)*0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// get returns inference k's reference (k from 0). Without --data it
// evaluates it, unless prefetch started that already.
func (r *references) get(k int) (*expected, error) {
	if k == 0 {
		return r.first, nil
	}
	if r.sets != nil {
		return r.sets[k%len(r.sets)], nil
	}
	r.prefetch(k)
	res := <-r.pending[k]
	delete(r.pending, k)
	return res.ref, res.err
}

// prefetch starts evaluating inference k's host reference, so that it is
// ready when the device has run inference k-1.
func (r *references) prefetch(k int) {
	if k == 0 || r.host == nil {
		return
	}
	if _, ok := r.pending[k]; ok {
		return
	}
	ch := make(chan refResult, 1)
	r.pending[k] = ch
	go func() {
		ref, err := r.host.evaluate(k)
		ch <- refResult{ref, err}
	}()
}

// wait lets a prefetch still running finish, so that no evaluation
// outlives the check.
func (r *references) wait() {
	for k, ch := range r.pending {
		<-ch
		delete(r.pending, k)
	}
}

// hostReference generates inference 0's inputs from --seed and evaluates
// the package's model on them at --reference-precision. The expected
// outputs are the evaluation's, rounded once to each output's type, and
// their tolerances are derived as for test data (verdict.ForExpected):
// from the output's type and its Accumulate, whatever the precision of
// the reference, so that a device that sums in another order than the
// reference still passes, and nothing wider.
func hostReference(o *options, pkg *ipuexe.Package, log *slog.Logger, out io.Writer, before func() error) (*references, error) {
	g, err := packageModel(pkg)
	if err != nil {
		return nil, fmt.Errorf("%s: model section: %w", o.pkgPath, err)
	}
	precision, err := hostref.ParsePrecision(o.precision)
	if err != nil {
		return nil, toolrun.Usagef("--reference-precision: %v", err)
	}
	if err := before(); err != nil {
		return nil, err
	}
	threads := o.threads
	if threads == 0 {
		threads = runtime.NumCPU()
	}
	h := &hostModel{o: o, pkg: pkg, g: g, precision: precision, threads: threads, log: log}

	start := time.Now()
	inputs := hostref.GenerateInputs(g, inferenceSeed(o.seed, 0))
	log.Info("prepared reference inputs", trace.Elapsed(start))
	log.Info("configured host reference BLAS", slog.Int("threads", threads))
	if err := trace.Result(out, "referencePrecision", precision.String()); err != nil {
		return nil, err
	}
	start = time.Now()
	ref, err := h.eval(inputs)
	if err != nil {
		return nil, err
	}
	log.Info("evaluated host reference", trace.Elapsed(start))
	return &references{first: ref, host: h, pending: map[int]chan refResult{}}, nil
}

// evaluate generates inference k's inputs from its seed and evaluates the
// model on them.
func (h *hostModel) evaluate(k int) (*expected, error) {
	start := time.Now()
	seed := inferenceSeed(h.o.seed, k)
	ref, err := h.eval(hostref.GenerateInputs(h.g, seed))
	if err != nil {
		return nil, err
	}
	h.log.Debug("evaluated host reference", slog.Int("inference", k+1), slog.Uint64("seed", seed), trace.Elapsed(start))
	return ref, nil
}

// eval evaluates the model on inputs: the expected outputs and their
// tolerances.
func (h *hostModel) eval(inputs []*onnx.Tensor) (*expected, error) {
	ref := &expected{}
	for _, t := range inputs {
		ref.inputs = append(ref.inputs, t.Raw)
	}
	outs, err := hostref.Eval(h.g, inputs, hostref.Options{Precision: h.precision, Threads: h.threads})
	if err != nil {
		return nil, fmt.Errorf("%s: host reference: %w", h.o.pkgPath, err)
	}
	for i, t := range h.pkg.Host.Outputs {
		raw, err := asOutput(outs[i], h.g.Outputs[i])
		if err != nil {
			return nil, fmt.Errorf("%s: host reference: %w", h.o.pkgPath, err)
		}
		tol, err := verdict.ForExpected(t.DType, t.Accumulate, raw)
		if err != nil {
			return nil, fmt.Errorf("%s: package output %q: %w", h.o.pkgPath, t.Name, err)
		}
		ref.outputs = append(ref.outputs, raw)
		ref.tolerances = append(ref.tolerances, tol)
	}
	return ref, nil
}

// packageModel decodes the package's model section and checks that its
// inputs and outputs are the package's tensors, in order.
func packageModel(pkg *ipuexe.Package) (*graph.Graph, error) {
	pg, err := plan.ReadGraph(pkg.Host.Model)
	if err != nil {
		return nil, err
	}
	g, err := graph.Decode(pg)
	if err != nil {
		return nil, err
	}
	if err := sameTensors("input", g.Inputs, pkg.Host.Inputs); err != nil {
		return nil, err
	}
	if err := sameTensors("output", g.Outputs, pkg.Host.Outputs); err != nil {
		return nil, err
	}
	return g, nil
}

// sameTensors checks the model's inputs or outputs against the package's.
func sameTensors(kind string, vs []*graph.Value, ts []obj.Tensor) error {
	if len(vs) != len(ts) {
		return fmt.Errorf("the model has %d %ss, the package %d", len(vs), kind, len(ts))
	}
	for i, v := range vs {
		t := ts[i]
		if v.Name != t.Name || v.DType.String() != t.DType || !slices.Equal(v.Shape, t.Shape) {
			return fmt.Errorf("graph.%ss[%d]: %q %s%s, package %s %d is %q %s%s", kind, i,
				v.Name, v.DType, dims(v.Shape), kind, i, t.Name, t.DType, dims(t.Shape))
		}
	}
	return nil
}

// asOutput returns the raw elements of an evaluated output in the
// output's type: as evaluated, or (an FP64 reference, which comes back as
// double) rounded once to it.
func asOutput(t *onnx.Tensor, v *graph.Value) ([]byte, error) {
	if t.DType == v.DType {
		return t.Raw, nil
	}
	x, err := t.Float64s()
	if err != nil {
		return nil, fmt.Errorf("output %q: %w", v.Name, err)
	}
	r, err := hostref.Encode(v.Name, v.DType, v.Shape, x)
	if err != nil {
		return nil, err
	}
	return r.Raw, nil
}
