// Command ipu-check runs the application loaded on an IPU device and
// checks its results:
//
//	ipu-check --device DEV [--lock FILE] [--lock-timeout DUR] [--data DIR]
//	          [--inferences N] [--reference-precision device|fp32|fp64]
//	          [--threads N] [--profile OUT.capnp] [--sample-period CYCLES]
//	          IN.ipuexe
//
// IN.ipuexe must be the package the device was loaded with (ipu-load): the
// device records its fingerprint. With --data DIR the inputs are
// DIR/input_0.pb, DIR/input_1.pb ... and the expected outputs
// DIR/output_0.pb ... (serialized ONNX TensorProto, the ONNX backend test
// layout), in the package's input and output order; each must have the
// element type and shape the package gives that tensor. Without --data the
// expected outputs would come from a host reference evaluation of the
// model, which packages do not carry yet: ipu-check says so and exits with
// status 2. --reference-precision and --threads configure that host
// reference; they are checked but have no effect with --data.
//
// ipu-check takes hardware ownership as ipu-load does (--lock, default
// DEV.lock, waiting up to --lock-timeout), starts a host exchange session,
// and runs --inferences calls of "run" (default 2). After each it reads the
// outputs and compares them with the expected ones (package verdict: exact
// for integer results and outputs the compiler marks as not accumulated, a
// bound derived from the data types otherwise; each output's tolerance and
// its derivation are logged once). With --profile the first inference runs
// with PC sampling every --sample-period cycles and its profile is written
// to OUT.capnp (package profile; read it with `capnp decode
// formats/profile/profile.capnp Profile` or ipu-dump).
//
// Results go to stdout as key=value lines without timestamps, in this
// order:
//
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
