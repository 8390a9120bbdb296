package main

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"ipu.local/libs/graph"
	"ipu.local/libs/onnx"
)

// planError returns the error line ipu-plan prints for the model: the
// message of onnx.ReadModel or graph.Build, wrapped as tools/ipu-plan
// wraps it. Building the messages with the libraries keeps the test
// honest when their wording changes.
func planError(t *testing.T, b *onnx.ModelBuilder) string {
	t.Helper()
	const model = "ort/x/model.onnx"
	m, err := onnx.ReadModel(b.Marshal())
	if err != nil {
		return "ipu-plan: " + model + ": " + err.Error()
	}
	_, err = graph.Build(m)
	if err == nil {
		t.Fatal("graph.Build accepted the model")
	}
	var unsupported *graph.UnsupportedError
	if errors.As(err, &unsupported) {
		return "ipu-plan: " + err.Error()
	}
	return "ipu-plan: " + model + ": " + err.Error()
}

// The models of the refusals, each with one thing outside the supported
// set.

func modelOp(op string) *onnx.ModelBuilder {
	b := onnx.NewModel(21)
	b.AddInput("x", onnx.Float, []int64{4})
	b.AddNode(op, "n0", []string{"x"}, []string{"y"})
	b.AddOutput("y", onnx.Float, []int64{4})
	return b
}

func modelInputType(d onnx.DataType) *onnx.ModelBuilder {
	b := onnx.NewModel(21)
	b.AddInput("0", d, []int64{4})
	b.AddNode("Relu", "n0", []string{"0"}, []string{"y"})
	b.AddOutput("y", d, []int64{4})
	return b
}

func modelCast(to onnx.DataType) *onnx.ModelBuilder {
	b := onnx.NewModel(21)
	b.AddInput("x", onnx.Float, []int64{4})
	b.AddNode("Cast", "cast0", []string{"x"}, []string{"y"}, onnx.IntAttr("to", int64(to)))
	b.AddOutput("y", to, []int64{4})
	return b
}

func modelStash() *onnx.ModelBuilder {
	b := onnx.NewModel(21)
	b.AddInput("x", onnx.Float, []int64{2, 4})
	b.AddInitializer(onnx.NewFloat32("scale", []int64{4}, []float32{1, 1, 1, 1}))
	b.AddNode("LayerNormalization", "ln0", []string{"x", "scale"}, []string{"y"},
		onnx.IntAttr("stash_type", int64(onnx.Double)))
	b.AddOutput("y", onnx.Float, []int64{2, 4})
	return b
}

func modelConstantString() *onnx.ModelBuilder {
	b := onnx.NewModel(21)
	b.AddInput("x", onnx.Float, []int64{4})
	b.AddNode("Constant", "c0", nil, []string{"c"}, onnx.StringAttr("value_string", "a"))
	b.AddNode("Relu", "n0", []string{"x"}, []string{"y"})
	b.AddOutput("y", onnx.Float, []int64{4})
	return b
}

func modelArith(d onnx.DataType) *onnx.ModelBuilder {
	b := onnx.NewModel(21)
	b.AddInput("a", d, []int64{4})
	b.AddInput("b", d, []int64{4})
	b.AddNode("Add", "add0", []string{"a", "b"}, []string{"y"})
	b.AddOutput("y", d, []int64{4})
	return b
}

func modelConstData() *onnx.ModelBuilder {
	b := onnx.NewModel(21)
	b.AddInput("x", onnx.Float, []int64{4})
	w := onnx.NewFloat32("w", []int64{2}, []float32{1, 2})
	w.DType = onnx.Uint32 // 8 bytes: two uint32 elements
	b.AddInitializer(w)
	b.AddNode("Add", "add0", []string{"x", "w"}, []string{"y"})
	b.AddOutput("y", onnx.Float, []int64{4})
	return b
}

func modelLegacyBroadcast() *onnx.ModelBuilder {
	b := onnx.NewModel(6)
	b.AddInput("a", onnx.Float, []int64{2, 3, 4})
	b.AddInput("b", onnx.Float, []int64{2})
	b.AddNode("Add", "add0", []string{"a", "b"}, []string{"y"},
		onnx.IntAttr("broadcast", 1), onnx.IntAttr("axis", 0))
	b.AddOutput("y", onnx.Float, []int64{2, 3, 4})
	return b
}

