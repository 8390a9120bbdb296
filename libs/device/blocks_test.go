package device

import (
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"ipu.local/formats/obj"
)

// TestSessionBlocks runs the test program with its input and output laid
// out in transposed blocks: the input so that the program sees the bytes
// of the row-major layout, the output declared as the transpose of what
// the tiles write, so that ReadOutput must transpose it back.
func TestSessionBlocks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ipu0")
	pkg := testPackage(t, "ipu21-tiny", 0, 1)
	tiles := uint32(pkg.Tiles)
	h := &pkg.Host
	h.Inputs[0].Blocks = []obj.Block{{R0: 0, R1: 4, C0: 0, C1: 1, Rows: 4, Cols: 1, Transpose: true}}
	// Tile t writes its 4 words at 16t: row t of the transposed view.
	h.Outputs[0].Shape = []int64{4, int64(tiles)}
	for tile := range tiles {
		h.Outputs[0].Blocks = append(h.Outputs[0].Blocks,
			obj.Block{Offset: 16 * tile, R0: tile, R1: tile + 1, C0: 0, C1: 4, Rows: 1, Cols: 4, Transpose: true})
	}
	log := quietLog()
	loadDevice(t, path, pkg, log)
	got := call(t, path, pkg, log, words(10, 20, 30, 40))
	want := make([]uint32, 4*tiles)
	for c, x := range []uint32{10, 20, 30, 40} {
		want[uint32(c)*tiles+0] = x + 1 // tile 0
		want[uint32(c)*tiles+1] = x + 2 // tile 1
	}
	if diff := cmp.Diff(words(want...), got); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}
