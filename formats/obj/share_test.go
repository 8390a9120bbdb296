package obj_test

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"unsafe"

	"ipu.local/formats/obj"
)

// TestReadShares checks what Read's sharing promises: a raw segment and
// the host model are the file's bytes, and a reference is the referenced
// segment's, each capped so that appending to it never writes into the
// file's buffer or the other segment; and that Marshal and Write give
// the same bytes when the writer keeps big slices by reference (a host
// model and a tile larger than the encoder's copy threshold).
func TestReadShares(t *testing.T) {
	o := samples()["full"]
	r := rand.New(rand.NewPCG(3, 4))
	big := make([]byte, 200<<10) // random: stored raw, not compressed
	for i := range big {
		big[i] = byte(r.Uint32())
	}
	o.Host.Model = big
	o.Tiles[0].Segments = append(o.Tiles[0].Segments, obj.Segment{Name: "weights", Kind: obj.Data, Addr: 0xa0000, Size: uint32(len(big)), Data: big})
	// The same weights on a later tile: stored as a reference to tile 0's.
	o.Tiles[1].Segments = append(o.Tiles[1].Segments, obj.Segment{Name: "weights", Kind: obj.Data, Addr: 0x80000, Size: uint32(len(big)), Data: bytes.Clone(big)})
	data := marshal(t, o)
	m, err := obj.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(m, data) {
		t.Fatalf("Marshal gives %d bytes unlike Write's %d", len(m), len(data))
	}
	got, err := obj.Read(data)
	if err != nil {
		t.Fatal(err)
	}
	kept := bytes.Clone(data)
	gs := got.Tiles[0].Segments
	seg := gs[len(gs)-1].Data
	ref := got.Tiles[1].Segments[1].Data
	if len(data) >= 3*len(big) {
		t.Fatalf("%d bytes of file for a host model and two segments of %d bytes: the second segment is not a reference", len(data), len(big))
	}
	if unsafe.SliceData(ref) != unsafe.SliceData(seg) {
		t.Error("a reference's data is a copy, not the referenced segment's")
	}
	for name, b := range map[string][]byte{"raw segment": seg, "host model": got.Host.Model, "reference": ref} {
		if !bytes.Equal(b, big) {
			t.Fatalf("%s: read back differs", name)
		}
		if cap(b) != len(b) {
			t.Errorf("%s: capacity %d past its %d bytes: an append would write into the file's buffer", name, cap(b), len(b))
		}
		_ = append(b, 0xff)
	}
	if !bytes.Equal(data, kept) {
		t.Fatal("appending to what Read returned changed the file's bytes")
	}
}
