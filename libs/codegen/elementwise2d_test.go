package codegen

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/google/go-cmp/cmp"

	"ipu.local/libs/numfmt"
)

// The 2-D and FP16 elementwise kernels: every run fills the data memory,
// runs the kernel on the simulator and compares the whole data memory
// with the initial one plus the reference's writes (so padding, guards
// and everything else must be preserved), and the measured cycles with
// Cost at the run's phase.

const dataLo = nonIlBuf // data memory tested: [dataLo, end of memory)

// newDataTile returns a tile whose data memory holds random bytes.
func newDataTile(seed int64) *tile {
	tl := newTile()
	r := rng(seed)
	lo := dataLo - tl.p.Memory.Lo
	r.Read(tl.mem[lo:])
	return tl
}

func (t *tile) elem(addr uint32, es int) uint32 { return getElem(t.mem, t.p.Memory.Lo, addr, es) }

func getElem(mem []byte, lo, addr uint32, es int) uint32 {
	b := mem[addr-lo:]
	switch es {
	case 4:
		return binary.LittleEndian.Uint32(b)
	case 2:
		return uint32(binary.LittleEndian.Uint16(b))
	}
	return uint32(b[0])
}

func setElem(mem []byte, lo, addr uint32, es int, v uint32) {
	b := mem[addr-lo:]
	switch es {
	case 4:
		binary.LittleEndian.PutUint32(b, v)
	case 2:
		binary.LittleEndian.PutUint16(b, uint16(v))
	default:
		b[0] = byte(v)
	}
}

// f32Specials and f16Specials are values every input draws from.
var (
	f32Specials = []uint32{0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00001, 0x7F800001,
		1, 0x80000123, 0x00400000, 0x7F7FFFFF, 0xFF7FFFFF, 0x3F800000, 0xBF800000}
	f16Specials = []uint32{0, 0x8000, 0x7C00, 0xFC00, 0x7E00, 0xFE01, 0x7C01, 1, 0x8001, 0x03FF,
		0x0400, 0x7BFF, 0xFBFF, 0x3C00, 0xBC00, 0x5BFF, 0xDBFF}
)

// randElem returns an input element's bits: mostly moderate values, some
// specials and random bit patterns (NaN payloads, subnormals, huge
// values: FP16 products and sums overflow).
func randElem(r *rand.Rand, t ElemType) uint32 {
	k := r.Intn(10)
	if t == F16 {
		switch {
		case k < 1:
			return f16Specials[r.Intn(len(f16Specials))]
		case k < 4:
			return uint32(r.Intn(1 << 16))
		}
		return uint32(numfmt.F32ToF16(math.Float32bits(float32(r.Float64()*16 - 8))))
	}
	switch {
	case k < 1:
		return f32Specials[r.Intn(len(f32Specials))]
	case k < 2:
		return r.Uint32()
	}
	return math.Float32bits(float32(r.Float64()*10 - 5))
}

// arr2 is a 2-D array: rows of n elements of es bytes, stride elements
// apart.
type arr2 struct {
	addr   uint32
	stride int
	es     int
}

func (a arr2) at(r, c int) uint32 { return a.addr + uint32(a.es*(r*a.stride+c)) }

// fill writes random elements into the rows (n elements each) of a.
func (t *tile) fill(r *rand.Rand, a arr2, rows, n int, typ ElemType) {
	for i := 0; i < max(rows, 1); i++ {
		for j := 0; j < n; j++ {
			setElem(t.mem, t.p.Memory.Lo, a.at(i, j), a.es, randElem(r, typ))
		}
	}
}

// runChecked runs the kernel emit makes at phase, with ref applying the
// expected writes to a copy of the memory before the run, and checks the
// data memory and the cycles against Cost.
func (t *tile) runChecked(tb testing.TB, phase int, emit func(b *Builder) (Kernel, error), cost func() (Cost, error), ref func(mem []byte)) Kernel {
	tb.Helper()
	want := append([]byte(nil), t.mem...)
	ref(want)
	k, cycles := t.runKernel(tb, phase, emit)
	lo := int(dataLo - t.p.Memory.Lo)
	if !bytes.Equal(want[lo:], t.mem[lo:]) {
		i := lo
		for want[i] == t.mem[i] {
			i++
		}
		a, e := max(i-16, lo)&^3, min(i+32, len(want))
		tb.Fatalf("memory mismatch from %#x (-want +got):\n%s", uint32(a)+t.p.Memory.Lo, cmp.Diff(want[a:e], t.mem[a:e]))
	}
	if got, want := cycles, k.CyclesAt(phase); got != want {
		tb.Errorf("measured %d cycles, the kernel's Cost says %d", got, want)
	}
	c, err := cost()
	if err != nil {
		tb.Fatal(err)
	}
	if diff := cmp.Diff(k.Cost, c); diff != "" {
		tb.Errorf("Cost() mismatch (-emitted +Cost):\n%s", diff)
	}
	return k
}

// shapes2D are the R x N shapes every 2-D test runs.
func shapes2D() [][2]int {
	var s [][2]int
	for _, r := range []int{1, 2, 3, 7} {
		for _, n := range []int{1, 2, 3, 4, 5, 8, 13, 64, 130} {
			s = append(s, [2]int{r, n})
		}
	}
	return s
}

// roundUp rounds n up to a multiple of m.
func roundUp(n, m int) int { return (n + m - 1) / m * m }

