package numfmt

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"ipu.local/libs/onnx"
	"ipu.local/libs/repodata"
)

// conformanceDir finds the conformance data: $IPU_CONFORMANCE, the
// checkout's sibling shared/conformance, or the committed copy under
// testdata/conformance (libs/repodata).
func conformanceDir(t *testing.T) string {
	t.Helper()
	r, err := repodata.Conformance()
	if err != nil {
		t.Fatal(err)
	}
	return r.Dir
}

// castNode is what the tests need of an ONNX node.
type castNode struct {
	op       string
	inputs   []string
	outputs  []string
	to       int64
	saturate int64
}

// readGraph walks a ModelProto just far enough to list the nodes (graph
// field 7, node field 1) and graph outputs (field 12). The model reader
// proper lives in package onnx; this keeps the test independent of it.
func readGraph(t *testing.T, path string) (nodes []castNode, outputs []string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fields := func(b []byte, fn func(num protowire.Number, typ protowire.Type, v []byte, x uint64)) {
		for len(b) > 0 {
			num, typ, n := protowire.ConsumeTag(b)
			if n < 0 {
				t.Fatalf("%s: bad tag", path)
			}
			b = b[n:]
			switch typ {
			case protowire.BytesType:
				v, n := protowire.ConsumeBytes(b)
				if n < 0 {
					t.Fatalf("%s: bad bytes", path)
				}
				fn(num, typ, v, 0)
				b = b[n:]
			case protowire.VarintType:
				x, n := protowire.ConsumeVarint(b)
				if n < 0 {
					t.Fatalf("%s: bad varint", path)
				}
				fn(num, typ, nil, x)
				b = b[n:]
			default:
				n := protowire.ConsumeFieldValue(num, typ, b)
				if n < 0 {
					t.Fatalf("%s: bad field", path)
				}
				b = b[n:]
			}
		}
	}
	fields(data, func(num protowire.Number, typ protowire.Type, graph []byte, _ uint64) {
		if num != 7 || typ != protowire.BytesType {
			return
		}
		fields(graph, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) {
			switch {
			case num == 1 && typ == protowire.BytesType:
				nd := castNode{saturate: 1}
				fields(v, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) {
					switch num {
					case 1:
						nd.inputs = append(nd.inputs, string(v))
					case 2:
						nd.outputs = append(nd.outputs, string(v))
					case 4:
						nd.op = string(v)
					case 5:
						var name string
						var i int64
						fields(v, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) {
							switch {
							case num == 1:
								name = string(v)
							case num == 3 && typ == protowire.VarintType:
								i = int64(x)
							}
						})
						switch name {
						case "to":
							nd.to = i
						case "saturate":
							nd.saturate = i
						}
					}
				})
				nodes = append(nodes, nd)
			case num == 12 && typ == protowire.BytesType:
				fields(v, func(num protowire.Number, _ protowire.Type, v []byte, _ uint64) {
					if num == 1 {
						outputs = append(outputs, string(v))
					}
				})
			}
		})
	})
	return nodes, outputs
}

var fp8OfONNX = map[int64]Format{17: E4M3FN, 18: E4M3FNUZ, 19: E5M2, 20: E5M2FNUZ}

// fp8CastOf returns the format and mode of the Cast to FP8 that reads
// input, from the model's nodes.
func fp8CastOf(t *testing.T, nodes []castNode, input string) (Format, Mode) {
	t.Helper()
	for _, nd := range nodes {
		if nd.op == "Cast" && len(nd.inputs) == 1 && nd.inputs[0] == input {
			f, mode, _ := fp8Cast(t, nd)
			return f, mode
		}
	}
	t.Fatalf("no cast reads %q", input)
	return 0, 0
}

// fp8Cast returns the format and mode of a Cast node to FP8.
func fp8Cast(t *testing.T, nd castNode) (Format, Mode, bool) {
	t.Helper()
	f, ok := fp8OfONNX[nd.to]
	if nd.op != "Cast" || !ok {
		t.Fatalf("node %v %v is not a cast to fp8 (to=%d)", nd.op, nd.outputs, nd.to)
	}
	if nd.saturate != 0 {
		return f, Saturate, true
	}
	return f, NaNOnOverflow, true
}

