package sim

import (
	"math"

	"ipu.local/libs/fmath"
	"ipu.local/libs/isa"
	"ipu.local/libs/numfmt"
)

// stepFloat executes the floating-point register instructions: scalar
// FP32, f32v2, f16v4, the functions and the conversions. It reports false
// for an opcode that is none of them.
func stepFloat(c *context, in *inst) bool {
	switch in.op {
	// Scalar FP32.
	case isa.FADD:
		c.a[in.d&15] = bits32(f32(c.a[in.a&15]) + f32(c.a[in.b&15]))
	case isa.FSUB:
		c.a[in.d&15] = bits32(f32(c.a[in.a&15]) - f32(c.a[in.b&15]))
	case isa.FMUL:
		c.a[in.d&15] = bits32(f32(c.a[in.a&15]) * f32(c.a[in.b&15]))
	case isa.FMA:
		c.a[in.d&15] = fma32(c.a[in.a&15], c.a[in.b&15], c.a[in.d&15])
	case isa.FMAX:
		c.a[in.d&15] = fmax32(c.a[in.a&15], c.a[in.b&15])
	case isa.FMIN:
		c.a[in.d&15] = fmin32(c.a[in.a&15], c.a[in.b&15])
	case isa.FCMPLT:
		c.a[in.d&15] = mask32(f32(c.a[in.a&15]) < f32(c.a[in.b&15]))
	case isa.FSEL:
		if c.a[in.a&15] != 0 {
			c.a[in.d&15] = c.a[in.b&15]
		} else {
			c.a[in.d&15] = c.a[in.c&15]
		}

	// f32v2.
	case isa.V2ADD, isa.V2SUB, isa.V2MUL, isa.V2FMA, isa.V2MAX, isa.V2MIN, isa.V2CMPLT, isa.V2CMPEQ:
		d, a, b := in.d&15, in.a&15, in.b&15
		for l := uint8(0); l < 2; l++ {
			p, q := c.a[(a+l)&15], c.a[(b+l)&15]
			var v uint32
			switch in.op {
			case isa.V2ADD:
				v = bits32(f32(p) + f32(q))
			case isa.V2SUB:
				v = bits32(f32(p) - f32(q))
			case isa.V2MUL:
				v = bits32(f32(p) * f32(q))
			case isa.V2FMA:
				v = fma32(p, q, c.a[(d+l)&15])
			case isa.V2MAX:
				v = fmax32(p, q)
			case isa.V2MIN:
				v = fmin32(p, q)
			case isa.V2CMPLT:
				v = mask32(f32(p) < f32(q))
			case isa.V2CMPEQ:
				v = mask32(f32(p) == f32(q))
			}
			c.a[(d+l)&15] = v
		}
	case isa.V2SEL:
		d, a, b, cc := in.d&15, in.a&15, in.b&15, in.c&15
		lo0, lo1 := c.a[b], c.a[(b+1)&15]
		if c.a[a] == 0 {
			lo0 = c.a[cc]
		}
		if c.a[(a+1)&15] == 0 {
			lo1 = c.a[(cc+1)&15]
		}
		c.a[d], c.a[(d+1)&15] = lo0, lo1

	// f16v4.
	case isa.H4ADD, isa.H4SUB, isa.H4MUL, isa.H4FMA, isa.H4MAX, isa.H4MIN, isa.H4CMPLT, isa.H4CMPEQ:
		d, a, b := in.d&15, in.a&15, in.b&15
		x, y := uint64(c.a[a])|uint64(c.a[(a+1)&15])<<32, uint64(c.a[b])|uint64(c.a[(b+1)&15])<<32
		var v uint64
		switch in.op {
		case isa.H4MAX, isa.H4MIN:
			v = h4maxmin(x, y, in.op == isa.H4MAX)
		case isa.H4CMPLT, isa.H4CMPEQ:
			v = h4op(in.op, x, y, 0)
		default:
			v = h4arith(in.op, x, y, uint64(c.a[d])|uint64(c.a[(d+1)&15])<<32, halfTable())
		}
		c.a[d], c.a[(d+1)&15] = uint32(v), uint32(v>>32)
	case isa.H4SEL:
		d, a, b, cc := in.d&15, in.a&15, in.b&15, in.c&15
		c.a[d], c.a[(d+1)&15] = sel16(c.a[a], c.a[b], c.a[cc]), sel16(c.a[(a+1)&15], c.a[(b+1)&15], c.a[(cc+1)&15])

	// FP32 functions.
	case isa.FEXP:
		c.a[in.d&15] = bits32(fmath.Exp(f32(c.a[in.a&15])))
	case isa.FLOG:
		c.a[in.d&15] = bits32(fmath.Log(f32(c.a[in.a&15])))
	case isa.FRCP:
		c.a[in.d&15] = bits32(1 / f32(c.a[in.a&15]))
	case isa.FRSQRT:
		c.a[in.d&15] = bits32(float32(1 / math.Sqrt(float64(f32(c.a[in.a&15])))))
	case isa.FSQRT:
		c.a[in.d&15] = bits32(float32(math.Sqrt(float64(f32(c.a[in.a&15])))))
	case isa.FTANH:
		c.a[in.d&15] = bits32(fmath.Tanh(f32(c.a[in.a&15])))
	case isa.FERF:
		c.a[in.d&15] = bits32(fmath.Erf(f32(c.a[in.a&15])))
	case isa.FSIN:
		c.a[in.d&15] = bits32(fmath.Sin(f32(c.a[in.a&15])))
	case isa.FCOS:
		c.a[in.d&15] = bits32(fmath.Cos(f32(c.a[in.a&15])))
	case isa.FABS:
		c.a[in.d&15] = c.a[in.a&15] &^ 0x80000000
	case isa.FNEG:
		c.a[in.d&15] = c.a[in.a&15] ^ 0x80000000
	case isa.FPOW:
		c.a[in.d&15] = bits32(fmath.Pow(f32(c.a[in.a&15]), f32(c.a[in.b&15])))
	case isa.V2EXP, isa.V2RCP, isa.V2ABS, isa.V2NEG:
		d, a := in.d&15, in.a&15
		for l := uint8(0); l < 2; l++ {
			v := c.a[(a+l)&15]
			switch in.op {
			case isa.V2EXP:
				v = bits32(fmath.Exp(f32(v)))
			case isa.V2RCP:
				v = bits32(1 / f32(v))
			case isa.V2ABS:
				v &^= 0x80000000
			case isa.V2NEG:
				v ^= 0x80000000
			}
			c.a[(d+l)&15] = v
		}

	// Conversions.
	case isa.CVTFH:
		a := in.a & 15
		c.a[in.d&15] = uint32(numfmt.F32ToF16(c.a[a])) | uint32(numfmt.F32ToF16(c.a[(a+1)&15]))<<16
	case isa.CVTHF:
		v, d := c.a[in.a&15], in.d&15
		c.a[d], c.a[(d+1)&15] = f16to32(uint16(v)), f16to32(uint16(v>>16))
	case isa.CVTH8:
		cfg := decodeFP8(c.fp8)
		a := in.a & 15
		var v uint32
		hv := uint64(c.a[a]) | uint64(c.a[(a+1)&15])<<32
		for i := 0; i < 4; i++ {
			v |= uint32(numfmt.F16ToF8Dev(uint16(hv>>(16*i)), cfg.fa, cfg.sa, cfg.mode)) << (8 * i)
		}
		c.a[in.d&15] = v
	case isa.CVT8H:
		cfg := decodeFP8(c.fp8)
		v, d := c.a[in.a&15], in.d&15
		var h [4]uint32
		for i := range h {
			h[i] = uint32(numfmt.F8ToF16(uint8(v>>(8*i)), cfg.fa, cfg.sa))
		}
		c.a[d], c.a[(d+1)&15] = h[0]|h[1]<<16, h[2]|h[3]<<16
	case isa.CVTF8:
		cfg := decodeFP8(c.fp8)
		a := in.a & 15
		c.a[in.d&15] = uint32(numfmt.F32ToF8Dev(c.a[a], cfg.fa, cfg.sa, cfg.mode)) |
			uint32(numfmt.F32ToF8Dev(c.a[(a+1)&15], cfg.fa, cfg.sa, cfg.mode))<<8
	case isa.CVTF8H:
		cfg := decodeFP8(c.fp8)
		a, d := in.a&15, in.d&15
		c.a[d] = c.a[d]&0xFFFF | uint32(numfmt.F32ToF8Dev(c.a[a], cfg.fa, cfg.sa, cfg.mode))<<16 |
			uint32(numfmt.F32ToF8Dev(c.a[(a+1)&15], cfg.fa, cfg.sa, cfg.mode))<<24
	case isa.CVT8F:
		cfg := decodeFP8(c.fp8)
		v, d := c.a[in.a&15], in.d&15
		c.a[d], c.a[(d+1)&15] = numfmt.F8ToF32(uint8(v), cfg.fa, cfg.sa), numfmt.F8ToF32(uint8(v>>8), cfg.fa, cfg.sa)
	case isa.CVTIF:
		c.a[in.d&15] = math.Float32bits(float32(int32(c.a[in.a&15])))
	case isa.CVTFI:
		c.a[in.d&15] = f32toi32(c.a[in.a&15])
	case isa.FSUM2:
		a := in.a & 15
		c.a[in.d&15] = bits32(f32(c.a[a]) + f32(c.a[(a+1)&15]))
	case isa.H4SUMF:
		a := in.a & 15
		lo, hi := c.a[a], c.a[(a+1)&15]
		sum := f32(f16to32(uint16(lo))) + f32(f16to32(uint16(lo>>16)))
		sum = float32(sum) + f32(f16to32(uint16(hi)))
		sum = float32(sum) + f32(f16to32(uint16(hi>>16)))
		c.a[in.d&15] = bits32(sum)

	default:
		return false
	}
	return true
}
