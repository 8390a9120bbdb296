package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"ipu.local/formats/plan"
)

// testModel is a model section for the add-one package (input "x" float[4],
// output "y" float[4]):
//
//	add1      y = Add(x, 1.0): what the package computes
//	add2      y = Add(x, 2.0): not what it computes
//	renamed   add1 with its output called "z"
//	badshape  add1 with y declared float[5]
//	garbage   not JSON
func testModel(kind string) ([]byte, error) {
	scalar := func(f float32) []byte { return binary.LittleEndian.AppendUint32(nil, math.Float32bits(f)) }
	g := plan.Graph{
		Name: "add_one", Opset: 21, Inputs: []int{0}, Outputs: []int{2},
		Values: []plan.Value{
			{Name: "x", DType: "float", Shape: []int64{4}},
			{Name: "one", DType: "float", Shape: []int64{}, Const: scalar(1)},
			{Name: "y", DType: "float", Shape: []int64{4}},
		},
		Nodes: []plan.Node{{Name: "add", Op: "Add", Inputs: []int{0, 1}, Outputs: []int{2}}},
	}
	switch kind {
	case "add1":
	case "add2":
		g.Values[1].Const = scalar(2)
	case "renamed":
		g.Values[2].Name = "z"
	case "badshape":
		g.Values[2].Shape = []int64{5}
	case "garbage":
		return []byte("not a graph"), nil
	default:
		return nil, fmt.Errorf("unknown test model %q", kind)
	}
	return plan.MarshalGraph(g)
}

// TestHostReference checks ipu-check without --data on packages that
// carry a model: the device's y = x + 1 passes against the host
// reference at every precision, a model the program does not compute
// fails, and a bad model section is an error naming the package.
func TestHostReference(t *testing.T) {
	dir := t.TempDir()
	path := func(name string) string { return filepath.Join(dir, name) }
	for _, cmd := range [][]string{
		{path("add1.ipuexe"), "model=add1"},
		{path("add2.ipuexe"), "model=add2"},
		{path("renamed.ipuexe"), "model=renamed"},
		{path("badshape.ipuexe"), "model=badshape"},
		{path("garbage.ipuexe"), "model=garbage"},
	} {
		if status := mkpkgMain(cmd); status != 0 {
			t.Fatalf("mkpkg %v failed", cmd)
		}
	}
	dev := path("ipu0")
	if status := loaddevMain([]string{dev, path("add1.ipuexe")}); status != 0 {
		t.Fatal("loaddev failed")
	}
	// The packages with other models differ from the loaded one; load
	// each on its own device.
	add2Dev := path("ipu1")
	if status := loaddevMain([]string{add2Dev, path("add2.ipuexe")}); status != 0 {
		t.Fatal("loaddev failed")
	}

	pass := func(precision string) string {
		return "referencePrecision=" + precision + "\n" +
			"referenceInference=1 numericalTest=PASS\n" +
			"referenceMaximumAbsoluteError=0 numericalTest=PASS\n" +
			"package=" + path("add1.ipuexe") + " tiles=4 hardwareTest=PASS\n"
	}
	tests := []struct {
		name   string
		args   []string
		status int
		stdout string // all of it, when the run gets that far
		stderr string // last line, without time and level
	}{
		{"device", []string{"--device", dev, "--inferences", "1", path("add1.ipuexe")}, 0, pass("device"), ""},
		{"fp32", []string{"--device", dev, "--inferences", "1", "--reference-precision", "fp32", path("add1.ipuexe")}, 0, pass("fp32"), ""},
		{"fp64", []string{"--device", dev, "--inferences", "1", "--reference-precision", "fp64", "--seed", "7", path("add1.ipuexe")}, 0, pass("fp64"), ""},
		{"wrong model", []string{"--device", add2Dev, "--inferences", "1", "--threads", "2", path("add2.ipuexe")}, 1,
			"referencePrecision=device\n" +
				"referenceInference=1 numericalTest=FAIL\n" +
				"referenceMaximumAbsoluteError=1 numericalTest=FAIL\n" +
				"package=" + path("add2.ipuexe") + " tiles=4 hardwareTest=PASS\n",
			`numerical mismatch inference=1 output="y" index=0 got=1.1965219 (0x3f9927a1) want=2.1965218 (0x400c93d0) bad=4 elements=4 max_abs_error=1 atol=0`},
		{"garbage model", []string{"--device", dev, path("garbage.ipuexe")}, 1, "",
			"ipu-check: " + path("garbage.ipuexe") + ": model section: plan: bad JSON at byte 2: invalid character 'o' in literal null (expecting 'u')"},
		{"model of other tensors", []string{"--device", dev, path("renamed.ipuexe")}, 1, "",
			"ipu-check: " + path("renamed.ipuexe") + `: model section: graph.outputs[0]: "z" float[4], package output 0 is "y" float[4]`},
		{"inconsistent model", []string{"--device", dev, path("badshape.ipuexe")}, 1, "",
			"ipu-check: " + path("badshape.ipuexe") + `: model section: graph.nodes[0] ("add"): output 0: "y" is float[5], the operator gives float[4]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			status := run(append([]string{"ipu-check"}, tt.args...), &stdout, &stderr)
			lastErr := strings.TrimPrefix(strings.TrimLeft(lastLine(normalize(stderr.String())), " "), "INFO ")
			lastErr = strings.TrimPrefix(lastErr, "ERROR ")
			if status != tt.status {
				t.Errorf("status %d, want %d; stderr:\n%s", status, tt.status, stderr.String())
			}
			if d := cmp.Diff(tt.stdout, stdout.String()); d != "" {
				t.Errorf("stdout mismatch (-want +got):\n%s", d)
			}
			if tt.stderr != "" {
				var errLines []string
				for _, l := range strings.Split(normalize(stderr.String()), "\n") {
					if strings.Contains(l, "numerical mismatch") || strings.HasPrefix(l, "ipu-check:") {
						errLines = append(errLines, strings.TrimPrefix(strings.TrimPrefix(l, "ERROR "), "INFO "))
					}
				}
				if len(errLines) == 0 || errLines[0] != tt.stderr {
					t.Errorf("stderr error lines %q, want first %q (last line %q)", errLines, tt.stderr, lastErr)
				}
			}
		})
	}
}

// The first inference's seed is --seed itself (its inputs, and so the
// logs and golden outputs of a single inference, are what they always
// were); the others differ from it and from each other.
func TestInferenceSeed(t *testing.T) {
	for _, seed := range []uint64{0, 1, 99, 1<<64 - 1} {
		if got := inferenceSeed(seed, 0); got != seed {
			t.Errorf("seed %d: inference 0 has seed %d", seed, got)
		}
		seen := map[uint64]int{seed: 0}
		for k := 1; k < 1000; k++ {
			s := inferenceSeed(seed, k)
			if j, dup := seen[s]; dup {
				t.Fatalf("seed %d: inferences %d and %d share seed %d", seed, j, k, s)
			}
			seen[s] = k
		}
	}
}
