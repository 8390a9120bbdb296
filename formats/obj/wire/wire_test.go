package wire

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
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
		{"declared larger", len(src) + 1, "decompressed to 4000 bytes, want 4001"},
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
