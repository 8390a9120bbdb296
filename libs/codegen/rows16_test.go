package codegen

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"ipu.local/libs/numfmt"
)

// rowF16Specials are FP16 bit patterns mixed into some rows: NaNs with
// payloads (quiet and signalling), infinities, signed zeros, subnormals.
var rowF16Specials = []uint16{0x7E01, 0xFD55, 0x7C01, 0x7C00, 0xFC00, 0x8000, 0x0000, 0x0001, 0x83FF, 0x7BFF}

// rowBytes returns n random values in [lo, hi) stored as FP16 or FP32,
// with specials at a few places when special.
func rowBytes(r *rand.Rand, n int, f16 bool, lo, hi float64, special bool) []byte {
	var out []byte
	for i := 0; i < n; i++ {
		v := lo + (hi-lo)*r.Float64()
		if f16 {
			h := numfmt.F64ToF16(v)
			if special && r.Intn(4) == 0 {
				h = rowF16Specials[r.Intn(len(rowF16Specials))]
			}
			out = binary.LittleEndian.AppendUint16(out, h)
			continue
		}
		b := math.Float32bits(float32(v))
		if special && r.Intn(4) == 0 {
			b = numfmt.F16ToF32(rowF16Specials[r.Intn(len(rowF16Specials))])
		}
		out = binary.LittleEndian.AppendUint32(out, b)
	}
	return out
}

