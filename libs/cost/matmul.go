package cost

import (
	"fmt"

	"ipu.local/libs/arch"
	"ipu.local/libs/codegen"
)

// kernelTableBytes is the per-worker parameter table a kernel carries
// beside its code (five words per worker, the largest of the kernels').
const kernelTableBytes = 5 * 4 * codegen.Slots

// EvalMatMul costs mm split by s over the tiles from lo. what names the
// node in a memory report.
func EvalMatMul(p *arch.Preset, mm MatMul, s Split, lo int, what string) (*Estimate, error) {
	s.Align = mm.Align
	if !s.Fits(mm.M, mm.K, mm.N) {
		return nil, fmt.Errorf("%s: split %v does not fit [%d,%d]x[%d,%d]", what, s, mm.M, mm.K, mm.K, mm.N)
	}
	if lo < 0 || lo+s.Tiles() > p.Tiles {
		return nil, fmt.Errorf("%s: split %v from tile %d exceeds the %d tiles", what, s, lo, p.Tiles)
	}
	est := &Estimate{}
	mem := make([]TileMemory, s.Tiles())
	for t := range mem {
		mem[t].Tile = lo + t
		mem[t].Stacks = StackBytesPerContext * int64(codegen.Slots+1)
	}
	at := func(tile int) *TileMemory {
		if tile < lo || tile >= lo+len(mem) {
			return nil
		}
		return &mem[tile-lo]
	}
	amp := mm.Type.Size()
	aDist := Dist{Rows: mm.M, Cols: mm.K, ElemBytes: amp, Panel: RowAlign}
	bDist := Dist{Rows: mm.K, Cols: mm.N, ElemBytes: amp, Panel: ColAlign}
	for i := 0; i < s.GM; i++ {
		r0, r1 := s.MBlock(mm.M, i)
		for l := 0; l < s.GK; l++ {
			k0, k1 := s.KBlock(mm.K, l)
			for j := 0; j < s.GN; j++ {
				c0, c1 := s.NBlock(mm.N, j)
				t := s.Tile(lo, i, j, l)
				aDist.Pieces = append(aDist.Pieces, Piece{t, r0, r1, k0, k1})
				bDist.Pieces = append(bDist.Pieces, Piece{t, k0, k1, c0, c1})
			}
		}
	}

	// Casts before the exchange, on the source tiles.
	var pre int64
	preMem := map[int]int64{}
	for _, op := range []struct {
		o *Operand
	}{{&mm.A}, {&mm.B}} {
		o := op.o
		if o.Source == nil || !o.HasCast || !o.CastBefore {
			continue
		}
		for _, pc := range o.Source.Pieces {
			n := (pc.R1 - pc.R0) * (pc.C1 - pc.C0)
			c, err := CastCycles(p, o.Cast, n, mm.FP8)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", what, err)
			}
			pre = max(pre, c)
			preMem[pc.Tile] += int64(n * amp)
		}
	}
	if pre > 0 {
		est.Phases = append(est.Phases, Phase{Name: "cast", Cycles: pre + int64(p.SyncCycles)})
	}

	// Operands that come through the exchange.
	in := NewExchange(p)
	for _, op := range []struct {
		o   *Operand
		dst Dist
	}{{&mm.A, aDist}, {&mm.B, bDist}} {
		o := op.o
		if o.Source == nil {
			continue
		}
		bytes := o.ResidentBytes
		if o.HasCast && o.CastBefore {
			bytes = amp
		}
		if err := in.Move(*o.Source, op.dst, bytes); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		for _, pc := range o.Source.Pieces {
			if m := at(pc.Tile); m != nil {
				m.Variables += int64((pc.R1 - pc.R0) * (pc.C1 - pc.C0) * o.ResidentBytes)
			}
		}
	}
	for t, b := range preMem {
		if m := at(t); m != nil {
			m.Variables += b
		}
	}
	if err := addExchange(est, "operands", in, at); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}

	// The product, with casts after the exchange.
	var compute int64
	var kerr error
	for i := 0; i < s.GM; i++ {
		r0, r1 := s.MBlock(mm.M, i)
		mb := r1 - r0
		for l := 0; l < s.GK; l++ {
			k0, k1 := s.KBlock(mm.K, l)
			kb := k1 - k0
			for j := 0; j < s.GN; j++ {
				c0, c1 := s.NBlock(mm.N, j)
				nb := c1 - c0
				m := at(s.Tile(lo, i, j, l))
				c, err := MatMulCycles(p, mm.Type, mb, kb, nb)
				if err != nil && kerr == nil {
					// Report memory first: a block too large for the
					// kernel is too large for the tile too.
					kerr = fmt.Errorf("%s: block %dx%dx%d: %w", what, mb, kb, nb, err)
				}
				mp, np, kp := pad(mb, 4), pad(nb, 16), kb
				if mm.Type == codegen.AMPFP8 {
					kp = pad(kb, 2)
				}
				m.Code += matmulCode(p, mm.Type, int64(kp)/int64(3-amp) > codegen.MaxRptiCount) + kernelTableBytes + 4*SupervisorInstrsPerKernel
				for _, op := range []struct {
					o     *Operand
					elems int
					amp   int64
					il    bool
				}{{&mm.A, mb * kb, int64(mp * kp * amp), false}, {&mm.B, kb * nb, int64(kp * np * amp), true}} {
					o := op.o
					resident := int64(0)
					if o.HasCast && !(o.Source != nil && o.CastBefore) {
						cc, err := CastCycles(p, o.Cast, op.elems, mm.FP8)
						if err != nil {
							return nil, fmt.Errorf("%s: %w", what, err)
						}
						c += cc
						m.Code += castCode(p, o.Cast) + kernelTableBytes + 4*SupervisorInstrsPerKernel
						resident = int64(op.elems * o.ResidentBytes)
					}
					if o.Constant && o.Source == nil {
						m.Constants += op.amp + resident
					} else {
						m.Variables += op.amp + resident
					}
					if op.il {
						m.Interleaved += op.amp
					}
				}
				cb := int64(mp * np * 4)
				m.Variables += cb
				m.Interleaved += cb
				compute = max(compute, c)
			}
		}
	}
	est.Phases = append(est.Phases, Phase{Name: "matmul", Cycles: compute + int64(p.SyncCycles)})

	// Reduce-scatter of the partial sums.
	out := Dist{Rows: mm.M, Cols: mm.N, ElemBytes: 4}
	if s.GK == 1 {
		for i := 0; i < s.GM; i++ {
			r0, r1 := s.MBlock(mm.M, i)
			for j := 0; j < s.GN; j++ {
				c0, c1 := s.NBlock(mm.N, j)
				out.Pieces = append(out.Pieces, Piece{s.Tile(lo, i, j, 0), r0, r1, c0, c1})
			}
		}
	} else {
		red := NewExchange(p)
		var add int64
		for i := 0; i < s.GM; i++ {
			r0, r1 := s.MBlock(mm.M, i)
			for j := 0; j < s.GN; j++ {
				c0, c1 := s.NBlock(mm.N, j)
				for l := 0; l < s.GK; l++ {
					p0, p1 := s.PartBlock(r1-r0, l)
					dst := s.Tile(lo, i, j, l)
					out.Pieces = append(out.Pieces, Piece{dst, r0 + p0, r0 + p1, c0, c1})
					n := (p1 - p0) * (c1 - c0)
					if n == 0 {
						continue
					}
					for l2 := 0; l2 < s.GK; l2++ {
						if l2 != l {
							if err := red.add(s.Tile(lo, i, j, l2), dst, dst+1, n, nil); err != nil {
								return nil, fmt.Errorf("%s: %w", what, err)
							}
						}
					}
					c, err := AddCycles(p, n)
					if err != nil {
						return nil, fmt.Errorf("%s: %w", what, err)
					}
					add = max(add, int64(s.GK-1)*c)
					m := at(dst)
					m.Variables += int64(s.GK-1) * int64(n) * 4
					m.Interleaved += int64(s.GK-1) * int64(n) * 4
					m.Code += addCode(p) + kernelTableBytes + 4*SupervisorInstrsPerKernel*int64(s.GK-1)
				}
			}
		}
		if err := addExchange(est, "reduce", red, at); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		est.Phases = append(est.Phases, Phase{Name: "reduce-add", Cycles: add + int64(p.SyncCycles)})
	}
	est.Out = out
	for _, ph := range est.Phases {
		est.Total += ph.Cycles
		if ph.Exchange {
			est.Exchange += ph.Cycles
		}
		est.Transfers += ph.Transfers
	}
	est.Memory = mem
	if err := CheckMemory(p, what, mem); err != nil {
		return est, err
	}
	if kerr != nil {
		return nil, kerr
	}
	return est, nil
}

// addExchange appends x's phase (when it moves anything) and charges
// its exchange code to the tiles.
func addExchange(est *Estimate, name string, x *Exchange, at func(int) *TileMemory) error {
	c, err := x.Cycles()
	if err != nil {
		return err
	}
	if c == 0 {
		return nil
	}
	est.Phases = append(est.Phases, Phase{Name: name, Exchange: true, Cycles: c, Transfers: len(x.Transfers)})
	for t, n := range x.PerTile() {
		if m := at(t); m != nil {
			m.ExchangeCode += 4 * int64(n*ExchangeInstrsPerTransfer+1)
		}
	}
	return nil
}
