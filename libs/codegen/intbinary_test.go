package codegen

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"ipu.local/libs/sim"
)

// IntBinary against int64 arithmetic on in-range values at the extremes,
// every operand form, worker counts and lengths it was not written
// around, with the cycles its Cost gives.
func TestIntBinary(t *testing.T) {
	tl := newDataTile(21)
	lo := tl.p.Memory.Lo
	forms := []struct{ a, b string }{{"array", "array"}, {"scalar", "array"}, {"array", "const"}, {"array", "inplace"}}
	i := 0
	for _, op := range []IntOp{IntAdd, IntSub, IntMul, IntEq, IntNe, IntLess, IntLessEq, IntNonZero, IntMin, IntMax, IntTrunc} {
		for _, f := range forms {
			for _, n := range []int{1, 2, 5, 13, 130} {
				i++
				p := IntBinary{Op: op, N: n, Workers: 1 + i%6, Y: ilBuf + 0x20000}
				r := rng(int64(5000 + i))
				val := func() int32 {
					if op == IntTrunc {
						// FP32 words: the in-range extremes and just
						// past them (saturated), infinities, NaNs (0),
						// signed zeros, fractions either side of
						// integers, subnormals and assorted magnitudes
						if r.Intn(2) == 0 {
							return int32(math.Float32bits([]float32{0x1p31 - 128, -0x1p31, -0x1p31 + 128, 0, float32(math.Copysign(0, -1)),
								0.5, -0.5, 1.9999999, -1.9999999, 2.5, -3.5, 0x1p-149, -0x1p-126, 0x1p24 + 2, -0x1p23 - 1,
								0x1p31, -0x1p31 - 256, 3e38, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), math.Float32frombits(0xFFC00001)}[r.Intn(22)]))
						}
						return int32(math.Float32bits(float32(r.NormFloat64() * math.Ldexp(1, r.Intn(31)))))
					}
					if op >= IntEq {
						// few values, so that equal pairs come up, at
						// the extremes too
						return []int32{0, 1, -1, 2, math.MaxInt32, math.MinInt32, boolOne}[r.Intn(7)]
					}
					if op == IntMul {
						// products near the int32 limits, both signs
						switch r.Intn(4) {
						case 0:
							return int32(r.Intn(1<<16)) - 1<<15
						case 1:
							return []int32{46340, -46340, 46341, 65535, -65536, 1, -1, 0, 32768}[r.Intn(9)]
						}
						return int32(r.Intn(200)) - 100
					}
					switch r.Intn(4) {
					case 0:
						return int32(r.Intn(1<<30)) - 1<<29 // halves: never overflow
					case 1:
						return int32(r.Intn(200)) - 100
					}
					return int32(r.Intn(1<<16)) - 1<<15
				}
				put := func(addr uint32, k int) {
					for j := 0; j < k; j++ {
						setElem(tl.mem, lo, addr+uint32(4*j), 4, uint32(val()))
					}
				}
				switch f.a {
				case "array":
					p.A = Operand{Addr: ilBuf}
					put(ilBuf, n)
				case "scalar":
					p.A = Operand{Addr: ilBuf + 4, Scalar: true}
					put(ilBuf+4, 1)
				}
				switch f.b {
				case "array":
					p.B = Operand{Addr: nonIlBuf}
					put(nonIlBuf, n)
				case "const":
					p.B = Operand{Const: true, Value: math.Float32frombits(uint32(val()))}
				case "inplace":
					p.B = Operand{Addr: nonIlBuf}
					put(nonIlBuf, n)
					p.Y = nonIlBuf
				}
				// Keep every element in range (the overflow test is below):
				// an out-of-range product gets A = 1 (or B, when A is a
				// broadcast).
				for j := 0; j < n; j++ {
					a, b := int32(getElem(tl.mem, lo, opAddr(p.A, j), 4)), int32(math.Float32bits(p.B.Value))
					if !p.B.Const {
						b = int32(getElem(tl.mem, lo, opAddr(p.B, j), 4))
					}
					if _, ok := EmulateIntBinary(op, a, b); !ok {
						if p.A.Scalar {
							setElem(tl.mem, lo, opAddr(p.B, j), 4, 1)
						} else {
							setElem(tl.mem, lo, opAddr(p.A, j), 4, 1)
						}
					}
				}
				t.Run(fmt.Sprintf("%s/%s-%s/n%d-w%d", op, f.a, f.b, n, p.Workers), func(t *testing.T) {
					get := func(mem []byte, o Operand, j int) int32 {
						switch {
						case o.Const:
							return int32(math.Float32bits(o.Value))
						case o.Scalar:
							return int32(getElem(mem, lo, o.Addr, 4))
						}
						return int32(getElem(mem, lo, o.Addr+uint32(4*j), 4))
					}
					ref := func(mem []byte) {
						src := append([]byte(nil), mem...)
						for j := 0; j < n; j++ {
							a, b := get(src, p.A, j), get(src, p.B, j)
							v, ok := EmulateIntBinary(op, a, b)
							if !ok {
								t.Fatalf("test values %d %s %d overflow", a, op, b)
							}
							setElem(mem, lo, p.Y+uint32(4*j), 4, uint32(v))
						}
					}
					tl.runChecked(t, i%Slots, func(b *Builder) (Kernel, error) { return EmitIntBinary(b, p) }, p.Cost, ref)
				})
			}
		}
	}
}