// TestRows16 runs the FP16 forms of Rows on the simulator: every byte of
// Y's area (rows, padding and guard) as EmulateRowBytes says, Mean and
// InvStdDev as EmulateRow's, cycles equal to Cost.
func TestRows16(t *testing.T) {
	type variant struct {
		op              RowOp
		in, out, sf16   bool
		scale, bia, mom bool
	}
	var variants []variant
	for _, io := range [][2]bool{{true, false}, {false, true}, {true, true}} {
		for _, op := range []RowOp{Softmax, LogSoftmax, ReduceSum, ReduceMean, LayerNorm} {
			variants = append(variants, variant{op: op, in: io[0], out: io[1]})
		}
		variants = append(variants,
			variant{op: LayerNorm, in: io[0], out: io[1], scale: true, bia: true, sf16: true, mom: true},
			variant{op: LayerNorm, in: io[0], out: io[1], scale: true, sf16: io[1]},
			variant{op: LayerNorm, in: io[0], out: io[1], bia: true, sf16: io[0]})
	}
	variants = append(variants, variant{op: LayerNorm, scale: true, bia: true, sf16: true})
	shapes := []struct{ r, c, w, pad int }{
		{1, 1, 6, 0}, {3, 2, 6, 1}, {5, 3, 2, 0}, {4, 4, 3, 2}, {13, 5, 6, 1}, {6, 7, 4, 0},
		{2, 64, 1, 0}, {8, 101, 6, 3}, {7, 130, 5, 1}, {9, 33, 6, 0},
	}
	const xBase, yBase, gBase, bBase, mBase, iBase, guard = 0x80000, 0xA0000, 0x60000, 0x61000, 0x62000, 0x63000, 32
	tl := newTile()
	for vi, v := range variants {
		for si, sh := range shapes {
			name := fmt.Sprintf("%s-in%v-out%v-s%v-g%v-b%v/%dx%d-w%d", v.op, v.in, v.out, v.sf16, v.scale, v.bia, sh.r, sh.c, sh.w)
			t.Run(name, func(t *testing.T) {
				p := Rows{Op: v.op, R: sh.r, C: sh.c, X: xBase, Y: yBase, Workers: sh.w, Epsilon: 1e-3, InF16: v.in, OutF16: v.out, ScaleF16: v.sf16}
				round := func(c int, f16 bool) int {
					if f16 {
						return (c + 3) &^ 3
					}
					return (c + 1) &^ 1
				}
				xm, ym := 2, 2
				if v.in {
					xm = 4
				}
				if v.out {
					ym = 4
				}
				p.XStride = round(sh.c, v.in) + xm*(sh.pad%2)
				p.YStride = round(sh.c, v.out) + ym*(sh.pad/2)
				inPlace := v.in == v.out && !v.op.reduces() && si%3 == 1
				if inPlace {
					p.Y, p.YStride = p.X, p.XStride
				}
				if v.scale {
					p.Scale = gBase
				}
				if v.bia {
					p.Bias = bBase
				}
				if v.mom {
					p.Mean, p.InvStdDev = mBase, iBase
				}
				r := rng(int64(1000*vi + si))
				xe, ye := int(p.xSize()), int(p.ySize())
				lo, hi := -8.0, 8.0
				if v.op == LayerNorm {
					lo, hi = -1, 5
				}
				x := rowBytes(r, p.R*p.XStride, v.in, lo, hi, false)
				for i := 1; i < p.R; i += 4 { // specials in some rows
					copy(x[xe*i*p.XStride:], rowBytes(r, p.C, v.in, lo, hi, true))
				}
				var g, b []byte
				if v.scale {
					g = rowBytes(r, p.C, v.sf16, 0.5, 1.5, false)
					tl.put(p.Scale, g)
				}
				if v.bia {
					b = rowBytes(r, p.C, v.sf16, -1, 1, false)
					tl.put(p.Bias, b)
				}
				ySpan := ye * ((p.R-1)*p.YStride + p.C)
				if v.op.reduces() {
					ySpan = ye * p.R
				}
				area := randBytes(r, ySpan+2*guard)
				if inPlace {
					area = append(append(randBytes(r, guard), x[:ySpan]...), randBytes(r, guard)...)
				}
				want := append([]byte(nil), area...)
				var mus, rs []float32
				for i := 0; i < p.R; i++ {
					var gi, bi []byte
					if v.scale {
						gi = g
					}
					if v.bia {
						bi = b
					}
					y, mu, rr := EmulateRowBytes(p, x[xe*i*p.XStride:], gi, bi)
					if y == nil {
						t.Fatal("EmulateRowBytes gave nil")
					}
					at := guard + ye*i*p.YStride
					if v.op.reduces() {
						at = guard + ye*i
					}
					copy(want[at:], y)
					mus, rs = append(mus, mu), append(rs, rr)
				}
				phases := []int{(vi + si) % Slots}
				if si == 4 && vi%5 == 0 {
					phases = []int{0, 1, 2, 3, 4, 5}
				}
				for _, phase := range phases {
					tl.put(p.X, x)
					tl.put(p.Y-guard, area)
					k, cycles := tl.runKernel(t, phase, func(bd *Builder) (Kernel, error) { return EmitRows(bd, p) })
					if d := cmp.Diff(want, tl.get(p.Y-guard, len(want))); d != "" {
						t.Fatalf("phase %d: Y mismatch (-want +got):\n%s", phase, d)
					}
					if v.mom {
						if d := cmp.Diff(f32bits(mus), tl.getBits(p.Mean, p.R)); d != "" {
							t.Errorf("mean mismatch (-want +got):\n%s", d)
						}
						if d := cmp.Diff(f32bits(rs), tl.getBits(p.InvStdDev, p.R)); d != "" {
							t.Errorf("inverse std mismatch (-want +got):\n%s", d)
						}
					}
					checkCycles(t, k, cycles, phase)
					if c, err := p.Cost(); err != nil || c.CyclesAt(phase) != cycles {
						t.Errorf("Cost() = %v, %v; measured %d", c.CyclesAt(phase), err, cycles)
					}
				}
			})
		}
	}
}

