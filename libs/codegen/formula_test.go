package codegen

import (
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"ipu.local/libs/numfmt"
)

// These tests keep the cost formulas written in the doc comments true:
// they recompute them from the doc and compare with Cost.

func TestRowsFormula(t *testing.T) {
	b2i := func(v bool) int64 {
		if v {
			return 1
		}
		return 0
	}
	for _, op := range []RowOp{Softmax, LogSoftmax, ReduceSum, ReduceMean, LayerNorm} {
		for _, c := range []int{1, 2, 3, 10, 77, 8190, 8193} {
			for _, opt := range []int{0, 1, 2, 3} {
				p := Rows{Op: op, R: 9, C: c, X: 0, XStride: c + c%2, Y: 0, YStride: c + c%2 + 2*(opt%2), Workers: 4, Epsilon: 1e-5}
				if op == LayerNorm {
					if opt&1 != 0 {
						p.Scale, p.Mean = 8, 16
					}
					if opt&2 != 0 {
						p.Bias, p.InvStdDev = 24, 32
					}
				}
				if opt == 3 && !op.reduces() {
					p.XStride = 9000 // 36000 bytes: not an imm16
				}
				t.Run(fmt.Sprintf("%s/c%d/opt%d", op, c, opt), func(t *testing.T) {
					P, tt := int64(c/2), int64(c%2)
					L := b2i(P > 0)
					pro := int64(4 + 3 + 1)
					if P > MaxRptiCount {
						pro += int64(ConstLen(uint32(P)))
					}
					pro += loadBigIssues(4*int64(p.XStride)) + b2i(!op.reduces())*loadBigIssues(4*int64(p.YStride))
					var row int64
					switch op {
					case Softmax, LogSoftmax:
						pro += 3
						row = 16 + 3*L + 13*P + 11*tt
					case ReduceSum:
						row = 7 + L + 2*P + 2*tt
					case ReduceMean:
						pro += int64(F32Len(p.invC()))
						row = 8 + L + 2*P + 2*tt
					case LayerNorm:
						pro += int64(F32Len(p.invC())+F32Len(p.Epsilon)) + b2i(p.Mean != 0) + b2i(p.InvStdDev != 0)
						e := int64(4)
						switch {
						case p.Scale != 0 && p.Bias != 0:
							e = 7
						case p.Scale != 0 || p.Bias != 0:
							e = 6
						}
						outs := b2i(p.Mean != 0) + b2i(p.InvStdDev != 0)
						vecs := b2i(p.Scale != 0) + b2i(p.Bias != 0)
						row = 19 + 3*L + 5*P + 5*tt + (P+tt)*e + outs + vecs
					}
					_, count := split(p.R, 4)
					want := make([]int64, 4)
					for w := range want {
						want[w] = Slots * (pro + int64(count[w])*row)
					}
					got, err := p.Cost()
					if err != nil {
						t.Fatal(err)
					}
					if diff := cmp.Diff(want, got.Work); diff != "" {
						t.Errorf("work mismatch (-doc +Cost):\n%s", diff)
					}
				})
			}
		}
	}
}

