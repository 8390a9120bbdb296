package onnx

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protowire"

	"ipu.local/libs/repodata"
)

// conformanceDir finds the conformance data: $IPU_CONFORMANCE, the
// checkout's sibling shared/conformance, or the committed copy under
// testdata/conformance (libs/repodata).
func conformanceDir(tb testing.TB) string {
	tb.Helper()
	r, err := repodata.Conformance()
	if err != nil {
		tb.Fatal(err)
	}
	return r.Dir
}

func conformanceTensors(tb testing.TB) []string {
	tb.Helper()
	files, err := filepath.Glob(filepath.Join(conformanceDir(tb), "*", "*", "test_data_set_*", "*.pb"))
	if err != nil {
		tb.Fatal(err)
	}
	if len(files) == 0 {
		tb.Skip("no conformance tensors")
	}
	sort.Strings(files)
	return files
}

func TestReadConformanceTensors(t *testing.T) {
	for _, path := range conformanceTensors(t) {
		rel, _ := filepath.Rel(conformanceDir(t), path)
		t.Run(rel, func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			tn, err := ReadTensor(data)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := int64(len(tn.Raw)), tn.NumElements()*int64(tn.DType.ElemSize()); got != want {
				t.Errorf("%d raw bytes, want %d for dims %v %v", got, want, tn.Dims, tn.DType)
			}
			// onnx writes test data in raw_data form with packed dims, in
			// field order: encoding gives the same bytes back.
			if enc := EncodeTensor(tn); !bytes.Equal(enc, data) {
				back, err := ReadTensor(enc)
				if err != nil {
					t.Fatalf("re-read: %v", err)
				}
				if d := cmp.Diff(tn, back); d != "" {
					t.Errorf("round trip mismatch (-want +got):\n%s", d)
				}
				t.Logf("re-encoding differs from the file (%d vs %d bytes) but decodes the same", len(enc), len(data))
			}
		})
	}
}

// proto builds a TensorProto field by field.
type proto []byte

func (p proto) varint(num protowire.Number, v uint64) proto {
	p = protowire.AppendTag(p, num, protowire.VarintType)
	return protowire.AppendVarint(p, v)
}

func (p proto) bytes(num protowire.Number, v []byte) proto {
	p = protowire.AppendTag(p, num, protowire.BytesType)
	return protowire.AppendBytes(p, v)
}

func (p proto) fixed32(num protowire.Number, v uint32) proto {
	p = protowire.AppendTag(p, num, protowire.Fixed32Type)
	return protowire.AppendFixed32(p, v)
}

func (p proto) fixed64(num protowire.Number, v uint64) proto {
	p = protowire.AppendTag(p, num, protowire.Fixed64Type)
	return protowire.AppendFixed64(p, v)
}

func packedVarints(vs ...int64) []byte {
	var b []byte
	for _, v := range vs {
		b = protowire.AppendVarint(b, uint64(v))
	}
	return b
}

func le32(vs ...uint32) []byte {
	var b []byte
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint32(b, v)
	}
	return b
}

func le64(vs ...uint64) []byte {
	var b []byte
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint64(b, v)
	}
	return b
}

