package main

import (
	"bytes"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"ipu.local/libs/graph"
	"ipu.local/libs/hostref"
	"ipu.local/libs/onnx"
)

// Every -torch case is deterministic, reads back at its opset, has
// distinct names, and each gated detector's condition is what its name
// says (taken: true, skipped: false) on its input.
func TestTorchCases(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range torchCases() {
		t.Run(c.Name, func(t *testing.T) {
			if seen[c.Name] {
				t.Fatal("duplicate case name")
			}
			seen[c.Name] = true
			if err := c.check(); err != nil {
				t.Fatal(err)
			}
			model, inputs := c.model()
			again, _ := c.model()
			if !bytes.Equal(model, again) {
				t.Fatal("two runs of the generator differ")
			}
			m, err := onnx.ReadModel(model)
			if err != nil {
				t.Fatal(err)
			}
			if m.Opset("") != c.Opset {
				t.Fatalf("opset %d, want %d", m.Opset(""), c.Opset)
			}
			g, err := graph.BuildWith(m, graph.BuildOptions{InputShapes: graph.InputShapesOf(m, inputs)})
			if err != nil {
				t.Fatal(err)
			}
			if c.Dynamic {
				if _, err := graph.Build(m); err == nil || !strings.Contains(err.Error(), `symbolic ("batch_size")`) {
					t.Errorf("a dynamic batch without shapes: %v", err)
				}
			}
			if c.Family != torchGate {
				return
			}
			vals, err := hostref.EvalValues(g, inputs, hostref.Options{Precision: hostref.FP64, Threads: 1})
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, v := range g.Values {
				if v.Producer != nil && v.Producer.Op == "Cast" && v.DType == onnx.Bool {
					found = true
					if got := vals[v.Index][0] != 0; got != c.Taken {
						t.Fatalf("condition %s = %v, want %v", v.Name, got, c.Taken)
					}
				}
			}
			if !found {
				t.Fatal("no bool Cast")
			}
			if strings.Contains(c.Name, "taken") != c.Taken {
				t.Fatal("name and Taken disagree")
			}
		})
	}
}

// The committed -torch -smoke cases must be exactly what the generator
// writes, and nothing else.
func TestCommittedTorchSmokeIsGenerated(t *testing.T) {
	dir := t.TempDir()
	if err := runTorch(dir, strings.Join(torchSmoke, ","), false, false, 2, io.Discard); err != nil {
		t.Fatal(err)
	}
	committed := filepath.Join("..", "..", "testdata", "models", "torch-sizes")
	list := func(root string) []string {
		var files []string
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && d.Name() != "README.md" {
				rel, _ := filepath.Rel(root, path)
				files = append(files, rel)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return files
	}
	want, got := list(dir), list(committed)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("testdata/models/torch-sizes files mismatch (-want +got):\n%s", diff)
	}
	for _, f := range want {
		a, _ := os.ReadFile(filepath.Join(dir, f))
		b, _ := os.ReadFile(filepath.Join(committed, f))
		if !bytes.Equal(a, b) {
			t.Errorf("testdata/models/torch-sizes/%s differs from the generator's output: regenerate it (cd scripts && go run ./genmodels -torch -smoke -out ../testdata/models/torch-sizes)", f)
		}
	}
}
