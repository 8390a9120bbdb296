package plan

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
)

// The graph's constants travel as base64 strings inside the JSON: the
// 12-layer BERT-base encoder's plan holds 227 MB of them in a 289 MB
// file. encoding/json grows its buffer through every one when encoding
// (4.9 s of the encoder's ipu-plan) and steps its scanner through every
// byte when decoding (4.5 s of its ipu-link). So the writers encode the
// document with a short stub in each constant's place and write the
// base64 straight into an output of the exact size, and the readers take
// the constants out before the JSON decoder sees the document.

// stubBytes stands for a constant while the JSON encoder runs; its base64
// is stub64. No constant stays in the encoder's input, so every stub64
// after a key the filler looks for is one it put there.
var stubBytes = []byte{0xff, 0xfe, 0xfd}

const stub64 = "//79"

// filling is a byte slice the encoder left a stub for, after key.
type filling struct {
	key  string // `"const": "` (indented) or `"const":"` (compact)
	data []byte
}

// stubValues returns a copy of vs with each non-empty constant replaced
// by the stub, and the constants in order.
func stubValues(vs []Value) ([]Value, [][]byte) {
	var consts [][]byte
	out := make([]Value, len(vs))
	for i, v := range vs {
		out[i] = v
		if len(v.Const) > 0 {
			out[i].Const = stubBytes
			consts = append(consts, v.Const)
		}
	}
	return out, consts
}

// fill returns doc with each filling's stub, in document order, replaced
// by the base64 of its data, in one allocation of the output's size. The
// document's text is copied first; the base64, most of a big plan's
// bytes, is then encoded into its places on the host's cores.
func fill(doc []byte, fs []filling) ([]byte, error) {
	size := len(doc)
	for _, f := range fs {
		size += base64.StdEncoding.EncodedLen(len(f.data)) - len(stub64)
	}
	out := make([]byte, 0, size)
	places := make([]int, len(fs)) // where each filling's base64 starts in out
	at := 0
	for i, f := range fs {
		k := bytes.Index(doc[at:], []byte(f.key+stub64+`"`))
		if k < 0 {
			return nil, fmt.Errorf("plan: encoded constant %d of %d has no stub", i, len(fs))
		}
		k += at + len(f.key)
		out = append(out, doc[at:k]...)
		places[i] = len(out)
		out = out[:len(out)+base64.StdEncoding.EncodedLen(len(f.data))]
		at = k + len(stub64)
	}
	out = append(out, doc[at:]...)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(fs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < len(fs); i = int(next.Add(1) - 1) {
				base64.StdEncoding.Encode(out[places[i]:], fs[i].data)
			}
		}()
	}
	wg.Wait()
	return out, nil
}

// constFillings lists a document's fillings: the values' constants, then
// the schedules (the plan's last field), under key forms of key.
func constFillings(consts [][]byte, key string) []filling {
	fs := make([]filling, len(consts))
	for i, c := range consts {
		fs[i] = filling{key, c}
	}
	return fs
}

// A reader takes out each constant of 64 characters or more written
// `"const": "..."` or `"const":"..."` whose string has no escape and no
// line break (plainString); a constant written any other way goes
// through the JSON decoder. Inside a JSON string every quote is
// escaped, so the pattern's quote after const can only close a key, and
// with no escape the next quote closes the string. The stub is base64,
// valid in any string; what the string held instead is decided by the
// base64 decoder, which refuses every byte outside its alphabet but the
// line breaks plainString excludes: a byte JSON would refuse there (a
// control character) fails it as well. Any failure, of the stubbed
// document or of a constant, sends the file itself to the JSON decoder,
// so that errors and their byte offsets are the file's. The text around
// the constants also loses its whitespace between tokens on the way
// (appendCompact), keeping one space where two tokens would run
// together, so the stubbed document decodes to the same values and
// fails where the file fails.

// taken is a document with its constants taken out.
type taken struct {
	doc    []byte
	consts [][]byte // base64, in document order
	nonce  [12]byte // the stubs' first bytes; the index follows
}

// take returns data with each constant's base64 replaced by a stub that
// decodes to nonce and the constant's index (nil when there are none).
// The nonce is random, so no file can hold a stub.
func take(data []byte) *taken {
	var t taken
	var out []byte
	copied := 0 // data[:copied] is in out
	for at := 0; at < len(data); {
		k := bytes.Index(data[at:], []byte(`"const":`))
		if k < 0 {
			break
		}
		start := at + k + len(`"const":`)
		if start < len(data) && data[start] == ' ' {
			start++
		}
		if start >= len(data) || data[start] != '"' {
			at = start
			continue
		}
		start++
		q := bytes.IndexByte(data[start:], '"')
		if q < 0 {
			break
		}
		end := start + q
		at = end
		if q < 64 || !plainString(data[start:end]) {
			// Short ones cost the decoder nothing.
			continue
		}
		if t.consts == nil {
			if _, err := rand.Read(t.nonce[:]); err != nil {
				return nil
			}
			out = make([]byte, 0, len(data)/8)
		}
		var stub [16]byte
		copy(stub[:], t.nonce[:])
		n := uint32(len(t.consts))
		stub[12], stub[13], stub[14], stub[15] = byte(n), byte(n>>8), byte(n>>16), byte(n>>24)
		out = appendSegment(out, data, copied, start)
		out = base64.StdEncoding.AppendEncode(out, stub[:])
		t.consts = append(t.consts, data[start:end])
		copied = end
	}
	if t.consts == nil {
		return nil
	}
	t.doc = appendSegment(out, data, copied, len(data))
	return &t
}