func TestStreamFormula(t *testing.T) {
	// Body (per pair) and setup issues from Unary's and Binary's docs.
	unary := []struct {
		p           Unary
		body, setup int64
	}{
		{Unary{Op: Neg}, 3, 0}, {Unary{Op: Abs}, 3, 0}, {Unary{Op: Relu}, 3, 1},
		{Unary{Op: Exp}, 6, 0}, {Unary{Op: Sqrt}, 6, 0}, {Unary{Op: Tanh}, 6, 0},
		{Unary{Op: Sigmoid}, 12, 3}, {Unary{Op: GeluErf}, 10, 9}, {Unary{Op: GeluTanh}, 14, 12},
		{Unary{Op: PowConst, Exponent: 1.5}, 10, 2}, {Unary{Op: PowConst, Exponent: 2}, 3, 0},
		{Unary{Op: Clip, Min: 0, Max: 6}, 4, (1 + 1) + (2 + 1)}, // ConstLen(0) = 1, ConstLen(6) = 2
		{Unary{Op: Log}, 6, 0}, {Unary{Op: Erf}, 6, 0}, {Unary{Op: Softplus}, 15, 4},
		{Unary{Op: LeakyRelu, Alpha: 0.01}, 5, 2 + 2}, {Unary{Op: Elu, Alpha: 1}, 10, 5 + 2},
		{Unary{Op: Selu, Alpha: 1.67, Gamma: 1.05}, 11, 3 + 2 + 2}, {Unary{Op: HardSigmoid, Alpha: 0.2, Beta: 0}, 6, 6 + 2 + 1},
		{Unary{Op: HardSwish}, 7, 10},
		{Unary{Op: Floor}, 16, 7}, {Unary{Op: Ceil}, 18, 7}, {Unary{Op: Round}, 13, 7}, {Unary{Op: Sign}, 7, 4}, {Unary{Op: Sin}, 6, 0}, {Unary{Op: Cos}, 6, 0},
	}
	for _, c := range unary {
		t.Run(c.p.Op.String(), func(t *testing.T) {
			for _, n := range []int{1, 2, 5, 12, 1001} {
				p := c.p
				p.N, p.Workers = n, 6
				s, _ := p.stream()
				checkStream(t, s, c.body, c.setup)
			}
		})
	}
	binary := []struct {
		op          BinaryOp
		a, b        Operand
		body, setup int64
	}{
		{Add, Operand{}, Operand{}, 4, 0},
		{Mul, Operand{}, Operand{Scalar: true, Addr: 0x60000}, 3, 3},
		{Max, Operand{Const: true, Value: 0.5}, Operand{}, 3, 1 + 2},
		{Pow, Operand{}, Operand{}, 11, 0},
		{Pow, Operand{}, Operand{Const: true, Value: 3}, 10, 1 + 2},
		{Div, Operand{}, Operand{}, 14, 0},
		{Div, Operand{}, Operand{Scalar: true, Addr: 0x60000}, 9, 3 + 4},
		{Div, Operand{Scalar: true, Addr: 0x60000}, Operand{}, 14, 3},
		{Equal, Operand{}, Operand{}, 5, 5}, {Less, Operand{}, Operand{Const: true, Value: 0}, 4, 2 + 5},
		{LessEq, Operand{}, Operand{}, 7, 5}, {NotEqual, Operand{}, Operand{}, 5, 5},
	}
	for i, c := range binary {
		t.Run(fmt.Sprintf("%s-%d", c.op, i), func(t *testing.T) {
			for _, n := range []int{1, 6, 13, 1000} {
				p := Binary{Op: c.op, N: n, A: c.a, B: c.b, Workers: 5}
				s, err := p.stream()
				if err != nil {
					t.Fatal(err)
				}
				checkStream(t, s, c.body, c.setup)
			}
		})
	}
	casts := []struct {
		p    Cast
		body int64
	}{
		{Cast{Kind: F32ToF16}, 5}, {Cast{Kind: F16ToF32}, 5}, {Cast{Kind: F32ToF8, Format: numfmt.E4M3FN}, 5},
		{Cast{Kind: F8ToF32, Format: numfmt.E4M3FNUZ}, 6}, {Cast{Kind: F8ToF32, Format: numfmt.E5M2, Scale: 9}, 8},
		{Cast{Kind: F16ToF8, Format: numfmt.E5M2FNUZ}, 5},
		{Cast{Kind: F32ToF8, Format: numfmt.E4M3FN, Interleaved: true}, 4},
		{Cast{Kind: F16ToF8, Format: numfmt.E5M2FNUZ, Interleaved: true}, 7},
	}
	for _, c := range casts {
		t.Run(fmt.Sprintf("%s-interleaved%v", c.p.Kind, c.p.Interleaved), func(t *testing.T) {
			p := c.p
			p.N, p.Workers = 4003, 6
			s, err := p.stream()
			if err != nil {
				t.Fatal(err)
			}
			setup := int64(0)
			if p.Kind.fp8() {
				setup = 2
			}
			checkStream(t, s, c.body, setup)
		})
	}
}