func TestReadTensorFields(t *testing.T) {
	f32 := func(v float32) uint32 { return math.Float32bits(v) }
	tests := []struct {
		name string
		in   proto
		want *Tensor
	}{
		{
			name: "raw float packed dims",
			in:   proto{}.bytes(1, packedVarints(2, 1)).varint(2, 1).bytes(8, []byte("x")).bytes(9, le32(f32(1), f32(-2))),
			want: &Tensor{Name: "x", DType: Float, Dims: []int64{2, 1}, Raw: le32(f32(1), f32(-2))},
		},
		{
			name: "unpacked dims and float_data, fields out of order",
			in:   proto{}.fixed32(4, f32(1.5)).varint(1, 3).fixed32(4, f32(2.5)).fixed32(4, f32(-0)).varint(2, 1),
			want: &Tensor{DType: Float, Dims: []int64{3}, Raw: le32(f32(1.5), f32(2.5), 0)},
		},
		{
			name: "packed float_data in two runs",
			in:   proto{}.varint(1, 3).varint(2, 1).bytes(4, le32(f32(1))).bytes(4, le32(f32(2), f32(3))),
			want: &Tensor{DType: Float, Dims: []int64{3}, Raw: le32(f32(1), f32(2), f32(3))},
		},
		{
			name: "scalar",
			in:   proto{}.varint(2, 7).bytes(7, packedVarints(-5)),
			want: &Tensor{DType: Int64, Raw: le64(uint64(0xFFFFFFFFFFFFFFFB))},
		},
		{
			name: "empty tensor",
			in:   proto{}.bytes(1, packedVarints(0, 4)).varint(2, 1),
			want: &Tensor{DType: Float, Dims: []int64{0, 4}, Raw: []byte{}},
		},
		{
			name: "zero dim after huge ones",
			in:   proto{}.bytes(1, packedVarints(1<<62, 1<<62, 0)).varint(2, 1),
			want: &Tensor{DType: Float, Dims: []int64{1 << 62, 1 << 62, 0}, Raw: []byte{}},
		},
		{
			name: "float16 in int32_data",
			in:   proto{}.varint(1, 2).varint(2, 10).bytes(5, packedVarints(0x3C00, 0xFC00)),
			want: &Tensor{DType: Float16, Dims: []int64{2}, Raw: []byte{0x00, 0x3C, 0x00, 0xFC}},
		},
		{
			name: "int8 negative sign-extended",
			in:   proto{}.varint(1, 3).varint(2, 3).bytes(5, packedVarints(-128, 127, -1)),
			want: &Tensor{DType: Int8, Dims: []int64{3}, Raw: []byte{0x80, 0x7F, 0xFF}},
		},
		{
			name: "uint8, bool, fp8 unpacked",
			in:   proto{}.varint(1, 2).varint(2, 18).varint(5, 0x80).varint(5, 0x7F),
			want: &Tensor{DType: Float8E4M3FNUZ, Dims: []int64{2}, Raw: []byte{0x80, 0x7F}},
		},
		{
			name: "int16",
			in:   proto{}.varint(1, 2).varint(2, 5).bytes(5, packedVarints(-2, 0x7FFF)),
			want: &Tensor{DType: Int16, Dims: []int64{2}, Raw: []byte{0xFE, 0xFF, 0xFF, 0x7F}},
		},
		{
			name: "int32",
			in:   proto{}.varint(1, 2).varint(2, 6).bytes(5, packedVarints(math.MinInt32, 7)),
			want: &Tensor{DType: Int32, Dims: []int64{2}, Raw: le32(0x80000000, 7)},
		},
		{
			name: "double packed and unpacked",
			in:   proto{}.varint(1, 2).varint(2, 11).bytes(10, le64(math.Float64bits(0.5))).fixed64(10, math.Float64bits(-3)),
			want: &Tensor{DType: Double, Dims: []int64{2}, Raw: le64(math.Float64bits(0.5), math.Float64bits(-3))},
		},
		{
			name: "uint32 and uint64 in uint64_data",
			in:   proto{}.varint(1, 1).varint(2, 12).varint(11, math.MaxUint32),
			want: &Tensor{DType: Uint32, Dims: []int64{1}, Raw: le32(math.MaxUint32)},
		},
		{
			name: "uint64",
			in:   proto{}.varint(1, 1).varint(2, 13).bytes(11, packedVarints(-1)),
			want: &Tensor{DType: Uint64, Dims: []int64{1}, Raw: le64(math.MaxUint64)},
		},
		{
			name: "complex64 takes two floats per element",
			in:   proto{}.varint(1, 1).varint(2, 14).bytes(4, le32(f32(1), f32(2))),
			want: &Tensor{DType: Complex64, Dims: []int64{1}, Raw: le32(f32(1), f32(2))},
		},
		{
			name: "unknown fields and doc_string skipped",
			in:   proto{}.varint(2, 9).bytes(12, []byte("doc")).varint(99, 1).bytes(9, []byte{1}).varint(14, 0),
			want: &Tensor{DType: Bool, Raw: []byte{1}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReadTensor(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("mismatch (-want +got):\n%s", d)
			}
			back, err := ReadTensor(EncodeTensor(got))
			if err != nil {
				t.Fatalf("re-read: %v", err)
			}
			if d := cmp.Diff(got, back); d != "" {
				t.Errorf("round trip mismatch (-want +got):\n%s", d)
			}
		})
	}
}