// align returns the stride unit (elements per 8 bytes).
func align(es int) int { return 8 / es }

func unaryCases() []Unary {
	var ps []Unary
	for op := UnaryOp(0); op < numUnary; op++ {
		switch op {
		case PowConst:
			ps = append(ps, Unary{Op: op, Exponent: 1.7}, Unary{Op: op, Exponent: 2})
		case Clip:
			ps = append(ps, Unary{Op: op, Min: -1.5, Max: 2.25}, Unary{Op: op, Min: -1e-9, Max: 0.1})
		case LeakyRelu, Elu:
			ps = append(ps, Unary{Op: op, Alpha: 0.01}, Unary{Op: op, Alpha: 1.5})
		case Selu:
			ps = append(ps, Unary{Op: op, Alpha: 1.6732632, Gamma: 1.050701})
		case HardSigmoid:
			ps = append(ps, Unary{Op: op, Alpha: 0.2, Beta: 0.5}, Unary{Op: op, Alpha: -3, Beta: 0.25})
		default:
			ps = append(ps, Unary{Op: op})
		}
	}
	return ps
}

func unaryName(p Unary) string {
	switch p.Op {
	case PowConst:
		return fmt.Sprintf("pow%g", p.Exponent)
	case Clip:
		return fmt.Sprintf("clip%g,%g", p.Min, p.Max)
	case LeakyRelu, Elu, Selu, HardSigmoid:
		return fmt.Sprintf("%s%g,%g,%g", p.Op, p.Alpha, p.Beta, p.Gamma)
	}
	return p.Op.String()
}

// emulate1 applies a Unary's emulation to one element's bits.
func emulate1(p Unary, x uint32) uint32 {
	if p.Type == F16 {
		return uint32(EmulateUnaryF16(p, uint16(x)))
	}
	return math.Float32bits(EmulateUnary(p, math.Float32frombits(x)))
}

func emulate2(p Binary, a, b uint32) uint32 {
	if p.Type == F16 && p.Op.Compare() {
		return math.Float32bits(EmulateCompareF16(p.Op, uint16(a), uint16(b)))
	}
	if p.Type == F16 {
		return uint32(EmulateBinaryF16(p.Op, uint16(a), uint16(b)))
	}
	return math.Float32bits(EmulateBinary(p.Op, math.Float32frombits(a), math.Float32frombits(b)))
}

func TestUnary2D(t *testing.T) {
	tl := newDataTile(1)
	for ci, c := range unaryCases() {
		for _, typ := range []ElemType{F32, F16} {
			for si, sh := range shapes2D() {
				i := ci*7 + si
				es := typ.size()
				al := align(es)
				p := c
				p.Type, p.R, p.N, p.Workers = typ, sh[0], sh[1], 1+i%6
				p.X, p.Y = ilBuf, ilBuf+0x20000
				p.XStride = roundUp(p.N, al) + al*(i%3)
				p.YStride = roundUp(p.N, al) + al*((i+1)%3)
				form := []string{"padded", "inplace", "xstride0", "dense"}[i%4]
				switch form {
				case "inplace":
					p.Y, p.YStride = p.X, p.XStride
				case "xstride0":
					p.XStride = 0
				case "dense":
					p.XStride, p.YStride = roundUp(p.N, al), roundUp(p.N, al)
				}
				t.Run(fmt.Sprintf("%s/%s/r%d-n%d-w%d-%s", unaryName(c), typ, p.R, p.N, p.Workers, form), func(t *testing.T) {
					x, y := arr2{p.X, p.XStride, es}, arr2{p.Y, p.YStride, es}
					tl.fill(rng(int64(i)), x, p.R, p.N, typ)
					ref := func(mem []byte) {
						lo := tl.p.Memory.Lo
						src := append([]byte(nil), mem...)
						for r := 0; r < max(p.R, 1); r++ {
							for j := 0; j < p.N; j++ {
								setElem(mem, lo, y.at(r, j), es, emulate1(p, getElem(src, lo, x.at(r, j), es)))
							}
						}
					}
					tl.runChecked(t, i%Slots, func(b *Builder) (Kernel, error) { return EmitUnary(b, p) }, p.Cost, ref)
				})
			}
		}
	}
}

// operand forms of the 2-D Binary tests: A, B.
var binaryForms = []struct {
	name string
	a, b string
}{
	{"arrays", "array", "array"},
	{"b-rowbcast", "array", "stride0"},
	{"b-perrow", "array", "perrow"},
	{"a-perrow", "perrow", "array"},
	{"a-scalar", "scalar", "array"},
	{"b-const", "array", "const"},
	{"outer", "stride0", "perrow"},
	{"inplace", "array", "array"},
}

