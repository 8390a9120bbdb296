package ipuexe

import (
	"strings"
	"testing"

	"ipu.local/formats/obj"
	"ipu.local/formats/obj/wire"
)

// TestReadDuplicateImages builds a file by hand, since Write refuses to
// store an image twice.
func TestReadDuplicateImages(t *testing.T) {
	img := Image{Entry: 0x4c000, Segments: []obj.Segment{{Name: "t", Kind: obj.Code, Addr: 0x4c000, Size: 4, Data: []byte{0, 0, 0, 0xa5}}}}
	var meta, images, tilemap, config, host wire.Encoder
	meta.String("0.1.0")
	meta.String("ipu21-tiny")
	meta.U32(2)
	meta.String(strings.Repeat("ab", 32))
	images.U32(2)
	for range 2 {
		body := EncodeImage(&img)
		images.U32(uint32(len(body)))
		images.Bytes(wire.Compress(body))
	}
	tilemap.U32(2)
	tilemap.U32(0)
	tilemap.U32(1)
	obj.EncodeConfig(&config, nil)
	obj.EncodeHost(&host, &obj.HostProgram{})
	data := format.Build([][]byte{meta.Data(), images.Data(), tilemap.Data(), config.Data(), host.Data()})
	_, err := Read(data)
	want := "image 1: same as image 0 (identical images are stored once)"
	if err == nil || !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), "ipuexe: section images at byte 0x") {
		t.Errorf("error %v, want one containing %q", err, want)
	}
}