func readFloats(t *testing.T, path string) []float32 {
	t.Helper()
	tn, err := onnx.ReadTensorFile(path)
	if err != nil {
		t.Fatal(err)
	}
	v, err := tn.Float32s()
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return v
}

// TestORTCastTables checks every element of onnxruntime's FP8 cast tables:
// model x -> Cast(to=fp8, saturate) -> Cast(to=float) -> output, one
// output per FP8 type. F32ToF8ORT must reproduce each output bit for bit,
// and F32ToF8 (the ONNX rules) must differ only where F32ToF8ORT documents
// onnxruntime's departures.
func TestORTCastTables(t *testing.T) {
	root := conformanceDir(t)
	for _, name := range []string{"cast_fp8_saturate", "cast_fp8_nosaturate"} {
		dir := filepath.Join(root, "ort", name)
		nodes, outputs := readGraph(t, filepath.Join(dir, "model.onnx"))
		if len(outputs) != 4 {
			t.Fatalf("%s: %d outputs, want 4", name, len(outputs))
		}
		x := readFloats(t, filepath.Join(dir, "test_data_set_0", "input_0.pb"))
		for k, out := range outputs {
			// out = Cast(to=float)(Cast(to=fp8)(x)): find the fp8 cast.
			var mid string
			for _, nd := range nodes {
				if len(nd.outputs) == 1 && nd.outputs[0] == out {
					mid = nd.inputs[0]
				}
			}
			var f Format
			var mode Mode
			found := false
			for _, nd := range nodes {
				if len(nd.outputs) == 1 && nd.outputs[0] == mid {
					f, mode, found = fp8Cast(t, nd)
				}
			}
			if !found {
				t.Fatalf("%s: no node produces %q", name, mid)
			}
			t.Run(fmt.Sprintf("%s/%s", name, out), func(t *testing.T) {
				want := readFloats(t, filepath.Join(dir, "test_data_set_0", fmt.Sprintf("output_%d.pb", k)))
				if len(want) != len(x) {
					t.Fatalf("output has %d elements, input %d", len(want), len(x))
				}
				bad, departures := 0, 0
				for i, v := range x {
					b := math.Float32bits(v)
					w := math.Float32bits(want[i])
					ort := F32ToF8ORT(b, f, mode)
					if got := F8ToF32(ort, f, 0); got != w {
						if bad < 10 {
							t.Errorf("element %d: x=%#08x (%g): got %#08x, onnxruntime %#08x", i, b, v, got, w)
						}
						bad++
					}
					if F32ToF8(b, f, 0, mode) != ort {
						departures++
					}
				}
				if bad > 0 {
					t.Errorf("%d of %d elements differ", bad, len(x))
				}
				t.Logf("%v %v: %d elements, %d where onnxruntime departs from the ONNX rules", f, mode, len(x), departures)
			})
		}
	}
}

