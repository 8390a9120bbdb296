// Package onnx decodes the parts of the ONNX protobuf format the toolchain
// reads: tensors (onnx.TensorProto) and, alongside, models.
//
// Decoding walks the wire format with protowire instead of generated code:
// the toolchain needs a few fields, wants every length checked against the
// input before anything is allocated, and wants errors that name the field
// and the byte offset at fault.
//
// A TensorProto, as far as this package reads it:
//
//	TensorProto {
//		dims        1  repeated int64 (packed or not)
//		data_type   2  int32 (DataType)
//		segment     3  rejected
//		float_data  4  repeated float   FLOAT, COMPLEX64
//		int32_data  5  repeated int32   INT32, INT16, INT8, UINT16, UINT8, BOOL,
//		                                FLOAT16, BFLOAT16, FLOAT8* (bits in the low bits)
//		string_data 6  rejected
//		int64_data  7  repeated int64   INT64
//		name        8  string
//		raw_data    9  bytes, little-endian elements
//		double_data 10 repeated double  DOUBLE, COMPLEX128
//		uint64_data 11 repeated uint64  UINT32, UINT64
//		doc_string  12 ignored
//		external_data 13 repeated StringStringEntryProto: location, offset,
//		                 length, checksum (in a model only)
//		data_location 14 DEFAULT or EXTERNAL (in a model only)
//	}
//
// Whatever field holds the data, Tensor.Raw holds the elements in raw_data
// form; a model's tensor whose data lies in another file (External) has
// none until Model.LoadExternal reads it.
package onnx

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"os"

	"google.golang.org/protobuf/encoding/protowire"
)

// DataType is an ONNX TensorProto.DataType value.
type DataType int32

// Element types, numbered as in onnx.proto.
const (
	Undefined      DataType = 0
	Float          DataType = 1
	Uint8          DataType = 2
	Int8           DataType = 3
	Uint16         DataType = 4
	Int16          DataType = 5
	Int32          DataType = 6
	Int64          DataType = 7
	String         DataType = 8
	Bool           DataType = 9
	Float16        DataType = 10
	Double         DataType = 11
	Uint32         DataType = 12
	Uint64         DataType = 13
	Complex64      DataType = 14
	Complex128     DataType = 15
	BFloat16       DataType = 16
	Float8E4M3FN   DataType = 17
	Float8E4M3FNUZ DataType = 18
	Float8E5M2     DataType = 19
	Float8E5M2FNUZ DataType = 20
)

var dataTypeInfo = [...]struct {
	name string
	size int // bytes per element in raw form; 0: no raw form
}{
	Undefined:      {"undefined", 0},
	Float:          {"float", 4},
	Uint8:          {"uint8", 1},
	Int8:           {"int8", 1},
	Uint16:         {"uint16", 2},
	Int16:          {"int16", 2},
	Int32:          {"int32", 4},
	Int64:          {"int64", 8},
	String:         {"string", 0},
	Bool:           {"bool", 1},
	Float16:        {"float16", 2},
	Double:         {"double", 8},
	Uint32:         {"uint32", 4},
	Uint64:         {"uint64", 8},
	Complex64:      {"complex64", 8},
	Complex128:     {"complex128", 16},
	BFloat16:       {"bfloat16", 2},
	Float8E4M3FN:   {"float8e4m3fn", 1},
	Float8E4M3FNUZ: {"float8e4m3fnuz", 1},
	Float8E5M2:     {"float8e5m2", 1},
	Float8E5M2FNUZ: {"float8e5m2fnuz", 1},
}

// String returns the ONNX name of the type in lower case ("float",
// "float16", "float8e4m3fnuz"), or "datatype(N)" for a number this package
// does not know.
func (d DataType) String() string {
	if d >= 0 && int(d) < len(dataTypeInfo) {
		return dataTypeInfo[d].name
	}
	return fmt.Sprintf("datatype(%d)", int32(d))
}

// ElemSize returns the bytes per element in raw form, or 0 for types that
// have none (undefined, string, unknown numbers).
func (d DataType) ElemSize() int {
	if d >= 0 && int(d) < len(dataTypeInfo) {
		return dataTypeInfo[d].size
	}
	return 0
}

