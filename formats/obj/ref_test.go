package obj_test

import (
	"bytes"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"

	"ipu.local/formats/obj"
)

// noise is n bytes that zstd does not shrink, the same for a seed.
func noise(n int, seed uint32) []byte {
	b := make([]byte, n)
	x := seed*2654435761 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

// sharedObject has tiles 0, 1 and 3 with weights w (256 bytes) and v
// (272 bytes) copied between them at other addresses, and a small code
// segment in each that stays raw.
func sharedObject() *obj.Object {
	halt := words(0xa5000000)
	w, v := noise(256, 1), noise(272, 2)
	code := obj.Segment{Name: "text", Kind: obj.Code, Addr: 0x4c000, Size: 4, Data: halt}
	return &obj.Object{
		Arch: "ipu21-tiny", Compiler: "0.1.0",
		Source: "2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae",
		Tiles: []obj.Tile{
			{Index: 0, Entry: 0x4c000, Segments: []obj.Segment{code, {Name: "w", Kind: obj.Data, Addr: 0x80000, Size: 256, Data: w}}},
			{Index: 1, Entry: 0x4c000, Segments: []obj.Segment{code,
				{Name: "v", Kind: obj.Data, Addr: 0x80000, Size: 272, Data: v},
				{Name: "w1", Kind: obj.Data, Addr: 0x90000, Size: 256, Data: w}}},
			{Index: 3, Entry: 0x4c000, Segments: []obj.Segment{code,
				{Name: "v", Kind: obj.Data, Addr: 0x80000, Size: 272, Data: v},
				{Name: "w", Kind: obj.Data, Addr: 0x81000, Size: 256, Data: w}}},
		},
	}
}

// TestRefs: copied segments are stored once, whatever the workers, and
// read back as they were.
func TestRefs(t *testing.T) {
	o := sharedObject()
	data := marshal(t, o)
	// Three copies of w and two of v stored raw would take 3x256+2x272.
	if len(data) > 256+272+500 {
		t.Errorf("object of %d bytes: the copies are stored again", len(data))
	}
	for _, procs := range []int{1, 4} {
		old := runtime.GOMAXPROCS(procs)
		again := marshal(t, sharedObject())
		runtime.GOMAXPROCS(old)
		if !bytes.Equal(again, data) {
			t.Fatalf("GOMAXPROCS %d: different bytes", procs)
		}
	}
	got, err := obj.Read(data)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(o, got, equate); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
	// A reference shares the referenced segment's data (TestReadShares).
	if a, b := got.Tiles[0].Segments[1].Data, got.Tiles[1].Segments[2].Data; unsafe.SliceData(a) != unsafe.SliceData(b) {
		t.Error("a reference's data is a copy of the segment it refers to")
	}
}

// refAt returns the offset of the data of the reference stored for the
// segment at addr of size bytes (its encoding, addr, size and length 8
// precede it).
func refAt(t *testing.T, data []byte, addr, size uint32) int {
	t.Helper()
	head := append([]byte{2}, le32(addr)...)
	head = append(append(head, le32(size)...), le32(8)...)
	i := bytes.Index(data, head)
	if i < 0 || bytes.Index(data[i+1:], head) >= 0 {
		t.Fatalf("no single reference at %#x", addr)
	}
	return i + len(head)
}

// TestRefsCorrupt: Read refuses a reference to a tile not before the
// one that holds it, to a segment that does not exist, or to one of
// another kind or size, with a one-line error.
func TestRefsCorrupt(t *testing.T) {
	base := marshal(t, sharedObject())
	at := refAt(t, base, 0x90000, 256) // tile 1's w1: tile 0 segment 1
	for _, tc := range []struct {
		name       string
		group, seg uint32
		want       string
	}{
		{"itself", 1, 2, "refers to tile 1, not an earlier one"},
		{"later", 3, 2, "refers to tile 3, not an earlier one"},
		{"missing tile", 2, 0, "refers to tile 2, not an earlier one"},
		{"missing segment", 0, 2, "refers to segment 2 of tile 0, which has 2"},
		{"other kind", 0, 0, "refers to segment 0 of tile 0, code of 4 bytes, not data of 256"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := append([]byte(nil), base...)
			copy(data[at:], append(le32(tc.group), le32(tc.seg)...))
			_, err := obj.Read(fixCRCs(data))
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("Read: %v, want an error containing %q", err, tc.want)
			}
			checkRead(t, fixCRCs(data))
		})
	}
	// Tile 3's v refers to tile 1's v (272 bytes), not to its w1.
	data := append([]byte(nil), base...)
	vat := refAt(t, data, 0x80000, 272)
	copy(data[vat:], append(le32(1), le32(2)...))
	if _, err := obj.Read(fixCRCs(data)); err == nil || !strings.Contains(err.Error(), "data of 256 bytes, not data of 272") {
		t.Fatalf("Read: %v, want a size mismatch", err)
	}
	// A reference's data is 8 bytes.
	data = append([]byte(nil), base...)
	copy(data[at-4:], le32(7))
	if _, err := obj.Read(fixCRCs(data)); err == nil || !strings.Contains(err.Error(), "a reference of 7 bytes") {
		t.Fatalf("Read: %v, want a reference length error", err)
	}
}