// TestRows16Max checks the FP16 maximum of Softmax's and LogSoftmax's
// first pass (f16v4max) on the rows where its order matters: zeros of
// both signs as the maximum (LogSoftmax's y_j = (x_j - m) - l keeps the
// sign of a zero when l = 0), -Inf, NaNs with payloads among them, rows
// of 1 to 11 elements (quads, the last pair, the odd element), whole
// rows and the split chunks: Y bit for bit as EmulateRowBytes, which
// takes the maximum in FP32 pairs.
func TestRows16Max(t *testing.T) {
	rows := [][]uint16{
		{0x8000},
		{0x8000, 0x0000},
		{0x0000, 0x8000, 0x8000},
		{0x8000, 0x8000, 0x8000, 0x0000, 0x8000},
		{0x8000, 0x8000, 0x8000, 0x8000, 0x8000, 0x8000, 0x8000},
		{0xFC00, 0xFC00, 0x8000, 0xFC00, 0xFC00, 0xFC00, 0xFC00, 0xFC00, 0xFC00},
		{0xFC00, 0xFC00, 0xFC00, 0xFC00},
		{0xBC00, 0x7E01, 0x8000, 0x0000, 0xFD55, 0x3C00},
		{0xC000, 0xC200, 0x8000, 0xC400, 0xC500, 0xC600, 0xC700, 0xC800, 0xC880, 0xC900, 0xC980},
		{0x7C01, 0x0000, 0x0000, 0x0000, 0x0000, 0x0000, 0x0000, 0x0000},
	}
	const xBase, yBase = 0x80000, 0xA0000
	tl := newTile()
	for _, op := range []RowOp{Softmax, LogSoftmax} {
		for ri, row := range rows {
			for _, split := range []bool{false, true} {
				if split && len(row) < 8 {
					continue
				}
				t.Run(fmt.Sprintf("%s/row%d/split%v", op, ri, split), func(t *testing.T) {
					C := len(row)
					p := Rows{Op: op, R: 1, C: C, X: xBase, Y: yBase, XStride: (C + 3) &^ 3, YStride: (C + 1) &^ 1, Workers: 6, InF16: true}
					x := make([]byte, 2*p.XStride)
					for j, h := range row {
						binary.LittleEndian.PutUint16(x[2*j:], h)
					}
					want, _, _ := EmulateRowBytes(p, x, nil, nil)
					launches := []Rows{p}
					if split {
						seq := p.splitSeq((C+3)/4, 4, 0x90000)
						launches = seq
						want, _, _ = EmulateRowBytes(seq[0], x, nil, nil)
					}
					tl.put(p.X, x)
					tl.put(p.Y, make([]byte, 4*C))
					for _, q := range launches {
						tl.runKernel(t, 0, func(bd *Builder) (Kernel, error) { return EmitRows(bd, q) })
					}
					if d := cmp.Diff(want, tl.get(p.Y, len(want))); d != "" {
						t.Fatalf("Y mismatch (-want +got):\n%s", d)
					}
				})
			}
		}
	}
}

// TestRows16Errors checks the FP16 alignment rules.
func TestRows16Errors(t *testing.T) {
	tl := newTile()
	cases := []struct {
		p    Rows
		want string
	}{
		{Rows{Op: Softmax, R: 2, C: 6, X: 0x80000, XStride: 6, Y: 0x90000, YStride: 8, Workers: 2, InF16: true},
			"row strides 6, 8: want strides of at least C=6, multiples of 4 (X) and 2 (Y)"},
		{Rows{Op: Softmax, R: 2, C: 6, X: 0x80000, XStride: 8, Y: 0x90000, YStride: 6, Workers: 2, OutF16: true},
			"multiples of 2 (X) and 4 (Y)"},
		{Rows{Op: ReduceSum, R: 3, C: 5, X: 0x80000, XStride: 8, Y: 0x90002, Workers: 2, InF16: true, OutF16: true},
			"Y at 0x90002 is not 4-byte aligned"},
		{Rows{Op: LayerNorm, R: 3, C: 5, X: 0x80000, XStride: 8, Y: 0x90000, YStride: 8, Scale: 0x70002, Workers: 2, ScaleF16: true, InF16: true, OutF16: true},
			"scale at 0x70002 is not 4-byte aligned"},
		{Rows{Op: Softmax, R: 2, C: 6, X: 0x80000, XStride: 8, Y: 0x80000, YStride: 8, Workers: 2, InF16: true},
			"overlaps"},
		{Rows{Op: ReduceMean, R: 2, C: 6, X: 0x80000, XStride: 8, Y: 0x90000, Workers: 2, ScaleF16: true},
			"are LayerNorm's"},
	}
	for i, c := range cases {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			_, err := EmitRows(NewBuilder(tl.p, codeBase), c.p)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one with %q", err, c.want)
			}
		})
	}
	// In place FP16.
	ok := Rows{Op: LayerNorm, R: 3, C: 5, X: 0x80000, XStride: 8, Y: 0x80000, YStride: 8, Workers: 2, InF16: true, OutF16: true}
	if _, err := EmitRows(NewBuilder(tl.p, codeBase), ok); err != nil {
		t.Errorf("in place: %v", err)
	}
	if y, _, _ := EmulateRowBytes(ok, make([]byte, 9), nil, nil); y != nil {
		t.Errorf("short row: EmulateRowBytes gave %d bytes, want nil", len(y))
	}
}

