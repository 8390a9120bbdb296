package plan

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestIndent checks indent against json.Indent on documents with nested
// empty and non-empty objects and arrays, escapes, and long strings.
func TestIndent(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var gen func(depth int) any
	gen = func(depth int) any {
		switch k := rng.IntN(7); {
		case depth > 4 || k == 0:
			return rng.IntN(1000) - 500
		case k == 1:
			return strings.Repeat(`a"\b\\`, rng.IntN(4)) + "é\n\t<>&" + strings.Repeat("x", rng.IntN(3000))
		case k == 2:
			return []byte(strings.Repeat("z", rng.IntN(100)))
		case k == 3:
			return nil
		case k == 4:
			m := map[string]any{}
			for range rng.IntN(4) {
				m[strings.Repeat(`k\"`, rng.IntN(3))+string(rune('a'+rng.IntN(26)))] = gen(depth + 1)
			}
			return m
		default:
			a := make([]any, rng.IntN(4))
			for i := range a {
				a[i] = gen(depth + 1)
			}
			return a
		}
	}
	for i := 0; i < 2000; i++ {
		v := gen(0)
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			t.Fatal(err)
		}
		var want bytes.Buffer
		if err := json.Indent(&want, b.Bytes(), "", " "); err != nil {
			t.Fatal(err)
		}
		if got := indent(nil, b.Bytes()); !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("indent of %s:\n%s\nwant\n%s", b.Bytes(), got, want.Bytes())
		}
	}
}
