package artdiff

import (
	"strings"
	"testing"

	"ipu.local/formats/obj"
)

func TestHostBlocksAndModel(t *testing.T) {
	blk := func(r0 uint32) obj.Block {
		return obj.Block{R0: r0, R1: r0 + 4, C1: 8, Rows: 4, Cols: 8, Order: obj.APanel, Offset: r0 * 64}
	}
	a := &obj.HostProgram{Inputs: []obj.Tensor{{Name: "x", DType: "float", Shape: []int64{8, 8}, Blocks: []obj.Block{blk(0), blk(4)}}}, Model: []byte("a")}
	b := &obj.HostProgram{Inputs: []obj.Tensor{{Name: "x", DType: "float", Shape: []int64{8, 8}, Blocks: []obj.Block{blk(0), blk(2)}}}, Model: []byte("b")}
	got := strings.Join(diffHost(a, b), "\n")
	for _, want := range []string{
		`host: input "x": block removed: rows [4,8) cols [0,8) apanel 4x8 at 0x100, block added: rows [2,6) cols [0,8) apanel 4x8 at 0x80`,
		"host: model: 1 bytes sha256 ",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in:\n%s", want, got)
		}
	}
	if d := diffHost(a, a); len(d) != 0 {
		t.Errorf("a host program differs from itself: %q", d)
	}
}
