package device

import (
	"bytes"
	"encoding/binary"
	"math"
	"path/filepath"
	"testing"

	"ipu.local/formats/obj"
	"ipu.local/libs/sim"
)

// PoisonOutputs fills the outputs with the poison before a run; what the
// run writes replaces it, what it does not write keeps it.
func TestPoisonOutputs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ipu0")
	pkg := testPackage(t, "ipu21-tiny", 1)
	log := quietLog()
	loadDevice(t, path, pkg, log)
	d, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	s, err := d.NewSession(pkg, testFingerprint, log)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Attach(pkg.Host.Pages); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteInput("x", words(1, 2, 3, 4)); err != nil {
		t.Fatal(err)
	}
	if err := s.PoisonOutputs(); err != nil {
		t.Fatal(err)
	}
	y, err := s.ReadOutput("y")
	if err != nil {
		t.Fatal(err)
	}
	if want := bytes.Repeat([]byte{0xA5}, len(y)); !bytes.Equal(y, want) {
		t.Fatalf("poisoned y = % x, want all 0xa5", y)
	}
	if _, err := s.Call("run", 0, sim.Options{}); err != nil {
		t.Fatal(err)
	}
	if y, err = s.ReadOutput("y"); err != nil {
		t.Fatal(err)
	}
	// Tile 1 wrote its row (x + 1 call + tile 1); the idle tiles did not.
	for tile := 0; tile < 4; tile++ {
		row := y[16*tile : 16*tile+16]
		want := bytes.Repeat([]byte{0xA5}, 16)
		if tile == 1 {
			want = words(3, 4, 5, 6)
		}
		if !bytes.Equal(row, want) {
			t.Errorf("tile %d's row = % x, want % x", tile, row, want)
		}
	}
	// The input is left alone.
	x, err := s.tensorRange("input", pkg.Host.Inputs[0])
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(x, words(1, 2, 3, 4)) {
		t.Errorf("input after poisoning = % x", x)
	}
}

// Every floating-point poison is a NaN, and Unwritten finds it; it does
// not count a computed NaN, and never counts in the other types.
func TestPoisonPattern(t *testing.T) {
	isNaN := map[string]func([]byte) bool{
		"float":    func(b []byte) bool { return math.IsNaN(float64(math.Float32frombits(binary.LittleEndian.Uint32(b)))) },
		"double":   func(b []byte) bool { return math.IsNaN(math.Float64frombits(binary.LittleEndian.Uint64(b))) },
		"float16":  func(b []byte) bool { v := binary.LittleEndian.Uint16(b); return v&0x7c00 == 0x7c00 && v&0x3ff != 0 },
		"bfloat16": func(b []byte) bool { v := binary.LittleEndian.Uint16(b); return v&0x7f80 == 0x7f80 && v&0x7f != 0 },
		// The FP8 types' NaN encodings (ONNX's FP8 definitions).
		"float8e4m3fn":   func(b []byte) bool { return b[0]&0x7f == 0x7f },
		"float8e4m3fnuz": func(b []byte) bool { return b[0] == 0x80 },
		"float8e5m2":     func(b []byte) bool { return b[0]&0x7c == 0x7c && b[0]&3 != 0 },
		"float8e5m2fnuz": func(b []byte) bool { return b[0] == 0x80 },
	}
	for dtype, nan := range isNaN {
		t.Run(dtype, func(t *testing.T) {
			ot := obj.Tensor{Name: "y", DType: dtype, Shape: []int64{3}}
			raw, err := PoisonPattern(ot)
			if err != nil {
				t.Fatal(err)
			}
			e := len(raw) / 3
			if !nan(raw[:e]) {
				t.Errorf("poison % x is not a NaN", raw[:e])
			}
			first, n := Unwritten(ot, raw)
			switch dtype {
			case "float", "double", "float16", "bfloat16":
				if first != 0 || n != 3 {
					t.Errorf("Unwritten(poison) = %d, %d; want 0, 3", first, n)
				}
				written := append([]byte(nil), raw...)
				clear(written[:e]) // element 0 written: zero
				if first, n := Unwritten(ot, written); first != 1 || n != 2 {
					t.Errorf("Unwritten after a write = %d, %d; want 1, 2", first, n)
				}
			default:
				if n != 0 {
					t.Errorf("Unwritten counts %d in %s, whose poison is its only NaN", n, dtype)
				}
			}
		})
	}
	canonical := binary.LittleEndian.AppendUint32(nil, 0x7fc00000)
	if _, n := Unwritten(obj.Tensor{DType: "float", Shape: []int64{1}}, canonical); n != 0 {
		t.Error("Unwritten counts a computed NaN")
	}
	if _, n := Unwritten(obj.Tensor{DType: "int32", Shape: []int64{1}}, []byte{0xA5, 0xA5, 0xA5, 0xA5}); n != 0 {
		t.Error("Unwritten counts an int32")
	}
}

// The poison of every integer and bool output is a value the device can
// hold: the host's page conversion (int64 narrowed to int32, bool to
// words) takes it.
func TestPoisonFitsTheDevice(t *testing.T) {
	for _, dtype := range []string{"int64", "int32", "bool"} {
		ot := obj.Tensor{Name: "y", DType: dtype, Shape: []int64{5}, Page: 0}
		raw, err := PoisonPattern(ot)
		if err != nil {
			t.Fatal(err)
		}
		page := make([]byte, 64)
		if err := ot.Scatter(page, raw); err != nil {
			t.Errorf("%s: the poison does not go to the device: %v", dtype, err)
		}
	}
}