func TestReadTensorErrors(t *testing.T) {
	tests := []struct {
		name string
		in   proto
		want string
	}{
		{"empty message", proto{}, "field data_type at byte 0x0: unsupported element type undefined"},
		{"string type", proto{}.varint(2, 8), "unsupported element type string"},
		{"unknown type", proto{}.varint(2, 99), "unsupported element type datatype(99)"},
		{"negative dim", proto{}.varint(2, 1).bytes(1, packedVarints(2, -1)), "field dims at byte 0x2: negative dimension -1"},
		{"count overflow", proto{}.varint(2, 1).bytes(1, packedVarints(1<<40, 1<<40)), "field dims at byte 0x0: element count of [1099511627776 1099511627776] overflows"},
		{"byte size overflow", proto{}.varint(2, 11).bytes(1, packedVarints(1<<61)), "byte size of [2305843009213693952] double overflows"},
		{"raw too short", proto{}.varint(2, 1).varint(1, 2).bytes(9, []byte{1, 2, 3, 4}), "field raw_data at byte 0x4: 4 bytes, want 8 for 2 float elements"},
		{"typed count", proto{}.varint(2, 1).varint(1, 2).fixed32(4, 0), "field float_data at byte 0x4: 1 values, want 2 for 2 float elements"},
		{"no data", proto{}.varint(2, 1).varint(1, 2), "field raw_data at byte 0x4: no data for 2 float elements"},
		{"wrong typed field", proto{}.varint(2, 7).fixed32(4, 0), "field float_data at byte 0x2: field does not hold int64 elements"},
		{"raw and typed", proto{}.varint(2, 1).bytes(9, le32(0)).fixed32(4, 0), "both raw_data and typed data present"},
		{"int8 out of range", proto{}.varint(2, 3).varint(1, 2).varint(5, 200).varint(5, 300), "field int32_data at byte 0x8: value 300 does not fit in 8 bits"},
		{"uint32 out of range", proto{}.varint(2, 12).varint(11, 1<<32), "value 4294967296 does not fit in 32 bits"},
		{"segment", proto{}.bytes(3, nil), "field segment at byte 0x0: segmented tensors are not supported"},
		{"string data", proto{}.bytes(6, []byte("a")), "string tensors are not supported"},
		{"external data key", proto{}.bytes(13, nil), `field external_data at byte 0x0: unknown key "" (want location, offset, length or checksum)`},
		{"data location without entries", proto{}.varint(2, 1).varint(14, 1), "field data_location at byte 0x2: EXTERNAL without external_data"},
		{"external outside a model", proto{}.varint(2, 1).bytes(13, entry("location", "w.bin")).varint(14, 1), "field data_location at byte 0x0: external data outside a model (a tensor file holds its data)"},
		{"unknown data location", proto{}.varint(14, 2), "field data_location at byte 0x0: unknown location 2 (want DEFAULT 0 or EXTERNAL 1)"},
		{"bad tag", proto{0x80}, "at byte 0x0: bad field tag"},
		{"truncated raw", proto{}.varint(2, 1).bytes(9, le32(0))[:5], "field raw_data at byte 0x3: unexpected EOF"},
		{"data_type wire type", proto{}.fixed32(2, 1), "field data_type at byte 0x0: unexpected wire type 5"},
		{"name wire type", proto{}.varint(8, 1), "field name at byte 0x0: unexpected wire type 0"},
		{"float_data wire type", proto{}.varint(4, 1), "field float_data at byte 0x1: unexpected wire type 0"},
		{"packed float length", proto{}.varint(2, 1).bytes(4, []byte{1, 2, 3}), "field float_data at byte 0x4: packed length 3 is not a multiple of 4"},
		{"packed varint cut", proto{}.varint(2, 3).bytes(5, []byte{0x01, 0x80}), "field int32_data at byte 0x5: packed varints end inside a value"},
		{"dims varint cut", proto{}.bytes(1, []byte{0x80}), "field dims at byte 0x2: unexpected EOF"},
		{"unknown field cut", proto{}.varint(2, 1)[:2].bytes(99, []byte{1, 2})[:5], "field 99 at byte 0x4: unexpected EOF"},
		{"bool raw of 2", proto{}.varint(2, 9).varint(1, 2).bytes(9, []byte{1, 2}), "field raw_data at byte 0x4: bool element 1 is 2, want 0 or 1"},
		{"bool typed of 2", proto{}.varint(2, 9).varint(5, 2), "field int32_data at byte 0x2: bool element 0 is 2, want 0 or 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReadTensor(tt.in)
			if err == nil {
				t.Fatalf("no error, got %+v", got)
			}
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Errorf("error %T is not a *FormatError", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestReadTensorFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.pb")
	bad := filepath.Join(dir, "bad.pb")
	want := NewFloat32("x", []int64{2}, []float32{1, 2})
	if err := os.WriteFile(good, EncodeTensor(want), 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte{0x10, 0x01, 0x0a}, 0o666); err != nil {
		t.Fatal(err)
	}
	got, err := ReadTensorFile(good)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("mismatch (-want +got):\n%s", d)
	}
	if _, err := ReadTensorFile(bad); err == nil || !strings.Contains(err.Error(), "bad.pb: field dims at byte 0x3") {
		t.Errorf("error %v, want it to name the file and field", err)
	}
	if _, err := ReadTensorFile(filepath.Join(dir, "missing.pb")); err == nil {
		t.Errorf("no error for a missing file")
	}
}

func TestDataTypeNames(t *testing.T) {
	tests := []struct {
		d    DataType
		name string
		size int
	}{
		{Float, "float", 4}, {Uint8, "uint8", 1}, {Int8, "int8", 1}, {Uint16, "uint16", 2},
		{Int16, "int16", 2}, {Int32, "int32", 4}, {Int64, "int64", 8}, {String, "string", 0},
		{Bool, "bool", 1}, {Float16, "float16", 2}, {Double, "double", 8}, {Uint32, "uint32", 4},
		{Uint64, "uint64", 8}, {Complex64, "complex64", 8}, {Complex128, "complex128", 16},
		{BFloat16, "bfloat16", 2}, {Float8E4M3FN, "float8e4m3fn", 1}, {Float8E4M3FNUZ, "float8e4m3fnuz", 1},
		{Float8E5M2, "float8e5m2", 1}, {Float8E5M2FNUZ, "float8e5m2fnuz", 1},
		{Undefined, "undefined", 0}, {21, "datatype(21)", 0}, {-1, "datatype(-1)", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.d.String(); got != tt.name {
				t.Errorf("String() = %q, want %q", got, tt.name)
			}
			if got := tt.d.ElemSize(); got != tt.size {
				t.Errorf("ElemSize() = %d, want %d", got, tt.size)
			}
		})
	}
}

func TestAccessors(t *testing.T) {
	f := NewFloat32("f", []int64{3}, []float32{1, -2, 0.5})
	got, err := f.Float32s()
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]float32{1, -2, 0.5}, got); d != "" {
		t.Errorf("Float32s mismatch (-want +got):\n%s", d)
	}
	if _, err := f.Int64s(); err == nil || err.Error() != `tensor "f": element type float, want int64` {
		t.Errorf("Int64s on float: %v", err)
	}
	i64 := &Tensor{Name: "i", DType: Int64, Dims: []int64{2}, Raw: le64(5, math.MaxUint64)}
	if v, err := i64.Int64s(); err != nil || !cmp.Equal(v, []int64{5, -1}) {
		t.Errorf("Int64s = %v, %v", v, err)
	}
	i32 := &Tensor{DType: Int32, Raw: le32(0xFFFFFFFE)}
	if v, err := i32.Int32s(); err != nil || !cmp.Equal(v, []int32{-2}) {
		t.Errorf("Int32s = %v, %v", v, err)
	}
	d := &Tensor{DType: Double, Raw: le64(math.Float64bits(2.5))}
	if v, err := d.Float64s(); err != nil || !cmp.Equal(v, []float64{2.5}) {
		t.Errorf("Float64s = %v, %v", v, err)
	}
	h := &Tensor{DType: Float16, Raw: []byte{0x00, 0x3C}}
	if v, err := h.Float16Bits(); err != nil || !cmp.Equal(v, []uint16{0x3C00}) {
		t.Errorf("Float16Bits = %v, %v", v, err)
	}
	if v, err := NewInt64("i", []int64{2}, []int64{-1, 1 << 40}).Int64s(); err != nil || !cmp.Equal(v, []int64{-1, 1 << 40}) {
		t.Errorf("NewInt64 = %v, %v", v, err)
	}
	if v, err := NewInt32("i", []int64{2}, []int32{-1, 7}).Int32s(); err != nil || !cmp.Equal(v, []int32{-1, 7}) {
		t.Errorf("NewInt32 = %v, %v", v, err)
	}
	b := NewBool("b", []int64{3}, []bool{true, false, true})
	if v, err := b.Bools(); err != nil || !cmp.Equal(v, []bool{true, false, true}) || !bytes.Equal(b.Raw, []byte{1, 0, 1}) {
		t.Errorf("NewBool = %v, %v", v, err)
	}
	if back, err := ReadTensor(EncodeTensor(b)); err != nil || !cmp.Equal(back, b) {
		t.Errorf("bool round trip = %+v, %v", back, err)
	}
	odd := &Tensor{DType: Float, Raw: []byte{1, 2, 3}}
	if _, err := odd.Float32s(); err == nil {
		t.Errorf("Float32s accepted 3 raw bytes")
	}
}

