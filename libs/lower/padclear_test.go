package lower

import (
	"testing"

	"ipu.local/libs/codegen"
	"ipu.local/libs/prog"
)

// TestLanePadUnread checks the pass's proof on hand-made reads of a
// 6-row FP8 A panel (lanes 6 and 7 padded): unread when the product
// reads back rows [0, 6); kept (the clear is needed) when it reads row 6
// or 7, when a transfer or another kernel reads the panel, or when the
// product's k extent is not the panel's.
func TestLanePadUnread(t *testing.T) {
	buf := &prog.Buffer{Name: "a"}
	p := &codegen.Pack{Kind: codegen.APanel, R: 6, C: 24, KP: 24, Out: codegen.AMPFP8}
	y := prog.Ref{Buf: buf}
	mm := func(k, rows int) padRead {
		return padRead{k: &prog.Kernel{Params: &codegen.MatMul{M: 8, K: k, N: 16}, RowsRead: rows}, ok: true}
	}
	for _, tc := range []struct {
		name  string
		reads []padRead
		want  bool
	}{
		{"rows 0..6 read", []padRead{mm(24, 6)}, true},
		{"row 6 read", []padRead{mm(24, 7)}, false},
		{"rows unknown", []padRead{mm(24, 0)}, false},
		{"a transfer reads it", []padRead{mm(24, 6), {}}, false},
		{"another k extent", []padRead{mm(26, 6)}, false},
		{"nobody reads it", nil, false},
	} {
		if got := lanePadUnread(p, y, tc.reads); got != tc.want {
			t.Errorf("%s: unread %v, want %v", tc.name, got, tc.want)
		}
	}
	full := *p
	full.R = 8
	if lanePadUnread(&full, y, []padRead{mm(24, 8)}) {
		t.Error("a panel without padded lanes has clears to remove")
	}
}