func TestBinary2D(t *testing.T) {
	tl := newDataTile(2)
	for op := BinaryOp(0); op < numBinary; op++ {
		for _, typ := range []ElemType{F32, F16} {
			for si, sh := range shapes2D() {
				for k := 0; k < 2; k++ {
					i := int(op)*11 + si*2 + k
					f := binaryForms[(si*2+k+int(op))%len(binaryForms)]
					es := typ.size()
					al := align(es)
					p := Binary{Op: op, Type: typ, R: sh[0], N: sh[1], Workers: 1 + i%6, Y: ilBuf + 0x20000}
					p.YStride = roundUp(p.N, al) + al*(i%2)
					yes := es
					if op.Compare() {
						// BOOL words out; no in-place form across sizes.
						yes = 4
						p.YStride = roundUp(p.N, 2) + 2*(i%2)
						if f.name == "inplace" && typ == F16 {
							f = binaryForms[0]
						}
					}
					r := rng(int64(1000 + i))
					// Each operand gets its own area; PerRow strides
					// and scalar addresses vary in parity (FP16 halves).
					operand := func(form string, addr uint32, j int) Operand {
						switch form {
						case "array":
							return Operand{Addr: addr, Stride: roundUp(p.N, al) + al*((i+j)%3)}
						case "stride0":
							return Operand{Addr: addr}
						case "perrow":
							return Operand{Addr: addr + uint32(es*(i%2)), PerRow: true, Stride: 1 + (i+j)%4}
						case "scalar":
							return Operand{Addr: addr + uint32(es*(i%2)), Scalar: true}
						}
						v := math.Float32frombits(randElem(r, F32))
						if typ == F16 {
							v = math.Float32frombits(numfmt.F16ToF32(uint16(randElem(r, F16))))
						}
						return Operand{Const: true, Value: v}
					}
					p.A = operand(f.a, ilBuf, 0)
					p.B = operand(f.b, nonIlBuf, 1)
					if f.name == "inplace" {
						p.Y, p.YStride = p.A.Addr, p.A.Stride
					}
					t.Run(fmt.Sprintf("%s/%s/r%d-n%d-w%d-%s", op, typ, p.R, p.N, p.Workers, f.name), func(t *testing.T) {
						// Element (row, col) of an operand.
						get := func(mem []byte, o Operand, row, col int) uint32 {
							lo := tl.p.Memory.Lo
							switch {
							case o.Const:
								if typ == F16 {
									return uint32(numfmt.F32ToF16(math.Float32bits(o.Value)))
								}
								return math.Float32bits(o.Value)
							case o.Scalar:
								return getElem(mem, lo, o.Addr, es)
							case o.PerRow:
								return getElem(mem, lo, o.Addr+uint32(es*row*o.Stride), es)
							}
							return getElem(mem, lo, arr2{o.Addr, o.Stride, es}.at(row, col), es)
						}
						for _, o := range []Operand{p.A, p.B} {
							switch {
							case o.Scalar:
								tl.fill(r, arr2{o.Addr, 0, es}, 1, 1, typ)
							case o.PerRow:
								tl.fill(r, arr2{o.Addr, o.Stride, es}, p.R, 1, typ)
							case !o.Const:
								tl.fill(r, arr2{o.Addr, o.Stride, es}, p.R, p.N, typ)
							}
						}
						y := arr2{p.Y, p.YStride, yes}
						ref := func(mem []byte) {
							src := append([]byte(nil), mem...)
							for row := 0; row < max(p.R, 1); row++ {
								for col := 0; col < p.N; col++ {
									setElem(mem, tl.p.Memory.Lo, y.at(row, col), yes, emulate2(p, get(src, p.A, row, col), get(src, p.B, row, col)))
								}
							}
						}
						tl.runChecked(t, i%Slots, func(b *Builder) (Kernel, error) { return EmitBinary(b, p) }, p.Cost, ref)
					})
				}
			}
		}
	}
}

func TestCast2D(t *testing.T) {
	tl := newDataTile(3)
	variants := []Cast{
		{Kind: F32ToF16}, {Kind: F16ToF32},
		{Kind: F32ToF8, Format: numfmt.E4M3FN, Scale: -2}, {Kind: F32ToF8, Format: numfmt.E5M2, Saturate: true},
		{Kind: F8ToF32, Format: numfmt.E4M3FNUZ, Scale: 3}, {Kind: F8ToF32, Format: numfmt.E5M2, Scale: 20},
		{Kind: F16ToF8, Format: numfmt.E4M3FN, Saturate: true}, {Kind: F16ToF8, Format: numfmt.E5M2FNUZ, Scale: 1},
	}
	for vi, v := range variants {
		for si, sh := range shapes2D() {
			i := vi*5 + si
			ein, eout := v.Kind.sizes()
			p := v
			p.R, p.N, p.Workers, p.X, p.Y = sh[0], sh[1], 1+i%6, ilBuf, ilBuf+0x20000
			p.XStride = roundUp(p.N, align(ein)) + align(ein)*(i%3)
			p.YStride = roundUp(p.N, align(eout)) + align(eout)*((i+1)%3)
			form := []string{"padded", "xstride0", "dense"}[i%3]
			switch form {
			case "xstride0":
				p.XStride = 0
			case "dense":
				p.XStride, p.YStride = roundUp(p.N, align(ein)), roundUp(p.N, align(eout))
			}
			t.Run(fmt.Sprintf("%s-%s%+d/r%d-n%d-w%d-%s", p.Kind, p.Format, p.Scale, p.R, p.N, p.Workers, form), func(t *testing.T) {
				x, y := arr2{p.X, p.XStride, ein}, arr2{p.Y, p.YStride, eout}
				r := rng(int64(2000 + i))
				for row := 0; row < p.R; row++ {
					for j := 0; j < p.N; j++ {
						var e uint32
						switch ein {
						case 4:
							e = randElem(r, F32)
						case 2:
							e = randElem(r, F16)
						default:
							e = uint32(r.Intn(256))
						}
						setElem(tl.mem, tl.p.Memory.Lo, x.at(row, j), ein, e)
					}
				}
				one := p
				one.N, one.R = 1, 0
				ref := func(mem []byte) {
					lo := tl.p.Memory.Lo
					src := append([]byte(nil), mem...)
					for row := 0; row < max(p.R, 1); row++ {
						for j := 0; j < p.N; j++ {
							a := x.at(row, j) - lo
							copy(mem[y.at(row, j)-lo:], EmulateCast(one, src[a:a+uint32(ein)]))
						}
					}
				}
				tl.runChecked(t, i%Slots, func(b *Builder) (Kernel, error) { return EmitCast(b, p) }, p.Cost, ref)
			})
		}
	}
}