// Tensor is a decoded TensorProto.
type Tensor struct {
	Name  string
	DType DataType
	Dims  []int64
	Raw   []byte // little-endian elements, len = NumElements * DType.ElemSize
	// External, when not nil, says where the data lies outside the model
	// file (external_data); Raw is nil until Model.LoadExternal reads it.
	External *External
}

// External is where a tensor's raw_data-form bytes lie outside the
// model file: Length bytes (the tensor's byte size) at Offset in the
// file Location, a path relative to the model file's folder.
type External struct {
	Location       string
	Offset, Length int64
	Checksum       string // the SHA-1 hex the model gives, if any (not checked)
}

// FormatError reports malformed input at a byte offset.
type FormatError struct {
	Off   int    // byte offset in the message being decoded
	Field string // field at fault, or "" for the message framing
	Msg   string
}

func (e *FormatError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("at byte 0x%x: %s", e.Off, e.Msg)
	}
	return fmt.Sprintf("field %s at byte 0x%x: %s", e.Field, e.Off, e.Msg)
}

// TensorProto field numbers.
const (
	fieldDims         = 1
	fieldDataType     = 2
	fieldSegment      = 3
	fieldFloatData    = 4
	fieldInt32Data    = 5
	fieldStringData   = 6
	fieldInt64Data    = 7
	fieldName         = 8
	fieldRawData      = 9
	fieldDoubleData   = 10
	fieldUint64Data   = 11
	fieldExternalData = 13
	fieldDataLocation = 14
)

var typedFieldNames = map[protowire.Number]string{
	fieldFloatData:  "float_data",
	fieldInt32Data:  "int32_data",
	fieldInt64Data:  "int64_data",
	fieldDoubleData: "double_data",
	fieldUint64Data: "uint64_data",
}

// typedField returns the typed data field that carries elements of d, the
// number of field values per element, and the element's width in bits
// when it travels in a wider field.
func typedField(d DataType) (num protowire.Number, perElem int, width uint) {
	switch d {
	case Float:
		return fieldFloatData, 1, 32
	case Complex64:
		return fieldFloatData, 2, 32
	case Int32:
		return fieldInt32Data, 1, 32
	case Int16, Uint16, Float16, BFloat16:
		return fieldInt32Data, 1, 16
	case Int8, Uint8, Bool, Float8E4M3FN, Float8E4M3FNUZ, Float8E5M2, Float8E5M2FNUZ:
		return fieldInt32Data, 1, 8
	case Int64:
		return fieldInt64Data, 1, 64
	case Double:
		return fieldDoubleData, 1, 64
	case Complex128:
		return fieldDoubleData, 2, 64
	case Uint32:
		return fieldUint64Data, 1, 32
	case Uint64:
		return fieldUint64Data, 1, 64
	}
	return 0, 0, 0
}

// span is one occurrence of a repeated field: either a packed payload or a
// single unpacked value.
type span struct {
	off    int // offset of the payload (packed) or value in the message
	packed bool
	data   []byte // packed payload
	value  uint64 // unpacked value (fixed32, fixed64 or varint bits)
}

// ReadTensor decodes a serialized TensorProto. A tensor given by
// raw_data shares data's bytes (capped, so that appending to Raw copies):
// the caller must not change data while the tensor is in use.
func ReadTensor(data []byte) (*Tensor, error) {
	t, err := readTensor(data)
	if err == nil && t.External != nil {
		return nil, &FormatError{Off: 0, Field: "data_location", Msg: "external data outside a model (a tensor file holds its data)"}
	}
	return t, err
}

// readTensor is ReadTensor for a model's tensor, whose data may lie in
// another file (Tensor.External).
func readTensor(data []byte) (*Tensor, error) {
	f := &tensorFields{t: &Tensor{}, rawOff: -1, extOff: -1, locOff: -1, typed: map[protowire.Number][]span{}, firstAt: map[protowire.Number]int{}}
	for off := 0; off < len(data); {
		num, typ, n := protowire.ConsumeTag(data[off:])
		if n < 0 {
			return nil, &FormatError{Off: off, Msg: "bad field tag: " + protowire.ParseError(n).Error()}
		}
		n, err := f.consume(num, typ, data, off, off+n)
		if err != nil {
			return nil, err
		}
		off = n
	}
	return f.tensor(len(data))
}

