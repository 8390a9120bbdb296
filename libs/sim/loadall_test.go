package sim

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"
)

// TestLoadAllMatchesLoad checks that LoadAll leaves the machine as Loads
// one by one do, and that its error names the failing tile after loading
// the ones before it.
func TestLoadAllMatchesLoad(t *testing.T) {
	a := newRig(t, "ipu21-64", Options{Parallel: 1})
	loadRing(t, a)

	b := newRig(t, "ipu21-64", Options{Parallel: 3})
	tiles, imgs := ringImages(b.p.Tiles)
	if err := b.m.LoadAll(tiles, imgs); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.m.MarshalState(), b.m.MarshalState()) {
		t.Fatal("state after LoadAll differs from the state after Loads")
	}
	compareOutcomes(t, "run after LoadAll", runRing(t, a, 2), runRing(t, b, 2))

	c := newRig(t, "ipu21-64", Options{Parallel: 2})
	bad := append([]Image(nil), imgs[:3]...)
	bad[2] = Image{Segments: []Segment{{Addr: codeBase + 2, Data: []byte{0, 0, 0, 0}, Code: true}}}
	err := c.m.LoadAll(tiles[:3], bad)
	var le *LoadError
	if !errors.As(err, &le) || le.Tile != 2 {
		t.Fatalf("LoadAll error %v, want a *LoadError for tile 2", err)
	}
	for tile := 0; tile < 3; tile++ {
		if got, want := c.m.Active(tile), tile < 2; got != want {
			t.Errorf("tile %d active %v after the failed LoadAll, want %v", tile, got, want)
		}
		if got, want := c.word(tile, dataBase), uint32(tile*3+1); tile < 2 && got != want {
			t.Errorf("tile %d holds %#x at the data segment after the failed LoadAll, want %#x", tile, got, want)
		}
	}

	// A tile loaded twice in one LoadAll holds its second image, as
	// after two Loads.
	d := newRig(t, "ipu21-64", Options{Parallel: 3})
	e := newRig(t, "ipu21-64", Options{Parallel: 1})
	pair := []Image{imgs[7], imgs[9]}
	if err := d.m.LoadAll([]int{5, 6, 5}, []Image{pair[0], imgs[6], pair[1]}); err != nil {
		t.Fatal(err)
	}
	for i, tile := range []int{5, 6, 5} {
		if err := e.m.Load(tile, []Image{pair[0], imgs[6], pair[1]}[i]); err != nil {
			t.Fatal(err)
		}
	}
	if got := d.word(5, dataBase); got != 9*3+1 {
		t.Errorf("tile 5 loaded twice holds %#x, want %#x", got, 9*3+1)
	}
	if !bytes.Equal(d.m.MarshalState(), e.m.MarshalState()) {
		t.Error("state after LoadAll of a tile twice differs from the state after Loads")
	}
}

// ringImages returns the tiles of a ring of n and their images: the
// ring's program and a data segment (tile*3+1, tile), as loadRing loads.
func ringImages(n int) ([]int, []Image) {
	var tiles []int
	var imgs []Image
	for tile := range n {
		code := ringProgram(n, tile, int32(pcOf(ringWorker)))
		tiles = append(tiles, tile)
		imgs = append(imgs, Image{Entry: codeBase, Segments: []Segment{
			{Addr: codeBase, Data: codeBytes(code), Code: true},
			words(dataBase, uint32(tile*3+1), uint32(tile)),
		}})
	}
	return tiles, imgs
}

// TestWordCache checks the memoized decoding against decodeWord on words
// that collide in the cache and repeat.
func TestWordCache(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var c wordCache
	words := make([]uint32, 64)
	for i := range words {
		words[i] = rng.Uint32()
	}
	for i := 0; i < 100000; i++ {
		w := words[rng.IntN(len(words))]
		if i%3 == 0 {
			w = rng.Uint32()
		}
		if got, want := c.decode(w), decodeWord(w); got != want {
			t.Fatalf("word %#08x: cached %+v, decoded %+v", w, got, want)
		}
	}
}
