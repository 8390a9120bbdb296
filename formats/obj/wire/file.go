package wire

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
)

// Format names one kind of file: its magic prefix, version and sections.
type Format struct {
	// Prefix is the 7-byte magic before the version byte ("\x89IPUOBJ").
	Prefix string
	// Version is the only version this code reads and writes.
	Version byte
	// Name is what a version error calls the format ("object format").
	Name string
	// Sections names the sections, in file order; section i has kind i+1.
	Sections []string
}

// Build assembles a file of format f from its sections' bytes (one per
// name in f.Sections, in order).
func (f *Format) Build(sections [][]byte) []byte {
	chunks := make([][][]byte, len(sections))
	size := 0
	for i, s := range sections {
		chunks[i] = [][]byte{s}
		size += len(s)
	}
	out := f.header(chunks, size)
	for _, s := range sections {
		out = append(out, s...)
	}
	return out
}

// Write writes the file of format f whose sections are the encoders' (one
// per name in f.Sections, in order), the same bytes as Build of their
// Data, chunk by chunk: nothing the size of a section is copied.
func (f *Format) Write(w io.Writer, sections []*Encoder) error {
	chunks := make([][][]byte, len(sections))
	for i, e := range sections {
		chunks[i] = e.Chunks()
	}
	if _, err := w.Write(f.header(chunks, 0)); err != nil {
		return err
	}
	for _, cs := range chunks {
		for _, c := range cs {
			if _, err := w.Write(c); err != nil {
				return err
			}
		}
	}
	return nil
}

// Bytes returns the file Write writes, in one allocation of its size.
func (f *Format) Bytes(sections []*Encoder) []byte {
	n := HeaderSize + EntrySize*len(sections)
	for _, e := range sections {
		n += e.Len()
	}
	b := bytes.NewBuffer(make([]byte, 0, n))
	f.Write(b, sections) // a bytes.Buffer takes every write
	return b.Bytes()
}

// header returns the header and section table of a file of format f
// whose sections are the joined chunks, in a slice with room for extra
// more bytes.
func (f *Format) header(sections [][][]byte, extra int) []byte {
	if len(sections) != len(f.Sections) {
		panic(fmt.Sprintf("wire: %d sections, format has %d", len(sections), len(f.Sections)))
	}
	size := HeaderSize + EntrySize*len(sections)
	out := make([]byte, 0, size+extra)
	out = append(out, f.Prefix...)
	out = append(out, f.Version)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(sections)))
	out = binary.LittleEndian.AppendUint32(out, 0)
	off := uint64(size)
	for i, cs := range sections {
		crc, n := uint32(0), 0
		for _, c := range cs {
			crc = crc32.Update(crc, castagnoli, c)
			n += len(c)
		}
		out = binary.LittleEndian.AppendUint32(out, uint32(i+1))
		out = binary.LittleEndian.AppendUint32(out, crc)
		out = binary.LittleEndian.AppendUint64(out, off)
		out = binary.LittleEndian.AppendUint64(out, uint64(n))
		off += uint64(n)
	}
	return out
}

// Section is one section of a parsed file.
type Section struct {
	Name string
	Off  int64 // file offset of Data[0]
	Data []byte
}

// Decoder returns a decoder over the section.
func (s *Section) Decoder() *Decoder { return NewDecoder(s.Name, s.Data, s.Off) }

// Parse checks the header, the section table and every section's CRC, and
// returns the sections in the order of f.Sections. Nothing is allocated
// from a size read from the file.
func (f *Format) Parse(data []byte) ([]Section, *Error) {
	size := uint64(len(data))
	fail := func(section string, off uint64, format string, args ...any) *Error {
		return &Error{Section: section, Off: int64(off), Msg: fmt.Sprintf(format, args...)}
	}
	if size < HeaderSize {
		if size >= 7 && string(data[:7]) != f.Prefix {
			return nil, fail("header", 0, "bad magic %q (want %q)", data[:7], f.Prefix)
		}
		return nil, fail("header", 0, "truncated: file is %d bytes, the header needs %d", size, HeaderSize)
	}
	if string(data[:7]) != f.Prefix {
		return nil, fail("header", 0, "bad magic %q (want %q)", data[:7], f.Prefix)
	}
	if v := data[7]; v != f.Version {
		return nil, fail("header", 7, "%s version %d not supported (want %d)", f.Name, v, f.Version)
	}
	n := binary.LittleEndian.Uint32(data[8:])
	if n != uint32(len(f.Sections)) {
		return nil, fail("header", 8, "%d sections, want %d", n, len(f.Sections))
	}
	if r := binary.LittleEndian.Uint32(data[12:]); r != 0 {
		return nil, fail("header", 12, "reserved field is %#x, want 0", r)
	}
	tableEnd := uint64(HeaderSize + EntrySize*len(f.Sections))
	if tableEnd > size {
		return nil, fail("table", HeaderSize, "truncated: file is %d bytes, the section table ends at byte %#x", size, tableEnd)
	}
	secs := make([]Section, len(f.Sections))
	next := tableEnd
	for i, name := range f.Sections {
		ent := uint64(HeaderSize + EntrySize*i)
		kind := binary.LittleEndian.Uint32(data[ent:])
		crc := binary.LittleEndian.Uint32(data[ent+4:])
		off := binary.LittleEndian.Uint64(data[ent+8:])
		length := binary.LittleEndian.Uint64(data[ent+16:])
		if kind != uint32(i+1) {
			return nil, fail("table", ent, "entry %d has kind %d, want %d (%s)", i, kind, i+1, name)
		}
		if off != next {
			return nil, fail(name, ent+8, "section starts at byte %#x, want %#x", off, next)
		}
		if length > size-off {
			return nil, fail(name, ent+16, "section length %d exceeds file size (%d bytes from byte %#x)", length, size-off, off)
		}
		body := data[off : off+length]
		if got := CRC(body); got != crc {
			return nil, fail(name, off, "crc mismatch (want 0x%08x, got 0x%08x)", crc, got)
		}
		secs[i] = Section{Name: name, Off: int64(off), Data: body}
		next = off + length
	}
	if next != size {
		return nil, fail(f.Sections[len(f.Sections)-1], next, "%d unexpected bytes after the last section", size-next)
	}
	return secs, nil
}