// tensorFields is a TensorProto's fields as ReadTensor scans them: the
// tensor's dims, type and name, its raw_data (at rawOff, -1: none) and
// its typed data fields' spans, with the offset of each one's first.
type tensorFields struct {
	t       *Tensor
	rawOff  int
	raw     []byte
	typed   map[protowire.Number][]span
	firstAt map[protowire.Number]int
	// ext holds the external_data entries by key (the first at extOff,
	// -1: none); locOff is where data_location says EXTERNAL (-1: it
	// does not).
	ext            map[string]string
	extOff, locOff int
}

// consume reads the field with number num and wire type typ whose tag
// is at fieldOff in data and its value at off, and returns the offset
// after it.
func (f *tensorFields) consume(num protowire.Number, typ protowire.Type, data []byte, fieldOff, off int) (int, error) {
	t, rest := f.t, data[off:]
	switch num {
	case fieldDims:
		vals, n, err := consumeVarints(rest, typ, off, "dims")
		if err != nil {
			return 0, err
		}
		for _, v := range vals {
			d := int64(v)
			if d < 0 {
				return 0, &FormatError{Off: fieldOff, Field: "dims", Msg: fmt.Sprintf("negative dimension %d", d)}
			}
			t.Dims = append(t.Dims, d)
		}
		return off + n, nil
	case fieldDataType:
		if typ != protowire.VarintType {
			return 0, wireTypeError(fieldOff, "data_type", typ)
		}
		v, n := protowire.ConsumeVarint(rest)
		if n < 0 {
			return 0, &FormatError{Off: off, Field: "data_type", Msg: protowire.ParseError(n).Error()}
		}
		t.DType = DataType(int32(v))
		return off + n, nil
	case fieldName:
		if typ != protowire.BytesType {
			return 0, wireTypeError(fieldOff, "name", typ)
		}
		v, n := protowire.ConsumeBytes(rest)
		if n < 0 {
			return 0, &FormatError{Off: off, Field: "name", Msg: protowire.ParseError(n).Error()}
		}
		t.Name = string(v)
		return off + n, nil
	case fieldRawData:
		if typ != protowire.BytesType {
			return 0, wireTypeError(fieldOff, "raw_data", typ)
		}
		v, n := protowire.ConsumeBytes(rest)
		if n < 0 {
			return 0, &FormatError{Off: off, Field: "raw_data", Msg: protowire.ParseError(n).Error()}
		}
		f.raw, f.rawOff = v, fieldOff
		return off + n, nil
	case fieldFloatData, fieldInt32Data, fieldInt64Data, fieldDoubleData, fieldUint64Data:
		sp, n, err := consumeSpan(rest, num, typ, off)
		if err != nil {
			return 0, err
		}
		if _, ok := f.firstAt[num]; !ok {
			f.firstAt[num] = fieldOff
		}
		f.typed[num] = append(f.typed[num], sp)
		return off + n, nil
	case fieldSegment:
		return 0, &FormatError{Off: fieldOff, Field: "segment", Msg: "segmented tensors are not supported"}
	case fieldStringData:
		return 0, &FormatError{Off: fieldOff, Field: "string_data", Msg: "string tensors are not supported"}
	case fieldExternalData:
		if typ != protowire.BytesType {
			return 0, wireTypeError(fieldOff, "external_data", typ)
		}
		v, n := protowire.ConsumeBytes(rest)
		if n < 0 {
			return 0, &FormatError{Off: off, Field: "external_data", Msg: protowire.ParseError(n).Error()}
		}
		if err := f.externalEntry(v, fieldOff); err != nil {
			return 0, err
		}
		return off + n, nil
	case fieldDataLocation:
		if typ != protowire.VarintType {
			return 0, wireTypeError(fieldOff, "data_location", typ)
		}
		v, n := protowire.ConsumeVarint(rest)
		if n < 0 {
			return 0, &FormatError{Off: off, Field: "data_location", Msg: protowire.ParseError(n).Error()}
		}
		switch v {
		case 0:
			f.locOff = -1
		case 1:
			f.locOff = fieldOff
		default:
			return 0, &FormatError{Off: fieldOff, Field: "data_location", Msg: fmt.Sprintf("unknown location %d (want DEFAULT 0 or EXTERNAL 1)", v)}
		}
		return off + n, nil
	}
	n := protowire.ConsumeFieldValue(num, typ, rest)
	if n < 0 {
		return 0, &FormatError{Off: off, Field: fmt.Sprintf("%d", int32(num)), Msg: protowire.ParseError(n).Error()}
	}
	return off + n, nil
}