// TestElementwiseBig covers strides beyond an imm16, unit counts beyond
// rpti's, row splits with few units, and every phase.
func TestElementwiseBig(t *testing.T) {
	tl := newDataTile(4)
	cases := []struct {
		name string
		p    any
	}{
		{"unary-f32-bigstride", Unary{Op: GeluErf, R: 3, N: 21, X: nonIlBuf, XStride: 9000, Y: ilBuf, YStride: 8194, Workers: 6}},
		{"unary-f16-bigstride", Unary{Op: Tanh, Type: F16, R: 3, N: 23, X: nonIlBuf, XStride: 17000, Y: ilBuf, YStride: 16400, Workers: 5}},
		{"unary-f32-rpt", Unary{Op: Neg, R: 2, N: 8200, X: nonIlBuf, XStride: 8204, Y: ilBuf, YStride: 8200, Workers: 2}},
		{"unary-f16-rows", Unary{Op: Relu, Type: F16, R: 40, N: 3, X: nonIlBuf, XStride: 4, Y: ilBuf, YStride: 8, Workers: 6}},
		{"binary-f32-perrow-big", Binary{Op: Div, R: 3, N: 9, A: Operand{Addr: nonIlBuf, Stride: 10}, B: Operand{Addr: ilBuf + 0x100, PerRow: true, Stride: 9001}, Y: ilBuf + 0x40000, YStride: 12, Workers: 4}},
		{"binary-f16-perrow-big-odd", Binary{Op: Mul, Type: F16, R: 3, N: 9, A: Operand{Addr: nonIlBuf, Stride: 12}, B: Operand{Addr: ilBuf + 0x102, PerRow: true, Stride: 17001}, Y: ilBuf + 0x40000, YStride: 12, Workers: 4}},
		{"binary-f16-perrow-big-even", Binary{Op: Pow, Type: F16, R: 3, N: 9, A: Operand{Addr: nonIlBuf, PerRow: true, Stride: 17002}, B: Operand{Addr: ilBuf + 0x100, Stride: 12}, Y: ilBuf + 0x40000, YStride: 12, Workers: 3}},
		{"cast-f32-f8-rows", Cast{Kind: F32ToF8, Format: numfmt.E4M3FN, R: 50, N: 7, X: nonIlBuf, XStride: 8, Y: ilBuf, YStride: 8, Workers: 6}},
	}
	for ci, c := range cases {
		for phase := 0; phase < Slots; phase++ {
			if ci%2 == 1 && phase%2 == 1 {
				continue
			}
			t.Run(fmt.Sprintf("%s/phase%d", c.name, phase), func(t *testing.T) {
				r := rng(int64(3000 + ci))
				switch p := c.p.(type) {
				case Unary:
					es := p.Type.size()
					x, y := arr2{p.X, p.XStride, es}, arr2{p.Y, p.YStride, es}
					tl.fill(r, x, p.R, p.N, p.Type)
					tl.runChecked(t, phase, func(b *Builder) (Kernel, error) { return EmitUnary(b, p) }, p.Cost, func(mem []byte) {
						lo := tl.p.Memory.Lo
						src := append([]byte(nil), mem...)
						for row := 0; row < p.R; row++ {
							for j := 0; j < p.N; j++ {
								setElem(mem, lo, y.at(row, j), es, emulate1(p, getElem(src, lo, x.at(row, j), es)))
							}
						}
					})
				case Binary:
					es := p.Type.size()
					arr := func(o Operand) arr2 { return arr2{o.Addr, o.Stride, es} }
					n := func(o Operand) int {
						if o.PerRow {
							return 1
						}
						return p.N
					}
					tl.fill(r, arr(p.A), p.R, n(p.A), p.Type)
					tl.fill(r, arr(p.B), p.R, n(p.B), p.Type)
					y := arr2{p.Y, p.YStride, es}
					tl.runChecked(t, phase, func(b *Builder) (Kernel, error) { return EmitBinary(b, p) }, p.Cost, func(mem []byte) {
						lo := tl.p.Memory.Lo
						src := append([]byte(nil), mem...)
						at := func(o Operand, row, col int) uint32 {
							if o.PerRow {
								col = 0
							}
							return getElem(src, lo, arr(o).at(row, col), es)
						}
						for row := 0; row < p.R; row++ {
							for j := 0; j < p.N; j++ {
								setElem(mem, lo, y.at(row, j), es, emulate2(p, at(p.A, row, j), at(p.B, row, j)))
							}
						}
					})
				case Cast:
					ein, eout := p.Kind.sizes()
					x, y := arr2{p.X, p.XStride, ein}, arr2{p.Y, p.YStride, eout}
					tl.fill(r, x, p.R, p.N, F32)
					one := p
					one.N, one.R = 1, 0
					tl.runChecked(t, phase, func(b *Builder) (Kernel, error) { return EmitCast(b, p) }, p.Cost, func(mem []byte) {
						lo := tl.p.Memory.Lo
						src := append([]byte(nil), mem...)
						for row := 0; row < p.R; row++ {
							for j := 0; j < p.N; j++ {
								a := x.at(row, j) - lo
								copy(mem[y.at(row, j)-lo:], EmulateCast(one, src[a:a+uint32(ein)]))
							}
						}
					})
				}
			})
		}
	}
}

