package wire

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/klauspost/compress/zstd"
)

func TestHexDump(t *testing.T) {
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, ""},
		{"short", []byte("AB\x00"), "  00001000  41 42 00                                          |AB.|\n"},
		{"repeats", make([]byte, 64), "" +
			"  00001000  00 00 00 00 00 00 00 00  00 00 00 00 00 00 00 00  |................|\n" +
			"  *\n" +
			"  00001030  00 00 00 00 00 00 00 00  00 00 00 00 00 00 00 00  |................|\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			if err := HexDump(&b, "  ", 0x1000, tt.data); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, b.String()); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestIndent(t *testing.T) {
	var b strings.Builder
	iw := Indent(&b, "> ")
	iw.Write([]byte("a\nb"))
	iw.Write([]byte("c\n\nd"))
	if err := iw.Flush(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff("> a\n> bc\n> \n> d\n", b.String()); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}

func TestDecompress(t *testing.T) {
	src := bytes.Repeat([]byte("tile"), 1000)
	z := Compress(src)
	if !bytes.Equal(z, Compress(src)) {
		t.Fatal("Compress is not deterministic")
	}
	tests := []struct {
		name string
		size int
		want string // error substring; "" for success
	}{
		{"exact", len(src), ""},
		{"declared smaller", len(src) - 1, "zstd:"},
		{"declared larger", len(src) + 1, "zstd: frame header declares 4000 bytes, want 4001"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Decompress(z, tt.size)
			if tt.want == "" {
				if err != nil || !bytes.Equal(got, src) {
					t.Fatalf("Decompress = %d bytes, %v", len(got), err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want %q", err, tt.want)
			}
		})
	}
}

func TestDecoderBounds(t *testing.T) {
	var e Encoder
	e.U32(0xffffffff) // a count
	d := NewDecoder("tiles", e.Data(), 0x100)
	if n := d.Count("tile", 20); n != 0 {
		t.Fatalf("Count = %d", n)
	}
	want := "section tiles at byte 0x100: tile count 4294967295 exceeds file size (0 bytes left, 20 per entry at least)"
	if got := d.Err().Error(); got != want {
		t.Errorf("error %q, want %q", got, want)
	}
	// Later reads keep the first error.
	d.U32("x")
	if got := d.Err().Error(); got != want {
		t.Errorf("error changed to %q", got)
	}
}

// A frame without its size in the header is bounded by the declared size
// as it decodes: more is refused, less is an error naming both.
func TestDecompressStream(t *testing.T) {
	src := bytes.Repeat([]byte("tile"), 1000)
	var buf bytes.Buffer
	zw, err := zstd.NewWriter(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := zw.Write(src); err != nil {
		t.Fatal(err)
	}
	if err := zw.Flush(); err != nil { // the header goes out before the size is known
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	var h zstd.Header
	if err := h.Decode(buf.Bytes()); err != nil || h.HasFCS {
		t.Fatalf("stream frame header: %+v, %v; want no content size", h, err)
	}
	if got, err := Decompress(buf.Bytes(), len(src)); err != nil || !bytes.Equal(got, src) {
		t.Fatalf("Decompress = %d bytes, %v", len(got), err)
	}
	if _, err := Decompress(buf.Bytes(), len(src)+1); err == nil || err.Error() != "zstd: decompressed to 4000 bytes, want 4001" {
		t.Errorf("declared larger: %v", err)
	}
	if _, err := Decompress(buf.Bytes(), len(src)-1); err == nil || !strings.HasPrefix(err.Error(), "zstd: ") {
		t.Errorf("declared smaller: %v", err)
	}
}
