package onnx

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The proto builder, packedVarints, le32 and conformanceDir come from
// tensor_test.go.

func conformanceModels(tb testing.TB) []string {
	tb.Helper()
	files, err := filepath.Glob(filepath.Join(conformanceDir(tb), "*", "*", "model.onnx"))
	if err != nil {
		tb.Fatal(err)
	}
	if len(files) == 0 {
		tb.Skip("no conformance models")
	}
	sort.Strings(files)
	return files
}

func TestReadConformanceModels(t *testing.T) {
	for _, path := range conformanceModels(t) {
		rel, _ := filepath.Rel(conformanceDir(t), path)
		t.Run(filepath.Dir(rel), func(t *testing.T) {
			m, err := ReadModelFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if v := m.Opset(""); v < MinOpset || v > MaxOpset {
				t.Errorf("opset %d", v)
			}
			g := m.Graph
			if len(g.Nodes) == 0 || len(g.Inputs) == 0 || len(g.Outputs) == 0 {
				t.Errorf("graph has %d nodes, %d inputs, %d outputs", len(g.Nodes), len(g.Inputs), len(g.Outputs))
			}
			for i, n := range g.Nodes {
				if n.OpType == "" || len(n.Outputs) == 0 {
					t.Errorf("node %d: %+v", i, n)
				}
			}
			for _, vi := range append(append([]ValueInfo{}, g.Inputs...), g.Outputs...) {
				if vi.Name == "" || vi.DType == Undefined || !vi.HasShape {
					t.Errorf("value info %+v", vi)
				}
			}
		})
	}
}

// Builders for the messages of a model.

func valueInfo(name string, elem DataType, dims ...any) proto {
	var shape proto
	for _, d := range dims {
		switch d := d.(type) {
		case int:
			shape = shape.bytes(1, proto{}.varint(1, uint64(d)))
		case string:
			shape = shape.bytes(1, proto{}.bytes(2, []byte(d)))
		case nil:
			shape = shape.bytes(1, nil)
		}
	}
	tensorType := proto{}.varint(1, uint64(elem)).bytes(2, shape)
	return proto{}.bytes(1, []byte(name)).bytes(2, proto{}.bytes(1, tensorType))
}

func opset(domain string, v int) proto {
	p := proto{}
	if domain != "" {
		p = p.bytes(1, []byte(domain))
	}
	return p.varint(2, uint64(v))
}

func node(name, op string, inputs, outputs []string, attrs ...proto) proto {
	p := proto{}
	for _, in := range inputs {
		p = p.bytes(1, []byte(in))
	}
	for _, out := range outputs {
		p = p.bytes(2, []byte(out))
	}
	if name != "" {
		p = p.bytes(3, []byte(name))
	}
	p = p.bytes(4, []byte(op))
	for _, a := range attrs {
		p = p.bytes(5, a)
	}
	return p
}

func model(graph proto, opsets ...proto) proto {
	p := proto{}.varint(1, 10).bytes(2, []byte("test"))
	p = p.bytes(7, graph)
	for _, o := range opsets {
		p = p.bytes(8, o)
	}
	return p
}

// sampleGraph exercises every field the reader decodes.
func sampleGraph() proto {
	w := EncodeTensor(NewFloat32("w", []int64{2}, []float32{1, 2}))
	sub := proto{}.bytes(2, []byte("body"))
	g := proto{}.
		bytes(1, node("mm", "MatMul", []string{"x", "w"}, []string{"y"},
			proto{}.bytes(1, []byte("f")).fixed32(2, math.Float32bits(0.5)).varint(20, 1),
			proto{}.bytes(1, []byte("i")).varint(3, uint64(1<<64-3)).varint(20, 2),
			proto{}.bytes(1, []byte("s")).bytes(4, []byte("tanh")).varint(20, 3),
			proto{}.bytes(1, []byte("t")).bytes(5, w).varint(20, 4),
			proto{}.bytes(1, []byte("g")).bytes(6, sub).varint(20, 5),
			proto{}.bytes(1, []byte("fs")).bytes(7, le32(math.Float32bits(1), math.Float32bits(-2))).fixed32(7, math.Float32bits(3)).varint(20, 6),
			proto{}.bytes(1, []byte("is")).bytes(8, packedVarints(1, -1)).varint(8, 7).varint(20, 7),
			proto{}.bytes(1, []byte("ss")).bytes(9, []byte("a")).bytes(9, []byte("b")).varint(20, 8),
			// An old exporter's attribute without a type field.
			proto{}.bytes(1, []byte("untyped")).varint(3, 4),
			proto{}.bytes(1, []byte("ref")).bytes(21, []byte("outer")).varint(20, 2),
		).bytes(7, []byte("com.example"))).
		bytes(2, []byte("g")).
		bytes(5, w).
		bytes(10, []byte("ignored doc")).
		bytes(11, valueInfo("x", Float, 3, "batch", nil)).
		bytes(11, proto{}.bytes(1, []byte("seq")).bytes(2, proto{}.bytes(4, nil))).
		bytes(12, valueInfo("y", Float16)).
		bytes(13, proto{}.bytes(1, []byte("notype")))
	return g
}