// TestUnaryF16Exhaustive runs every unary op on all 65536 FP16 codes.
func TestUnaryF16Exhaustive(t *testing.T) {
	tl := newDataTile(5)
	x := arr2{ilBuf, 0, 2}
	for i := 0; i < 1<<16; i++ {
		setElem(tl.mem, tl.p.Memory.Lo, x.at(0, i), 2, uint32(i))
	}
	cases := append(unaryCases(), Unary{Op: Clip, Min: float32(math.NaN()), Max: 1}, Unary{Op: Clip, Min: 1e-10, Max: -1e-10},
		Unary{Op: Clip, Min: -70000, Max: 1e6}, Unary{Op: Clip, Min: 0.1, Max: 0.2})
	for ci, c := range cases {
		t.Run(unaryName(c), func(t *testing.T) {
			p := c
			p.Type, p.N, p.X, p.Y, p.Workers = F16, 1<<16, ilBuf, ilBuf+0x20000, 6
			tl.runChecked(t, ci%Slots, func(b *Builder) (Kernel, error) { return EmitUnary(b, p) }, p.Cost, func(mem []byte) {
				for i := 0; i < p.N; i++ {
					setElem(mem, tl.p.Memory.Lo, p.Y+uint32(2*i), 2, uint32(EmulateUnaryF16(p, uint16(i))))
				}
			})
		})
	}
}

// TestBinaryF16Rounding checks the f16v4 operations against the FP32
// route of EmulateBinaryF16 on many random pairs (the double rounding
// claim of BinaryOp's doc), and the FP32 route against a direct float64
// rounding.
func TestBinaryF16Rounding(t *testing.T) {
	tl := newDataTile(6)
	const n = 1 << 15
	r := rng(7)
	a, b := arr2{ilBuf, 0, 2}, arr2{nonIlBuf, 0, 2}
	for op := BinaryOp(0); op < numBinary; op++ {
		t.Run(op.String(), func(t *testing.T) {
			for i := 0; i < n; i++ {
				av, bv := randElem(r, F16), randElem(r, F16)
				if i%2 == 0 {
					av, bv = uint32(r.Intn(1<<16)), uint32(r.Intn(1<<16))
				}
				setElem(tl.mem, tl.p.Memory.Lo, a.at(0, i), 2, av)
				setElem(tl.mem, tl.p.Memory.Lo, b.at(0, i), 2, bv)
				if _, ok := op.h4(); ok {
					x, y := numfmt.F16ToF64(uint16(av)), numfmt.F16ToF64(uint16(bv))
					var exact float64
					switch op {
					case Add:
						exact = x + y
					case Sub:
						exact = x - y
					case Mul:
						exact = x * y
					case Max:
						exact = math.Max(x, y)
					case Min:
						exact = math.Min(x, y)
					}
					got, want := EmulateBinaryF16(op, uint16(av), uint16(bv)), numfmt.F64ToF16(exact)
					if exact != exact || x != x || y != y {
						want = 0x7E00
					}
					if exact == 0 && (op == Max || op == Min) {
						continue // signed zeros: max/min rules, not a rounding
					}
					if got != want {
						t.Fatalf("%#04x %s %#04x: FP32 route %#04x, direct rounding %#04x", av, op, bv, got, want)
					}
				}
			}
			p := Binary{Op: op, Type: F16, N: n, A: Operand{Addr: a.addr}, B: Operand{Addr: b.addr}, Y: ilBuf + 0x20000, Workers: 6}
			tl.runChecked(t, int(op)%Slots, func(bl *Builder) (Kernel, error) { return EmitBinary(bl, p) }, p.Cost, func(mem []byte) {
				lo := tl.p.Memory.Lo
				ys := p.outSize()
				for i := 0; i < n; i++ {
					setElem(mem, lo, p.Y+uint32(ys*i), ys, emulate2(p, getElem(mem, lo, a.at(0, i), 2), getElem(mem, lo, b.at(0, i), 2)))
				}
			})
		})
	}
}

