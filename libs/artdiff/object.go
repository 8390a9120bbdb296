package artdiff

import (
	"bytes"

	"ipu.local/formats/obj"
)

var objectKind = &Kind{
	Name:   "object",
	Match:  func(data []byte) bool { return bytes.HasPrefix(data, []byte(obj.Magic[:len(obj.Magic)-1])) },
	Decode: func(data []byte) (any, error) { return obj.Read(data) },
	Diff:   func(a, b any) []string { return Objects(a.(*obj.Object), b.(*obj.Object)) },
}

// Objects lists the differences between two objects: header fields
// ("header: "), tiles ("tile N: " or "tiles RANGES: "), host program
// ("host: "), configuration ("config: ").
func Objects(a, b *obj.Object) []string {
	type header struct{ Arch, Compiler, Source string }
	lines := prefixed("header: ", fieldDiffs(header{a.Arch, a.Compiler, a.Source}, header{b.Arch, b.Compiler, b.Source}))

	var tiles []tileDiff
	i, j := 0, 0
	for i < len(a.Tiles) || j < len(b.Tiles) {
		switch {
		case j == len(b.Tiles) || (i < len(a.Tiles) && a.Tiles[i].Index < b.Tiles[j].Index):
			tiles = append(tiles, tileDiff{a.Tiles[i].Index, []string{"removed"}})
			i++
		case i == len(a.Tiles) || b.Tiles[j].Index < a.Tiles[i].Index:
			tiles = append(tiles, tileDiff{b.Tiles[j].Index, []string{"added"}})
			j++
		default:
			tiles = append(tiles, tileDiff{a.Tiles[i].Index, diffProgram(tileProgram(&a.Tiles[i]), tileProgram(&b.Tiles[j]))})
			i++
			j++
		}
	}
	lines = append(lines, groupTiles(tiles)...)
	lines = append(lines, diffHost(&a.Host, &b.Host)...)
	return append(lines, diffConfig(a.Config, b.Config)...)
}

func tileProgram(t *obj.Tile) *program {
	return &program{entry: t.Entry, segments: t.Segments, symbols: t.Symbols, xfers: t.Exchange}
}

func prefixed(prefix string, lines []string) []string {
	for i := range lines {
		lines[i] = prefix + lines[i]
	}
	return lines
}
