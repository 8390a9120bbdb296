package sim

import (
	"testing"

	"ipu.local/libs/arch"
)

// TestCodeIndex: tiles share a program only when their code ranges and
// the words in them are the same, whatever the hash says.
func TestCodeIndex(t *testing.T) {
	const lo = 0x4C000
	mem := func(words ...byte) []byte {
		b := make([]byte, 64)
		copy(b[8:], words)
		return b
	}
	code := []arch.Range{{Lo: lo + 8, Hi: lo + 16}}
	x := newCodeIndex(lo)
	decodes := 0
	get := func(m []byte, c []arch.Range) *program {
		return x.get(m, c, func() *program {
			decodes++
			return &program{code: append([]arch.Range(nil), c...)}
		})
	}
	a := get(mem(1, 2, 3, 4, 5, 6, 7, 8), code)
	if b := get(mem(1, 2, 3, 4, 5, 6, 7, 8), code); b != a {
		t.Error("identical code: two programs")
	}
	if c := get(mem(1, 2, 3, 4, 5, 6, 7, 9), code); c == a {
		t.Error("code differing in its last byte: one program")
	}
	shifted := []arch.Range{{Lo: lo + 8, Hi: lo + 12}, {Lo: lo + 12, Hi: lo + 16}}
	if d := get(mem(1, 2, 3, 4, 5, 6, 7, 8), shifted); d == a {
		t.Error("the same words in other ranges: one program")
	}
	if decodes != 3 {
		t.Errorf("%d decodes, want 3", decodes)
	}
	// Equal hashes are only candidates: same() decides.
	if x.same(a, mem(1, 2, 3, 4, 5, 6, 7, 9), code) || !x.same(a, mem(1, 2, 3, 4, 5, 6, 7, 8), code) {
		t.Error("same() does not compare the words")
	}
}