func FuzzReadTensor(f *testing.F) {
	f.Add([]byte(EncodeTensor(NewFloat32("x", []int64{2, 2}, []float32{1, 2, 3, 4}))))
	f.Add([]byte(proto{}.varint(1, 2).varint(2, 10).bytes(5, packedVarints(0x3C00, 0xFC00))))
	f.Add([]byte(proto{}.varint(1, 2).varint(2, 11).bytes(10, le64(1, 2))))
	f.Add([]byte(proto{}.varint(1, 1).varint(2, 13).bytes(11, packedVarints(-1))))
	files, _ := filepath.Glob(filepath.Join(conformanceDirOrEmpty(), "*", "*", "test_data_set_*", "*.pb"))
	sort.Strings(files)
	for _, path := range files {
		// Large tensors make slow seeds; the small ones cover the same
		// fields.
		if st, err := os.Stat(path); err == nil && st.Size() <= 16<<10 {
			if data, err := os.ReadFile(path); err == nil {
				f.Add(data)
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tn, err := ReadTensor(data)
		if err != nil {
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("error %T is not a *FormatError: %v", err, err)
			}
			return
		}
		if got, want := int64(len(tn.Raw)), tn.NumElements()*int64(tn.DType.ElemSize()); got != want {
			t.Fatalf("%d raw bytes, want %d", got, want)
		}
		back, err := ReadTensor(EncodeTensor(tn))
		if err != nil {
			t.Fatalf("re-read: %v", err)
		}
		if d := cmp.Diff(tn, back); d != "" {
			t.Fatalf("round trip mismatch (-want +got):\n%s", d)
		}
	})
}

// conformanceDirOrEmpty is conformanceDir without the failure: a fuzz
// target still runs on its own seeds when no data is found.
func conformanceDirOrEmpty() string {
	r, err := repodata.Conformance()
	if err != nil {
		return ""
	}
	return r.Dir
}
