package wire

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestWriteEqualsBuild encodes the same values through Raw and Bytes and
// through RawRef, BytesRef, BytesShared and Refs of another encoder's
// Chunks (slices on both sides of refMin and shareMin, empty ones,
// references back to back and first or last), and checks that Data
// joins the chunks and that Format.Write writes Build's bytes.
func TestWriteEqualsBuild(t *testing.T) {
	f := Format{Prefix: "\x89TESTFM", Version: 3, Name: "test format", Sections: []string{"a", "b", "c"}}
	r := rand.New(rand.NewPCG(1, 2))
	sizes := []int{0, 1, 7, shareMin - 1, shareMin, refMin - 1, refMin, refMin + 1, 3 * refMin}
	for trial := 0; trial < 200; trial++ {
		var plain, ref [3]Encoder
		for s := range 3 {
			for op := r.IntN(6); op > 0; op-- {
				b := make([]byte, sizes[r.IntN(len(sizes))])
				for i := range b {
					b[i] = byte(r.Uint32())
				}
				switch r.IntN(6) {
				case 0:
					plain[s].Raw(b)
					ref[s].RawRef(b)
				case 1:
					plain[s].Bytes(b)
					ref[s].BytesRef(b)
				case 4:
					plain[s].Bytes(b)
					ref[s].BytesShared(b)
				case 5:
					// A part encoded apart, handed on by its pieces.
					var part Encoder
					part.U32(uint32(len(b)))
					part.BytesShared(b)
					part.U8(7)
					plain[s].U32(uint32(len(b)))
					plain[s].Bytes(b)
					plain[s].U8(7)
					ref[s].Refs(part.Chunks())
				case 2:
					v := r.Uint32()
					plain[s].U32(v)
					ref[s].U32(v)
				default:
					plain[s].String("x")
					ref[s].String("x")
				}
			}
			if !bytes.Equal(plain[s].Data(), ref[s].Data()) || plain[s].Len() != ref[s].Len() {
				t.Fatalf("trial %d section %d: Data with references differs (len %d, want %d)", trial, s, ref[s].Len(), plain[s].Len())
			}
			if got := bytes.Join(ref[s].Chunks(), nil); !bytes.Equal(got, plain[s].Data()) {
				t.Fatalf("trial %d section %d: Chunks join to %d bytes, want Data's %d", trial, s, len(got), plain[s].Len())
			}
		}
		want := f.Build([][]byte{plain[0].Data(), plain[1].Data(), plain[2].Data()})
		var got bytes.Buffer
		if err := f.Write(&got, []*Encoder{&ref[0], &ref[1], &ref[2]}); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Bytes(), want) {
			t.Fatalf("trial %d: Write gives %d bytes unlike Build's %d", trial, got.Len(), len(want))
		}
		if _, err := f.Parse(got.Bytes()); err != nil {
			t.Fatalf("trial %d: Parse of Write's file: %v", trial, err)
		}
	}
}
