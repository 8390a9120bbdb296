package codegen

import (
	"fmt"
	"math"
	"testing"
)

// The FP16 Select against its definition on every operand form (V
// broadcasts from either half of a word, per-row values at odd and even
// strides), one and two dimensions, odd lengths, worker counts 1 to 6,
// both senses: conditions 0, 1.0, -0, a denormal and a NaN (any non-zero
// bits true), values of any 16 bits (NaN payloads kept), Y's other
// halves and padding unchanged, and the cycles its Cost gives.
func TestSelect16(t *testing.T) {
	tl := newDataTile(17)
	forms := []struct{ name, c, v string }{
		{"arrays", "array", "array"},
		{"c-scalar", "scalar", "array"},
		{"c-const-true", "const1", "array"},
		{"c-const-false", "const0", "array"},
		{"v-const", "array", "const"},
		{"v-scalar-low", "array", "scalar"},
		{"v-scalar-high", "array", "scalar2"},
		{"c-perrow", "perrow", "array"},
		{"v-perrow", "array", "perrow"},
		{"v-perrow-high", "array", "perrow2"},
		{"c-perrow-v-scalar", "perrow", "scalar2"},
		{"c-scalar-v-perrow", "scalar", "perrow"},
		{"both-broadcast", "scalar", "const"},
		{"c-stride0", "stride0", "array"},
		{"v-stride0", "array", "stride0"},
	}
	i := 0
	for _, whenTrue := range []bool{true, false} {
		for fi, f := range forms {
			for si, sh := range shapes2D() {
				if (si+fi)%2 != 0 {
					continue
				}
				i++
				p := Select{Type: F16, WhenTrue: whenTrue, R: sh[0], N: sh[1], Workers: 1 + i%6, Y: ilBuf + 0x20000}
				p.YStride = roundUp(p.N, 4) + 4*(i%2)
				r := rng(int64(5000 + i))
				operand := func(form string, addr uint32, es, j int) Operand {
					al := 8 / es
					switch form {
					case "array":
						return Operand{Addr: addr, Stride: roundUp(p.N, al) + al*((i+j)%3)}
					case "stride0":
						return Operand{Addr: addr}
					case "perrow":
						return Operand{Addr: addr + uint32(4*(i%2)), PerRow: true, Stride: 1 + (i+j)%4}
					case "perrow2":
						return Operand{Addr: addr + 2, PerRow: true, Stride: 1 + (i+j)%4}
					case "scalar":
						return Operand{Addr: addr + uint32(4*(i%2)), Scalar: true}
					case "scalar2":
						return Operand{Addr: addr + 6, Scalar: true}
					case "const1":
						return Operand{Const: true, Value: 1}
					case "const0":
						return Operand{Const: true, Value: 0}
					}
					return Operand{Const: true, Value: -2.5}
				}
				p.C = operand(f.c, ilBuf, 4, 0)
				p.V = operand(f.v, nonIlBuf, 2, 1)
				t.Run(fmt.Sprintf("%v/r%d-n%d-w%d-%s", whenTrue, p.R, p.N, p.Workers, f.name), func(t *testing.T) {
					lo := tl.p.Memory.Lo
					cond := func() uint32 { return []uint32{0, 0x3F800000, 0x80000000, 1, 0x7FC00001, 0}[r.Intn(6)] }
					val := func() uint32 { return uint32(r.Intn(1 << 16)) }
					for _, x := range []struct {
						o    Operand
						es   int
						elem func() uint32
					}{{p.C, 4, cond}, {p.V, 2, val}} {
						for row := 0; row < max(p.R, 1); row++ {
							switch {
							case x.o.Const:
							case x.o.Scalar:
								setElem(tl.mem, lo, x.o.Addr, x.es, x.elem())
							case x.o.PerRow:
								setElem(tl.mem, lo, x.o.Addr+uint32(x.es*row*x.o.Stride), x.es, x.elem())
							default:
								for col := 0; col < p.N; col++ {
									setElem(tl.mem, lo, arr2{x.o.Addr, x.o.Stride, x.es}.at(row, col), x.es, x.elem())
								}
							}
						}
					}
					get := func(mem []byte, o Operand, es, row, col int) uint32 {
						switch {
						case o.Const && es == 4:
							return math.Float32bits(o.Value)
						case o.Const:
							return 0xC100 // -2.5
						case o.Scalar || o.PerRow && p.R <= 1:
							return getElem(mem, lo, o.Addr, es)
						case o.PerRow:
							return getElem(mem, lo, o.Addr+uint32(es*row*o.Stride), es)
						}
						return getElem(mem, lo, arr2{o.Addr, o.Stride, es}.at(row, col), es)
					}
					y := arr2{p.Y, p.YStride, 2}
					ref := func(mem []byte) {
						src := append([]byte(nil), mem...)
						for row := 0; row < max(p.R, 1); row++ {
							for col := 0; col < p.N; col++ {
								old := uint16(getElem(src, lo, y.at(row, col), 2))
								v := EmulateSelect16(p.WhenTrue, get(src, p.C, 4, row, col), uint16(get(src, p.V, 2, row, col)), old)
								setElem(mem, lo, y.at(row, col), 2, uint32(v))
							}
						}
					}
					tl.runChecked(t, i%Slots, func(b *Builder) (Kernel, error) { return EmitSelect(b, p) }, p.Cost, ref)
				})
			}
		}
	}
}
