package link

import (
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"ipu.local/libs/codegen"
	"ipu.local/libs/hostref"
	"ipu.local/libs/onnx"
)

// TestActivations links the activations of codegen's Unary family that
// take attributes (and Log, Erf), at float and float16, and checks the
// simulated outputs bit for bit against codegen's emulation of the same
// kernels (the host reference does not know every one of them), and the
// costed cycles against the simulated ones.
func TestActivations(t *testing.T) {
	type act struct {
		op    string
		attrs []onnx.Attr
		p     codegen.Unary
		abs   bool // applied to |x| (Log)
	}
	acts := []act{
		{"Log", nil, codegen.Unary{Op: codegen.Log}, true},
		{"Erf", nil, codegen.Unary{Op: codegen.Erf}, false},
		{"Softplus", nil, codegen.Unary{Op: codegen.Softplus}, false},
		{"LeakyRelu", []onnx.Attr{onnx.FloatAttr("alpha", 0.2)}, codegen.Unary{Op: codegen.LeakyRelu, Alpha: 0.2}, false},
		{"LeakyRelu", nil, codegen.Unary{Op: codegen.LeakyRelu, Alpha: 0.01}, false},
		{"Elu", []onnx.Attr{onnx.FloatAttr("alpha", 0.7)}, codegen.Unary{Op: codegen.Elu, Alpha: 0.7}, false},
		{"Selu", nil, codegen.Unary{Op: codegen.Selu, Alpha: 1.67326319217681884765625, Gamma: 1.05070102214813232421875}, false},
		{"HardSigmoid", []onnx.Attr{onnx.FloatAttr("alpha", 0.3), onnx.FloatAttr("beta", 0.6)}, codegen.Unary{Op: codegen.HardSigmoid, Alpha: 0.3, Beta: 0.6}, false},
		{"HardSwish", nil, codegen.Unary{Op: codegen.HardSwish}, false},
	}
	for _, typ := range []onnx.DataType{onnx.Float, onnx.Float16} {
		shape := []int64{5, 7}
		if typ == onnx.Float16 {
			shape = []int64{3, 5, 9}
		}
		b := onnx.NewModel(21)
		b.AddInput("x", typ, shape)
		b.AddNode("Abs", "abs", []string{"x"}, []string{"ax"})
		for i, a := range acts {
			in := "x"
			if a.abs {
				in = "ax"
			}
			y := fmt.Sprint("y", i)
			b.AddNode(a.op, y, []string{in}, []string{y}, a.attrs...)
			b.AddOutput(y, typ, shape)
		}
		data := b.Marshal()
		for _, tiles := range []int{1, 4, 64} {
			t.Run(fmt.Sprintf("%s@%d", typ, tiles), func(t *testing.T) {
				o, st, g, err := planLink(t, data, tiles)
				if err != nil {
					t.Fatal(err)
				}
				ins := hostref.GenerateInputs(g, 7)
				outs, res := runObject(t, o, [][]byte{ins[0].Raw})
				x := ins[0].Raw
				for i, a := range acts {
					p := a.p
					p.Type = codegen.F32
					if typ == onnx.Float16 {
						p.Type = codegen.F16
					}
					got := outs[i]
					if len(got) != len(x) {
						t.Fatalf("%s: %d bytes out, want %d", a.op, len(got), len(x))
					}
					bad := 0
					for j := 0; j < len(x); {
						var want, have uint32
						if typ == onnx.Float16 {
							v := binary.LittleEndian.Uint16(x[j:])
							if a.abs {
								v &^= 0x8000
							}
							want, have = uint32(codegen.EmulateUnaryF16(p, v)), uint32(binary.LittleEndian.Uint16(got[j:]))
							j += 2
						} else {
							v := math.Float32frombits(binary.LittleEndian.Uint32(x[j:]))
							if a.abs {
								v = float32(math.Abs(float64(v)))
							}
							want, have = math.Float32bits(codegen.EmulateUnary(p, v)), binary.LittleEndian.Uint32(got[j:])
							j += 4
						}
						if want != have && bad < 3 {
							t.Errorf("%s (%s) element at byte %d: got %#x, want %#x", a.op, y(i), j, have, want)
						}
						if want != have {
							bad++
						}
					}
				}
				checkCyclesOnly(t, st, res)
			})
		}
	}
}

