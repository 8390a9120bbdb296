package codegen

import (
	"fmt"
	"slices"

	"ipu.local/libs/arch"
	"ipu.local/libs/isa"
	"ipu.local/libs/numfmt"
)

// buffer is a byte range a kernel reads or writes.
type buffer struct {
	name  string
	addr  uint32
	size  uint64
	write bool
}

// checkBuffer validates a buffer's alignment and that it lies in region.
func checkBuffer(b buffer, align uint32, region arch.Range, regionName string) error {
	if b.addr%align != 0 {
		return fmt.Errorf("%s at %#x is not %d-byte aligned", b.name, b.addr, align)
	}
	end := uint64(b.addr) + b.size
	if b.addr < region.Lo || end > uint64(region.Hi) {
		return fmt.Errorf("%s [%#x, %#x) is outside %s [%#x, %#x)", b.name, b.addr, end, regionName, region.Lo, region.Hi)
	}
	return nil
}

// checkDisjoint reports a written buffer that overlaps another buffer.
// Identical ranges are allowed when same is true (an in-place kernel).
func checkDisjoint(bufs []buffer, same bool) error {
	for i, a := range bufs {
		for _, b := range bufs[i+1:] {
			if !a.write && !b.write || a.size == 0 || b.size == 0 {
				continue
			}
			if same && a.addr == b.addr && a.size == b.size {
				continue
			}
			if uint64(a.addr) < uint64(b.addr)+b.size && uint64(b.addr) < uint64(a.addr)+a.size {
				return fmt.Errorf("%s [%#x, %#x) overlaps %s [%#x, %#x)", a.name, a.addr, uint64(a.addr)+a.size, b.name, b.addr, uint64(b.addr)+b.size)
			}
		}
	}
	return nil
}

// elements returns the memory elements a buffer touches, in increasing
// order.
func elements(p *arch.Preset, b buffer) []int {
	var out []int
	lo := b.addr &^ 7
	for a := uint64(lo); a < uint64(b.addr)+b.size; a += 8 {
		e := p.Element(uint32(a))
		if !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	slices.Sort(out)
	return out
}

// FP8Config is the FP8 part of CSR fp8 a kernel sets: operand formats
// and per-tensor scales (value = fp8 x 2^scale).
type FP8Config struct {
	FormatA, FormatB numfmt.Format
	ScaleA, ScaleB   int
	// NaNOnOverflow makes conversions to FP8 give NaN (E5M2: Inf) on
	// overflow instead of saturating.
	NaNOnOverflow bool
}

func (c FP8Config) check() error {
	if !c.FormatA.Valid() || !c.FormatB.Valid() {
		return fmt.Errorf("fp8 formats %d, %d: want 0..3", c.FormatA, c.FormatB)
	}
	for _, s := range []int{c.ScaleA, c.ScaleB} {
		if s < numfmt.MinScale || s > numfmt.MaxScale {
			return fmt.Errorf("fp8 scale %d out of range [%d, %d]", s, numfmt.MinScale, numfmt.MaxScale)
		}
	}
	return nil
}

// CSR returns the value of CSR fp8 for c.
func (c FP8Config) CSR() uint32 {
	v := uint32(c.FormatA)<<isa.FP8FormatAShift | uint32(c.FormatB)<<isa.FP8FormatBShift |
		uint32(c.ScaleA&63)<<isa.FP8ScaleAShift | uint32(c.ScaleB&63)<<isa.FP8ScaleBShift
	if c.NaNOnOverflow {
		v |= isa.FP8NaNOnOverflow
	}
	return v
}

// emitSetFP8 sets this worker's CSR fp8 (2 issues), using scratch.
func emitSetFP8(b *Builder, c FP8Config, scratch MReg) {
	b.LoadConst(scratch, c.CSR())
	b.Put(isa.CSRFP8, scratch)
}

const setFP8Issues = 2 // CSR values are below 2^17: one li

// fitsImm16 reports whether v is a signed 16-bit immediate.
func fitsImm16(v int64) bool { return v >= -0x8000 && v <= 0x7FFF }

// addConst emits d = a + v: addi when v fits, else add of reg, which the
// prologue loaded with v (see loadBig).
func addConst(b *Builder, d, a MReg, v int64, reg MReg) {
	if fitsImm16(v) {
		b.Addi(d, a, int32(v))
		return
	}
	b.Add(d, a, reg)
}

// loadBig loads v into reg when addConst will need it; it returns the
// issues spent.
func loadBig(b *Builder, v int64, reg MReg) {
	if !fitsImm16(v) {
		b.LoadConst(reg, uint32(v))
	}
}

func loadBigIssues(v int64) int64 {
	if fitsImm16(v) {
		return 0
	}
	return int64(ConstLen(uint32(v)))
}
