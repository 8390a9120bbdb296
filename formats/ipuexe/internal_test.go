package ipuexe

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

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

// bombPackage is a one-image ipuexe-tiny package whose image is the
// given frame with the declared length rawLen.
func bombPackage(frame []byte, rawLen uint32) []byte {
	var meta, images, tilemap, config, host wire.Encoder
	meta.String("0.1.0")
	meta.String("ipu21-tiny")
	meta.U32(1)
	meta.String(strings.Repeat("ab", 32))
	images.U32(1)
	images.U32(rawLen)
	images.Bytes(frame)
	tilemap.U32(1)
	tilemap.U32(0)
	obj.EncodeConfig(&config, nil)
	obj.EncodeHost(&host, &obj.HostProgram{})
	return format.Build([][]byte{meta.Data(), images.Data(), tilemap.Data(), config.Data(), host.Data()})
}

// allocated returns the bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// A zstd bomb, a few kilobytes that decompress to 256 MiB, is refused
// with a one-line error, having allocated no more than the declared
// length allows: whether its frame header claims the huge size, or
// leaves it out and produces it; and a declared length beyond the
// architecture's memory is refused before any decompression.
func TestReadZstdBomb(t *testing.T) {
	const huge = 256 << 20
	zeros := make([]byte, huge)
	claiming := wire.Compress(zeros) // the frame header says 256 MiB
	var buf bytes.Buffer
	zw, err := zstd.NewWriter(&buf, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithWindowSize(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := zw.Write(zeros); err != nil { // a stream: no size in the header
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	producing := buf.Bytes()
	zeros = nil
	tests := []struct {
		name   string
		frame  []byte
		rawLen uint32
		opt    ReadOptions
		want   string
	}{
		{"claiming", claiming, 1000, ReadOptions{}, "image 0: zstd: frame header declares 268435456 bytes, want 1000"},
		{"producing", producing, 1000, ReadOptions{}, "image 0: zstd: decompressed size exceeds configured limit"},
		{"producing at the limit", producing, MaxImageBytes, ReadOptions{}, "image 0: zstd: "},
		{"claiming at the limit", claiming, MaxImageBytes, ReadOptions{}, "image 0: zstd: frame header declares 268435456 bytes, want 1277952"},
		{"declared beyond the format", claiming, MaxImageBytes + 1, ReadOptions{},
			fmt.Sprintf("image 0: length %d exceeds the limit (%d bytes: twice the 638976-byte tile memory of ipu21-tiny)", MaxImageBytes+1, MaxImageBytes)},
		{"declared beyond the architecture", claiming, 2*4096 + 1, ReadOptions{Limits: small},
			"image 0: length 8193 exceeds the limit (8192 bytes: twice the 4096-byte tile memory of ipu21-tiny)"},
		{"tiles beyond the architecture", claiming, 1000, ReadOptions{Limits: func(string) (Limits, error) { return Limits{Tiles: 0, TileMemory: 4096}, nil }},
			"tile count 1 exceeds architecture ipu21-tiny's 0 tiles"},
		{"unknown architecture", claiming, 1000, ReadOptions{Limits: func(a string) (Limits, error) { return Limits{}, fmt.Errorf("unknown architecture") }},
			`arch "ipu21-tiny": unknown architecture`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := bombPackage(tt.frame, tt.rawLen)
			if len(data) > 64<<10 {
				t.Fatalf("the bomb is %d bytes", len(data))
			}
			var err error
			n := allocated(func() { _, err = ReadWith(data, tt.opt) })
			if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %v, want one line containing %q", err, tt.want)
			}
			// The declared length, the decoder's tables and the file.
			if limit := uint64(tt.rawLen) + 8<<20; n > limit {
				t.Errorf("allocated %d bytes reading a %d-byte bomb (limit %d)", n, len(data), limit)
			}
			t.Logf("%s: %d-byte package, %d bytes allocated: %v", tt.name, len(data), n, err)
		})
	}
}

// small is an architecture of 4 KiB tiles, for the limits above.
func small(string) (Limits, error) { return Limits{Tiles: 4, TileMemory: 4096}, nil }
