package ipuexe

import (
	"bufio"
	"fmt"
	"io"
	"strings"

	"ipu.local/formats/obj"
)

// DumpOptions tune Dump.
type DumpOptions struct {
	// Disasm, when set, writes a code segment's instructions, one per line,
	// instead of its hex dump. Dump indents its output.
	Disasm func(w io.Writer, addr uint32, code []byte)
}

// Dump writes p as canonical text, suitable for diff: the header, each
// unique image with the tiles that use it, the tile map, the device
// configuration and the host program.
func Dump(w io.Writer, p *Package, opt DumpOptions) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "ipuexe version %d\n", Version)
	fmt.Fprintf(bw, "arch %q\n", p.Arch)
	fmt.Fprintf(bw, "compiler %q\n", p.Compiler)
	fmt.Fprintf(bw, "object %q\n", p.Object)
	fmt.Fprintf(bw, "tiles %d\n", p.Tiles)
	fmt.Fprintf(bw, "images %d\n", len(p.Images))

	users := make([][]int, len(p.Images))
	for t, i := range p.TileImage {
		if int64(i) < int64(len(users)) {
			users[i] = append(users[i], t)
		}
	}
	for i := range p.Images {
		img := &p.Images[i]
		idle := ""
		if img.Idle {
			idle = " idle"
		}
		fmt.Fprintf(bw, "\nimage %d%s tiles %s (%d)\n", i, idle, Ranges(users[i]), len(users[i]))
		if err := obj.DumpProgram(bw, "  ", img.Entry, img.Segments, img.Symbols, img.Exchange, obj.DumpOptions{Disasm: opt.Disasm}); err != nil {
			return err
		}
	}

	fmt.Fprintf(bw, "\ntilemap\n")
	for start := 0; start < len(p.TileImage); {
		end := start + 1
		for end < len(p.TileImage) && p.TileImage[end] == p.TileImage[start] {
			end++
		}
		fmt.Fprintf(bw, "  tiles %s image %d\n", span(start, end-1), p.TileImage[start])
		start = end
	}
	fmt.Fprintln(bw)
	obj.DumpConfig(bw, "", p.Config)
	fmt.Fprintln(bw)
	obj.DumpHost(bw, "", &p.Host)
	return bw.Flush()
}

// Ranges writes increasing tile numbers as comma-separated ranges:
// "0-63,65,70-71".
func Ranges(tiles []int) string {
	var b strings.Builder
	for i := 0; i < len(tiles); {
		j := i + 1
		for j < len(tiles) && tiles[j] == tiles[j-1]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(span(tiles[i], tiles[j-1]))
		i = j
	}
	if b.Len() == 0 {
		return "none"
	}
	return b.String()
}

func span(lo, hi int) string {
	if lo == hi {
		return fmt.Sprint(lo)
	}
	return fmt.Sprintf("%d-%d", lo, hi)
}