func TestReadModelFields(t *testing.T) {
	data := model(sampleGraph(), opset("", 21), opset("com.example", 1))
	m, err := ReadModel(data)
	if err != nil {
		t.Fatal(err)
	}
	w := NewFloat32("w", []int64{2}, []float32{1, 2})
	want := &Model{
		IRVersion: 10,
		Opsets:    map[string]int64{"": 21, "com.example": 1},
		Producer:  "test",
		Graph: &Graph{
			Name: "g",
			Nodes: []Node{{
				Name: "mm", OpType: "MatMul", Domain: "com.example",
				Inputs: []string{"x", "w"}, Outputs: []string{"y"},
				Attrs: []Attr{
					{Name: "f", Type: AttrFloat, F: 0.5},
					{Name: "i", Type: AttrInt, I: -3},
					{Name: "s", Type: AttrString, S: "tanh"},
					{Name: "t", Type: AttrTensor, T: w},
					{Name: "g", Type: AttrGraph, G: &Graph{Name: "body"}},
					{Name: "fs", Type: AttrFloats, Floats: []float32{1, -2, 3}},
					{Name: "is", Type: AttrInts, Ints: []int64{1, -1, 7}},
					{Name: "ss", Type: AttrStrings, Strings: []string{"a", "b"}},
					{Name: "untyped", Type: AttrInt, I: 4},
					{Name: "ref", Type: AttrInt, RefAttrName: "outer"},
				},
			}},
			Initializers: []*Tensor{w},
			Inputs: []ValueInfo{
				{Name: "x", DType: Float, HasShape: true, Shape: []Dim{{Value: 3}, {Value: -1, Param: "batch"}, {Value: -1}}},
				{Name: "seq", NotTensor: true},
			},
			Outputs:   []ValueInfo{{Name: "y", DType: Float16, HasShape: true}},
			ValueInfo: []ValueInfo{{Name: "notype"}},
		},
	}
	if d := cmp.Diff(want, m); d != "" {
		t.Errorf("mismatch (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"", "com.example"}, m.OpsetDomains()); d != "" {
		t.Errorf("OpsetDomains mismatch (-want +got):\n%s", d)
	}
	if m.Opset("ai.onnx") != 21 {
		t.Errorf("Opset(ai.onnx) = %d", m.Opset("ai.onnx"))
	}
}

func TestAttrGetters(t *testing.T) {
	m, err := ReadModel(model(sampleGraph(), opset("", 21)))
	if err != nil {
		t.Fatal(err)
	}
	n := &m.Graph.Nodes[0]
	type result struct {
		V   any
		OK  bool
		Err string
	}
	errString := func(err error) string {
		if err == nil {
			return ""
		}
		return err.Error()
	}
	get := map[string]func() result{
		"int":            func() result { v, err := n.AttrInt("i", 9); return result{v, true, errString(err)} },
		"int default":    func() result { v, err := n.AttrInt("absent", 9); return result{v, true, errString(err)} },
		"int wrong type": func() result { v, err := n.AttrInt("f", 9); return result{v, true, errString(err)} },
		"float":          func() result { v, err := n.AttrFloat("f", 1); return result{v, true, errString(err)} },
		"string":         func() result { v, err := n.AttrString("s", ""); return result{v, true, errString(err)} },
		"ints":           func() result { v, ok, err := n.AttrInts("is"); return result{v, ok, errString(err)} },
		"ints absent":    func() result { v, ok, err := n.AttrInts("absent"); return result{v, ok, errString(err)} },
		"floats":         func() result { v, ok, err := n.AttrFloats("fs"); return result{v, ok, errString(err)} },
		"tensor":         func() result { v, err := n.AttrTensor("t"); return result{v.Dims, true, errString(err)} },
		"ref":            func() result { v, err := n.AttrInt("ref", 0); return result{v, true, errString(err)} },
	}
	want := map[string]result{
		"int":            {int64(-3), true, ""},
		"int default":    {int64(9), true, ""},
		"int wrong type": {int64(0), true, `attribute "f": type float, want int`},
		"float":          {float32(0.5), true, ""},
		"string":         {"tanh", true, ""},
		"ints":           {[]int64{1, -1, 7}, true, ""},
		"ints absent":    {[]int64(nil), false, ""},
		"floats":         {[]float32{1, -2, 3}, true, ""},
		"tensor":         {[]int64{2}, true, ""},
		"ref":            {int64(0), true, `attribute "ref" refers to function attribute "outer"`},
	}
	for name, fn := range get {
		t.Run(name, func(t *testing.T) {
			if d := cmp.Diff(want[name], fn()); d != "" {
				t.Errorf("mismatch (-want +got):\n%s", d)
			}
		})
	}
}

func TestReadModelErrors(t *testing.T) {
	good := sampleGraph()
	badAttr := proto{}.bytes(1, node("a", "Relu", []string{"x"}, []string{"y"})).
		bytes(1, node("b", "Relu", []string{"y"}, []string{"z"}, proto{}.bytes(1, []byte("alpha")).varint(2, 1)))
	badTensor := proto{}.bytes(1, node("c", "Constant", nil, []string{"y"},
		proto{}.bytes(1, []byte("value")).bytes(5, proto{}.varint(1, 2).varint(2, 1).bytes(9, []byte{1, 2, 3}))))
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "not an ONNX model: no ir_version"},
		{"text", []byte("hello, world\n"), "not an ONNX model: field 13 at byte 0x3: unexpected end-group marker"},
		{"no graph", proto{}.varint(1, 8), "not an ONNX model: no graph"},
		{"truncated", model(good, opset("", 21))[:40], "not an ONNX model: field graph at byte 0x9: length 319 runs past the end of the data (29 bytes left): truncated?"},
		{"bad tag", []byte{0x00}, "not an ONNX model: at byte 0x0: bad field tag: invalid field number"},
		{"no default opset", model(good, opset("com.example", 1)), "field opset_import at byte 0x0: no version of the default operator set (ai.onnx)"},
		{"opset too old", model(good, opset("", 5)), "unsupported opset 5 of the default domain (ai.onnx): supported are 6 to 21"},
		{"opset too new", model(good, opset("ai.onnx", 22)), "unsupported opset 22 of the default domain (ai.onnx): supported are 6 to 21"},
		{"opset twice", model(good, opset("", 13), opset("ai.onnx", 13)), `field opset_import[1] at byte 0x14e: domain "ai.onnx" imported twice`},
		{"two graphs", proto{}.varint(1, 8).bytes(7, nil).bytes(7, nil), "field graph at byte 0x4: second graph (first at byte 0x2)"},
		{"attr wire type", model(badAttr, opset("", 13)), "field graph.node[1].attribute[0].f at byte 0x35: unexpected wire type 0"},
		{"attr tensor", model(badTensor, opset("", 13)), "field graph.node[0].attribute[0].t.raw_data at byte 0x2b: 3 bytes, want 8 for 2 float elements"},
		{"negative dim", model(proto{}.bytes(11, proto{}.bytes(1, []byte("x")).bytes(2, proto{}.bytes(1, proto{}.bytes(2, proto{}.bytes(1, proto{}.varint(1, uint64(1<<64-2)))))))),
			"field graph.input[0].type.tensor_type.shape.dim[0].dim_value at byte 0x18: negative dimension -2"},
		{"no op_type", model(proto{}.bytes(1, proto{}.bytes(1, []byte("x"))), opset("", 13)), "field graph.node[0] at byte 0xc: node has no op_type"},
		{"attr without name", model(proto{}.bytes(1, node("n", "Relu", nil, nil, proto{}.varint(3, 1))), opset("", 13)), "field graph.node[0].attribute[0] at byte 0x17: attribute has no name"},
		{"attr twice", model(proto{}.bytes(1, node("n", "Relu", nil, nil, proto{}.bytes(1, []byte("a")), proto{}.bytes(1, []byte("a")))), opset("", 13)),
			`field graph.node[0].attribute[1] at byte 0x1a: attribute "a" repeats attribute[0]`},
		{"truncated packed ints", model(proto{}.bytes(1, node("n", "Relu", nil, nil, proto{}.bytes(1, []byte("a")).bytes(8, []byte{0x80}))), opset("", 13)),
			"not an ONNX model: field graph.node[0].attribute[0].ints[0] at byte 0x1c: unexpected EOF"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := ReadModel(tt.data)
			if err == nil {
				t.Fatalf("no error, model %+v", m)
			}
			if err.Error() != tt.want {
				t.Errorf("error %q, want %q", err, tt.want)
			}
		})
	}
}