// appendSegment appends data[from:to], the text between two taken
// constants, without the whitespace between tokens: the 12-layer
// encoder's indented plan is 71.5 MB of JSON around its constants,
// 28.6 MB without it, indentation the decoder would otherwise step
// through byte by byte. from is 0 or a taken constant's closing quote
// (appended as it is); to is len(data) or just past the next one's
// opening quote.
func appendSegment(dst, data []byte, from, to int) []byte {
	if from > 0 {
		dst = append(dst, data[from])
		from++
	}
	return appendCompact(dst, data[from:to])
}

// appendCompact appends src, JSON text that starts outside a string,
// without its whitespace outside strings, except one space where two
// tokens would otherwise run together (1 2, tru e): the text decodes
// to the same values, and text the decoder refuses it still refuses.
// A string that src cuts off (the last byte, a taken constant's opening
// quote) is appended as it is.
func appendCompact(dst, src []byte) []byte {
	for i := 0; i < len(src); {
		switch c := src[i]; {
		case c == '"':
			end := stringEnd(src, i)
			dst = append(dst, src[i:end]...)
			i = end
		case jsonSpace[c]:
			j := i + 1
			for j < len(src) && jsonSpace[src[j]] {
				j++
			}
			if n := len(dst); n > 0 && j < len(src) && !jsonPunct[dst[n-1]] && !jsonPunct[src[j]] {
				dst = append(dst, ' ')
			}
			i = j
		default:
			j := i + 1
			for j < len(src) && !jsonSpace[src[j]] && src[j] != '"' {
				j++
			}
			dst = append(dst, src[i:j]...)
			i = j
		}
	}
	return dst
}

// jsonSpace is JSON's whitespace; jsonPunct the bytes that end a token
// on their own (structural characters and the quote).
var jsonSpace, jsonPunct [256]bool

func init() {
	for _, c := range []byte(" \t\n\r") {
		jsonSpace[c] = true
	}
	for _, c := range []byte(`{}[]:,"`) {
		jsonPunct[c] = true
	}
}

// plainString reports whether s, the bytes up to the first quote after
// an opening one, is a whole JSON string's contents the JSON decoder
// would give as they are, as far as the base64 decoder cannot tell: no
// escape (its quote could be escaped), and no line break, which is
// invalid in a JSON string and which the base64 decoder skips. Any other
// byte outside base64's alphabet fails the base64 decoder.
func plainString(s []byte) bool {
	return bytes.IndexByte(s, '\\') < 0 && bytes.IndexByte(s, '\n') < 0 && bytes.IndexByte(s, '\r') < 0
}

// errRestore: a stub did not map to one constant; the caller decodes the
// file itself.
var errRestore = errors.New("plan: constants do not restore")

// restore replaces each stub among vs's constants by its constant,
// decoded. A stub used twice, an index out of range or base64 the
// decoder refuses is errRestore.
func (t *taken) restore(vs []Value) error {
	used := make([]int, len(t.consts)) // 1 + the value's index
	for i := range vs {
		c := vs[i].Const
		if len(c) != 16 || !bytes.Equal(c[:12], t.nonce[:]) {
			continue
		}
		n := int(uint32(c[12]) | uint32(c[13])<<8 | uint32(c[14])<<16 | uint32(c[15])<<24)
		if n >= len(t.consts) || used[n] != 0 {
			return errRestore
		}
		used[n] = 1 + i
	}
	// Decoding is most of the work: the constants go to the host's cores.
	var failed atomic.Bool
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(t.consts)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := int(next.Add(1) - 1); n < len(t.consts); n = int(next.Add(1) - 1) {
				if used[n] == 0 {
					continue
				}
				src := t.consts[n]
				dst := make([]byte, base64.StdEncoding.DecodedLen(len(src)))
				m, err := base64.StdEncoding.Decode(dst, src)
				if err != nil {
					failed.Store(true)
					return
				}
				vs[used[n]-1].Const = dst[:m]
			}
		}()
	}
	wg.Wait()
	if failed.Load() {
		return errRestore
	}
	return nil
}

// decodeFast decodes data as decodeStrict does, with the constants taken
// out first; values returns a decoded document's values. ok is false
// when data has none to take or the stubbed document or its constants
// fail: the caller decodes data itself then, so that errors and their
// offsets are the file's.
func decodeFast[T any](data []byte, values func(*T) []Value) (v *T, ok bool) {
	t := take(data)
	if t == nil {
		return nil, false
	}
	v = new(T)
	if decodeStrict(t.doc, v) != nil || t.restore(values(v)) != nil {
		return nil, false
	}
	return v, true
}

// encodeCompact is v's compact JSON as a json.Encoder writes it, HTML
// characters not escaped, with its trailing newline.
func encodeCompact(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