// logLine is a log event as the tools print it on stderr.
const logLine = `2026-12-02T16:53:41.756235Z  INFO ipu_codegen.package.build{tile_count=1472 operations=5}:ipu_codegen.package.phase{phase="compile_runtime"}: package build phase finished phase="compile_runtime" elapsed_ms=0 success=true`

func TestClassify(t *testing.T) {
	tests := []struct {
		name       string
		f          failure
		wantStatus Status
		wantDetail string
	}{
		{"operator", failure{Tool: toolPlan, Exit: 1, Stderr: logLine + "\n" + planError(t, modelOp("Hardmax")) + "\n"},
			Unsupported, "Hardmax"},
		{"operator of another domain", failure{Tool: toolPlan, Exit: 1,
			Stderr: "ipu-plan: " + (&graph.UnsupportedError{Op: "com.microsoft.FusedMatMul", Node: "fm"}).Error()},
			Unsupported, "com.microsoft.FusedMatMul"},
		{"operator quoted", failure{Tool: toolPlan, Exit: 1,
			Stderr: "ipu-plan: " + (&graph.UnsupportedError{Op: "My Op", Node: `a "b"`}).Error()},
			Unsupported, `"My Op"`},
		{"input type", failure{Tool: toolPlan, Exit: 1, Stderr: planError(t, modelInputType(onnx.Double))},
			Unsupported, `element type double (input "0")`},
		{"output type", failure{Tool: toolPlan, Exit: 1, Stderr: planError(t, modelCast(onnx.Double))},
			Unsupported, `element type double (node "cast0" output "y")`},
		{"cast target", failure{Tool: toolPlan, Exit: 1, Stderr: planError(t, modelCast(onnx.Uint8))},
			Unsupported, "Cast to uint8"},
		{"stash_type", failure{Tool: toolPlan, Exit: 1, Stderr: planError(t, modelStash())},
			Unsupported, "LayerNormalization stash_type double"},
		{"constant attribute", failure{Tool: toolPlan, Exit: 1, Stderr: planError(t, modelConstantString())},
			Unsupported, `Constant attribute "value_string" of type string`},
		{"arithmetic type", failure{Tool: toolPlan, Exit: 1, Stderr: planError(t, modelArith(onnx.Float8E4M3FN))},
			Unsupported, "Add on element type float8e4m3fn"},
		{"constant data type", failure{Tool: toolPlan, Exit: 1, Stderr: planError(t, modelConstData())},
			Unsupported, `element type uint32 (constant "w")`},
		{"legacy broadcast", failure{Tool: toolPlan, Exit: 1, Stderr: planError(t, modelLegacyBroadcast())},
			Unsupported, "Add legacy broadcast (axis 0)"},
		{"opset", failure{Tool: toolPlan, Exit: 1, Stderr: planError(t, onnx.NewModel(onnx.MaxOpset+1))},
			Unsupported, "opset 22"},
		{"tensor element type", failure{Tool: toolPlan, Exit: 1, Stderr: "ipu-plan: ort/x/model.onnx: graph: initializer 0: " +
			(&onnx.FormatError{Field: "data_type", Msg: "unsupported element type string"}).Error()},
			Unsupported, "element type string"},
		{"external data", failure{Tool: toolPlan, Exit: 1, Stderr: "ipu-plan: ort/x/model.onnx: " +
			(&onnx.FormatError{Off: 0x20, Field: "external_data", Msg: "external data is not supported"}).Error()},
			Unsupported, "external data"},
		{"plan fails otherwise", failure{Tool: toolPlan, Exit: 1,
			Stderr: logLine + "\nipu-plan: ort/x/model.onnx: node \"a\" (Add) input 1: shape [3] does not broadcast to [4]\n"},
			Fail, `ipu-plan: ort/x/model.onnx: node "a" (Add) input 1: shape [3] does not broadcast to [4]`},
		{"plan usage", failure{Tool: toolPlan, Exit: 2, Stderr: "ipu-plan: --arch: unknown preset \"x\" (run ipu-plan --help)\n"},
			Fail, `ipu-plan: --arch: unknown preset "x" (run ipu-plan --help)`},
		{"plan times out", failure{Tool: toolPlan, Exit: -1, Reason: "timeout after 5m0s",
			Stderr: planError(t, modelOp("Hardmax"))},
			Fail, "ipu-plan: timeout after 5m0s"},
		{"not lowered", failure{Tool: toolLink, Exit: 1,
			Stderr: logLine + "\nipu-link: model.plan: node \"sm\" (Softmax): operator Softmax is not lowered\n"},
			NotLowered, `model.plan: node "sm" (Softmax): operator Softmax is not lowered`},
		{"not lowered logged", failure{Tool: toolLink, Exit: 1, Stderr: "2026-12-02T16:53:41.756235Z  ERROR op Softmax is not lowered\n"},
			NotLowered, "ERROR op Softmax is not lowered"},
		{"link fails otherwise", failure{Tool: toolLink, Exit: 1, Stderr: "ipu-link: model.plan: at byte 0x10: bad magic\n"},
			Fail, "ipu-link: model.plan: at byte 0x10: bad magic"},
		{"link missing", failure{Tool: toolLink, Exit: -1, Reason: "not found in bin/"},
			Fail, "ipu-link: not found in bin/"},
		{"not lowered from another tool", failure{Tool: toolPack, Exit: 1, Stderr: "ipu-pack: operator Softmax is not lowered\n"},
			Fail, "ipu-pack: operator Softmax is not lowered"},
		{"unsupported from another tool", failure{Tool: toolLink, Exit: 1, Stderr: planError(t, modelOp("Hardmax"))},
			Fail, `ipu-link: ipu-plan: unsupported operator Hardmax (node "n0")`},
		{"check numerical", failure{Tool: toolCheck, Exit: 1,
			Stdout: "referenceInference=1 numericalTest=FAIL\nreferenceInference=2 numericalTest=FAIL\n" +
				"referenceMaximumAbsoluteError=0.5 numericalTest=FAIL\npackage=model.ipuexe tiles=4 hardwareTest=PASS\n",
			Stderr: logLine + "\n2026-12-02T16:53:42.000001Z ERROR ipu_check: numerical mismatch inference=1 output=y index=3 got=1 want=1.5\n"},
			Fail, "ipu-check: referenceInference=1 numericalTest=FAIL; referenceInference=2 numericalTest=FAIL; " +
				"referenceMaximumAbsoluteError=0.5 numericalTest=FAIL; numerical mismatch inference=1 output=y index=3 got=1 want=1.5"},
		{"check hardware", failure{Tool: toolCheck, Exit: 1, Where: "test_data_set_1",
			Stdout: "referenceMaximumAbsoluteError=0 numericalTest=FAIL\npackage=model.ipuexe tiles=4 hardwareTest=FAIL\n",
			Stderr: "ipu-check: tile 7 worker 2 pc 0x4c010: load out of range\n" + logLine + "\n"},
			Fail, "ipu-check: test_data_set_1: tile 7 worker 2 pc 0x4c010: load out of range"},
		{"log line only", failure{Tool: toolLoad, Exit: 1, Stderr: logLine + "\n"},
			Fail, `ipu-load: INFO ipu_codegen.package.build{tile_count=1472 operations=5}:ipu_codegen.package.phase{phase="compile_runtime"}: package build phase finished phase="compile_runtime" elapsed_ms=0 success=true`},
		{"silent", failure{Tool: toolPack, Exit: 3}, Fail, "ipu-pack: exit status 3"},
		{"blank error line", failure{Tool: toolPack, Exit: 1, Stderr: "something went wrong\r\nipu-pack: \n\n"},
			Fail, "ipu-pack: something went wrong"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, detail := classify(tt.f)
			if diff := cmp.Diff(tt.wantStatus.label()+" "+tt.wantDetail, st.label()+" "+detail); diff != "" {
				t.Errorf("classify mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
