package main

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"ipu.local/formats/ipuexe"
	"ipu.local/formats/obj"
	"ipu.local/libs/arch"
	"ipu.local/libs/graph"
	"ipu.local/libs/link"
	"ipu.local/libs/onnx"
	"ipu.local/libs/pack"
	"ipu.local/libs/planner"
)

// TestFaultNamesNode compiles models whose kernels fault the device on
// bad data (a token id outside the embedding table, an int32 overflow of
// an Add and of an int64 Mul), runs them through ipu-check with that
// data, and checks that the error line names the kernel and its node.
func TestFaultNamesNode(t *testing.T) {
	i32 := func(v ...int32) []byte {
		var b []byte
		for _, x := range v {
			b = binary.LittleEndian.AppendUint32(b, uint32(x))
		}
		return b
	}
	i64 := func(v ...int64) []byte {
		var b []byte
		for _, x := range v {
			b = binary.LittleEndian.AppendUint64(b, uint64(x))
		}
		return b
	}
	table := make([]float32, 11*37)
	for i := range table {
		table[i] = float32(i)
	}
	cases := []struct {
		name   string
		build  func(b *onnx.ModelBuilder)
		inputs []*onnx.Tensor
		output *onnx.Tensor
		want   string
	}{
		{"gather", func(b *onnx.ModelBuilder) {
			b.AddInput("ids", onnx.Int64, []int64{2, 3})
			b.AddInitializer(onnx.NewFloat32("w", []int64{11, 37}, table))
			b.AddNode("Gather", "embed", []string{"w", "ids"}, []string{"y"}, onnx.IntAttr("axis", 0))
			b.AddOutput("y", onnx.Float, []int64{2, 3, 37})
		}, []*onnx.Tensor{{Name: "ids", DType: onnx.Int64, Dims: []int64{2, 3}, Raw: i64(0, 3, 11, 4, -1, 2)}},
			&onnx.Tensor{Name: "y", DType: onnx.Float, Dims: []int64{2, 3, 37}, Raw: make([]byte, 4*6*37)},
			`of node "embed" (Gather, output "y"): an index of "ids" outside [-11, 11), the rows of "w"`},
		{"add", func(b *onnx.ModelBuilder) {
			b.AddInput("a", onnx.Int32, []int64{7})
			b.AddInput("b", onnx.Int32, []int64{7})
			b.AddNode("Add", "sum", []string{"a", "b"}, []string{"y"})
			b.AddOutput("y", onnx.Int32, []int64{7})
		}, []*onnx.Tensor{{Name: "a", DType: onnx.Int32, Dims: []int64{7}, Raw: i32(1, 2, 3, 0x7fffffff, 5, 6, 7)},
			{Name: "b", DType: onnx.Int32, Dims: []int64{7}, Raw: i32(1, 1, 1, 1, 1, 1, 1)}},
			&onnx.Tensor{Name: "y", DType: onnx.Int32, Dims: []int64{7}, Raw: make([]byte, 4*7)},
			`of node "sum" (Add, output "y"): a result outside the int32 range`},
		{"mul", func(b *onnx.ModelBuilder) {
			b.AddInput("a", onnx.Int64, []int64{5})
			b.AddInput("b", onnx.Int64, []int64{5})
			b.AddNode("Mul", "prod", []string{"a", "b"}, []string{"y"})
			b.AddOutput("y", onnx.Int64, []int64{5})
		}, []*onnx.Tensor{{Name: "a", DType: onnx.Int64, Dims: []int64{5}, Raw: i64(1, 2, 70000, 4, 5)},
			{Name: "b", DType: onnx.Int64, Dims: []int64{5}, Raw: i64(3, 3, 70000, 3, 3)}},
			&onnx.Tensor{Name: "y", DType: onnx.Int64, Dims: []int64{5}, Raw: make([]byte, 8*5)},
			`of node "prod" (Mul, output "y"): a result outside the int32 range (the device holds int64 values as int32)`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			b := onnx.NewModel(13)
			tc.build(b)
			m, err := onnx.ReadModel(b.Marshal())
			if err != nil {
				t.Fatal(err)
			}
			g, err := graph.Build(m)
			if err != nil {
				t.Fatal(err)
			}
			p := arch.MustLookup("ipu21")
			pl, _, _, err := planner.Plan(g, p, planner.Options{Tiles: 3, Seed: 1, MaxAttempts: 1})
			if err != nil {
				t.Fatal(err)
			}
			o, _, err := link.Link(pl, "test", link.Options{})
			if err != nil {
				t.Fatal(err)
			}
			od, err := obj.Marshal(o)
			if err != nil {
				t.Fatal(err)
			}
			pkg, err := pack.Build(o, p)
			if err != nil {
				t.Fatal(err)
			}
			pkg.Object = obj.Fingerprint(od)
			data, err := ipuexe.Marshal(pkg)
			if err != nil {
				t.Fatal(err)
			}
			pkgPath, dev, dd := filepath.Join(dir, "m.ipuexe"), filepath.Join(dir, "ipu0"), filepath.Join(dir, "data")
			if err := os.WriteFile(pkgPath, data, 0o644); err != nil {
				t.Fatal(err)
			}
			if loaddevMain([]string{dev, pkgPath}) != 0 {
				t.Fatal("loaddev failed")
			}
			if err := os.MkdirAll(dd, 0o755); err != nil {
				t.Fatal(err)
			}
			for i, in := range tc.inputs {
				if err := os.WriteFile(filepath.Join(dd, "input_"+string(rune('0'+i))+".pb"), onnx.EncodeTensor(in), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(filepath.Join(dd, "output_0.pb"), onnx.EncodeTensor(tc.output), 0o644); err != nil {
				t.Fatal(err)
			}
			var stdout, stderr bytes.Buffer
			status := run([]string{"ipu-check", "--device", dev, "--data", dd, "--inferences", "1", pkgPath}, &stdout, &stderr)
			if status != 1 {
				t.Fatalf("status %d, want 1; stderr:\n%s", status, stderr.String())
			}
			var line string
			for _, l := range strings.Split(stderr.String(), "\n") {
				if strings.HasPrefix(l, "ipu-check: ") {
					line = l
				}
			}
			if !strings.Contains(line, "device fault") || !strings.Contains(line, tc.want) {
				t.Errorf("error line %q, want a device fault %s", line, tc.want)
			}
			t.Log(line)
		})
	}
}