// TestORTQKEarly checks the FP8 casts of the qk_early cases through the
// product they feed: s = float(fp8(q)) x float(fp8(k))^T. The products of
// FP8 values are exact, so the exact sum rounded to FP32 may differ from
// onnxruntime's FP32 accumulation by at most K x 2^-24 x sum|products|;
// one wrongly cast element would exceed that by far.
func TestORTQKEarly(t *testing.T) {
	root := conformanceDir(t)
	for _, name := range []string{"qk_early_e4m3fnuz", "qk_early_e5m2"} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(root, "ort", name)
			nodes, _ := readGraph(t, filepath.Join(dir, "model.onnx"))
			var ops []string
			for _, nd := range nodes {
				ops = append(ops, nd.op)
			}
			if fmt.Sprint(ops) != "[Cast Cast Cast Cast Transpose MatMul]" {
				t.Fatalf("unexpected graph %v", ops)
			}
			qt, err := onnx.ReadTensorFile(filepath.Join(dir, "test_data_set_0", "input_0.pb"))
			if err != nil {
				t.Fatal(err)
			}
			q := readFloats(t, filepath.Join(dir, "test_data_set_0", "input_0.pb"))
			k := readFloats(t, filepath.Join(dir, "test_data_set_0", "input_1.pb"))
			s := readFloats(t, filepath.Join(dir, "test_data_set_0", "output_0.pb"))
			fq, mq := fp8CastOf(t, nodes, "q")
			fk, mk := fp8CastOf(t, nodes, "k")
			if len(qt.Dims) != 2 {
				t.Fatalf("q dims %v", qt.Dims)
			}
			m, kk := int(qt.Dims[0]), int(qt.Dims[1])
			n := len(k) / kk
			if len(q) != m*kk || len(s) != m*n {
				t.Fatalf("sizes q %d k %d s %d", len(q), len(k), len(s))
			}
			cast := func(v []float32, f Format, mode Mode) []float64 {
				out := make([]float64, len(v))
				for i, x := range v {
					out[i] = float64(math.Float32frombits(F8ToF32(F32ToF8ORT(math.Float32bits(x), f, mode), f, 0)))
				}
				return out
			}
			qf, kf := cast(q, fq, mq), cast(k, fk, mk)
			exact, worst := 0, 0.0
			for i := 0; i < m; i++ {
				for j := 0; j < n; j++ {
					sum, abs := 0.0, 0.0
					for l := 0; l < kk; l++ {
						p := qf[i*kk+l] * kf[j*kk+l]
						sum += p // float64: error far below the FP32 bound
						abs += math.Abs(p)
					}
					got := float64(s[i*n+j])
					if float64(float32(sum)) == got {
						exact++
					}
					bound := float64(kk) * 0x1p-24 * abs
					err := math.Abs(got - sum)
					if err > bound {
						t.Errorf("s[%d][%d] = %g, exact %g, bound %g", i, j, got, sum, bound)
					}
					if bound > 0 {
						worst = max(worst, err/bound)
					}
				}
			}
			t.Logf("%v %v x %v %v: %d of %d results bit-exact, worst error %.3g of the bound", fq, mq, fk, mk, exact, m*n, worst)
		})
	}
}

// TestDevScaled checks the device conversions' onnxruntime departures
// against the unscaled ones: converting x * 2^s with scale s is converting
// x (the scaling is exact for these values), in every format and mode,
// from FP32, FP16 and float64.
func TestDevScaled(t *testing.T) {
	xs := []float32{464, 470, 479.9, 480, 490, 495.9, 496, 500, 57344, 61439, 61440, 63000, 65535, 65536, 1, -480, -61440, 0.5}
	for f := Format(0); f < NumFormats; f++ {
		for _, mode := range []Mode{Saturate, NaNOnOverflow} {
			for _, x := range xs {
				want := F32ToF8Dev(math.Float32bits(x), f, 0, mode)
				if got := F64ToF8Dev(float64(x), f, 0, mode); got != want {
					t.Errorf("%v %v %g: F64ToF8Dev %#02x, F32ToF8Dev %#02x", f, mode, x, got, want)
				}
				for _, s := range []int{-3, -1, 2, 4} {
					y := float32(math.Ldexp(float64(x), s))
					if got := F32ToF8Dev(math.Float32bits(y), f, s, mode); got != want {
						t.Errorf("%v %v %g scale %d: %#02x, unscaled %#02x", f, mode, x, s, got, want)
					}
				}
				if h := F32ToF16(math.Float32bits(x)); F16ToF64(h) == float64(x) {
					if got := F16ToF8Dev(h, f, 0, mode); got != want {
						t.Errorf("%v %v %g: F16ToF8Dev %#02x, F32ToF8Dev %#02x", f, mode, x, got, want)
					}
				}
			}
		}
	}
}
