package link

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"testing"

	"ipu.local/formats/obj"
	"ipu.local/libs/onnx"
	"ipu.local/libs/sim"
)

// moveRef is a data-movement model's expected output: element out of
// the output copies element src(out) of input x (row-major flat index).
type moveCase struct {
	name  string
	in    []int64 // shape of x, a float input negated on the device first
	out   []int64
	build func(b *onnx.ModelBuilder) // from "nx" (-x) to "y"
	src   func(out []int, x []float32, xs []int) float32
}

func flatAt(idx, shape []int) int {
	f := 0
	for d := range shape {
		f = f*shape[d] + idx[d]
	}
	return f
}

// TestDataMovement plans and links Concat, Split, Slice, Expand, Tile and
// Gather on computed inputs of odd shapes, ranks 3 and 4, negative axes
// and steps, over several tile counts, and compares the simulated outputs
// bit for bit with a reference written out here (every element is a
// copy), and the simulated cycles with the linker's.
func TestDataMovement(t *testing.T) {
	cases := []moveCase{
		{"concat-axis-2", []int64{3, 5, 7}, []int64{3, 7, 7}, func(b *onnx.ModelBuilder) {
			b.AddInput("z", onnx.Float, []int64{3, 2, 7})
			b.AddNode("Concat", "c", []string{"nx", "z"}, []string{"y"}, onnx.IntAttr("axis", -2))
		}, nil},
		{"slice-negative-steps", []int64{2, 3, 5, 6}, []int64{2, 3, 4, 3}, func(b *onnx.ModelBuilder) {
			b.AddInitializer(int64s("st", -1, 4))
			b.AddInitializer(int64s("en", -1000, 0))
			b.AddInitializer(int64s("ax", -1, 2))
			b.AddInitializer(int64s("sp", -2, -1))
			b.AddNode("Slice", "s", []string{"nx", "st", "en", "ax", "sp"}, []string{"y"})
		}, func(o []int, x []float32, xs []int) float32 {
			return x[flatAt([]int{o[0], o[1], 4 - o[2], 5 - 2*o[3]}, xs)]
		}},
		{"split-middle", []int64{3, 5, 7}, []int64{3, 5, 4}, func(b *onnx.ModelBuilder) {
			b.AddInitializer(int64s("sz", 1, 4, 2))
			b.AddNode("Split", "s", []string{"nx", "sz"}, []string{"a", "y", "c"}, onnx.IntAttr("axis", -1))
		}, func(o []int, x []float32, xs []int) float32 {
			return x[flatAt([]int{o[0], o[1], o[2] + 1}, xs)]
		}},
		{"expand-rank4", []int64{3, 1, 5}, []int64{2, 3, 4, 5}, func(b *onnx.ModelBuilder) {
			b.AddInitializer(int64s("sh", 2, 1, 4, 1))
			b.AddNode("Expand", "e", []string{"nx", "sh"}, []string{"y"})
		}, func(o []int, x []float32, xs []int) float32 {
			return x[flatAt([]int{o[1], 0, o[3]}, xs)]
		}},
		{"tile", []int64{3, 1, 5}, []int64{6, 3, 5}, func(b *onnx.ModelBuilder) {
			b.AddInitializer(int64s("rp", 2, 3, 1))
			b.AddNode("Tile", "t", []string{"nx", "rp"}, []string{"y"})
		}, func(o []int, x []float32, xs []int) float32 {
			return x[flatAt([]int{o[0] % 3, 0, o[2]}, xs)]
		}},
		{"gather-const", []int64{3, 5, 7}, []int64{3, 2, 2, 7}, func(b *onnx.ModelBuilder) {
			ix := int64s("ix", 0, -1, 2, 1)
			ix.Dims = []int64{2, 2}
			b.AddInitializer(ix)
			b.AddNode("Gather", "g", []string{"nx", "ix"}, []string{"y"}, onnx.IntAttr("axis", -2))
		}, func(o []int, x []float32, xs []int) float32 {
			v := []int{0, 4, 2, 1}[o[1]*2+o[2]]
			return x[flatAt([]int{o[0], v, o[3]}, xs)]
		}},
	}
	for _, tc := range cases {
		b := onnx.NewModel(13)
		b.AddInput("x", onnx.Float, tc.in)
		b.AddNode("Neg", "n", []string{"x"}, []string{"nx"})
		tc.build(b)
		b.AddOutput("y", onnx.Float, tc.out)
		data := b.Marshal()
		for _, tiles := range []int{1, 5, 64} {
			t.Run(fmt.Sprintf("%s@%d", tc.name, tiles), func(t *testing.T) {
				o, st, _, err := planLink(t, data, tiles)
				if err != nil {
					t.Fatal(err)
				}
				xs := make([]int, len(tc.in))
				for i, d := range tc.in {
					xs[i] = int(d)
				}
				inputs := [][]byte{}
				var x, z []float32
				for _, in := range o.Host.Inputs {
					n := 1
					for _, d := range in.Shape {
						n *= int(d)
					}
					v := ramp(n, 0.5)
					for i := range v {
						v[i] += float32(i) // distinct values
					}
					if in.Name == "x" {
						x = v
					} else {
						z = v
					}
					inputs = append(inputs, f32raw(v))
				}
				outs, res := runObject(t, o, inputs)
				src := tc.src
				if src == nil { // the concatenation
					src = func(o []int, x []float32, xs []int) float32 {
						if o[1] < 5 {
							return x[flatAt(o, xs)]
						}
						return -z[flatAt([]int{o[0], o[1] - 5, o[2]}, []int{3, 2, 7})] // z is not negated
					}
				}
				os := make([]int, len(tc.out))
				for i, d := range tc.out {
					os[i] = int(d)
				}
				got := outs[0]
				i := 0
				eachIdx(os, func(idx []int) {
					want := -src(idx, x, xs)
					g := math.Float32frombits(binary.LittleEndian.Uint32(got[4*i:]))
					if g != want && i < 1<<30 {
						t.Fatalf("element %v: got %v, want %v", idx, g, want)
					}
					i++
				})
				checkCycles(t, res.Phases, st)
			})
		}
	}
}