// tensor checks the scanned fields of a message of dataLen bytes and
// returns the tensor with its data, or with where it lies (external).
func (f *tensorFields) tensor(dataLen int) (*Tensor, error) {
	t, raw, rawOff := f.t, f.raw, f.rawOff
	size := t.DType.ElemSize()
	if size == 0 {
		return nil, &FormatError{Off: 0, Field: "data_type", Msg: fmt.Sprintf("unsupported element type %v", t.DType)}
	}
	count, ok := elemCount(t.Dims)
	if !ok {
		return nil, &FormatError{Off: 0, Field: "dims", Msg: fmt.Sprintf("element count of %v overflows", t.Dims)}
	}
	want, ok := mulInt(count, int64(size))
	if !ok {
		return nil, &FormatError{Off: 0, Field: "dims", Msg: fmt.Sprintf("byte size of %v %v overflows", t.Dims, t.DType)}
	}
	if f.locOff >= 0 || f.extOff >= 0 {
		return f.external(want)
	}
	dataField, perElem, width := typedField(t.DType)
	for num, at := range f.firstAt {
		if num != dataField {
			return nil, &FormatError{Off: at, Field: typedFieldNames[num], Msg: fmt.Sprintf("field does not hold %v elements", t.DType)}
		}
		if rawOff >= 0 {
			return nil, &FormatError{Off: at, Field: typedFieldNames[num], Msg: "both raw_data and typed data present"}
		}
	}
	switch {
	case rawOff >= 0:
		if int64(len(raw)) != want {
			return nil, &FormatError{Off: rawOff, Field: "raw_data", Msg: fmt.Sprintf("%d bytes, want %d for %d %v elements", len(raw), want, count, t.DType)}
		}
		t.Raw = raw[:len(raw):len(raw)] // shared: a model's weights are most of its file
	case len(f.typed[dataField]) > 0:
		name := typedFieldNames[dataField]
		spans := f.typed[dataField]
		n := countValues(spans, dataField)
		if n != count*int64(perElem) {
			return nil, &FormatError{Off: f.firstAt[dataField], Field: name, Msg: fmt.Sprintf("%d values, want %d for %d %v elements", n, count*int64(perElem), count, t.DType)}
		}
		// n values each came from at least one input byte, so want is
		// bounded by a small multiple of the message's length.
		raw, err := typedToRaw(spans, dataField, name, width, int(want))
		if err != nil {
			return nil, err
		}
		t.Raw = raw
	default:
		if count != 0 {
			return nil, &FormatError{Off: dataLen, Field: "raw_data", Msg: fmt.Sprintf("no data for %d %v elements", count, t.DType)}
		}
		t.Raw = []byte{}
	}
	if t.DType == Bool {
		field, off := "raw_data", rawOff
		if rawOff < 0 {
			field, off = typedFieldNames[dataField], f.firstAt[dataField]
		}
		if err := checkBools(t.Raw, field, off); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// checkBools checks that bool elements are 0 or 1; field and off locate
// the data for the error.
func checkBools(raw []byte, field string, off int) error {
	for i, b := range raw {
		if b > 1 {
			return &FormatError{Off: off, Field: field, Msg: fmt.Sprintf("bool element %d is %d, want 0 or 1", i, b)}
		}
	}
	return nil
}

// ReadTensorFile reads and decodes a serialized TensorProto file.
func ReadTensorFile(path string) (*Tensor, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	t, err := ReadTensor(data)
	if err != nil {
		return nil, fmt.Errorf("tensor %s: %w", path, err)
	}
	return t, nil
}

func wireTypeError(off int, field string, typ protowire.Type) error {
	return &FormatError{Off: off, Field: field, Msg: fmt.Sprintf("unexpected wire type %d", typ)}
}

// consumeVarints reads one occurrence of a repeated varint field, packed
// or not. off is the offset of b in the message.
func consumeVarints(b []byte, typ protowire.Type, off int, field string) ([]uint64, int, error) {
	switch typ {
	case protowire.VarintType:
		v, n := protowire.ConsumeVarint(b)
		if n < 0 {
			return nil, 0, &FormatError{Off: off, Field: field, Msg: protowire.ParseError(n).Error()}
		}
		return []uint64{v}, n, nil
	case protowire.BytesType:
		payload, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return nil, 0, &FormatError{Off: off, Field: field, Msg: protowire.ParseError(n).Error()}
		}
		var vals []uint64
		for p := 0; p < len(payload); {
			v, m := protowire.ConsumeVarint(payload[p:])
			if m < 0 {
				return nil, 0, &FormatError{Off: off + n - len(payload) + p, Field: field, Msg: protowire.ParseError(m).Error()}
			}
			vals = append(vals, v)
			p += m
		}
		return vals, n, nil
	}
	return nil, 0, wireTypeError(off, field, typ)
}

// scalarWireType is the unpacked wire type of each typed data field.
func scalarWireType(num protowire.Number) protowire.Type {
	switch num {
	case fieldFloatData:
		return protowire.Fixed32Type
	case fieldDoubleData:
		return protowire.Fixed64Type
	}
	return protowire.VarintType
}

func consumeSpan(b []byte, num protowire.Number, typ protowire.Type, off int) (span, int, error) {
	name := typedFieldNames[num]
	if typ == protowire.BytesType {
		payload, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return span{}, 0, &FormatError{Off: off, Field: name, Msg: protowire.ParseError(n).Error()}
		}
		payloadOff := off + n - len(payload)
		switch scalarWireType(num) {
		case protowire.Fixed32Type:
			if len(payload)%4 != 0 {
				return span{}, 0, &FormatError{Off: payloadOff, Field: name, Msg: fmt.Sprintf("packed length %d is not a multiple of 4", len(payload))}
			}
		case protowire.Fixed64Type:
			if len(payload)%8 != 0 {
				return span{}, 0, &FormatError{Off: payloadOff, Field: name, Msg: fmt.Sprintf("packed length %d is not a multiple of 8", len(payload))}
			}
		default:
			if len(payload) > 0 && payload[len(payload)-1]&0x80 != 0 {
				return span{}, 0, &FormatError{Off: payloadOff + len(payload) - 1, Field: name, Msg: "packed varints end inside a value"}
			}
		}
		return span{off: payloadOff, packed: true, data: payload}, n, nil
	}
	if typ != scalarWireType(num) {
		return span{}, 0, wireTypeError(off, name, typ)
	}
	var v uint64
	var n int
	switch typ {
	case protowire.Fixed32Type:
		var v32 uint32
		v32, n = protowire.ConsumeFixed32(b)
		v = uint64(v32)
	case protowire.Fixed64Type:
		v, n = protowire.ConsumeFixed64(b)
	default:
		v, n = protowire.ConsumeVarint(b)
	}
	if n < 0 {
		return span{}, 0, &FormatError{Off: off, Field: name, Msg: protowire.ParseError(n).Error()}
	}
	return span{off: off, value: v}, n, nil
}