func y(i int) string { return fmt.Sprint("y", i) }

// bcastIndex returns the flat index into an input of shape in of the
// output element at flat index i of shape out (numpy broadcasting).
func bcastIndex(i int, in, out []int64) int {
	idx, stride := 0, 1
	for d := len(out) - 1; d >= 0; d-- {
		c := i % int(out[d])
		i /= int(out[d])
		k := d - (len(out) - len(in))
		if k < 0 {
			continue
		}
		if in[k] != 1 {
			idx += c * stride
		}
		stride *= int(in[k])
	}
	return idx
}

// TestVariadic links Sum and Mean of four broadcast inputs (and of one)
// at float and float16 and checks them bit for bit against the chain the
// lowering documents: ((a + b) + c) + d, then (Mean) the quotient by 4.
func TestVariadic(t *testing.T) {
	shapes := [][]int64{{2, 3, 5}, {5}, {3, 1}, {2, 1, 5}}
	out := []int64{2, 3, 5}
	for _, typ := range []onnx.DataType{onnx.Float, onnx.Float16} {
		b := onnx.NewModel(13)
		names := []string{"a", "b", "c", "d"}
		for i, n := range names {
			b.AddInput(n, typ, shapes[i])
		}
		b.AddNode("Sum", "sum", names, []string{"s"})
		b.AddNode("Mean", "mean", names, []string{"m"})
		b.AddNode("Mean", "mean1", []string{"a"}, []string{"m1"})
		b.AddOutput("s", typ, out)
		b.AddOutput("m", typ, out)
		b.AddOutput("m1", typ, out)
		data := b.Marshal()
		for _, tiles := range []int{1, 3, 64} {
			t.Run(fmt.Sprintf("%s@%d", typ, tiles), func(t *testing.T) {
				o, st, g, err := planLink(t, data, tiles)
				if err != nil {
					t.Fatal(err)
				}
				ins := hostref.GenerateInputs(g, 3)
				raw := make([][]byte, len(ins))
				for i, in := range ins {
					raw[i] = in.Raw
				}
				outs, res := runObject(t, o, raw)
				es := 4
				if typ == onnx.Float16 {
					es = 2
				}
				get := func(k, j int) uint32 {
					if es == 2 {
						return uint32(binary.LittleEndian.Uint16(raw[k][2*j:]))
					}
					return binary.LittleEndian.Uint32(raw[k][4*j:])
				}
				add := func(a, b uint32) uint32 {
					if es == 2 {
						return uint32(codegen.EmulateBinaryF16(codegen.Add, uint16(a), uint16(b)))
					}
					return math.Float32bits(codegen.EmulateBinary(codegen.Add, math.Float32frombits(a), math.Float32frombits(b)))
				}
				div4 := func(a uint32) uint32 {
					if es == 2 {
						return uint32(codegen.EmulateBinaryF16(codegen.Div, uint16(a), 0x4400))
					}
					return math.Float32bits(codegen.EmulateBinary(codegen.Div, math.Float32frombits(a), 4))
				}
				for j := 0; j < 30; j++ {
					s := get(0, j)
					for k := 1; k < 4; k++ {
						s = add(s, get(k, bcastIndex(j, shapes[k], out)))
					}
					for oi, want := range []uint32{s, div4(s), get(0, j)} {
						var have uint32
						if es == 2 {
							have = uint32(binary.LittleEndian.Uint16(outs[oi][2*j:]))
						} else {
							have = binary.LittleEndian.Uint32(outs[oi][4*j:])
						}
						if have != want {
							t.Errorf("output %d element %d: got %#x, want %#x", oi, j, have, want)
						}
					}
				}
				checkCyclesOnly(t, st, res)
			})
		}
	}
}
