package link

import (
	"encoding/binary"
	"fmt"
	"testing"

	"ipu.local/libs/onnx"
)

// move16Case is a data-movement model on float16 values: inputs "x"
// (and "z"), each negated on the device ("nx", "nz"), moved into "y".
// src maps an output index to the input (0: x, 1: z) and its index.
type move16Case struct {
	name  string
	in    [][]int64
	out   []int64
	build func(b *onnx.ModelBuilder)
	src   func(o []int) (int, []int)
}

// TestDataMovementFP16 plans and links Concat, Slice, Split, Expand,
// Tile, Gather, Transpose, Reshape and a re-layout on float16 values of odd shapes,
// whose runs start and end inside 32-bit words, on several tile counts;
// every output element is compared bit for bit with the input element
// the case's own index map names (negated: the sign bit flipped), and
// every superstep's simulated cycles with the linker's.
func TestDataMovementFP16(t *testing.T) {
	cases := []move16Case{
		{"concat-3x5-3x7-axis1", [][]int64{{3, 5}, {3, 7}}, []int64{3, 12}, func(b *onnx.ModelBuilder) {
			b.AddNode("Concat", "c", []string{"nx", "nz"}, []string{"y"}, onnx.IntAttr("axis", 1))
		}, func(o []int) (int, []int) {
			if o[1] < 5 {
				return 0, o
			}
			return 1, []int{o[0], o[1] - 5}
		}},
		{"concat-axis0", [][]int64{{3, 5}, {2, 5}}, []int64{5, 5}, func(b *onnx.ModelBuilder) {
			b.AddNode("Concat", "c", []string{"nx", "nz"}, []string{"y"}, onnx.IntAttr("axis", 0))
		}, func(o []int) (int, []int) {
			if o[0] < 3 {
				return 0, o
			}
			return 1, []int{o[0] - 3, o[1]}
		}},
		{"slice-step3", [][]int64{{4, 17}}, []int64{4, 6}, func(b *onnx.ModelBuilder) {
			b.AddInitializer(int64s("st", 1))
			b.AddInitializer(int64s("en", 100))
			b.AddInitializer(int64s("ax", 1))
			b.AddInitializer(int64s("sp", 3))
			b.AddNode("Slice", "s", []string{"nx", "st", "en", "ax", "sp"}, []string{"y"})
		}, func(o []int) (int, []int) { return 0, []int{o[0], 1 + 3*o[1]} }},
		{"slice-negative-step", [][]int64{{3, 9}}, []int64{2, 5}, func(b *onnx.ModelBuilder) {
			b.AddInitializer(int64s("st", 2, -1))
			b.AddInitializer(int64s("en", 0, -1000))
			b.AddInitializer(int64s("ax", 0, 1))
			b.AddInitializer(int64s("sp", -1, -2))
			b.AddNode("Slice", "s", []string{"nx", "st", "en", "ax", "sp"}, []string{"y"})
		}, func(o []int) (int, []int) { return 0, []int{2 - o[0], 8 - 2*o[1]} }},
		{"split-odd", [][]int64{{3, 11}}, []int64{3, 5}, func(b *onnx.ModelBuilder) {
			b.AddInitializer(int64s("sz", 3, 5, 3))
			b.AddNode("Split", "s", []string{"nx", "sz"}, []string{"a", "y", "c"}, onnx.IntAttr("axis", 1))
		}, func(o []int) (int, []int) { return 0, []int{o[0], o[1] + 3} }},
		{"expand", [][]int64{{3, 1}}, []int64{2, 3, 5}, func(b *onnx.ModelBuilder) {
			b.AddInitializer(int64s("sh", 2, 3, 5))
			b.AddNode("Expand", "e", []string{"nx", "sh"}, []string{"y"})
		}, func(o []int) (int, []int) { return 0, []int{o[1], 0} }},
		{"tile", [][]int64{{3, 5}}, []int64{6, 15}, func(b *onnx.ModelBuilder) {
			b.AddInitializer(int64s("rp", 2, 3))
			b.AddNode("Tile", "t", []string{"nx", "rp"}, []string{"y"})
		}, func(o []int) (int, []int) { return 0, []int{o[0] % 3, o[1] % 5} }},
		{"gather-const", [][]int64{{5, 7}}, []int64{3, 7}, func(b *onnx.ModelBuilder) {
			b.AddInitializer(int64s("ix", 4, 0, -2))
			b.AddNode("Gather", "g", []string{"nx", "ix"}, []string{"y"}, onnx.IntAttr("axis", 0))
		}, func(o []int) (int, []int) { return 0, []int{[]int{4, 0, 3}[o[0]], o[1]} }},
		{"gather-const-axis1", [][]int64{{3, 7}}, []int64{3, 3}, func(b *onnx.ModelBuilder) {
			b.AddInitializer(int64s("ix", 6, 1, 3))
			b.AddNode("Gather", "g", []string{"nx", "ix"}, []string{"y"}, onnx.IntAttr("axis", 1))
		}, func(o []int) (int, []int) { return 0, []int{o[0], []int{6, 1, 3}[o[1]]} }},
		{"transpose-inner", [][]int64{{3, 5, 7}}, []int64{7, 3, 5}, func(b *onnx.ModelBuilder) {
			b.AddNode("Transpose", "t", []string{"nx"}, []string{"y"}, onnx.IntsAttr("perm", 2, 0, 1))
		}, func(o []int) (int, []int) { return 0, []int{o[1], o[2], o[0]} }},
		{"transpose-outer", [][]int64{{3, 5, 7}}, []int64{5, 3, 7}, func(b *onnx.ModelBuilder) {
			b.AddNode("Transpose", "t", []string{"nx"}, []string{"y"}, onnx.IntsAttr("perm", 1, 0, 2))
		}, func(o []int) (int, []int) { return 0, []int{o[1], o[0], o[2]} }},
		{"reshape", [][]int64{{3, 5, 7}}, []int64{7, 15}, func(b *onnx.ModelBuilder) {
			b.AddInitializer(int64s("sh", 7, 15))
			b.AddNode("Reshape", "r", []string{"nx", "sh"}, []string{"y"})
		}, func(o []int) (int, []int) {
			f := o[0]*15 + o[1]
			return 0, []int{f / 35, f / 7 % 5, f % 7}
		}},
		{"concat-33x5-33x7-axis1", [][]int64{{33, 5}, {33, 7}}, []int64{33, 12}, func(b *onnx.ModelBuilder) {
			b.AddNode("Concat", "c", []string{"nx", "nz"}, []string{"y"}, onnx.IntAttr("axis", 1))
		}, func(o []int) (int, []int) {
			if o[1] < 5 {
				return 0, o
			}
			return 1, []int{o[0], o[1] - 5}
		}},
		{"concat-axis0-large", [][]int64{{31, 5}, {23, 5}}, []int64{54, 5}, func(b *onnx.ModelBuilder) {
			b.AddNode("Concat", "c", []string{"nx", "nz"}, []string{"y"}, onnx.IntAttr("axis", 0))
		}, func(o []int) (int, []int) {
			if o[0] < 31 {
				return 0, o
			}
			return 1, []int{o[0] - 31, o[1]}
		}},
		{"slice-step3-large", [][]int64{{40, 17}}, []int64{40, 6}, func(b *onnx.ModelBuilder) {
			b.AddInitializer(int64s("st", 1))
			b.AddInitializer(int64s("en", 100))
			b.AddInitializer(int64s("ax", 1))
			b.AddInitializer(int64s("sp", 3))
			b.AddNode("Slice", "s", []string{"nx", "st", "en", "ax", "sp"}, []string{"y"})
		}, func(o []int) (int, []int) { return 0, []int{o[0], 1 + 3*o[1]} }},
		{"slice-rows-step3", [][]int64{{61, 7}}, []int64{20, 7}, func(b *onnx.ModelBuilder) {
			b.AddInitializer(int64s("st", 2))
			b.AddInitializer(int64s("en", 100))
			b.AddInitializer(int64s("ax", 0))
			b.AddInitializer(int64s("sp", 3))
			b.AddNode("Slice", "s", []string{"nx", "st", "en", "ax", "sp"}, []string{"y"})
		}, func(o []int) (int, []int) { return 0, []int{2 + 3*o[0], o[1]} }},
		{"transpose-inner-large", [][]int64{{9, 5, 7}}, []int64{7, 9, 5}, func(b *onnx.ModelBuilder) {
			b.AddNode("Transpose", "t", []string{"nx"}, []string{"y"}, onnx.IntsAttr("perm", 2, 0, 1))
		}, func(o []int) (int, []int) { return 0, []int{o[1], o[2], o[0]} }},
		{"transpose-2d-large", [][]int64{{37, 11}}, []int64{11, 37}, func(b *onnx.ModelBuilder) {
			b.AddNode("Transpose", "t", []string{"nx"}, []string{"y"}, onnx.IntsAttr("perm", 1, 0))
		}, func(o []int) (int, []int) { return 0, []int{o[1], o[0]} }},
		{"transpose-outer-large", [][]int64{{9, 13, 7}}, []int64{13, 9, 7}, func(b *onnx.ModelBuilder) {
			b.AddNode("Transpose", "t", []string{"nx"}, []string{"y"}, onnx.IntsAttr("perm", 1, 0, 2))
		}, func(o []int) (int, []int) { return 0, []int{o[1], o[0], o[2]} }},
		{"reshape-large", [][]int64{{15, 7, 9}}, []int64{35, 27}, func(b *onnx.ModelBuilder) {
			b.AddInitializer(int64s("sh", 35, 27))
			b.AddNode("Reshape", "r", []string{"nx", "sh"}, []string{"y"})
		}, func(o []int) (int, []int) {
			f := o[0]*27 + o[1]
			return 0, []int{f / 63, f / 9 % 7, f % 9}
		}},
		{"expand-large", [][]int64{{13, 1}}, []int64{3, 13, 7}, func(b *onnx.ModelBuilder) {
			b.AddInitializer(int64s("sh", 3, 13, 7))
			b.AddNode("Expand", "e", []string{"nx", "sh"}, []string{"y"})
		}, func(o []int) (int, []int) { return 0, []int{o[1], 0} }},
		{"tile-large", [][]int64{{13, 5}}, []int64{26, 15}, func(b *onnx.ModelBuilder) {
			b.AddInitializer(int64s("rp", 2, 3))
			b.AddNode("Tile", "t", []string{"nx", "rp"}, []string{"y"})
		}, func(o []int) (int, []int) { return 0, []int{o[0] % 13, o[1] % 5} }},
		{"relayout-min", [][]int64{{33, 12}, {12, 33}}, []int64{33, 12}, func(b *onnx.ModelBuilder) {
			b.AddNode("Transpose", "t", []string{"nz"}, []string{"tz"}, onnx.IntsAttr("perm", 1, 0))
			b.AddNode("Min", "m", []string{"nx", "tz"}, []string{"y"}) // -z is the smaller
		}, func(o []int) (int, []int) { return 1, []int{o[1], o[0]} }},
	}
	for _, tc := range cases {
		b := onnx.NewModel(13)
		names := []string{"x", "z"}
		for i, s := range tc.in {
			b.AddInput(names[i], onnx.Float16, s)
			b.AddNode("Neg", "neg"+names[i], []string{names[i]}, []string{"n" + names[i]})
		}
		tc.build(b)
		b.AddOutput("y", onnx.Float16, tc.out)
		data := b.Marshal()
		for _, tiles := range []int{1, 3, 64} {
			t.Run(fmt.Sprintf("%s@%d", tc.name, tiles), func(t *testing.T) {
				o, st, _, err := planLink(t, data, tiles)
				if err != nil {
					t.Fatal(err)
				}
				// Distinct finite halves: x from 0x3c00 up, z from 0x5000.
				ins := make([][]uint16, len(tc.in))
				var raw [][]byte
				for _, in := range o.Host.Inputs {
					k := 0
					if in.Name == "z" {
						k = 1
					}
					n := 1
					for _, d := range in.Shape {
						n *= int(d)
					}
					v := make([]uint16, n)
					r := make([]byte, 2*n)
					for i := range v {
						v[i] = uint16(0x3c00 + 0x1400*k + i)
						binary.LittleEndian.PutUint16(r[2*i:], v[i])
					}
					ins[k] = v
					raw = append(raw, r)
				}
				outs, res := runObject(t, o, raw)
				os := make([]int, len(tc.out))
				for i, d := range tc.out {
					os[i] = int(d)
				}
				got := outs[0]
				i, bad := 0, 0
				eachIdx(os, func(idx []int) {
					k, si := tc.src(idx)
					xs := make([]int, len(tc.in[k]))
					for d, v := range tc.in[k] {
						xs[d] = int(v)
					}
					want := ins[k][flatAt(si, xs)] ^ 0x8000
					g := binary.LittleEndian.Uint16(got[2*i:])
					if g != want {
						if bad < 3 {
							t.Errorf("element %v: got %#04x, want %#04x", idx, g, want)
						}
						bad++
					}
					i++
				})
				checkCyclesOnly(t, st, res)
			})
		}
	}
}
