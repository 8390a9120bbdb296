package graph

import (
	"strings"
	"testing"

	"ipu.local/libs/onnx"
)

// modelOf decodes the model b writes.
func modelOf(t *testing.T, b *onnx.ModelBuilder) *onnx.Model {
	t.Helper()
	m, err := onnx.ReadModel(b.Marshal())
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// buildOf builds the model b writes, failing the test on an error.
func buildOf(t *testing.T, b *onnx.ModelBuilder) *Graph {
	t.Helper()
	g, err := Build(modelOf(t, b))
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// buildErr returns the error of building the model b writes.
func buildErr(t *testing.T, b *onnx.ModelBuilder) error {
	t.Helper()
	_, err := Build(modelOf(t, b))
	return err
}

// foldedInt64s returns the elements of g's first output, an int64
// constant, failing the test when the build did not fold it.
func foldedInt64s(t *testing.T, g *Graph) []int64 {
	t.Helper()
	c := g.Outputs[0].Const
	if c == nil {
		t.Fatalf("not folded:\n%s", g)
	}
	v, err := c.Int64s()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// checkNodeErr checks that err is the node's (starting with node) and
// says want.
func checkNodeErr(t *testing.T, err error, node, want string) {
	t.Helper()
	if err == nil || !strings.HasPrefix(err.Error(), node) || !strings.Contains(err.Error(), want) {
		t.Errorf("got %v\nwant %s ... %s", err, node, want)
	}
}
