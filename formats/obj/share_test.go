package obj_test

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"ipu.local/formats/obj"
)

// TestReadShares checks what Read's sharing promises: a raw segment and
// the host model are the file's bytes, capped so that appending to them
// never writes into the file's buffer; and that Marshal and Write give
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
	o.Tiles[1].Segments = append(o.Tiles[1].Segments, obj.Segment{Name: "weights", Kind: obj.Data, Addr: 0x80000, Size: uint32(len(big)), Data: big})
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
	seg := got.Tiles[1].Segments[1].Data
	for name, b := range map[string][]byte{"raw segment": seg, "host model": got.Host.Model} {
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