// checkStream checks s's documented body and setup issues and the
// stream work formula.
func checkStream(t *testing.T, s *stream, body, setup int64) {
	t.Helper()
	if got := issues(s.body); got != body {
		t.Errorf("n=%d: body issues %d, doc says %d", s.n, got, body)
	}
	if got := issues(s.setup); got != setup {
		t.Errorf("n=%d: setup issues %d, doc says %d", s.n, got, setup)
	}
	workers := min(s.workers, max(s.n/s.unit, 1))
	_, count := split(s.n/s.unit, workers)
	rem := s.n % s.unit
	want := make([]int64, workers)
	for w := range want {
		v := 4 + int64(len(s.inputs)) + 2 + setup + 1 + int64(count[w])*body
		if rem != 0 {
			v += 2 // tail flag load and brz
			if w == workers-1 {
				v += issues(func(b *Builder) { s.tail(b, rem) })
			}
		}
		want[w] = Slots * v
	}
	if diff := cmp.Diff(want, s.cost().Work); diff != "" {
		t.Errorf("n=%d: work mismatch (-doc +cost):\n%s", s.n, diff)
	}
}

func TestMatMulFormula(t *testing.T) {
	// The cost model against hand-counted cases of MatMul's doc.
	// Whole items (a multiple of the workers: no fractional split).
	p := MatMul{Type: AMPFP16, M: 64, K: 256, N: 64, CStride: 64, Workers: 4}
	c, err := p.Cost()
	if err != nil {
		t.Fatal(err)
	}
	// 64 items over 4 workers: 16 each, from 0, 16, 32, 48; P = 4
	// panels: group changes after items 3, 7, ... (4 per worker).
	want := []int64{
		Slots * (9 + 16*(256+27) + 4*4),
		Slots * (9 + 16*(256+27) + 4*4),
		Slots * (9 + 16*(256+27) + 4*4),
		Slots * (9 + 16*(256+27) + 4*4),
	}
	if diff := cmp.Diff(want, c.Work); diff != "" {
		t.Errorf("work mismatch (-doc +Cost):\n%s", diff)
	}
}

func TestMatMulSplitFormula(t *testing.T) {
	// 64 items of 256 steps over 6 workers: the split variant's sections
	// hand-counted. Worker ranges of the steps stream as planSplit finds
	// them: each a tail (the previous worker's head's item), whole items,
	// a head.
	p := MatMul{Type: AMPFP16, M: 64, K: 256, N: 64, CStride: 64, Workers: 6}
	c, err := p.Cost()
	if err != nil {
		t.Fatal(err)
	}
	s, pro, item := p.plan()
	if s.split == nil {
		t.Fatal("no split for 64 items over 6 workers")
	}
	steps := int64(0)
	for w, sh := range s.split {
		chunk := func(ch mmChunk, load bool) int64 {
			if ch.k1 == 0 {
				return 2 // ldm steps, brz
			}
			steps += ch.k1 - ch.k0
			if load {
				return 2 + 3 + 19 + 1 + (ch.k1 - ch.k0) + 19
			}
			return 2 + 3 + 1 + 1 + (ch.k1 - ch.k0) + 19
		}
		want := pro + chunk(sh.head, false) + 1 + chunk(sh.tail, true)
		want += int64(sh.count)*item + 4*int64((sh.start+sh.count)/4-sh.start/4)
		steps += int64(sh.count) * 256
		if Slots*want != c.Work[w] {
			t.Errorf("worker %d (%+v): Cost %d, hand count %d", w, sh, c.Work[w], Slots*want)
		}
	}
	if steps != 64*256 {
		t.Errorf("the shares cover %d steps, want %d", steps, 64*256)
	}
	// Whole items: 11 on the busiest worker, 9 + 11 x 283 + 4 x 2.
	if most := slices.Max(c.Work); most >= Slots*(9+11*283+8) {
		t.Errorf("split's busiest worker %d cycles, whole items' %d", most, Slots*(9+11*283+8))
	}
}