// countValues counts the values in spans without decoding them.
func countValues(spans []span, num protowire.Number) int64 {
	var n int64
	for _, sp := range spans {
		if !sp.packed {
			n++
			continue
		}
		switch scalarWireType(num) {
		case protowire.Fixed32Type:
			n += int64(len(sp.data) / 4)
		case protowire.Fixed64Type:
			n += int64(len(sp.data) / 8)
		default:
			for _, c := range sp.data {
				if c&0x80 == 0 {
					n++
				}
			}
		}
	}
	return n
}

// typedToRaw converts typed field values into raw little-endian elements
// of width bits each, checking that every value fits.
func typedToRaw(spans []span, num protowire.Number, name string, width uint, size int) ([]byte, error) {
	raw := make([]byte, 0, size)
	put := func(v uint64, off int) error {
		switch width {
		case 64:
			raw = binary.LittleEndian.AppendUint64(raw, v)
			return nil
		case 32:
			if num == fieldUint64Data {
				if v > math.MaxUint32 {
					return &FormatError{Off: off, Field: name, Msg: fmt.Sprintf("value %d does not fit in 32 bits", v)}
				}
				raw = binary.LittleEndian.AppendUint32(raw, uint32(v))
				return nil
			}
			if num == fieldFloatData {
				raw = binary.LittleEndian.AppendUint32(raw, uint32(v))
				return nil
			}
		}
		// int32_data travels sign-extended to 64 bits; accept both the
		// signed and the unsigned reading of the element's bits.
		s := int64(v)
		if s < -(1<<(width-1)) || s >= 1<<width {
			return &FormatError{Off: off, Field: name, Msg: fmt.Sprintf("value %d does not fit in %d bits", s, width)}
		}
		switch width {
		case 32:
			raw = binary.LittleEndian.AppendUint32(raw, uint32(s))
		case 16:
			raw = binary.LittleEndian.AppendUint16(raw, uint16(s))
		default:
			raw = append(raw, uint8(s))
		}
		return nil
	}
	for _, sp := range spans {
		if !sp.packed {
			if err := put(sp.value, sp.off); err != nil {
				return nil, err
			}
			continue
		}
		switch scalarWireType(num) {
		case protowire.Fixed32Type:
			for p := 0; p < len(sp.data); p += 4 {
				if err := put(uint64(binary.LittleEndian.Uint32(sp.data[p:])), sp.off+p); err != nil {
					return nil, err
				}
			}
		case protowire.Fixed64Type:
			for p := 0; p < len(sp.data); p += 8 {
				if err := put(binary.LittleEndian.Uint64(sp.data[p:]), sp.off+p); err != nil {
					return nil, err
				}
			}
		default:
			for p := 0; p < len(sp.data); {
				v, m := protowire.ConsumeVarint(sp.data[p:])
				if m < 0 {
					return nil, &FormatError{Off: sp.off + p, Field: name, Msg: protowire.ParseError(m).Error()}
				}
				if err := put(v, sp.off+p); err != nil {
					return nil, err
				}
				p += m
			}
		}
	}
	if len(raw) != size {
		// countValues and the decoding loop disagree only on bad input
		// that ConsumeVarint rejects above; keep the check anyway.
		return nil, &FormatError{Off: spans[0].off, Field: name, Msg: fmt.Sprintf("decoded %d bytes, want %d", len(raw), size)}
	}
	return raw, nil
}

