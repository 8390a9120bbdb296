package prog

import "testing"

// TestMarker: a marker numbers buffers from 0 in the order met, once
// each; a new marker numbers them afresh.
func TestMarker(t *testing.T) {
	a, b := &Buffer{}, &Buffer{}
	m := NewMarker()
	for _, c := range []struct {
		b     *Buffer
		want  int32
		first bool
	}{{b, 0, true}, {a, 1, true}, {b, 0, false}, {a, 1, false}} {
		if i, first := m.Index(c.b); i != c.want || first != c.first {
			t.Fatalf("Index = %d, %v, want %d, %v", i, first, c.want, c.first)
		}
	}
	if i, first := NewMarker().Index(a); i != 0 || !first {
		t.Fatalf("a new marker: %d, %v", i, first)
	}
}
