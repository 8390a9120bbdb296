package lower

import (
	"ipu.local/libs/arch"
	"ipu.local/libs/codegen"
	"ipu.local/libs/prog"
)

// The casts to FP8 from FP32 and FP16 have faster code for arrays in
// interleaved memory (codegen.Cast.Interleaved: 128-bit loads). Their
// buffers usually have no region (prog.AnyRegion): wideCasts moves them
// there when that cannot make the program's storage fail, which it
// decides on the whole program, after every step is lowered: only on
// tiles whose buffers, all of them and never reused, would fill at most
// half of the interleaved region, and only buffers of at most
// wideCastBytes. Otherwise the cast keeps its narrow code, which works
// anywhere.
//
// A program lowered for pricing shares buffers and kernels with others
// (StepCache), so every lowering decides again from scratch: earlier
// promotions are undone first, and a kernel whose choice changes
// forgets its cached cost.

// wideCastBytes bounds a buffer wideCasts moves.
const wideCastBytes = 64 << 10

func wideCasts(pr *prog.Program, p *arch.Preset) {
	for _, b := range pr.Buffers {
		if b.Promoted {
			b.Region, b.Promoted = prog.AnyRegion, false
		}
	}
	var casts []*prog.Kernel
	for _, s := range pr.Steps {
		for _, ks := range s.Work {
			for _, k := range ks {
				if c, ok := k.Params.(*codegen.Cast); ok && (c.Kind == codegen.F32ToF8 || c.Kind == codegen.F16ToF8) && len(k.Fixes) == 2 {
					casts = append(casts, k)
				}
			}
		}
	}
	if len(casts) == 0 {
		return
	}
	// Bytes by tile in a dense slice (buffers' tiles are the plan's,
	// never negative): a map lookup per buffer and tile was a sixth of
	// lowering for pricing on a full chip.
	n := 0
	for _, b := range pr.Buffers {
		for _, t := range b.Tiles {
			n = max(n, t+1)
		}
	}
	bytes := make([]int64, n)
	for _, b := range pr.Buffers {
		for _, t := range b.Tiles {
			bytes[t] += int64(b.Size)
		}
	}
	// Once a buffer: a cast buffer over many tiles is read by a kernel
	// on each of them.
	room := map[*prog.Buffer]bool{}
	roomy := func(b *prog.Buffer) bool {
		if ok, seen := room[b]; seen {
			return ok
		}
		ok := true
		for _, t := range b.Tiles {
			if bytes[t] > int64(p.Interleaved.Size()/2) {
				ok = false
				break
			}
		}
		room[b] = ok
		return ok
	}
	for _, k := range casts {
		c := k.Params.(*codegen.Cast)
		// A replayed cast's refs name the buffers of the lowering it was
		// cached from: the program's own are the ones it stands for.
		x, y := k.Fixes[0].Ref, k.Fixes[1].Ref
		x.Buf, y.Buf = canonical(pr, x.Buf), canonical(pr, y.Buf)
		wide := wideCastFits(*c, x, y) && roomy(x.Buf) && roomy(y.Buf)
		if wide {
			for _, b := range []*prog.Buffer{x.Buf, y.Buf} {
				if b.Region == prog.AnyRegion {
					b.Region, b.Promoted = prog.Interleaved, true
				}
			}
		}
		if c.Interleaved != wide {
			c.Interleaved = wide
			k.ClearCost()
		}
	}
}

// canonical is pr's buffer that b stands for (nil stays nil).
func canonical(pr *prog.Program, b *prog.Buffer) *prog.Buffer {
	if b == nil {
		return nil
	}
	return pr.Canonical(b)
}

// wideCastFits reports whether a cast's arrays meet Interleaved's
// alignment (pieces and rows 16-byte aligned) in buffers that may be
// interleaved.
func wideCastFits(c codegen.Cast, x, y prog.Ref) bool {
	ein, eout := 4, 1
	if c.Kind == codegen.F16ToF8 {
		ein = 2
	}
	if c.R > 1 && (ein*c.XStride%16 != 0 || eout*c.YStride%16 != 0) {
		return false
	}
	for _, r := range []prog.Ref{x, y} {
		if r.Buf == nil || r.Buf.Placed || r.Buf.Region == prog.NonInterleaved || r.Off%16 != 0 ||
			r.Buf.Align%16 != 0 || r.Buf.Size > wideCastBytes {
			return false
		}
	}
	return true
}
