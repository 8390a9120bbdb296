package plan

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"math/rand"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// withConsts is sample with constants of many sizes: empty, shorter than
// the readers take out, and long; the last at the end of the values.
func withConsts() *Plan {
	p := sample()
	rng := rand.New(rand.NewSource(1))
	for i, n := range []int{0, 1, 2, 3, 47, 48, 49, 50, 200, 4099, 70001} {
		c := make([]byte, n)
		rng.Read(c)
		if i == 0 {
			c = []byte{} // non-nil, empty: omitted, read back as nil
		}
		p.Graph.Values = append(p.Graph.Values, Value{Name: fmt.Sprintf("c%d", n), DType: "bool", Shape: []int64{int64(n)}, Const: c})
	}
	return p
}

// slowRead is Read through encoding/json alone.
func slowRead(data []byte) (*Plan, error) {
	if err := checkFormat(data, Format); err != nil {
		return nil, err
	}
	p := new(Plan)
	if err := decodeStrict(data, p); err != nil {
		return nil, err
	}
	if _, err := p.validate(); err != nil {
		return nil, err
	}
	return p, nil
}

// The writers' output is encoding/json's, byte for byte.
func TestMarshalFillsExactly(t *testing.T) {
	p := withConsts()
	p.Schedules = bytes.Repeat([]byte{7, 0, 1}, 1000)
	got, err := Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	want, err := marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("Marshal differs from encoding/json's: %d bytes, want %d", len(got), len(want))
	}
	g, err := MarshalGraph(p.Graph)
	if err != nil {
		t.Fatal(err)
	}
	wantG, err := encodeCompact(p.Graph)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(g, bytes.TrimSuffix(wantG, []byte("\n"))) {
		t.Fatal("MarshalGraph differs from encoding/json's")
	}
	if last := p.Graph.Values[len(p.Graph.Values)-1].Const; len(last) != 70001 {
		t.Fatal("Marshal changed its input")
	}
}

// The readers give encoding/json's result, and its errors.
func TestReadTakesConsts(t *testing.T) {
	p := withConsts()
	data, err := Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	long := 0
	for _, v := range p.Graph.Values {
		if base64.StdEncoding.EncodedLen(len(v.Const)) >= 64 {
			long++
		}
	}
	if tk := take(data); tk == nil || len(tk.consts) != long {
		t.Fatalf("took not the %d constants of 64 base64 characters or more", long)
	}
	if _, ok := decodeFast(data, func(p *Plan) []Value { return p.Graph.Values }); !ok {
		t.Fatal("the plan decoded through encoding/json alone")
	}
	got, err := Read(data)
	if err != nil {
		t.Fatal(err)
	}
	want, err := slowRead(data)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("Read differs from encoding/json's (-want +got):\n%s", d)
	}
	gd, err := MarshalGraph(p.Graph)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := decodeFast(gd, func(g *Graph) []Value { return g.Values }); !ok {
		t.Fatal("the graph decoded through encoding/json alone")
	}
	g, err := ReadGraph(gd)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(&want.Graph, g); d != "" {
		t.Fatalf("ReadGraph differs (-want +got):\n%s", d)
	}

	b64 := string(data[bytes.Index(data, []byte(`"const": "`))+10:])
	b64 = b64[:strings.IndexByte(b64, '"')]
	edits := map[string]func(s string) string{
		// A bad base64 character the readers pass to the decoder.
		"not base64": func(s string) string { return strings.Replace(s, b64, b64[:100]+"!"+b64[101:], 1) },
		// Padding inside: base64 characters that do not decode.
		"padding inside": func(s string) string { return strings.Replace(s, b64, b64[:100]+"="+b64[101:], 1) },
		// A line break, which JSON refuses in a string and base64 skips.
		"line break": func(s string) string { return strings.Replace(s, b64, b64[:100]+"\n"+b64[100:], 1) },
		// A control character, which JSON refuses in a string, and a byte
		// that is not UTF-8, which JSON takes: base64 refuses both.
		"tab":       func(s string) string { return strings.Replace(s, b64, b64[:100]+"\t"+b64[101:], 1) },
		"not UTF-8": func(s string) string { return strings.Replace(s, b64, b64[:100]+"\xff"+b64[101:], 1) },
		// An escape, which JSON takes in a string and base64 does not.
		"escape": func(s string) string { return strings.Replace(s, b64, b64[:100]+`\/`+b64[101:], 1) },
		// Cut inside a constant.
		"truncated": func(s string) string { return s[:strings.Index(s, b64)+200] },
		// A constant where no field takes one.
		"const in a node": func(s string) string {
			return strings.Replace(s, `"op": "MatMul"`, `"op": "MatMul", "const": "`+b64+`"`, 1)
		},
		// Keys as encoding/json matches them: another case, twice.
		"key case": func(s string) string { return strings.Replace(s, `"const": "`+b64, `"Const": "`+b64, 1) },
		"key twice": func(s string) string {
			return strings.Replace(s, `"const": "`+b64, `"const": "`+b64+`", "const": "AAAA`, 1)
		},
		"twice, the other case": func(s string) string {
			return strings.Replace(s, `"const": "`+b64, `"const": "`+b64+`", "CONST": "`+b64, 1)
		},
		// Whitespace the readers drop between tokens, and whitespace
		// they keep because it parts two of them: JSON refuses a number
		// or a literal cut in two, and so must the readers.
		"other whitespace": func(s string) string {
			return strings.NewReplacer("\n", "\r\n\t", ": ", " :\t").Replace(s)
		},
		"number cut": func(s string) string {
			return strings.Replace(s, `"final_cycles": 100`, "\"final_cycles\": 10 \n 0", 1)
		},
		"literal cut": func(s string) string {
			return strings.Replace(s, `"estimated": true`, `"estimated": tr ue`, 1)
		},
		"number and literal apart": func(s string) string {
			return strings.Replace(s, `"estimated": true`, `"estimated": true 1`, 1)
		},
	}
	for name, edit := range edits {
		t.Run(name, func(t *testing.T) {
			d := []byte(edit(string(data)))
			got, err := Read(d)
			want, wantErr := slowRead(d)
			if (err == nil) != (wantErr == nil) || err != nil && err.Error() != wantErr.Error() {
				t.Fatalf("Read error %v, encoding/json's %v", err, wantErr)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("Read differs (-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzReadAgrees checks that Read, which takes the constants out and
// the whitespace between tokens, gives encoding/json's values and error
// text on any file.
func FuzzReadAgrees(f *testing.F) {
	p := sample()
	p.Graph.Values = append(p.Graph.Values, Value{Name: "c", DType: "bool", Shape: []int64{60}, Const: bytes.Repeat([]byte{1, 2, 3}, 20)})
	data, err := Marshal(p)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := Read(data)
		want, wantErr := slowRead(data)
		if (err == nil) != (wantErr == nil) || err != nil && err.Error() != wantErr.Error() {
			t.Fatalf("Read error %v, encoding/json's %v", err, wantErr)
		}
		if !reflect.DeepEqual(want, got) {
			t.Fatalf("Read differs (-want +got):\n%s", cmp.Diff(want, got))
		}
	})
}
