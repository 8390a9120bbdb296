package sim

import (
	"bytes"
	"errors"
	"reflect"
	"sync/atomic"
	"testing"
)

// memFile is a TileFile over a rig's memories, counting its writes; it
// refuses writes to tile refuse (-1: none).
type memFile struct {
	r      *rig
	writes atomic.Int64
	refuse int
}

var errRefused = errors.New("refused")

func (f *memFile) WriteTile(tile int, addr uint32, src []byte) error {
	if tile == f.refuse {
		return errRefused
	}
	f.writes.Add(1)
	copy(f.r.mems[tile][addr-f.r.p.Memory.Lo:], src)
	return nil
}

// TestUseFile: LoadAll through a TileFile writes every segment with it
// and leaves the same memory, state and run as without; a write the file
// refuses is a LoadError for that tile, the tiles before it loaded and
// the others not.
func TestUseFile(t *testing.T) {
	a := newRig(t, "ipu21-64", Options{Parallel: 2})
	b := newRig(t, "ipu21-64", Options{Parallel: 2})
	fb := &memFile{r: b, refuse: -1}
	b.m.UseFile(fb)
	tiles, imgs := ringImages(a.p.Tiles)
	for _, r := range []*rig{a, b} {
		if err := r.m.LoadAll(tiles, imgs); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := fb.writes.Load(), int64(2*len(tiles)); got != want {
		t.Errorf("LoadAll wrote %d segments with the file, want %d", got, want)
	}
	for tile := range tiles {
		if !bytes.Equal(a.mems[tile], b.mems[tile]) {
			t.Fatalf("tile %d: memory after LoadAll with a file differs", tile)
		}
	}
	if !bytes.Equal(a.m.MarshalState(), b.m.MarshalState()) {
		t.Fatal("state after LoadAll with a file differs")
	}

	compareOutcomes(t, "run after LoadAll with a file", runRing(t, a, 2), runRing(t, b, 2))

	// A later segment over the code (Load copies segments in order) is
	// in the program decoded from the copy, as in the one decoded from
	// memory.
	over := func(img Image) Image {
		img.Segments = append(append([]Segment(nil), img.Segments...), words(codeBase+8, 0x10520000))
		return img
	}
	e, f := newRig(t, "ipu21-64", Options{Parallel: 2}), newRig(t, "ipu21-64", Options{Parallel: 2})
	f.m.UseFile(&memFile{r: f, refuse: -1})
	for _, r := range []*rig{e, f} {
		if err := r.m.LoadAll(tiles[:2], []Image{over(imgs[0]), imgs[1]}); err != nil {
			t.Fatal(err)
		}
	}
	if !reflect.DeepEqual(e.m.tiles[0].prog.insts, f.m.tiles[0].prog.insts) {
		t.Error("a segment over the code: the program decoded from the copy differs from memory's")
	}
	if reflect.DeepEqual(e.m.tiles[0].prog.insts, b.m.tiles[0].prog.insts) {
		t.Error("the segment over the code changed no instruction: the check above shows nothing")
	}

	d := newRig(t, "ipu21-64", Options{Parallel: 2})
	d.m.UseFile(&memFile{r: d, refuse: 2})
	err := d.m.LoadAll(tiles[:4], imgs[:4])
	var le *LoadError
	if !errors.As(err, &le) || le.Tile != 2 || !errors.Is(err, errRefused) {
		t.Fatalf("LoadAll error %v, want a *LoadError for tile 2", err)
	}
	for tile := 0; tile < 4; tile++ {
		if got, want := d.m.Active(tile), tile < 2; got != want {
			t.Errorf("tile %d active %v after the refused write, want %v", tile, got, want)
		}
	}
}
