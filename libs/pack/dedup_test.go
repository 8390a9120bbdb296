package pack

import (
	"bytes"
	"slices"
	"testing"

	"ipu.local/formats/ipuexe"
	"ipu.local/formats/obj"
	"ipu.local/libs/arch"
)

// dedupVariants are images that each differ from the first in one field
// the canonical bytes carry, and one that differs in a bss segment's
// data only, which they do not carry.
func dedupVariants() []ipuexe.Image {
	base := func() ipuexe.Image {
		pt := program(0x4c000)
		w := make([]byte, 512)
		for i := range w {
			w[i] = byte(i * 7)
		}
		segs := append(append([]obj.Segment(nil), pt.Segments...), obj.Segment{Name: "w", Kind: obj.Data, Addr: 0x90000, Size: 512, Data: w})
		return ipuexe.Image{Entry: pt.Entry, Segments: segs, Symbols: pt.Symbols,
			Exchange: []obj.Transfer{{Phase: 1, Cycle: 5, Dst: 2, DstCount: 1, Words: 4}}}
	}
	var out []ipuexe.Image
	for _, change := range []func(*ipuexe.Image){
		func(*ipuexe.Image) {},
		func(m *ipuexe.Image) { m.Idle = true },
		func(m *ipuexe.Image) { m.Entry += 4 },
		func(m *ipuexe.Image) { m.Segments[2].Data[511]++ },
		func(m *ipuexe.Image) { m.Segments[2].Name = "v" },
		func(m *ipuexe.Image) { m.Segments[2].Addr += 4 },
		func(m *ipuexe.Image) { m.Segments[2].Kind = obj.Code },
		func(m *ipuexe.Image) { m.Symbols = append(m.Symbols, obj.Symbol{Name: "w", Addr: 0x90000, Size: 512}) },
		func(m *ipuexe.Image) { m.Symbols[0].Code = false },
		func(m *ipuexe.Image) { m.Exchange[0].Words++ },
		func(m *ipuexe.Image) { m.Exchange = nil },
		func(m *ipuexe.Image) { m.Segments[1].Data = make([]byte, 256) }, // bss: not carried
	} {
		img := base()
		change(&img)
		out = append(out, img)
	}
	return out
}

// sameImage and hashImage agree with the canonical bytes: two images are
// the same exactly when their bytes are, and then hash the same.
func TestSameImage(t *testing.T) {
	imgs := dedupVariants()
	for i := range imgs {
		for j := range imgs {
			a, b := &imgs[i], &imgs[j]
			want := bytes.Equal(ipuexe.EncodeImage(a), ipuexe.EncodeImage(b))
			if got := sameImage(a, b); got != want {
				t.Errorf("images %d and %d: same %v, canonical bytes equal %v", i, j, got, want)
			}
			if want && hashImage(a) != hashImage(b) {
				t.Errorf("images %d and %d: the same, different hashes", i, j)
			}
		}
	}
	if !sameImage(&imgs[0], &imgs[len(imgs)-1]) {
		t.Error("a bss segment's data makes an image different")
	}
}

// Tiles whose programs differ in one byte of a large segment get images
// of their own; tiles with the same programs share one.
func TestBuildDedup(t *testing.T) {
	imgs := dedupVariants()
	tile := func(i int, img ipuexe.Image) obj.Tile {
		return obj.Tile{Index: i, Entry: img.Entry, Segments: img.Segments, Symbols: img.Symbols, Exchange: img.Exchange}
	}
	o := &obj.Object{Arch: "ipu21-tiny", Compiler: "0.1.0", Source: "src",
		Tiles: []obj.Tile{tile(0, imgs[0]), tile(1, imgs[3]), tile(2, dedupVariants()[0]), tile(3, imgs[3])}}
	pkg, err := Build(o, arch.MustLookup("ipu21-tiny"))
	if err != nil {
		t.Fatal(err)
	}
	if want := []uint32{0, 1, 0, 1}; len(pkg.Images) != 2 || !slices.Equal(pkg.TileImage, want) {
		t.Errorf("%d images, tile images %v; want 2 images, %v", len(pkg.Images), pkg.TileImage, want)
	}
}
