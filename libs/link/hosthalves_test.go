package link

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"ipu.local/libs/numfmt"
	"ipu.local/libs/onnx"
)

// An FP16 graph input read through a view whose runs are odd numbers of
// halves (a [B, S] mask unsqueezed to [B, 1, 1, S] with S odd): the host
// writes whole words into a staging buffer and a gather puts the halves
// in place; bit for bit, with the simulated cycles the linker's.
func TestHostHalves(t *testing.T) {
	for _, sh := range [][2]int64{{2, 13}, {3, 7}, {1, 5}} {
		b, s := sh[0], sh[1]
		m := onnx.NewModel(14)
		m.AddInput("mask", onnx.Float16, []int64{b, s})
		m.AddInput("x", onnx.Float16, []int64{b, 3, s, s})
		m.AddInitializer(int64s("axes", 1, 2))
		m.AddInitializer(&onnx.Tensor{Name: "one", DType: onnx.Float16, Dims: []int64{}, Raw: []byte{0x00, 0x3C}})
		m.AddNode("Unsqueeze", "u", []string{"mask", "axes"}, []string{"m4"})
		m.AddNode("Sub", "s", []string{"one", "m4"}, []string{"z"})
		m.AddNode("Add", "a", []string{"x", "z"}, []string{"y"})
		m.AddOutput("y", onnx.Float16, []int64{b, 3, s, s})
		data := m.Marshal()
		for _, tiles := range []int{1, 4, 64} {
			t.Run(fmt.Sprintf("%dx%d/%d", b, s, tiles), func(t *testing.T) {
				o, st, _, err := planLink(t, data, tiles)
				if err != nil {
					t.Fatal(err)
				}
				half := func(i int64, scale float64) uint16 { return numfmt.F64ToF16(float64(i%17-8) * scale) }
				mask := make([]byte, 2*b*s)
				for i := int64(0); i < b*s; i++ {
					binary.LittleEndian.PutUint16(mask[2*i:], half(i, 0.25))
				}
				n := b * 3 * s * s
				x := make([]byte, 2*n)
				for i := int64(0); i < n; i++ {
					binary.LittleEndian.PutUint16(x[2*i:], half(i*7, 0.5))
				}
				staged := false
				for _, tl := range o.Tiles {
					for _, sym := range tl.Symbols {
						staged = staged || strings.HasPrefix(sym.Name, "unpack:")
					}
				}
				if !staged && tiles > 1 {
					t.Error("no staged halves: the test does not reach them")
				}
				outs, res := runObject(t, o, [][]byte{mask, x})
				for i := int64(0); i < n; i++ {
					bi, col := i/(3*s*s), i%s
					mv := numfmt.F16ToF64(binary.LittleEndian.Uint16(mask[2*(bi*s+col):]))
					xv := numfmt.F16ToF64(binary.LittleEndian.Uint16(x[2*i:]))
					z := numfmt.F16ToF64(numfmt.F64ToF16(1 - mv))
					want := numfmt.F64ToF16(z + xv) // each exact in FP64, then one rounding
					if got := binary.LittleEndian.Uint16(outs[0][2*i:]); got != want {
						t.Fatalf("y[%d] = %#04x, want %#04x", i, got, want)
					}
				}
				checkCyclesOnly(t, st, res)
			})
		}
	}
}
