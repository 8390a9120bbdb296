package codegen

import (
	"fmt"
	"math"
	"testing"
)

// Select against its definition on every operand form, one and two
// dimensions, both senses: a random condition (0, 1.0 and other non-zero
// bits), values with NaN payloads kept bit for bit, Y's own elements kept
// where the condition says so, and the cycles its Cost gives.
func TestSelect(t *testing.T) {
	tl := newDataTile(11)
	forms := []struct{ name, c, v string }{
		{"arrays", "array", "array"},
		{"c-scalar", "scalar", "array"},
		{"v-const", "array", "const"},
		{"c-perrow", "perrow", "array"},
		{"v-perrow", "array", "perrow"},
		{"both-broadcast", "scalar", "const"},
		{"c-stride0", "stride0", "array"},
	}
	i := 0
	for _, whenTrue := range []bool{true, false} {
		for fi, f := range forms {
			for si, sh := range shapes2D() {
				if (si+fi)%3 != 0 {
					continue
				}
				i++
				p := Select{WhenTrue: whenTrue, R: sh[0], N: sh[1], Workers: 1 + i%6, Y: ilBuf + 0x20000}
				p.YStride = roundUp(p.N, 2) + 2*(i%2)
				r := rng(int64(3000 + i))
				operand := func(form string, addr uint32, j int) Operand {
					switch form {
					case "array":
						return Operand{Addr: addr, Stride: roundUp(p.N, 2) + 2*((i+j)%3)}
					case "stride0":
						return Operand{Addr: addr}
					case "perrow":
						return Operand{Addr: addr + uint32(4*(i%2)), PerRow: true, Stride: 1 + (i+j)%4}
					case "scalar":
						return Operand{Addr: addr + uint32(4*(i%2)), Scalar: true}
					}
					return Operand{Const: true, Value: float32(math.Inf(-1))}
				}
				p.C = operand(f.c, ilBuf, 0)
				p.V = operand(f.v, nonIlBuf, 1)
				t.Run(fmt.Sprintf("%v/r%d-n%d-w%d-%s", whenTrue, p.R, p.N, p.Workers, f.name), func(t *testing.T) {
					lo := tl.p.Memory.Lo
					cond := func() uint32 { return []uint32{0, 0x3F800000, 0x80000000, 1}[r.Intn(4)] }
					fill := func(o Operand, rows, n int, elem func() uint32) {
						for row := 0; row < max(rows, 1); row++ {
							for col := 0; col < n; col++ {
								setElem(tl.mem, lo, arr2{o.Addr, o.Stride, 4}.at(row, col), 4, elem())
							}
						}
					}
					for _, x := range []struct {
						o    Operand
						elem func() uint32
					}{{p.C, cond}, {p.V, func() uint32 { return randElem(r, F32) }}} {
						switch {
						case x.o.Scalar:
							fill(Operand{Addr: x.o.Addr}, 1, 1, x.elem)
						case x.o.PerRow:
							fill(Operand{Addr: x.o.Addr, Stride: x.o.Stride}, p.R, 1, x.elem)
						case !x.o.Const:
							fill(x.o, p.R, p.N, x.elem)
						}
					}
					get := func(mem []byte, o Operand, row, col int) uint32 {
						switch {
						case o.Const:
							return math.Float32bits(o.Value)
						case o.Scalar:
							return getElem(mem, lo, o.Addr, 4)
						case o.PerRow:
							return getElem(mem, lo, o.Addr+uint32(4*row*o.Stride), 4)
						}
						return getElem(mem, lo, arr2{o.Addr, o.Stride, 4}.at(row, col), 4)
					}
					y := arr2{p.Y, p.YStride, 4}
					ref := func(mem []byte) {
						src := append([]byte(nil), mem...)
						for row := 0; row < max(p.R, 1); row++ {
							for col := 0; col < p.N; col++ {
								old := getElem(src, lo, y.at(row, col), 4)
								setElem(mem, lo, y.at(row, col), 4, EmulateSelect(p.WhenTrue, get(src, p.C, row, col), get(src, p.V, row, col), old))
							}
						}
					}
					tl.runChecked(t, i%Slots, func(b *Builder) (Kernel, error) { return EmitSelect(b, p) }, p.Cost, ref)
				})
			}
		}
	}
}