// A result outside int32 faults the device instead of wrapping.
func TestIntBinaryOverflow(t *testing.T) {
	for _, c := range []struct {
		op   IntOp
		a, b int32
	}{{IntAdd, math.MaxInt32, 1}, {IntAdd, math.MinInt32, -1}, {IntSub, math.MinInt32, 1}, {IntSub, math.MaxInt32, -1}, {IntSub, 0, math.MinInt32},
		{IntMul, 46341, 46341}, {IntMul, 65536, 65536}, {IntMul, math.MinInt32, -1}, {IntMul, 65536, 32768}, {IntMul, -65537, 32768}, {IntMul, 3, 1 << 30}} {
		tl := newTile()
		p := IntBinary{Op: c.op, N: 7, Workers: 3, A: Operand{Addr: ilBuf}, B: Operand{Addr: nonIlBuf}, Y: ilBuf + 0x1000}
		for j := 0; j < 7; j++ {
			a, b := int32(j), int32(2*j)
			if j == 5 {
				a, b = c.a, c.b
			}
			setElem(tl.mem, tl.p.Memory.Lo, ilBuf+uint32(4*j), 4, uint32(a))
			setElem(tl.mem, tl.p.Memory.Lo, nonIlBuf+uint32(4*j), 4, uint32(b))
		}
		if _, ok := EmulateIntBinary(c.op, c.a, c.b); ok {
			t.Fatalf("%d %s %d: emulation says in range", c.a, c.op, c.b)
		}
		b := NewBuilder(tl.p, codeBase)
		k, err := EmitIntBinary(b, p)
		if err != nil {
			t.Fatal(err)
		}
		sup := b.Here()
		EmitLaunch(b, k.Entry, k.Workers)
		b.Join()
		b.Halt()
		code, err := b.Finish()
		if err != nil {
			t.Fatal(err)
		}
		entry, _ := b.Addr(sup)
		if err := tl.m.Load(0, sim.Image{Entry: entry, Segments: []sim.Segment{{Addr: codeBase, Data: code, Code: true}}}); err != nil {
			t.Fatal(err)
		}
		_ = tl.m.Configure(0, sim.RegEntry, entry)
		_, err = tl.m.Run(nil, 0)
		if err == nil || !strings.Contains(err.Error(), "0x0") && !strings.Contains(strings.ToLower(err.Error()), "outside") {
			t.Errorf("%d %s %d: run error %v, want a fault outside tile memory", c.a, c.op, c.b, err)
		}
	}
}

// opAddr is element j's address of an array or Scalar operand.
func opAddr(o Operand, j int) uint32 {
	if o.Scalar {
		return o.Addr
	}
	return o.Addr + uint32(4*j)
}

// The products at the int32 limits that are in range do not fault.
func TestIntMulLimits(t *testing.T) {
	tl := newDataTile(23)
	lo := tl.p.Memory.Lo
	pairs := [][2]int32{{-65536, 32768}, {32768, -65536}, {math.MinInt32, 1}, {1, math.MinInt32}, {-1, math.MaxInt32}, {46340, 46340}, {-46340, 46340}, {65535, 32768}, {0, math.MinInt32}, {math.MinInt32, 0}}
	p := IntBinary{Op: IntMul, N: len(pairs), Workers: 4, A: Operand{Addr: ilBuf}, B: Operand{Addr: nonIlBuf}, Y: ilBuf + 0x20000}
	for j, pr := range pairs {
		setElem(tl.mem, lo, ilBuf+uint32(4*j), 4, uint32(pr[0]))
		setElem(tl.mem, lo, nonIlBuf+uint32(4*j), 4, uint32(pr[1]))
	}
	tl.runChecked(t, 0, func(b *Builder) (Kernel, error) { return EmitIntBinary(b, p) }, p.Cost, func(mem []byte) {
		for j, pr := range pairs {
			v, ok := EmulateIntBinary(IntMul, pr[0], pr[1])
			if !ok {
				t.Fatalf("%d * %d out of range", pr[0], pr[1])
			}
			setElem(mem, lo, p.Y+uint32(4*j), 4, uint32(v))
		}
	})
}