func TestNestedGraphDepth(t *testing.T) {
	g := proto{}
	for i := 0; i < maxGraphDepth+2; i++ {
		g = proto{}.bytes(1, node("", "If", nil, []string{"y"}, proto{}.bytes(1, []byte("then_branch")).bytes(6, g)))
	}
	_, err := ReadModel(model(g, opset("", 13)))
	if err == nil || !strings.Contains(err.Error(), "graphs nested deeper than 32") {
		t.Errorf("error %v, want graphs nested deeper than 32", err)
	}
}

// TestTruncatedModels checks every proper prefix of small models: each is
// refused with an error, and none panics.
func TestTruncatedModels(t *testing.T) {
	inputs := map[string][]byte{"sample": model(sampleGraph(), opset("", 21))}
	for _, c := range []string{"ort/attention", "onnx-pytorch/test_Softsign"} {
		if data, err := os.ReadFile(filepath.Join(conformanceDirOrEmpty(), c, "model.onnx")); err == nil {
			inputs[c] = data
		}
	}
	for name, data := range inputs {
		t.Run(name, func(t *testing.T) {
			if _, err := ReadModel(data); err != nil {
				t.Fatalf("whole model: %v", err)
			}
			for n := 0; n < len(data); n++ {
				if _, err := ReadModel(data[:n]); err == nil {
					t.Errorf("prefix of %d of %d bytes decoded without error", n, len(data))
				}
			}
		})
	}
}

func TestReadModelFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.onnx")
	if err := os.WriteFile(path, []byte("junk"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := ReadModelFile(path)
	var nm *NotModelError
	if !errors.As(err, &nm) || !strings.HasPrefix(err.Error(), "model "+path+": not an ONNX model: ") {
		t.Errorf("error %v, want a NotModelError naming the file", err)
	}
	if _, err := ReadModelFile(filepath.Join(dir, "absent.onnx")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("error %v, want ErrNotExist", err)
	}
}

func TestFingerprint(t *testing.T) {
	// SHA-256("abc"), FIPS 180-2 appendix B.1.
	const want = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
	if got := Fingerprint([]byte("abc")); got != want {
		t.Errorf("Fingerprint = %s, want %s", got, want)
	}
}

func FuzzReadModel(f *testing.F) {
	f.Add([]byte(model(sampleGraph(), opset("", 21))))
	for _, c := range []string{"ort/attention", "ort/layernorm_residual", "ort/qk_late_fp16", "onnx-pytorch/test_operator_mm"} {
		if data, err := os.ReadFile(filepath.Join(conformanceDirOrEmpty(), c, "model.onnx")); err == nil {
			f.Add(data)
		}
	}
	if data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "models", "mlp-external.onnx")); err == nil {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ReadModel(data)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error %q", err)
			}
			return
		}
		if m.Graph == nil {
			t.Fatal("model without a graph")
		}
		// External data resolves in a folder holding a 64-byte file.
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "mlp-external.weights"), make([]byte, 64), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := m.LoadExternal(dir); err != nil && strings.Contains(err.Error(), "\n") {
			t.Fatalf("multi-line error %q", err)
		} else if err == nil && m.CheckLoaded() != nil {
			t.Fatalf("loaded, but %v", m.CheckLoaded())
		}
		if v := m.Opset(""); v < MinOpset || v > MaxOpset {
			t.Fatalf("accepted opset %d", v)
		}
	})
}
