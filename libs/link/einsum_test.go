package link

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"testing"

	"ipu.local/libs/hostref"
	"ipu.local/libs/numfmt"
	"ipu.local/libs/onnx"
)

// einsumNaive evaluates an explicit equation over float64 operands by
// its definition: every assignment of the letters, the product of the
// operands' elements added into the output's.
func einsumNaive(eq string, shapes [][]int64, ops [][]float64) []float64 {
	lhs, out, _ := strings.Cut(eq, "->")
	ins := strings.Split(lhs, ",")
	size := map[byte]int64{}
	var letters []byte
	for i, s := range ins {
		for k, l := range []byte(s) {
			if _, ok := size[l]; !ok {
				letters = append(letters, l)
			}
			size[l] = shapes[i][k]
		}
	}
	index := func(s string, at map[byte]int64) int64 {
		var p int64
		for _, l := range []byte(s) {
			p = p*size[l] + at[l]
		}
		return p
	}
	n := int64(1)
	for _, l := range []byte(out) {
		n *= size[l]
	}
	res := make([]float64, n)
	at := map[byte]int64{}
	var walk func(k int)
	walk = func(k int) {
		if k == len(letters) {
			v := 1.0
			for i, s := range ins {
				v *= ops[i][index(s, at)]
			}
			res[index(out, at)] += v
			return
		}
		for i := int64(0); i < size[letters[k]]; i++ {
			at[letters[k]] = i
			walk(k + 1)
		}
	}
	walk(0)
	return res
}

// TestEinsum builds Einsums from contractions exporters write (batched
// attention scores and context, a projection, an outer product, a
// transpose, a sum of an operand's own axis, a full contraction), checks
// the device against the host reference at device precision with
// ipu-check's rule (a k split sums its parts in its own order) and the
// host reference at FP64 against the equation's definition.
func TestEinsum(t *testing.T) {
	for _, c := range []struct {
		eq     string
		shapes [][]int64
		fp16   bool
	}{
		{"bhqd,bhkd->bhqk", [][]int64{{2, 3, 5, 4}, {2, 3, 6, 4}}, false},
		{"bhqk,bhkd->bqhd", [][]int64{{2, 3, 5, 6}, {2, 3, 6, 4}}, false},
		{"bsh,oh->bso", [][]int64{{2, 7, 12}, {9, 12}}, false},
		{"i,j->ij", [][]int64{{5}, {7}}, false},
		{"ij->ji", [][]int64{{3, 8}}, false},
		{"ijk,jk->i", [][]int64{{4, 3, 5}, {3, 5}}, false},
		{"abc,cd->bd", [][]int64{{3, 4, 5}, {5, 2}}, false},
		{"ij,ij->", [][]int64{{6, 5}, {6, 5}}, false},
		{"abc,cd->bda", [][]int64{{3, 4, 5}, {5, 2}}, false},
		{"ijk->kij", [][]int64{{2, 3, 4}}, false},
		{"bhqd,bhkd->bhqk", [][]int64{{1, 2, 9, 8}, {1, 2, 7, 8}}, true},
	} {
		dt := onnx.Float
		if c.fp16 {
			dt = onnx.Float16
		}
		t.Run(fmt.Sprintf("%s/%v", c.eq, dt), func(t *testing.T) {
			b := onnx.NewModel(13)
			var names []string
			for i, s := range c.shapes {
				name := fmt.Sprintf("x%d", i)
				b.AddInput(name, dt, s)
				names = append(names, name)
			}
			b.AddNode("Einsum", "es", names, []string{"y"}, onnx.StringAttr("equation", c.eq))
			b.AddOutputInfo(onnx.ValueInfo{Name: "y", DType: dt})
			for _, tiles := range []int{1, 5} {
				o, st, g, ins, _ := linkedInputs(t, b.Marshal(), tiles, 21)
				checkVerdict(t, o, st, g, 21)
				exact, err := hostref.EvalValues(g, ins, hostref.Options{Precision: hostref.FP64, Threads: 1})
				if err != nil {
					t.Fatal(err)
				}
				got := exact[g.Outputs[0].Index]
				var ops [][]float64
				for _, in := range ins {
					f := make([]float64, in.NumElements())
					for i := range f {
						if c.fp16 {
							f[i] = float64(math.Float32frombits(numfmt.F16ToF32(binary.LittleEndian.Uint16(in.Raw[2*i:]))))
						} else {
							f[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(in.Raw[4*i:])))
						}
					}
					ops = append(ops, f)
				}
				ref := einsumNaive(c.eq, c.shapes, ops)
				if len(got) != len(ref) {
					t.Fatalf("%d elements, want %d", len(got), len(ref))
				}
				for i := range ref {
					if math.Abs(got[i]-ref[i]) > 1e-9*(1+math.Abs(ref[i])) {
						t.Fatalf("element %d: %v, want %v", i, got[i], ref[i])
					}
				}
			}
		})
	}
}
