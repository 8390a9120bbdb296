package obj

import (
	"bufio"
	"crypto/sha256"
	"fmt"
	"io"

	"ipu.local/formats/obj/wire"
)

// DumpOptions tune Dump.
type DumpOptions struct {
	// Disasm, when set, writes a code segment's instructions, one per line,
	// instead of its hex dump. Dump indents its output.
	Disasm func(w io.Writer, addr uint32, code []byte)
	// UsableMemory, when non-zero, is the bytes of memory a tile's
	// program may use (the architecture preset's, which this package
	// does not know): Dump then ends with the memory report
	// (DumpMemory) against it.
	UsableMemory int64
}

// Dump writes o as canonical text: the same object always gives the same
// text, and two objects' dumps differ where the objects differ, so that
// dumps can be compared with diff.
func Dump(w io.Writer, o *Object, opt DumpOptions) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "ipuobj version %d\n", Version)
	fmt.Fprintf(bw, "arch %q\n", o.Arch)
	fmt.Fprintf(bw, "compiler %q\n", o.Compiler)
	fmt.Fprintf(bw, "source %q\n", o.Source)
	fmt.Fprintf(bw, "tiles %d\n", len(o.Tiles))
	for i := range o.Tiles {
		t := &o.Tiles[i]
		fmt.Fprintf(bw, "\ntile %d\n", t.Index)
		if err := DumpProgram(bw, "  ", t.Entry, t.Segments, t.Symbols, t.Exchange, opt); err != nil {
			return err
		}
	}
	fmt.Fprintln(bw)
	DumpHost(bw, "", &o.Host)
	fmt.Fprintln(bw)
	DumpConfig(bw, "", o.Config)
	if opt.UsableMemory > 0 {
		fmt.Fprintln(bw)
		DumpMemory(bw, "", o, opt.UsableMemory)
	}
	return bw.Flush()
}

// DumpProgram writes one tile's program, each line starting with indent.
func DumpProgram(w io.Writer, indent string, entry uint32, segs []Segment, syms []Symbol, xfers []Transfer, opt DumpOptions) error {
	fmt.Fprintf(w, "%sentry 0x%08x\n", indent, entry)
	for i := range segs {
		s := &segs[i]
		fmt.Fprintf(w, "%ssegment %s %q addr 0x%08x size %d\n", indent, s.Kind, s.Name, s.Addr, s.Size)
		switch {
		case s.Kind == BSS:
		case s.Kind == Code && opt.Disasm != nil:
			iw := wire.Indent(w, indent+"    ")
			opt.Disasm(iw, s.Addr, s.Data)
			if err := iw.Flush(); err != nil {
				return err
			}
		default:
			if err := wire.HexDump(w, indent+"    ", s.Addr, s.Data); err != nil {
				return err
			}
		}
	}
	for _, s := range syms {
		kind := "data"
		if s.Code {
			kind = "func"
		}
		fmt.Fprintf(w, "%ssymbol %s %q addr 0x%08x size %d\n", indent, kind, s.Name, s.Addr, s.Size)
	}
	for _, x := range xfers {
		fmt.Fprintf(w, "%stransfer phase %d cycle %d dst %d count %d words %d\n", indent, x.Phase, x.Cycle, x.Dst, x.DstCount, x.Words)
	}
	return nil
}

// DumpHost writes a host program, each line starting with indent.
func DumpHost(w io.Writer, indent string, h *HostProgram) {
	fmt.Fprintf(w, "%shost phases %d pages %d inputs %d outputs %d\n", indent, len(h.Phases), len(h.Pages), len(h.Inputs), len(h.Outputs))
	for i, p := range h.Phases {
		fmt.Fprintf(w, "%s  phase %d %s %q\n", indent, i, p.Kind, p.Name)
	}
	for _, p := range h.Pages {
		fmt.Fprintf(w, "%s  page %d bytes %d\n", indent, p.ID, p.Bytes)
	}
	for _, l := range []struct {
		what string
		ts   []Tensor
	}{{"input", h.Inputs}, {"output", h.Outputs}} {
		for i, t := range l.ts {
			fmt.Fprintf(w, "%s  %s %d %q %s %v page %d offset %#x", indent, l.what, i, t.Name, t.DType, t.Shape, t.Page, t.Offset)
			if t.Accumulate > 0 {
				fmt.Fprintf(w, " accumulate %d", t.Accumulate)
			}
			fmt.Fprintln(w)
			for j, b := range t.Blocks {
				tr := ""
				if b.Transpose {
					tr = "T "
				}
				fmt.Fprintf(w, "%s    block %d: rows [%d,%d) cols [%d,%d) %s%s %dx%d at %#x\n",
					indent, j, b.R0, b.R1, b.C0, b.C1, tr, b.Order, b.Rows, b.Cols, b.Offset)
			}
		}
	}
	for _, b := range h.Branches {
		fmt.Fprintf(w, "%s  branch If %q: condition %d bytes on tile %d at %#x; then phases [%d, %d) else [%d, %d)\n",
			indent, b.If, b.CondBytes, b.CondTile, b.CondAddr, b.Then[0], b.Then[1], b.Else[0], b.Else[1])
	}
	if len(h.Model) > 0 {
		sum := sha256.Sum256(h.Model)
		fmt.Fprintf(w, "%s  model: %d bytes sha256 %x\n", indent, len(h.Model), sum[:8])
	}
}

// DumpConfig writes register writes, each line starting with indent.
func DumpConfig(w io.Writer, indent string, ws []RegWrite) {
	fmt.Fprintf(w, "%sconfig register writes %d\n", indent, len(ws))
	for _, r := range ws {
		tile := fmt.Sprint(r.Tile)
		if r.Tile == AllTiles {
			tile = "all"
		}
		fmt.Fprintf(w, "%s  tile %s reg 0x%04x value 0x%08x\n", indent, tile, r.Reg, r.Value)
	}
}