// TestElementwiseZeroValue checks that the new fields' zero values (and
// R = 1, whatever the strides) give the 1-D kernel's code.
func TestElementwiseZeroValue(t *testing.T) {
	code := func(emit func(b *Builder) (Kernel, error)) []byte {
		b := NewBuilder(newTile().p, codeBase)
		if _, err := emit(b); err != nil {
			t.Fatal(err)
		}
		out, err := b.Finish()
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	u := Unary{Op: GeluTanh, N: 101, X: ilBuf, Y: nonIlBuf, Workers: 5}
	u1 := u
	u1.R, u1.XStride, u1.YStride = 1, 7, 3
	bi := Binary{Op: Div, N: 33, A: Operand{Addr: ilBuf}, B: Operand{Addr: nonIlBuf, Scalar: true}, Y: ilBuf + 0x1000, Workers: 6}
	b1 := bi
	b1.R, b1.YStride, b1.A.Stride = 1, 5, 9
	ca := Cast{Kind: F32ToF16, N: 77, X: ilBuf, Y: nonIlBuf, Workers: 3}
	c1 := ca
	c1.R, c1.XStride = 1, 3
	for _, c := range []struct {
		name string
		a, b func(b *Builder) (Kernel, error)
	}{
		{"unary", func(b *Builder) (Kernel, error) { return EmitUnary(b, u) }, func(b *Builder) (Kernel, error) { return EmitUnary(b, u1) }},
		{"binary", func(b *Builder) (Kernel, error) { return EmitBinary(b, bi) }, func(b *Builder) (Kernel, error) { return EmitBinary(b, b1) }},
		{"cast", func(b *Builder) (Kernel, error) { return EmitCast(b, ca) }, func(b *Builder) (Kernel, error) { return EmitCast(b, c1) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			if diff := cmp.Diff(code(c.a), code(c.b)); diff != "" {
				t.Errorf("code mismatch (-R0 +R1):\n%s", diff)
			}
		})
	}
}

func TestElementwise2DErrors(t *testing.T) {
	b := func() *Builder { return NewBuilder(newTile().p, codeBase) }
	emitU := func(p Unary) error { _, err := EmitUnary(b(), p); return err }
	emitB := func(p Binary) error { _, err := EmitBinary(b(), p); return err }
	costB := func(p Binary) error { _, err := p.Cost(); return err }
	emitC := func(p Cast) error { _, err := EmitCast(b(), p); return err }
	u := Unary{Op: Exp, R: 3, N: 6, X: ilBuf, XStride: 6, Y: nonIlBuf, YStride: 6, Workers: 6}
	bin := Binary{Op: Add, R: 3, N: 6, A: Operand{Addr: ilBuf, Stride: 8}, B: Operand{Addr: nonIlBuf, Stride: 8}, Y: ilBuf + 0x1000, YStride: 8, Workers: 6}
	with := func(p Binary, f func(p *Binary)) Binary {
		f(&p)
		return p
	}
	withU := func(p Unary, f func(p *Unary)) Unary {
		f(&p)
		return p
	}
	cases := []struct {
		name string
		err  error
		want bool // true: an error
	}{
		{"unary-ok", emitU(u), false},
		{"unary-odd-xstride", emitU(withU(u, func(p *Unary) { p.XStride = 7 })), true},
		{"unary-f16-xstride-4-bytes", emitU(withU(u, func(p *Unary) { p.Type, p.XStride, p.YStride = F16, 2, 8 })), true},
		{"unary-ystride-below-n", emitU(withU(u, func(p *Unary) { p.YStride = 4 })), true},
		{"unary-ystride-0", emitU(withU(u, func(p *Unary) { p.YStride = 0 })), true},
		{"unary-negative-stride", emitU(withU(u, func(p *Unary) { p.XStride = -8 })), true},
		{"unary-negative-r", emitU(withU(u, func(p *Unary) { p.R = -1 })), true},
		{"unary-too-many", emitU(withU(u, func(p *Unary) { p.R, p.N, p.XStride, p.YStride = 1<<13, 1<<12, 1<<12, 1<<12 })), true},
		{"unary-unknown-type", emitU(withU(u, func(p *Unary) { p.Type = 7 })), true},
		{"unary-out-of-memory", emitU(withU(u, func(p *Unary) { p.XStride = 1 << 20 })), true},
		{"unary-overlap-shifted", emitU(withU(u, func(p *Unary) { p.Y = p.X + 8 })), true},
		{"unary-inplace-other-stride", emitU(withU(u, func(p *Unary) { p.Y, p.XStride, p.YStride = p.X, 6, 8 })), true},
		{"unary-inplace", emitU(withU(u, func(p *Unary) { p.Y = p.X })), false},
		{"unary-y-reads-x-padding", emitU(withU(u, func(p *Unary) { p.N, p.XStride, p.YStride, p.Y = 4, 8, 8, p.X+16 })), false},
		{"unary-y-in-x-rows", emitU(withU(u, func(p *Unary) { p.N, p.XStride, p.YStride, p.Y = 4, 8, 8, p.X+8 })), true},
		{"unary-misaligned-x", emitU(withU(u, func(p *Unary) { p.X += 4 })), true},
		{"binary-ok", emitB(bin), false},
		{"binary-both-scalar", emitB(with(bin, func(p *Binary) { p.A.Scalar, p.B.Const = true, true })), true},
		{"binary-both-perrow", emitB(with(bin, func(p *Binary) { p.A.PerRow, p.B.PerRow = true, true })), true},
		{"binary-perrow-and-scalar", emitB(with(bin, func(p *Binary) { p.A.PerRow, p.B.Scalar = true, true })), true},
		{"binary-perrow-scalar-flags", emitB(with(bin, func(p *Binary) { p.B.PerRow, p.B.Scalar = true, true })), true},
		{"binary-const-scalar-flags", costB(with(bin, func(p *Binary) { p.B.Const, p.B.Scalar = true, true })), true},
		{"binary-f16-const-inexact", costB(with(bin, func(p *Binary) { p.Type, p.B = F16, Operand{Const: true, Value: 0.1} })), true},
		{"binary-f16-const-too-big", costB(with(bin, func(p *Binary) { p.Type, p.B = F16, Operand{Const: true, Value: 70000} })), true},
		{"binary-f16-const-exact", costB(with(bin, func(p *Binary) { p.Type, p.B = F16, Operand{Const: true, Value: -0.375} })), false},
		{"binary-f16-odd-stride", costB(with(bin, func(p *Binary) { p.Type, p.A.Stride = F16, 6 })), true},
		{"binary-stride0-ok", emitB(with(bin, func(p *Binary) { p.B.Stride = 0 })), false},
		{"binary-y-over-perrow", emitB(with(bin, func(p *Binary) { p.B = Operand{Addr: p.Y + 12, PerRow: true, Stride: 8} })), true},
		{"binary-perrow-in-padding", emitB(with(bin, func(p *Binary) { p.B = Operand{Addr: p.Y + 24, PerRow: true, Stride: 8} })), false},
		{"binary-perrow-misaligned", emitB(with(bin, func(p *Binary) { p.B = Operand{Addr: nonIlBuf + 2, PerRow: true, Stride: 1} })), true},
		{"binary-f16-perrow-half-aligned", emitB(with(bin, func(p *Binary) { p.Type, p.B = F16, Operand{Addr: nonIlBuf + 2, PerRow: true, Stride: 1} })), false},
		{"binary-scalar-in-y", emitB(with(bin, func(p *Binary) { p.B = Operand{Addr: p.Y + 4, Scalar: true} })), true},
		{"binary-scalar-in-y-1d", emitB(Binary{Op: Mul, N: 8, A: Operand{Addr: ilBuf}, B: Operand{Addr: nonIlBuf + 8, Scalar: true}, Y: nonIlBuf, Workers: 2}), true},
		{"binary-b-overlaps-y", emitB(with(bin, func(p *Binary) { p.B.Addr = p.Y - 8 })), true},
		{"binary-inplace", emitB(with(bin, func(p *Binary) { p.Y = p.A.Addr })), false},
		{"cast-ok", emitC(Cast{Kind: F16ToF8, R: 2, N: 5, X: ilBuf, XStride: 8, Y: nonIlBuf, YStride: 8, Workers: 3}), false},
		{"cast-fp8-stride", emitC(Cast{Kind: F16ToF8, R: 2, N: 5, X: ilBuf, XStride: 8, Y: nonIlBuf, YStride: 6, Workers: 3}), true},
		{"cast-overlap", emitC(Cast{Kind: F32ToF16, R: 2, N: 4, X: ilBuf, XStride: 4, Y: ilBuf + 8, YStride: 8, Workers: 3}), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if (c.err != nil) != c.want {
				t.Errorf("error %v, want an error: %v", c.err, c.want)
			}
		})
	}
}

