package ipuexe

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"ipu.local/formats/obj"
	"ipu.local/formats/obj/wire"
)

// refNoise is n bytes that zstd does not shrink.
func refNoise(n int) []byte {
	b := make([]byte, n)
	x := uint32(2463534242)
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

// refImages are two images holding the same weight w at different
// addresses, with different code.
func refImages() []Image {
	w := refNoise(4096)
	img := func(op byte, addr uint32) Image {
		return Image{Entry: 0x4c000, Segments: []obj.Segment{
			{Name: "text", Kind: obj.Code, Addr: 0x4c000, Size: 4, Data: []byte{op, 0, 0, 0xa5}},
			{Name: "w", Kind: obj.Data, Addr: addr, Size: 4096, Data: w},
		}}
	}
	return []Image{img(0, 0x80000), img(1, 0x90000)}
}

// handPackage builds a package of ipu21-tiny with one tile per image
// from the images' Bodies as given.
func handPackage(bodies [][]byte) []byte {
	var meta, images, tilemap, config, host wire.Encoder
	meta.String("0.1.0")
	meta.String("ipu21-tiny")
	meta.U32(uint32(len(bodies)))
	meta.String(strings.Repeat("ab", 32))
	images.U32(uint32(len(bodies)))
	tilemap.U32(uint32(len(bodies)))
	for i, body := range bodies {
		images.U32(uint32(len(body)))
		images.Bytes(wire.Compress(body))
		tilemap.U32(uint32(i))
	}
	obj.EncodeConfig(&config, nil)
	obj.EncodeHost(&host, &obj.HostProgram{})
	return format.Build([][]byte{meta.Data(), images.Data(), tilemap.Data(), config.Data(), host.Data()})
}

// TestRefs: a weight two images hold is stored once, and read back into
// both.
func TestRefs(t *testing.T) {
	p := &Package{Arch: "ipu21-tiny", Compiler: "0.1.0", Tiles: 2, Object: strings.Repeat("ab", 32), Images: refImages(), TileImage: []uint32{0, 1}}
	data, err := Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) > 4096+600 {
		t.Errorf("package of %d bytes: the weight is stored twice", len(data))
	}
	got, err := Read(data)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(p, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
	if again, _ := Marshal(got); !bytes.Equal(again, data) {
		t.Error("writing the package read back gives different bytes")
	}
}

// TestRefsCorrupt: Read refuses a reference to an image not before the
// one that holds it, to a segment that does not exist or to one of
// another kind, and finds an image the same as an earlier one although
// its Body refers to it.
func TestRefsCorrupt(t *testing.T) {
	imgs := refImages()
	raw := EncodeImage(&imgs[0])
	for _, tc := range []struct {
		name string
		ref  obj.Ref
		want string
	}{
		{"itself", obj.Ref{Group: 1, Seg: 1}, "refers to image 1, not an earlier one"},
		{"later", obj.Ref{Group: 2, Seg: 1}, "refers to image 2, not an earlier one"},
		{"missing segment", obj.Ref{Group: 0, Seg: 2}, "refers to segment 2 of image 0, which has 2"},
		{"other kind", obj.Ref{Group: 0, Seg: 0}, "refers to segment 0 of image 0, code of 4 bytes, not data of 4096"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := encodeBody(&imgs[1], map[int]obj.Ref{1: tc.ref})
			_, err := Read(handPackage([][]byte{raw, body, EncodeImage(idlePkgImage())}))
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("Read: %v, want an error containing %q", err, tc.want)
			}
		})
	}
	// Image 1 is image 0, its weight a reference: still the same image.
	same := encodeBody(&imgs[0], map[int]obj.Ref{1: {Group: 0, Seg: 1}})
	_, err := Read(handPackage([][]byte{raw, same}))
	if want := "image 1: same as image 0"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Read: %v, want an error containing %q", err, want)
	}
}

func idlePkgImage() *Image {
	return &Image{Idle: true, Entry: 0x4c000, Segments: []obj.Segment{{Name: "idle", Kind: obj.Code, Addr: 0x4c000, Size: 4, Data: []byte{0, 0, 0, 0xa5}}}}
}
