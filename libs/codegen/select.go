package codegen

// Select writes one operand of ONNX Where into Y where a condition says
// so and keeps Y's own value elsewhere:
//
//	WhenTrue:  Y[i] = C[i] != 0 ? V[i] : Y[i]
//	!WhenTrue: Y[i] = C[i] == 0 ? V[i] : Y[i]
//
// Where(c, a, b) is the two launches Select{C: c, V: a, WhenTrue: true}
// and Select{C: c, V: b} into one Y: each element is written by exactly
// one of them, so Y's prior contents do not matter. The condition is BOOL
// words (FP32 0.0 or 1.0, any non-zero bits true); V and Y are 4-byte
// elements (float, BOOL words, int32), copied bit for bit (f32v2sel: NaN
// payloads kept). C and V take every Operand form of Binary (arrays,
// Scalar, Const, PerRow, stride-0 rows), both may be broadcasts (Y is
// walked anyway), and R > 1 makes the kernel two-dimensional as Binary.
// Per pair of elements: the loads of the array operands, ld64 of Y,
// f32v2sel, st64.
type Select struct {
	WhenTrue bool
	N        int
	C, V     Operand
	Y        uint32
	Workers  int
	R        int // rows (0, 1: one)
	YStride  int // elements, R > 1
}

const (
	selTrue  = 1
	selFalse = 2
)

func (p Select) binary() Binary {
	sel := uint8(selFalse)
	if p.WhenTrue {
		sel = selTrue
	}
	return Binary{N: p.N, A: p.C, B: p.V, Y: p.Y, Workers: p.Workers, Type: F32, R: p.R, YStride: p.YStride, sel: sel}
}

// Cost returns the kernel's cost, counted from its code.
func (p Select) Cost() (Cost, error) {
	return p.binary().Cost()
}

// EmitSelect emits the kernel at b's current position.
func EmitSelect(b *Builder, p Select) (Kernel, error) {
	return EmitBinary(b, p.binary())
}

// EmulateSelect returns what Select writes into an element holding y.
func EmulateSelect(whenTrue bool, c, v, y uint32) uint32 {
	if (c != 0) == whenTrue {
		return v
	}
	return y
}
