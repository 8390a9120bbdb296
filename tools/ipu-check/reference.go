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

// reference prepares what the inferences are checked against: the test
// data of --data, or else a host reference evaluation of the model the
// package carries.
func reference(o *options, pkg *ipuexe.Package, log *slog.Logger, out io.Writer) (*expected, error) {
	if o.data == "" {
		if len(pkg.Host.Model) == 0 {
			return nil, toolrun.Usagef("package carries no model (an assembly program): give --data DIR")
		}
		return hostReference(o, pkg, log, out)
	}
	log.Debug("reference from test data; --seed, --reference-precision and --threads do not apply",
		slog.Uint64("seed", o.seed), slog.String("reference_precision", o.precision), slog.Int("threads", o.threads))
	start := time.Now()
	ref, err := readData(o.data, pkg)
	if err != nil {
		return nil, err
	}
	log.Info("prepared reference inputs", trace.Elapsed(start))
	return ref, nil
}

// hostReference generates the inputs from --seed and evaluates the
// package's model on them at --reference-precision. The expected outputs
// are the evaluation's, rounded once to each output's type, and their
// tolerances are derived as for test data (verdict.ForExpected): from
// the output's type and its Accumulate, whatever the precision of the
// reference, so that a device that sums in another order than the
// reference still passes, and nothing wider.
func hostReference(o *options, pkg *ipuexe.Package, log *slog.Logger, out io.Writer) (*expected, error) {
	g, err := packageModel(pkg)
	if err != nil {
		return nil, fmt.Errorf("%s: model section: %w", o.pkgPath, err)
	}
	precision, err := hostref.ParsePrecision(o.precision)
	if err != nil {
		return nil, toolrun.Usagef("--reference-precision: %v", err)
	}

	start := time.Now()
	inputs := hostref.GenerateInputs(g, o.seed)
	ref := &expected{}
	for _, t := range inputs {
		ref.inputs = append(ref.inputs, t.Raw)
	}
	log.Info("prepared reference inputs", trace.Elapsed(start))

	threads := o.threads
	if threads == 0 {
		threads = runtime.NumCPU()
	}
	log.Info("configured host reference BLAS", slog.Int("threads", threads))
	if err := trace.Result(out, "referencePrecision", precision.String()); err != nil {
		return nil, err
	}

	start = time.Now()
	outs, err := hostref.Eval(g, inputs, hostref.Options{Precision: precision, Threads: threads})
	if err != nil {
		return nil, fmt.Errorf("%s: host reference: %w", o.pkgPath, err)
	}
	for i, t := range pkg.Host.Outputs {
		raw, err := asOutput(outs[i], g.Outputs[i])
		if err != nil {
			return nil, fmt.Errorf("%s: host reference: %w", o.pkgPath, err)
		}
		tol, err := verdict.ForExpected(t.DType, t.Accumulate, raw)
		if err != nil {
			return nil, fmt.Errorf("%s: package output %q: %w", o.pkgPath, t.Name, err)
		}
		ref.outputs = append(ref.outputs, raw)
		ref.tolerances = append(ref.tolerances, tol)
	}
	log.Info("evaluated host reference", trace.Elapsed(start))
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