// TestStreamFormulaF16 keeps the FP16 body and setup issues of Unary's
// and Binary's Cost docs true.
func TestStreamFormulaF16(t *testing.T) {
	unary := []struct {
		p           Unary
		body, setup int64
	}{
		{Unary{Op: Neg}, 8, 0}, {Unary{Op: Abs}, 8, 0}, {Unary{Op: Relu}, 3, 1},
		{Unary{Op: Exp}, 14, 0}, {Unary{Op: Sqrt}, 14, 0}, {Unary{Op: Tanh}, 14, 0},
		{Unary{Op: Sigmoid}, 26, 3}, {Unary{Op: GeluErf}, 22, 9}, {Unary{Op: GeluTanh}, 30, 12},
		{Unary{Op: PowConst, Exponent: 1.5}, 22, 2}, {Unary{Op: PowConst, Exponent: 2}, 8, 0},
		{Unary{Op: Clip, Min: 0, Max: 6}, 4, 1 + 1 + 2 + 1}, // pairs 0 and 0x46004600
		{Unary{Op: Log}, 14, 0}, {Unary{Op: Erf}, 14, 0}, {Unary{Op: Softplus}, 32, 4},
		{Unary{Op: LeakyRelu, Alpha: 0.01}, 12, 2 + 2}, {Unary{Op: Elu, Alpha: 1}, 22, 5 + 2},
		{Unary{Op: Selu, Alpha: 1.67, Gamma: 1.05}, 24, 3 + 2 + 2}, {Unary{Op: HardSigmoid, Alpha: 0.2, Beta: 0}, 14, 6 + 2 + 1},
		{Unary{Op: HardSwish}, 16, 10},
		{Unary{Op: Floor}, 34, 7}, {Unary{Op: Ceil}, 38, 7}, {Unary{Op: Round}, 28, 7}, {Unary{Op: Sign}, 16, 4}, {Unary{Op: Sin}, 14, 0}, {Unary{Op: Cos}, 14, 0},
	}
	for _, c := range unary {
		t.Run(c.p.Op.String(), func(t *testing.T) {
			p := c.p
			p.Type, p.N, p.Workers = F16, 1003, 6
			s, _ := p.stream()
			checkStream(t, s, c.body, c.setup)
		})
	}
	binary := []struct {
		op          BinaryOp
		a, b        Operand
		body, setup int64
	}{
		{Add, Operand{}, Operand{}, 4, 0},
		{Mul, Operand{}, Operand{Scalar: true, Addr: 0x60002}, 3, 1 + 1 + 2 + 2},
		{Max, Operand{Const: true, Value: 0.5}, Operand{}, 3, 2 + 1}, // pair 0x38003800
		{Pow, Operand{}, Operand{}, 25, 0},
		{Pow, Operand{}, Operand{Const: true, Value: 3}, 22, 2 + 1},
		{Div, Operand{}, Operand{}, 31, 0},
		{Div, Operand{}, Operand{Scalar: true, Addr: 0x60000}, 20, 1 + 3 + 4},
		{Div, Operand{Scalar: true, Addr: 0x60000}, Operand{}, 30, 1 + 3},
	}
	for i, c := range binary {
		t.Run(fmt.Sprintf("%s-%d", c.op, i), func(t *testing.T) {
			p := Binary{Op: c.op, Type: F16, N: 1001, A: c.a, B: c.b, Workers: 5}
			s, err := p.stream()
			if err != nil {
				t.Fatal(err)
			}
			checkStream(t, s, c.body, c.setup)
		})
	}
	perRow := []struct {
		p    Binary
		want int64
	}{
		{Binary{Op: Add, B: Operand{PerRow: true, Stride: 1}}, 2},
		{Binary{Op: Add, B: Operand{PerRow: true, Stride: 9000}}, 3},
		{Binary{Op: Div, B: Operand{PerRow: true, Stride: 1}}, 2 + 4},
		{Binary{Op: Add, Type: F16, B: Operand{PerRow: true, Stride: 2}}, 3 + 2},
		{Binary{Op: Pow, Type: F16, B: Operand{PerRow: true, Stride: 2}}, 3},
		{Binary{Op: Pow, Type: F16, B: Operand{PerRow: true, Stride: 20000}}, 4},
		{Binary{Op: Div, Type: F16, B: Operand{PerRow: true, Stride: 3}}, 8 + 4},
		{Binary{Op: Min, Type: F16, B: Operand{PerRow: true, Stride: 3}}, 8 + 2},
		{Binary{Op: Min, Type: F16, B: Operand{PerRow: true, Stride: 20001}}, 8 + 2},
	}
	for i, c := range perRow {
		t.Run(fmt.Sprintf("perrow-%s-%d", c.p.Op, i), func(t *testing.T) {
			p := c.p
			p.R, p.N, p.YStride, p.Workers = 4, 8, 8, 2
			s, err := p.stream()
			if err != nil {
				t.Fatal(err)
			}
			if got := issues(s.perRow); got != c.want {
				t.Errorf("per-row issues %d, doc says %d", got, c.want)
			}
		})
	}
}