// elemCount returns the product of dims (1 for a scalar). A zero
// dimension makes the count zero whatever the others are.
func elemCount(dims []int64) (int64, bool) {
	for _, d := range dims {
		if d == 0 {
			return 0, true
		}
	}
	n := int64(1)
	for _, d := range dims {
		var ok bool
		if n, ok = mulInt(n, d); !ok {
			return 0, false
		}
	}
	return n, true
}

// mulInt multiplies non-negative a and b, reporting overflow of int64 and
// of int on this platform.
func mulInt(a, b int64) (int64, bool) {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi != 0 || lo > math.MaxInt64 || lo > uint64(math.MaxInt) {
		return 0, false
	}
	return int64(lo), true
}

// NumElements returns the product of the dims (1 for a scalar), or 0 if
// it overflows (ReadTensor never returns such a tensor).
func (t *Tensor) NumElements() int64 {
	n, _ := elemCount(t.Dims)
	return n
}

// EncodeTensor serializes t as a TensorProto with raw_data: fields in
// number order, dims packed, the same bytes onnx and onnxruntime write for
// test data. A tensor with External set is written with its external_data
// and data_location instead (its data is the caller's to write).
func EncodeTensor(t *Tensor) []byte {
	var b []byte
	if len(t.Dims) > 0 {
		var dims []byte
		for _, d := range t.Dims {
			dims = protowire.AppendVarint(dims, uint64(d))
		}
		b = protowire.AppendTag(b, fieldDims, protowire.BytesType)
		b = protowire.AppendBytes(b, dims)
	}
	b = protowire.AppendTag(b, fieldDataType, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(int64(t.DType)))
	if t.Name != "" {
		b = protowire.AppendTag(b, fieldName, protowire.BytesType)
		b = protowire.AppendString(b, t.Name)
	}
	if e := t.External; e != nil {
		return appendExternal(b, e)
	}
	b = protowire.AppendTag(b, fieldRawData, protowire.BytesType)
	b = protowire.AppendBytes(b, t.Raw)
	return b
}
