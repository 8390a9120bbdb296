package artdiff

import (
	"bytes"
	"fmt"

	"ipu.local/formats/ipuexe"
)

var packageKind = &Kind{
	Name:   "package",
	Match:  func(data []byte) bool { return bytes.HasPrefix(data, []byte(ipuexe.Magic[:len(ipuexe.Magic)-1])) },
	Decode: func(data []byte) (any, error) { return ipuexe.Read(data) },
	Diff:   func(a, b any) []string { return Packages(a.(*ipuexe.Package), b.(*ipuexe.Package)) },
}

// Packages lists the differences between two packages: header fields
// ("header: "), the tiles whose images differ, compared tile by tile
// whatever the images' numbering ("tile N: ", "tiles RANGES: "), host
// program ("host: "), configuration ("config: "). The tilemap shows only
// through the tiles' images.
func Packages(a, b *ipuexe.Package) []string {
	type header struct {
		Arch, Compiler string
		Tiles          int
		Object         string
	}
	lines := prefixed("header: ", fieldDiffs(header{a.Arch, a.Compiler, a.Tiles, a.Object}, header{b.Arch, b.Compiler, b.Tiles, b.Object}))

	// Many tiles share few images: compare each pair of images once.
	memo := map[[2]uint32][]string{}
	var tiles []tileDiff
	for t := 0; t < max(len(a.TileImage), len(b.TileImage)); t++ {
		switch {
		case t >= len(b.TileImage):
			tiles = append(tiles, tileDiff{t, []string{"removed"}})
		case t >= len(a.TileImage):
			tiles = append(tiles, tileDiff{t, []string{"added"}})
		default:
			key := [2]uint32{a.TileImage[t], b.TileImage[t]}
			d, ok := memo[key]
			if !ok {
				ia, ib, err := images(a, b, key)
				if err != nil {
					d = []string{err.Error()}
				} else {
					d = diffProgram(imageProgram(ia), imageProgram(ib))
				}
				memo[key] = d
			}
			tiles = append(tiles, tileDiff{t, d})
		}
	}
	lines = append(lines, groupTiles(tiles)...)
	lines = append(lines, diffHost(&a.Host, &b.Host)...)
	return append(lines, diffConfig(a.Config, b.Config)...)
}

// images returns the images a tile map pair refers to. Read validates the
// tile map; a package built in memory may not be.
func images(a, b *ipuexe.Package, key [2]uint32) (*ipuexe.Image, *ipuexe.Image, error) {
	if int64(key[0]) >= int64(len(a.Images)) || int64(key[1]) >= int64(len(b.Images)) {
		return nil, nil, fmt.Errorf("image %d -> %d: not in the packages (%d and %d images)", key[0], key[1], len(a.Images), len(b.Images))
	}
	return &a.Images[key[0]], &b.Images[key[1]], nil
}

func imageProgram(img *ipuexe.Image) *program {
	return &program{idle: img.Idle, entry: img.Entry, segments: img.Segments, symbols: img.Symbols, xfers: img.Exchange}
}
