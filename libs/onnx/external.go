package onnx

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
)

// External data (onnx.proto: TensorProto.external_data, data_location
// EXTERNAL) holds a tensor's bytes in another file, beside the model:
// exporters write large models so (protobuf messages stop at 2 GiB), and
// onnx.save_model(..., save_as_external_data=True) does for any. The keys
// are "location" (required: a path relative to the model file's folder),
// "offset" and "length" (bytes; the data is the raw_data form) and
// "checksum" (SHA-1). A location may not leave the model's folder, as
// onnxruntime also requires.

// externalEntry reads one StringStringEntryProto of external_data (at
// fieldOff in the tensor's message) into f.ext.
func (f *tensorFields) externalEntry(msg []byte, fieldOff int) error {
	var key, value string
	for off := 0; off < len(msg); {
		num, typ, n := protowire.ConsumeTag(msg[off:])
		if n < 0 {
			return &FormatError{Off: fieldOff, Field: "external_data", Msg: "bad field tag: " + protowire.ParseError(n).Error()}
		}
		off += n
		if (num == 1 || num == 2) && typ == protowire.BytesType {
			v, m := protowire.ConsumeBytes(msg[off:])
			if m < 0 {
				return &FormatError{Off: fieldOff, Field: "external_data", Msg: protowire.ParseError(m).Error()}
			}
			if num == 1 {
				key = string(v)
			} else {
				value = string(v)
			}
			off += m
			continue
		}
		m := protowire.ConsumeFieldValue(num, typ, msg[off:])
		if m < 0 {
			return &FormatError{Off: fieldOff, Field: "external_data", Msg: protowire.ParseError(m).Error()}
		}
		off += m
	}
	switch key {
	case "location", "offset", "length", "checksum":
	default:
		return &FormatError{Off: fieldOff, Field: "external_data", Msg: fmt.Sprintf("unknown key %q (want location, offset, length or checksum)", key)}
	}
	if f.ext == nil {
		f.ext, f.extOff = map[string]string{}, fieldOff
	}
	if _, dup := f.ext[key]; dup {
		return &FormatError{Off: fieldOff, Field: "external_data", Msg: fmt.Sprintf("key %q given twice", key)}
	}
	f.ext[key] = value
	return nil
}

// external checks the external_data of a tensor of want bytes and
// returns it with External set.
func (f *tensorFields) external(want int64) (*Tensor, error) {
	t := f.t
	at := max(f.extOff, f.locOff)
	switch {
	case f.locOff < 0:
		return nil, &FormatError{Off: f.extOff, Field: "external_data", Msg: "given, but data_location is not EXTERNAL"}
	case f.extOff < 0:
		return nil, &FormatError{Off: f.locOff, Field: "data_location", Msg: "EXTERNAL without external_data"}
	case f.rawOff >= 0:
		return nil, &FormatError{Off: f.rawOff, Field: "raw_data", Msg: "both raw_data and external data present"}
	}
	first := -1
	var firstNum protowire.Number
	for num, off := range f.firstAt {
		if first < 0 || off < first {
			first, firstNum = off, num
		}
	}
	if first >= 0 {
		return nil, &FormatError{Off: first, Field: typedFieldNames[firstNum], Msg: "both typed data and external data present"}
	}
	loc, ok := f.ext["location"]
	if !ok || loc == "" {
		return nil, &FormatError{Off: at, Field: "external_data", Msg: "no location"}
	}
	if err := checkLocation(loc); err != nil {
		return nil, &FormatError{Off: at, Field: "external_data", Msg: err.Error()}
	}
	e := &External{Location: loc, Length: want, Checksum: f.ext["checksum"]}
	for _, k := range []string{"offset", "length"} {
		s, ok := f.ext[k]
		if !ok {
			continue
		}
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v < 0 {
			return nil, &FormatError{Off: at, Field: "external_data", Msg: fmt.Sprintf("%s %q: want a byte count", k, s)}
		}
		if k == "offset" {
			e.Offset = v
		} else if v != want {
			return nil, &FormatError{Off: at, Field: "external_data", Msg: fmt.Sprintf("length %d, want %d for %v %v", v, want, t.Dims, t.DType)}
		}
	}
	t.External = e
	return t, nil
}

// checkLocation refuses a location that is not a relative path inside
// the model's folder.
func checkLocation(loc string) error {
	if filepath.IsAbs(loc) || strings.HasPrefix(loc, "/") || filepath.VolumeName(loc) != "" {
		return fmt.Errorf("location %q is absolute: want a path relative to the model's folder", loc)
	}
	if clean := path.Clean(filepath.ToSlash(loc)); clean == "." || !fs.ValidPath(clean) {
		return fmt.Errorf("location %q is not a file inside the model's folder", loc)
	}
	return nil
}

