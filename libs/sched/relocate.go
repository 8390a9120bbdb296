package sched

import (
	"cmp"
	"fmt"
	"slices"

	"ipu.local/libs/codegen"
	"ipu.local/libs/isa"
)

// SamePattern reports whether two phases move the same pattern: the same
// transfers' Src, Dst, destination count and stride and Words, in the
// same order.
// Their addresses may differ.
func SamePattern(a, b []Transfer) bool {
	if len(a) != len(b) {
		return false
	}
	for i, x := range a {
		y := b[i]
		if x.Src != y.Src || x.Dst != y.Dst || x.Dests() != y.Dests() || x.Step() != y.Step() || x.Words != y.Words {
			return false
		}
	}
	return true
}

// PatternKey is a key for SamePattern: two phases have the same key
// exactly when they move the same pattern.
func PatternKey(phase []Transfer) string {
	b := make([]byte, 0, 16*len(phase))
	put := func(v int) {
		u := uint32(v)
		b = append(b, byte(u), byte(u>>8), byte(u>>16), byte(u>>24))
	}
	for _, x := range phase {
		put(x.Src)
		put(x.Dst)
		put(x.Dests())
		put(x.Step())
		put(x.Words)
	}
	return string(b)
}

// RelocateError is why a plan cannot be relocated to another phase: the
// relocation changes something the schedule depends on.
type RelocateError struct{ Reason string }

func (e *RelocateError) Error() string { return "sched: relocate: " + e.Reason }

// Relocate returns the plan of phase to, made from pl, the plan of phase
// from, without scheduling: the two phases move the same pattern
// (SamePattern) at other addresses, and the new plan is pl's code with
// every register load of an old operand value loading the new one, in
// the same instructions at the same cycles.
//
// The scheduler reads the operand values (send: destination, source
// address, words; recv: source tile, destination address, words) only
// to compare them with each other on one tile (its register cache, the
// values pending events read, an instruction's equal operands), to test
// them for zero ($mzero), and for the length of their loads
// (codegen.ConstLen). So when, on every tile, old and new values
// correspond one to one, zero to zero, and each new value loads in as
// many instructions as the old one, scheduling phase to takes every
// decision it took for from: Relocate's plan is the plan Schedule would
// make, with the same options, cycles and events (shared with pl: they do
// not depend on addresses). Otherwise Relocate returns a *RelocateError
// naming the first value that breaks the correspondence.
//
// Relocate checks neither phase against a preset: Validate the result.
func Relocate(pl *Plan, from, to []Transfer) (*Plan, error) {
	if !SamePattern(from, to) {
		return nil, &RelocateError{"the phases move different patterns"}
	}
	if len(pl.Events) != len(from) {
		return nil, fmt.Errorf("sched: relocate: %d events for %d transfers", len(pl.Events), len(from))
	}
	m, err := newValueMap(from, to)
	if err != nil {
		return nil, err
	}
	out := &Plan{Makespan: pl.Makespan, LowerBound: pl.LowerBound, Events: pl.Events, Options: pl.Options,
		Tiles: make([]TileCode, len(pl.Tiles))}
	for i, tc := range pl.Tiles {
		code, err := m.relocate(tc.Tile, tc.Code)
		if err != nil {
			return nil, fmt.Errorf("sched: relocate: tile %d: %w", tc.Tile, err)
		}
		out.Tiles[i] = TileCode{Tile: tc.Tile, Code: code, Cycles: tc.Cycles}
	}
	return out, nil
}

// Relocatable reports whether a plan of phase from relocates to phase to
// (see Relocate): nil when it does, so that both phases schedule to the
// same cycles and events; a *RelocateError when not.
func Relocatable(from, to []Transfer) error {
	if !SamePattern(from, to) {
		return &RelocateError{"the phases move different patterns"}
	}
	if _, err := newValueMap(from, to); err != nil {
		return err
	}
	return nil
}

// valueMap is the correspondence of old and new operand values, per
// tile: each tile's pairs, old value in the high half, sorted.
type valueMap struct {
	pairs *buckets[uint64]
}