// TestGatherRows looks token ids up in an embedding table on several
// tile counts: int64 ids from the host (negative ones wrap), odd row
// widths, the rows added to a computed value afterwards.
func TestGatherRows(t *testing.T) {
	const V, D = 11, 37
	table := ramp(V*D, 0.25)
	for i := range table {
		table[i] += float32(i)
	}
	b := onnx.NewModel(13)
	b.AddInput("ids", onnx.Int64, []int64{2, 3})
	b.AddInitializer(onnx.NewFloat32("w", []int64{V, D}, table))
	b.AddNode("Gather", "g", []string{"w", "ids"}, []string{"y"}, onnx.IntAttr("axis", 0))
	b.AddOutput("y", onnx.Float, []int64{2, 3, D})
	data := b.Marshal()
	ids := []int64{0, 10, -1, 3, -11, 7}
	for _, tiles := range []int{1, 3, 64, 1472} {
		t.Run(fmt.Sprint(tiles), func(t *testing.T) {
			o, st, _, err := planLink(t, data, tiles)
			if err != nil {
				t.Fatal(err)
			}
			raw := make([]byte, 8*len(ids))
			for i, v := range ids {
				binary.LittleEndian.PutUint64(raw[8*i:], uint64(v))
			}
			outs, res := runObject(t, o, [][]byte{raw})
			for i, v := range ids {
				if v < 0 {
					v += V
				}
				for c := 0; c < D; c++ {
					g := math.Float32frombits(binary.LittleEndian.Uint32(outs[0][4*(i*D+c):]))
					if g != table[int(v)*D+c] {
						t.Fatalf("row %d column %d: got %v, want %v", i, c, g, table[int(v)*D+c])
					}
				}
			}
			checkCycles(t, res.Phases, st)
			// An id outside the table faults the device.
			binary.LittleEndian.PutUint64(raw[8:], uint64(V))
			if _, _, err := Simulate(o, [][]byte{raw}, sim.Options{}); err == nil {
				t.Errorf("id %d of a table of %d rows: no fault", V, V)
			}
			// An id outside int32 is refused by the host conversion.
			binary.LittleEndian.PutUint64(raw[8:], 1<<40)
			if _, _, err := Simulate(o, [][]byte{raw}, sim.Options{}); err == nil || !strings.Contains(err.Error(), "outside the int32 range") {
				t.Errorf("id 2^40: error %v, want the int32 range", err)
			}
		})
	}
}

func f32raw(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func eachIdx(shape []int, f func(idx []int)) {
	idx := make([]int, len(shape))
	for {
		f(idx)
		d := len(shape) - 1
		for d >= 0 {
			idx[d]++
			if idx[d] < shape[d] {
				break
			}
			idx[d] = 0
			d--
		}
		if d < 0 {
			return
		}
	}
}

// checkCycles compares every device superstep's simulated cycles with
// the linker's.
func checkCycles(t *testing.T, phases []sim.PhaseStats, st *Stats) {
	t.Helper()
	for i, ph := range phases {
		s := st.Supersteps[i]
		if s.Kind == obj.HostExchange {
			continue
		}
		if ph.Cycles != s.Cycles {
			t.Errorf("superstep %d (%s): simulated %d cycles, costed %d", i, s.Name, ph.Cycles, s.Cycles)
		}
	}
}