// LoadExternal reads the data of the model's tensors that lie in other
// files (Tensor.External), whose locations are relative to dir (the
// model file's folder): initializers and tensor attributes, in If
// branches too. Each is checked against its file's size before it is
// read; symbolic links may not leave dir. An error names the tensor and
// its file.
func (m *Model) LoadExternal(dir string) error {
	var root *os.Root
	files := map[string]*os.File{}
	defer func() {
		for _, f := range files {
			f.Close()
		}
		if root != nil {
			root.Close()
		}
	}()
	return m.eachTensor(func(where string, t *Tensor) error {
		e := t.External
		if e == nil || t.Raw != nil {
			return nil
		}
		if root == nil {
			var err error
			if root, err = os.OpenRoot(dir); err != nil {
				return fmt.Errorf("%s: external data: %w", where, err)
			}
		}
		f, ok := files[e.Location]
		if !ok {
			var err error
			if f, err = root.Open(filepath.FromSlash(e.Location)); err != nil {
				return fmt.Errorf("%s: external data: %w", where, err)
			}
			files[e.Location] = f
		}
		st, err := f.Stat()
		if err != nil {
			return fmt.Errorf("%s: external data %s: %w", where, e.Location, err)
		}
		if e.Offset > st.Size() || e.Length > st.Size()-e.Offset {
			return fmt.Errorf("%s: external data %s: %d bytes at offset %d, beyond the file's %d", where, e.Location, e.Length, e.Offset, st.Size())
		}
		raw := make([]byte, e.Length)
		if _, err := f.ReadAt(raw, e.Offset); err != nil && !(errors.Is(err, io.EOF) && e.Length == 0) {
			return fmt.Errorf("%s: external data %s: %w", where, e.Location, err)
		}
		if t.DType == Bool {
			if err := checkBools(raw, "external_data", 0); err != nil {
				return fmt.Errorf("%s: external data %s: %w", where, e.Location, err)
			}
		}
		t.Raw = raw
		return nil
	})
}

// FingerprintModel returns the content hash that artifacts record for
// the model whose file holds data, m, its external data loaded:
// Fingerprint(data) when no tensor lies in another file, else the hex
// SHA-256 of data followed by each such tensor's location, offset and
// bytes, in model order, so that it changes with the weights wherever
// they lie.
func FingerprintModel(data []byte, m *Model) string {
	if !m.HasExternal() {
		return Fingerprint(data)
	}
	h := sha256.New()
	h.Write(data)
	m.eachTensor(func(_ string, t *Tensor) error {
		if e := t.External; e != nil {
			fmt.Fprintf(h, "\x00%s\x00%d\x00%d\x00", e.Location, e.Offset, len(t.Raw))
			h.Write(t.Raw)
		}
		return nil
	})
	return hex.EncodeToString(h.Sum(nil))
}

// CheckLoaded returns an error naming the first tensor whose data lies
// in another file and is not loaded (LoadExternal), nil when there is
// none.
func (m *Model) CheckLoaded() error {
	return m.eachTensor(func(where string, t *Tensor) error {
		if t.External != nil && t.Raw == nil {
			return fmt.Errorf("%s: its external data (%s) is not loaded", where, t.External.Location)
		}
		return nil
	})
}

// HasExternal reports whether a tensor of the model has its data in
// another file.
func (m *Model) HasExternal() bool {
	return m.eachTensor(func(_ string, t *Tensor) error {
		if t.External != nil {
			return errFound
		}
		return nil
	}) != nil
}

var errFound = errors.New("found")

// eachTensor calls f with each tensor of the model's graphs (the
// initializers and the tensor attributes of every node, branches
// included) and where it is, until f returns an error.
func (m *Model) eachTensor(f func(where string, t *Tensor) error) error {
	return eachGraphTensor(m.Graph, "graph", f)
}

func eachGraphTensor(g *Graph, path string, f func(string, *Tensor) error) error {
	if g == nil {
		return nil
	}
	for _, t := range g.Initializers {
		if err := f(fmt.Sprintf("%s initializer %q", path, t.Name), t); err != nil {
			return err
		}
	}
	for _, n := range g.Nodes {
		for _, a := range n.Attrs {
			where := fmt.Sprintf("%s node %q attribute %s", path, n.Name, a.Name)
			if a.T != nil {
				if err := f(where, a.T); err != nil {
					return err
				}
			}
			for _, t := range a.Tensors {
				if err := f(where, t); err != nil {
					return err
				}
			}
			if err := eachGraphTensor(a.G, where, f); err != nil {
				return err
			}
			for _, sg := range a.Graphs {
				if err := eachGraphTensor(sg, where, f); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// appendExternal appends e as external_data entries (location, then
// offset and length) and data_location EXTERNAL.
func appendExternal(b []byte, e *External) []byte {
	entry := func(k, v string) {
		var m []byte
		m = appendString(m, 1, k)
		m = appendString(m, 2, v)
		b = appendMessage(b, fieldExternalData, m)
	}
	entry("location", e.Location)
	entry("offset", strconv.FormatInt(e.Offset, 10))
	entry("length", strconv.FormatInt(e.Length, 10))
	if e.Checksum != "" {
		entry("checksum", e.Checksum)
	}
	b = protowire.AppendTag(b, fieldDataLocation, protowire.VarintType)
	return protowire.AppendVarint(b, 1)
}
