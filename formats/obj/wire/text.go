package wire

import (
	"bytes"
	"fmt"
	"io"
)

// HexDump writes data, which starts at address addr, sixteen bytes a line
// with the address, the bytes and their printable characters. A run of
// lines equal to the line before is written as one "*" line; the last
// line is always written, so the dump shows where the data ends.
func HexDump(w io.Writer, indent string, addr uint32, data []byte) error {
	var prev []byte
	starred := false
	for off := 0; off < len(data); off += 16 {
		line := data[off:min(off+16, len(data))]
		last := off+16 >= len(data)
		if prev != nil && !last && len(line) == 16 && bytes.Equal(line, prev) {
			if !starred {
				if _, err := fmt.Fprintf(w, "%s*\n", indent); err != nil {
					return err
				}
				starred = true
			}
			continue
		}
		starred = false
		prev = line
		var b bytes.Buffer
		fmt.Fprintf(&b, "%s%08x ", indent, addr+uint32(off))
		for i := 0; i < 16; i++ {
			if i == 8 {
				b.WriteByte(' ')
			}
			if i < len(line) {
				fmt.Fprintf(&b, " %02x", line[i])
			} else {
				b.WriteString("   ")
			}
		}
		b.WriteString("  |")
		for _, c := range line {
			if c < 0x20 || c > 0x7e {
				c = '.'
			}
			b.WriteByte(c)
		}
		b.WriteString("|\n")
		if _, err := w.Write(b.Bytes()); err != nil {
			return err
		}
	}
	return nil
}

// Indent returns a writer that starts every line written through it with
// prefix, so that a callback's output nests inside a dump. Call Flush
// when done to end an unfinished last line.
func Indent(w io.Writer, prefix string) *IndentWriter {
	return &IndentWriter{w: w, prefix: []byte(prefix), bol: true}
}

// IndentWriter prefixes lines; see Indent.
type IndentWriter struct {
	w      io.Writer
	prefix []byte
	bol    bool // at the beginning of a line
	err    error
}

func (iw *IndentWriter) Write(p []byte) (int, error) {
	if iw.err != nil {
		return 0, iw.err
	}
	var b []byte
	for _, c := range p {
		if iw.bol {
			b = append(b, iw.prefix...)
			iw.bol = false
		}
		b = append(b, c)
		if c == '\n' {
			iw.bol = true
		}
	}
	if _, err := iw.w.Write(b); err != nil {
		iw.err = err
		return 0, err
	}
	return len(p), nil
}

// Flush ends an unfinished last line and returns the first write error.
func (iw *IndentWriter) Flush() error {
	if iw.err == nil && !iw.bol {
		_, iw.err = iw.w.Write([]byte{'\n'})
		iw.bol = true
	}
	return iw.err
}
