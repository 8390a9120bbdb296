// Package wire is the binary framing shared by the object (.ipuobj) and
// package (.ipuexe) formats: little-endian primitives, the header and
// section table with per-section CRC-32C, zstd with fixed options, and the
// text-dump helpers.
//
// Every file built by this package starts
//
//	Header struct {
//		Magic    [8]byte // 7-byte kind prefix, then the version byte
//		NSection uint32
//		Reserved uint32 // 0
//	}
//	Table [NSection]struct {
//		Kind uint32 // 1..NSection, in order
//		CRC  uint32 // CRC-32C (Castagnoli) of the section's bytes
//		Off  uint64 // from the start of the file
//		Len  uint64
//	}
//
// and the sections follow the table back to back, in table order, up to
// the end of the file. Strings are a uint32 length and that many bytes.
//
// The Decoder never trusts a length: every count and length is checked
// against the bytes left before anything is allocated, and the first
// problem is kept with its byte offset.
package wire

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"slices"
)

// Sizes of the fixed parts of a file.
const (
	HeaderSize = 16
	EntrySize  = 24
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// CRC returns the CRC-32C of b.
func CRC(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// Error is a problem at a byte offset of a file. Section names the part of
// the file at fault ("header", "table", or a section name); the format
// packages turn it into their own FormatError.
type Error struct {
	Section string
	Off     int64
	Msg     string
}

func (e *Error) Error() string {
	where := "section " + e.Section
	if e.Section == "header" {
		where = "header"
	}
	return fmt.Sprintf("%s at byte %#x: %s", where, e.Off, e.Msg)
}

// Encoder appends little-endian values to a buffer. RawRef and BytesRef
// take a large slice by reference instead of copying it, so that a
// section of hundreds of MB (an object's tiles, a host model) reaches
// the file without passing through one more buffer: Format.Write writes
// an encoder's Chunks as they are.
type Encoder struct {
	buf    []byte
	chunks [][]byte // finished pieces before buf, in order
	size   int      // bytes in chunks
}

// refMin is the smallest slice RawRef keeps by reference; a smaller one
// is copied, as a reference would cost more than it saves.
const refMin = 64 << 10

// Reset makes e encode into buf's array from its start (a caller's
// scratch, reused).
func (e *Encoder) Reset(buf []byte) { e.buf, e.chunks, e.size = buf[:0], nil, 0 }

// Data returns what was encoded so far, in one slice (joined when
// RawRef kept pieces by reference).
func (e *Encoder) Data() []byte {
	if len(e.chunks) == 0 {
		return e.buf
	}
	out := make([]byte, 0, e.Len())
	for _, c := range e.chunks {
		out = append(out, c...)
	}
	return append(out, e.buf...)
}

// Chunks returns what was encoded so far as pieces in order, without
// copying; they join to Data().
func (e *Encoder) Chunks() [][]byte {
	if len(e.buf) == 0 {
		return e.chunks
	}
	return append(e.chunks[:len(e.chunks):len(e.chunks)], e.buf)
}

// Len is the number of bytes encoded so far.
func (e *Encoder) Len() int { return e.size + len(e.buf) }

// U8 appends one byte.
func (e *Encoder) U8(v uint8) { e.buf = append(e.buf, v) }

// U32 appends v as 4 bytes.
func (e *Encoder) U32(v uint32) { e.buf = binary.LittleEndian.AppendUint32(e.buf, v) }

// U64 appends v as 8 bytes.
func (e *Encoder) U64(v uint64) { e.buf = binary.LittleEndian.AppendUint64(e.buf, v) }

// I64 appends v as 8 bytes, two's complement.
func (e *Encoder) I64(v int64) { e.U64(uint64(v)) }

// String appends a uint32 length and the bytes of s.
func (e *Encoder) String(s string) {
	e.U32(uint32(len(s)))
	e.buf = append(e.buf, s...)
}

// Grow makes room for n more bytes.
func (e *Encoder) Grow(n int) { e.buf = slices.Grow(e.buf, n) }

// Raw appends b as it is (no length).
func (e *Encoder) Raw(b []byte) { e.buf = append(e.buf, b...) }

// RawRef appends b as it is, by reference when it is large: the caller
// must not change b while e is in use.
func (e *Encoder) RawRef(b []byte) { e.rawRef(b, refMin) }

// shareMin is the smallest slice BytesShared keeps by reference.
const shareMin = 1 << 10

// BytesShared appends a uint32 length and b, by reference from a smaller
// size than BytesRef: for an encoder whose pieces are written or handed
// on (Chunks, Refs), never joined (Data), where a reference costs a
// slice header and a copy costs the fresh memory it fills.
func (e *Encoder) BytesShared(b []byte) {
	e.U32(uint32(len(b)))
	e.rawRef(b, shareMin)
}

// Refs appends the pieces by reference, whatever their sizes (another
// encoder's Chunks): the caller must not change them while e is in use.
func (e *Encoder) Refs(pieces [][]byte) {
	for _, b := range pieces {
		e.rawRef(b, 0)
	}
}

func (e *Encoder) rawRef(b []byte, min int) {
	if len(b) < min || len(b) == 0 {
		e.Raw(b)
		return
	}
	if len(e.buf) > 0 {
		e.chunks = append(e.chunks, e.buf)
		e.size += len(e.buf)
		e.buf = nil
	}
	e.chunks = append(e.chunks, b)
	e.size += len(b)
}

// Bytes appends a uint32 length and b.
func (e *Encoder) Bytes(b []byte) {
	e.U32(uint32(len(b)))
	e.buf = append(e.buf, b...)
}

// BytesRef appends a uint32 length and b, by reference as RawRef.
func (e *Encoder) BytesRef(b []byte) {
	e.U32(uint32(len(b)))
	e.RawRef(b)
}

// Decoder reads little-endian values from one section. After the first
// problem every read returns a zero value and Err reports that problem.
type Decoder struct {
	section string
	buf     []byte
	pos     int
	base    int64 // file offset of buf[0]
	err     *Error
}

// NewDecoder reads buf, which starts at file offset base and belongs to
// the named section.
func NewDecoder(section string, buf []byte, base int64) *Decoder {
	return &Decoder{section: section, buf: buf, base: base}
}

// Err returns the first problem, or nil.
func (d *Decoder) Err() *Error { return d.err }

// Off is the file offset of the next byte.
func (d *Decoder) Off() int64 { return d.base + int64(d.pos) }

// Left is the number of bytes not yet read.
func (d *Decoder) Left() int { return len(d.buf) - d.pos }

// Failf records a problem at file offset off, unless one was recorded
// already.
func (d *Decoder) Failf(off int64, format string, args ...any) {
	if d.err == nil {
		d.err = &Error{Section: d.section, Off: off, Msg: fmt.Sprintf(format, args...)}
	}
}

func (d *Decoder) take(what string, n int) []byte {
	if d.err != nil {
		return nil
	}
	if n > d.Left() {
		d.Failf(d.Off(), "truncated %s (needs %d bytes, %d left)", what, n, d.Left())
		return nil
	}
	b := d.buf[d.pos : d.pos+n]
	d.pos += n
	return b
}

// U8 reads one byte.
func (d *Decoder) U8(what string) uint8 {
	b := d.take(what, 1)
	if b == nil {
		return 0
	}
	return b[0]
}

// U32 reads 4 bytes.
func (d *Decoder) U32(what string) uint32 {
	b := d.take(what, 4)
	if b == nil {
		return 0
	}
	return binary.LittleEndian.Uint32(b)
}

// U64 reads 8 bytes.
func (d *Decoder) U64(what string) uint64 {
	b := d.take(what, 8)
	if b == nil {
		return 0
	}
	return binary.LittleEndian.Uint64(b)
}

// I64 reads 8 bytes, two's complement.
func (d *Decoder) I64(what string) int64 { return int64(d.U64(what)) }

// Int reads a uint32 that the Go types hold in an int; it must not exceed
// math.MaxInt32, so that it means the same on every platform.
func (d *Decoder) Int(what string) int {
	off := d.Off()
	v := d.U32(what)
	if v > math.MaxInt32 {
		d.Failf(off, "%s %d out of range", what, v)
		return 0
	}
	return int(v)
}

// Bytes reads a uint32 length and that many bytes, after checking that
// the section holds them. The result aliases the input.
func (d *Decoder) Bytes(what string) []byte {
	off := d.Off()
	n := d.U32(what + " length")
	if d.err != nil {
		return nil
	}
	if uint64(n) > uint64(d.Left()) {
		d.Failf(off, "%s length %d exceeds file size (%d bytes left)", what, n, d.Left())
		return nil
	}
	return d.take(what, int(n))
}

// String reads a uint32 length and that many bytes.
func (d *Decoder) String(what string) string {
	off := d.Off()
	n := d.U32(what + " length")
	if d.err != nil {
		return ""
	}
	if uint64(n) > uint64(d.Left()) {
		d.Failf(off, "%s length %d exceeds file size (%d bytes left)", what, n, d.Left())
		return ""
	}
	return string(d.take(what, int(n)))
}

// Count reads a uint32 element count and checks that the rest of the
// section could hold that many elements of at least minSize bytes each,
// so that the caller may allocate count elements.
func (d *Decoder) Count(what string, minSize int) int {
	off := d.Off()
	n := d.U32(what + " count")
	if d.err != nil {
		return 0
	}
	if uint64(n)*uint64(minSize) > uint64(d.Left()) {
		d.Failf(off, "%s count %d exceeds file size (%d bytes left, %d per entry at least)", what, n, d.Left(), minSize)
		return 0
	}
	return int(n)
}

// Done checks that the whole section was read.
func (d *Decoder) Done() {
	if d.err == nil && d.Left() != 0 {
		d.Failf(d.Off(), "%d unexpected bytes at the end of the section", d.Left())
	}
}
