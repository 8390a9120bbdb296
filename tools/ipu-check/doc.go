// Command ipu-check runs the application loaded on an IPU device and
// checks its results:
//
//	ipu-check --device DEV [--lock FILE] [--lock-timeout DUR] [--data DIR]
//	          [--inferences N] [--seed N] [--reference-precision device|fp32|fp64]
//	          [--threads N] [--profile OUT.capnp] [--sample-period CYCLES]
//	          [--progress auto|always|never] IN.ipuexe
//
// With stderr on a terminal (--progress auto) a progress bar shows the
// inferences.
//
// IN.ipuexe must be the package the device was loaded with (ipu-load): the
// device records its fingerprint. Its tile images, which ipu-load
// validated, are read only for --profile or to name a fault's kernel. With
// --data DIR the inputs are
// DIR/input_0.pb, DIR/input_1.pb ... and the expected outputs
// DIR/output_0.pb ... (serialized ONNX TensorProto, the ONNX backend test
// layout), in the package's input and output order; each must have the
// element type and shape the package gives that tensor. DIR may also be
// a test case holding data sets, DIR/test_data_set_0,
// DIR/test_data_set_1 ... (numbered from 0 without gaps; DIR then holds
// no input_0.pb itself): inference n (from 1) is checked against
// test_data_set_((n-1) modulo the number of sets), so that consecutive
// inferences get different data when there are several sets. The sets
// the inferences use are read and checked before the device is touched.
//
// Without --data the expected outputs come from a host reference: the
// package's model section (the plan's graph, which ipu-link stores) is
// decoded and checked as a model is, and must have the package's inputs
// and outputs; the inputs are generated from --seed (default 1; the same
// seed gives the same inputs on every platform) and the model is evaluated
// on the host (package hostref) at --reference-precision. Each inference
// gets its own inputs: inference n (referenceInference=n, from 1) has
// the seed --seed for n = 1, so that one inference checks what it always
// did, and a SplitMix64 mix of --seed and n-1 after it; each is checked
// against its own evaluation (the next one is evaluated while the device
// runs the current one; the first one's evaluation is the one the log's
// "evaluated host reference" line times, the others' are logged with -v).
// The precisions: device (the
// default) emulates the device's roundings, fp32 onnxruntime's float32
// arithmetic, fp64 the exact result, rounded once to each output's type.
// --threads sets the goroutines of its matrix products (default 0, one
// per CPU); results do not depend on it. A bad model section is an error
// naming the package (status 1). A package without a model (a hand-written
// assembly program) needs --data: without it ipu-check says so and exits
// with status 2. With --data, --seed, --reference-precision and --threads
// are checked but have no effect.
//
// ipu-check takes hardware ownership as ipu-load does (--lock, default
// DEV.lock, waiting up to --lock-timeout), starts a host exchange session,
// and runs --inferences calls of "run" (default 2). It does so after the
// reference is evaluated, unless the device's header, read once the
// model or the test data are checked, says that the device does not run
// this package (not loaded, or loaded with another): then it takes the
// device first, so that the refusal does not wait for the reference. A
// device that does not exist is refused before either. Before each it writes
// that inference's inputs and poisons every output in the host pages
// with a NaN pattern of its type (libs/device PoisonOutputs): an output
// the run does not write reads back as the poison, never as an earlier
// inference's result, and fails ("output not written by the run", even
// where a NaN is expected). After each it reads the outputs and compares
// them with the expected ones (package verdict: exact
// for integer results and outputs the compiler marks as not accumulated, a
// bound derived from the data types otherwise; each output's tolerance and
// its derivation are logged once). The tolerance is the same whether the
// expected outputs come from test data or from a host reference at any
// precision: it covers a device that sums in another order than the
// reference, and is never widened to pass.
//
// With --profile the first inference runs with PC sampling every
// --sample-period cycles and its profile is written to OUT.capnp (package
// profile; read it with `capnp decode formats/profile/profile.capnp
// Profile` or ipu-dump).
//
// Results go to stdout as key=value lines without timestamps, in this
// order:
//
//	referencePrecision=device                        (without --data)
//	profile=OUT.capnp tiles=T samples=S              (with --profile)
//	referenceInference=1 numericalTest=PASS
//	...
//	referenceMaximumAbsoluteError=X numericalTest=PASS
//	package=IN.ipuexe tiles=T hardwareTest=PASS
//
// A numerical mismatch logs the output, the first bad element, and the
// values got and wanted. A device fault (an access out of range, an
// invalid instruction, an exchange out of step...) is printed as one line
// naming tile, context, PC and phase, and gives hardwareTest=FAIL.
//
// Exit status: 0 when every verdict is PASS, 1 on a FAIL or another
// failure, 2 on a usage error.
package main