// TestElementwiseRandomParams feeds random, mostly invalid, parameters
// to Cost and Emit: they return errors, never panic, and agree when
// both succeed.
func TestElementwiseRandomParams(t *testing.T) {
	r := rng(8)
	pick := func(v ...int) int { return v[r.Intn(len(v))] }
	// mostly returns one of good, one time in ten one of bad.
	mostly := func(good, bad []int) int {
		if r.Intn(10) == 0 {
			return pick(bad...)
		}
		return pick(good...)
	}
	addr := func() uint32 {
		return uint32(mostly([]int{ilBuf, ilBuf + 0x4000, nonIlBuf, nonIlBuf + 0x800}, []int{0, ilBuf + 2, 0xE7FF8, 0xF0000}))
	}
	stride := func() int { return mostly([]int{0, 8, 16, 64, 9000}, []int{-8, 1, 2, 4, 6, 1 << 30, math.MaxInt}) }
	operand := func() Operand {
		o := Operand{Addr: addr(), Stride: stride()}
		switch r.Intn(8) {
		case 0:
			o.Scalar = true
		case 1:
			o.Const, o.Value = true, []float32{0.1, 2, -0.5, 1e6}[r.Intn(4)]
		case 2:
			o.PerRow, o.Stride = true, pick(1, 2, 3, 9001)
		}
		o.Scalar = o.Scalar || r.Intn(20) == 0
		return o
	}
	ok := 0
	agree := func(t *testing.T, c Cost, cerr error, k Kernel, kerr error) {
		if cerr == nil && kerr == nil {
			ok++
			if diff := cmp.Diff(c, k.Cost); diff != "" {
				t.Errorf("Cost mismatch (-Cost +emitted):\n%s", diff)
			}
		}
	}
	preset := newTile().p
	for i := 0; i < 3000; i++ {
		n := mostly([]int{1, 3, 4, 7, 8}, []int{-1, 0, 9, 1 << 25})
		rows := mostly([]int{0, 1, 2, 5}, []int{-1, 1 << 25})
		w := mostly([]int{1, 3, 6}, []int{0, 7})
		typ := ElemType(mostly([]int{0, 1}, []int{2}))
		b := NewBuilder(preset, codeBase)
		switch i % 3 {
		case 0:
			p := Unary{Op: UnaryOp(pick(0, 2, 7, 10, 11)), Type: typ, N: n, R: rows, X: addr(), Y: addr(), XStride: stride(), YStride: stride(), Workers: w}
			c, cerr := p.Cost()
			k, kerr := EmitUnary(b, p)
			agree(t, c, cerr, k, kerr)
		case 1:
			p := Binary{Op: BinaryOp(pick(0, 3, 6, 7)), Type: typ, N: n, R: rows, A: operand(), B: operand(), Y: addr(), YStride: stride(), Workers: w}
			c, cerr := p.Cost()
			k, kerr := EmitBinary(b, p)
			agree(t, c, cerr, k, kerr)
		default:
			p := Cast{Kind: CastKind(pick(0, 1, 2, 3, 4, 5)), N: n, R: rows, X: addr(), Y: addr(), XStride: stride(), YStride: stride(), Workers: w}
			c, cerr := p.Cost()
			k, kerr := EmitCast(b, p)
			agree(t, c, cerr, k, kerr)
		}
	}
	if ok < 500 {
		t.Errorf("only %d of 3000 random kernels are valid", ok)
	}
}
