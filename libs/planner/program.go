package planner

// Points that plan the same program. A decision's cast order and
// stationary operand only steer how the builder lays the operands out
// (buildproduct.go); the lowering reads the plan's tensors and steps but
// never a step's CastOrder or Stationary (libs/lower: only its step
// cache's key names them). So two points whose plans differ in those two
// strings alone lower to the same program and cost the same: with the
// cast after the exchange, for one, the stationary operand changes
// nothing. The search prices such a program once (evalAll).

import (
	"crypto/sha256"
	"encoding/binary"
	"hash"

	"ipu.local/formats/plan"
)

// programPrint identifies what a plan gives the lowering: its tensors
// and steps, less the steps' CastOrder and Stationary. The plans the
// search prices share the rest (format, arch, tiles and the encoded
// graph; model, cost and search are unset).
type programPrint [sha256.Size]byte

// printOf returns p's programPrint.
func printOf(p *plan.Plan) programPrint {
	e := printer{h: sha256.New()}
	e.str(p.Format)
	e.str(p.Arch)
	e.str(p.Supersteps)
	e.ints(int64(p.Tiles), int64(len(p.Tensors)))
	for i := range p.Tensors {
		t := &p.Tensors[i]
		e.ints(int64(t.ID), int64(t.Value))
		e.str(t.Name)
		e.str(t.DType)
		e.ints(int64(len(t.Shape)))
		e.ints(t.Shape...)
		e.flag(t.Transposed)
		e.str(t.Layout)
		e.ints(int64(t.Pad))
		e.str(t.Source)
		e.ints(int64(len(t.Pieces)))
		for _, pc := range t.Pieces {
			e.ints(int64(pc.Tile), int64(len(pc.Region)))
			for _, r := range pc.Region {
				e.ints(r[0], r[1])
			}
		}
		e.flush()
	}
	e.ints(int64(len(p.Steps)))
	for i := range p.Steps {
		st := &p.Steps[i]
		e.ints(int64(st.Node))
		e.str(st.Name)
		e.str(st.Kernel)
		e.ints(int64(len(st.Inputs)))
		for _, id := range st.Inputs {
			e.ints(int64(id))
		}
		e.ints(int64(len(st.Outputs)))
		for _, id := range st.Outputs {
			e.ints(int64(id))
		}
		e.flag(st.Split != nil)
		if s := st.Split; s != nil {
			e.ints(int64(s.B), int64(s.M), int64(s.N), int64(s.K), int64(s.Align), int64(s.NAlign))
			e.str(s.Order)
			e.str(s.Parts)
			e.flag(s.Rest != nil)
			if r := s.Rest; r != nil {
				e.str(r.Axis)
				e.ints(int64(r.At), int64(r.M), int64(r.N))
			}
		}
		e.ints(int64(st.Tiles[0]), int64(st.Tiles[1]))
	}
	e.flush()
	var out programPrint
	e.h.Sum(out[:0])
	return out
}

// printer hashes varints and length-prefixed strings.
type printer struct {
	h   hash.Hash
	buf []byte
}

func (e *printer) ints(vs ...int64) {
	for _, v := range vs {
		e.buf = binary.AppendVarint(e.buf, v)
	}
}

func (e *printer) str(s string) {
	e.ints(int64(len(s)))
	e.buf = append(e.buf, s...)
}

func (e *printer) flag(b bool) {
	if b {
		e.buf = append(e.buf, 1)
	} else {
		e.buf = append(e.buf, 0)
	}
}

func (e *printer) flush() {
	e.h.Write(e.buf)
	e.buf = e.buf[:0]
}