// newValueMap pairs the old and new operand values of every event of the
// phases and checks that they correspond one to one on each tile, zero
// to zero, with loads of the same length.
func newValueMap(from, to []Transfer) (*valueMap, error) {
	tiles := 0
	for _, x := range from {
		tiles = max(tiles, x.Src+1, x.Last()+1)
	}
	b := newBuckets[uint64](tiles)
	for _, x := range from {
		b.count(x.Src, 3)
		for u := x.Dst; u <= x.Last(); u += x.Step() {
			b.count(u, 3)
		}
	}
	b.alloc()
	for i, x := range from {
		y := to[i]
		so, sn := sendOps(x), sendOps(y)
		ro, rn := recvOps(x), recvOps(y)
		for k := range 3 {
			if err := pairable(so[k], sn[k]); err != "" {
				return nil, &RelocateError{fmt.Sprintf("transfer %d: tile %d: %s", i, x.Src, err)}
			}
			if err := pairable(ro[k], rn[k]); err != "" {
				return nil, &RelocateError{fmt.Sprintf("transfer %d: tile %d: %s", i, x.Dst, err)}
			}
			b.put(x.Src, uint64(so[k])<<32|uint64(sn[k]))
		}
		for u := x.Dst; u <= x.Last(); u += x.Step() {
			for k := range 3 {
				b.put(u, uint64(ro[k])<<32|uint64(rn[k]))
			}
		}
	}
	var scratch []uint64
	for t := range tiles {
		ps := b.of(t)
		slices.Sort(ps)
		ps = slices.Compact(ps)
		for i := 1; i < len(ps); i++ {
			if ps[i]>>32 == ps[i-1]>>32 {
				return nil, &RelocateError{fmt.Sprintf("tile %d: value %#x becomes both %#x and %#x", t, ps[i]>>32, uint32(ps[i-1]), uint32(ps[i]))}
			}
		}
		// One to one the other way too: no two old values become one.
		scratch = scratch[:0]
		for _, p := range ps {
			scratch = append(scratch, p<<32|p>>32)
		}
		slices.Sort(scratch)
		for i := 1; i < len(scratch); i++ {
			if a, c := scratch[i-1], scratch[i]; a>>32 == c>>32 {
				return nil, &RelocateError{fmt.Sprintf("tile %d: values %#x and %#x both become %#x", t, uint32(a), uint32(c), a>>32)}
			}
		}
		b.next[t] = b.start[t] + len(ps)
	}
	return &valueMap{b}, nil
}

// pairable says why old value v cannot become w, or "".
func pairable(v, w uint32) string {
	switch {
	case v == w:
		return ""
	case (v == 0) != (w == 0):
		return fmt.Sprintf("value %#x becomes %#x: $mzero serves only one of them", v, w)
	case codegen.ConstLen(v) != codegen.ConstLen(w):
		return fmt.Sprintf("value %#x becomes %#x: %d load instructions become %d", v, w, codegen.ConstLen(v), codegen.ConstLen(w))
	}
	return ""
}

// get returns the new value of tile t's old value v.
func (m *valueMap) get(t int, v uint32) (uint32, bool) {
	if t >= len(m.pairs.next) {
		return 0, false
	}
	ps := m.pairs.of(t)
	i, ok := slices.BinarySearchFunc(ps, v, func(p uint64, v uint32) int { return cmp.Compare(uint32(p>>32), v) })
	if !ok {
		return 0, false
	}
	return uint32(ps[i]), true
}

// relocate rewrites tile t's code: each load (li, or li and lih of one
// register, as code emits them) of an old value loads its new value in
// as many instructions.
func (m *valueMap) relocate(t int, code []isa.Inst) ([]isa.Inst, error) {
	out := make([]isa.Inst, len(code))
	copy(out, code)
	for pc := 0; pc < len(out); pc++ {
		in := out[pc]
		switch in.Op {
		case isa.LI:
		case isa.LIH:
			return nil, fmt.Errorf("pc %d: lih without its li", pc)
		default:
			continue
		}
		v, n := uint32(in.Imm), 1
		if pc+1 < len(out) && out[pc+1].Op == isa.LIH && out[pc+1].D == in.D {
			v, n = uint32(in.Imm)&0xFFFF|uint32(out[pc+1].Imm)<<16, 2
		}
		w, ok := m.get(t, v)
		if !ok {
			return nil, fmt.Errorf("pc %d: loads %#x, which no event of the tile reads", pc, v)
		}
		if codegen.ConstLen(w) != n {
			return nil, fmt.Errorf("pc %d: %#x needs %d load instructions, the code has %d", pc, w, codegen.ConstLen(w), n)
		}
		if n == 1 {
			out[pc].Imm = int32(w)
			continue
		}
		out[pc].Imm = int32(w & 0xFFFF)
		out[pc+1].Imm = int32(w >> 16)
		pc++
	}
	return out, nil
}
