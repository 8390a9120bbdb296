package codegen

import (
	"fmt"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRows(t *testing.T) {
	tl := newTile()
	shapes := []struct{ r, c, w, pad int }{
		{1, 1, 6, 1}, {3, 2, 6, 0}, {5, 7, 2, 1}, {13, 64, 6, 2}, {8, 101, 6, 1}, {7, 33, 4, 3},
	}
	type variant struct {
		op         RowOp
		scale, bia bool
		outs       bool
	}
	variants := []variant{
		{op: Softmax}, {op: LogSoftmax}, {op: ReduceSum}, {op: ReduceMean},
		{op: LayerNorm}, {op: LayerNorm, scale: true}, {op: LayerNorm, bia: true},
		{op: LayerNorm, scale: true, bia: true, outs: true},
	}
	for vi, v := range variants {
		for si, sh := range shapes {
			name := fmt.Sprintf("%s/%dx%d-w%d", v.op, sh.r, sh.c, sh.w)
			if v.op == LayerNorm {
				name = fmt.Sprintf("%s-g%v-b%v/%dx%d-w%d", v.op, v.scale, v.bia, sh.r, sh.c, sh.w)
			}
			t.Run(name, func(t *testing.T) {
				stride := sh.c + sh.c%2 + 2*(sh.pad/2)
				p := Rows{Op: v.op, R: sh.r, C: sh.c, X: ilBuf, XStride: stride, Y: nonIlBuf, YStride: stride + 2*(si%2), Workers: sh.w, Epsilon: 1e-5}
				if si == 3 && !v.op.reduces() {
					p.Y, p.YStride = p.X, p.XStride // in place
				}
				r := rng(int64(100*vi + si))
				x := make([][]float32, p.R)
				for i := range x {
					x[i] = randF32(r, p.C, -6, 6)
					if v.op == LayerNorm {
						for j := range x[i] {
							x[i][j] = float32(3 + 2*r.NormFloat64())
						}
					}
					tl.putF32(p.X+uint32(4*i*p.XStride), x[i])
				}
				var g, b []float32
				if v.scale {
					g = randF32(r, p.C, 0.5, 1.5)
					p.Scale = ilBuf + 0x40000
					tl.putF32(p.Scale, g)
				}
				if v.bia {
					b = randF32(r, p.C, -1, 1)
					p.Bias = ilBuf + 0x41000
					tl.putF32(p.Bias, b)
				}
				if v.outs {
					p.Mean, p.InvStdDev = ilBuf+0x42000, ilBuf+0x43000
				}
				phase := (vi + si) % Slots
				k, cycles := tl.runKernel(t, phase, func(bd *Builder) (Kernel, error) { return EmitRows(bd, p) })
				for i := 0; i < p.R; i++ {
					want, mu, rs := EmulateRow(p, x[i], g, b)
					var got []float32
					if v.op.reduces() {
						got = readF32(tl, p.Y+uint32(4*i), 1)
					} else {
						got = readF32(tl, p.Y+uint32(4*i*p.YStride), p.C)
					}
					if diff := cmp.Diff(f32bits(want), f32bits(got)); diff != "" {
						t.Fatalf("row %d mismatch (-want +got):\n%s", i, diff)
					}
					if v.outs {
						gm, gr := readF32(tl, p.Mean+uint32(4*i), 1)[0], readF32(tl, p.InvStdDev+uint32(4*i), 1)[0]
						if gm != mu || gr != rs {
							t.Fatalf("row %d: mean, inverse std %g, %g; want %g, %g", i, gm, gr, mu, rs)
						}
					}
					checkRowBound(t, p, i, x[i], g, b, got)
				}
				checkCycles(t, k, cycles, phase)
				if f, err := p.Cost(); err != nil || f.CyclesAt(phase) != k.CyclesAt(phase) {
					t.Errorf("Cost() = %v, %v; want the emitted kernel's %d", f.CyclesAt(phase), err, k.CyclesAt(phase))
				}
			})
		}
	}
}

// checkRowBound compares a row with float64 math, within bounds derived
// from the roundings of the documented order (first order in u; the
// factor 1.01 covers the second-order terms).
func checkRowBound(t *testing.T, p Rows, row int, x, g, b []float32, y []float32) {
	t.Helper()
	n := len(x)
	gs := gamma((n+1)/2 + 1) // one lane's additions plus the lane sum
	xs := make([]float64, n)
	sum, abs := 0.0, 0.0
	for j, v := range x {
		xs[j] = float64(v)
		sum += xs[j]
		abs += math.Abs(xs[j])
	}
	fail := func(j int, got, exact, bound float64) {
		t.Errorf("row %d element %d: got %g, exact %g: error %g above bound %g", row, j, got, exact, math.Abs(got-exact), bound)
	}
	switch p.Op {
	case ReduceSum:
		if e, bd := math.Abs(float64(y[0])-sum), gs*abs; e > bd {
			fail(0, float64(y[0]), sum, bd)
		}
	case ReduceMean:
		mean := sum / float64(n)
		if e, bd := math.Abs(float64(y[0])-mean), 1.01*(gs*abs/float64(n)+2*u*math.Abs(mean)); e > bd {
			fail(0, float64(y[0]), mean, bd)
		}
	case Softmax, LogSoftmax:
		m := math.Inf(-1)
		for _, v := range xs {
			m = math.Max(m, v)
		}
		s, maxD := 0.0, 0.0
		for _, v := range xs {
			s += math.Exp(v - m)
			maxD = math.Max(maxD, m-v)
		}
		// e_j = exp(RN(x_j - m)) rounded: relative error u(|x_j-m|+1);
		// s adds the lane-sum bound.
		es := gs + u*(maxD+1)
		for j, v := range xs {
			ej := u * (m - v + 1)
			if p.Op == Softmax {
				exact := math.Exp(v-m) / s
				if bd := 1.01 * exact * (ej + es + 2*u); math.Abs(float64(y[j])-exact) > bd {
					fail(j, float64(y[j]), exact, bd)
				}
				continue
			}
			exact := v - m - math.Log(s)
			bd := 1.01 * (u*(m-v) + es + u*math.Log(s) + u*math.Abs(exact))
			if math.Abs(float64(y[j])-exact) > bd {
				fail(j, float64(y[j]), exact, bd)
			}
		}
	case LayerNorm:
		mu := sum / float64(n)
		v, absD := 0.0, 0.0
		for _, x := range xs {
			v += (x - mu) * (x - mu)
			absD += math.Abs(x - mu)
		}
		v /= float64(n)
		absD /= float64(n)
		eps := float64(p.Epsilon)
		r := 1 / math.Sqrt(v+eps)
		dmu := gs*abs/float64(n) + 2*u*math.Abs(mu)
		// q's lane sums of fused d*d: gs relative, plus 2|d|(u|d| + dmu)
		// from the rounded d; then *c, +eps, rsqrt: 2u + u + u.
		eVar := (gs*v+2*absD*dmu+2*u*v)/(v+eps) + u
		eR := 0.5*eVar + 2*u
		for j, x := range xs {
			d := x - mu
			gj, bj := 1.0, 0.0
			if g != nil {
				gj = float64(g[j])
			}
			if b != nil {
				bj = float64(b[j])
			}
			exact := d*r*gj + bj
			bd := 1.01 * (math.Abs(gj)*r*(math.Abs(d)*(eR+2*u)+dmu) + u*math.Abs(exact) + u*math.Abs(bj))
			if math.Abs(float64(y[j])-exact) > bd {
				fail(j, float64(y[j]), exact, bd)
			}
		}
	}
}

func TestRowsLong(t *testing.T) {
	tl := newTile()
	// Rows longer than an rpti count (C/2 > 4095) and strides beyond an
	// imm16 byte offset.
	for _, op := range []RowOp{ReduceMean, Softmax} {
		t.Run(op.String(), func(t *testing.T) {
			p := Rows{Op: op, R: 3, C: 8195, X: ilBuf, XStride: 8200, Y: ilBuf + 0x30000, YStride: 8198, Workers: 6}
			x := make([][]float32, p.R)
			for i := range x {
				x[i] = randF32(rng(int64(i)), p.C, -3, 3)
				tl.putF32(p.X+uint32(4*i*p.XStride), x[i])
			}
			k, cycles := tl.runKernel(t, 0, func(bd *Builder) (Kernel, error) { return EmitRows(bd, p) })
			for i := range x {
				want, _, _ := EmulateRow(p, x[i], nil, nil)
				var got []float32
				if op.reduces() {
					got = readF32(tl, p.Y+uint32(4*i), 1)
				} else {
					got = readF32(tl, p.Y+uint32(4*i*p.YStride), p.C)
				}
				if diff := cmp.Diff(f32bits(want), f32bits(got)); diff != "" {
					t.Fatalf("row %d mismatch (-want +got):\n%s", i, diff)
				}
				checkRowBound(t, p, i, x[i], nil, nil, got)
			}
			checkCycles(t, k, cycles, 0)
		})
	}
}