// TestRows16Formula recomputes the FP16 forms' cost from the rules in
// Rows.Cost's doc: the FP32 row formula with each quad pass's changes.
func TestRows16Formula(t *testing.T) {
	b2i := func(v bool) int64 {
		if v {
			return 1
		}
		return 0
	}
	for _, op := range []RowOp{Softmax, LogSoftmax, ReduceSum, ReduceMean, LayerNorm} {
		for _, c := range []int{1, 2, 3, 5, 6, 7, 77, 128, 16390, 16393} {
			for fl := 1; fl < 16; fl++ {
				in, out, sf16, vecs := fl&1 != 0, fl&2 != 0, fl&4 != 0, fl&8 != 0
				if op != LayerNorm && (sf16 || vecs) {
					continue
				}
				p := Rows{Op: op, R: 7, C: c, XStride: (c + 3) &^ 3, YStride: (c + 3) &^ 3, Workers: 3, Epsilon: 1e-5,
					InF16: in, OutF16: out, ScaleF16: sf16}
				if vecs {
					p.Scale, p.Bias, p.Mean = 8, 16, 24
				}
				t.Run(fmt.Sprintf("%s/c%d/in%v-out%v-s%v-v%v", op, c, in, out, sf16, vecs), func(t *testing.T) {
					P, tt := int64(c/2), int64(c%2)
					Q, r2 := int64(c/4), int64(c%4/2)
					L, L4 := b2i(P > 0), b2i(Q > 0)
					// The FP32 row (with its advance) and prologue.
					var row, pro int64
					pro = 4 + 3 + 1 + loadBigIssues(p.xSize()*int64(p.XStride))
					if !op.reduces() {
						pro += loadBigIssues(p.ySize() * int64(p.YStride))
					}
					var passes []rowPass
					switch op {
					case Softmax, LogSoftmax:
						pro += 3
						row = 16 + 3*L + 13*P + 11*tt
					case ReduceSum, ReduceMean:
						row = 7 + L + 2*P + 2*tt
						if op == ReduceMean {
							row++
							pro += int64(F32Len(p.invC()))
						}
					case LayerNorm:
						pro += int64(F32Len(p.invC())+F32Len(p.Epsilon)) + b2i(vecs)
						e := int64(4) + 3*b2i(vecs)
						row = 19 + 3*L + 5*P + 5*tt + (P+tt)*e + b2i(vecs) + 2*b2i(vecs)
						row += 2 * b2i(sf16 && vecs) * (P + tt) // one f16v2tof32 per vector load
					}
					// Pass by pass changes.
					passes = p.passes()
					var pairs, quads bool
					for i, ps := range passes {
						if op == Softmax && out && i == 1 {
							row -= P + tt + 1 // no store of e, no reset of Y's pointer
						}
						if op == Softmax && out && i == 2 {
							row += 5*P + 3*tt + 1 // e again, X's pointer reset
						}
						if !p.quads(ps) {
							pairs = true
							continue
						}
						quads = true
						din, dout := b2i(in), b2i(ps.out && out)
						row += L4 - L + (Q+r2)*(din+dout) + tt*(din+7*dout)
						if (op == Softmax || op == LogSoftmax) && in && i == 0 {
							row += 3 - 3*Q // f16v4max a quad, the lanes converted once
						}
					}
					if pairs && P > MaxRptiCount {
						pro += int64(ConstLen(uint32(P)))
					}
					if quads && Q > MaxRptiCount {
						pro += int64(ConstLen(uint32(Q)))
					}
					want := make([]int64, 0, 4)
					if p.reduce16() {
						pro++ // the odd-row flag
						bare := row - 4
						_, _, npairs, odd := p.split16()
						for w := range npairs {
							want = append(want, Slots*(pro+2+int64(npairs[w])*(2*bare+2+4)+b2i(odd[w])*(bare+8)))
						}
					} else {
						_, count := split(p.R, 3)
						for w := range count {
							want = append(want, Slots*(pro+int64(count[w])*row))
						}
					}
					got, err := p.Cost()
					if err != nil {
						t.Fatal(err)
					}
					if d := cmp.Diff(want, got.Work); d != "" {
						t.Errorf("work mismatch (-doc +Cost):\n%s", d)
					}
				})
			}
		}
	}
}
