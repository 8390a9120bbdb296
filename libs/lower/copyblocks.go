package lower

import (
	"ipu.local/libs/codegen"
	"ipu.local/libs/prog"
)

// A tile's local runs often repeat in nested patterns: a stride-2
// convolution's windows gathered along one axis copy one word in two
// (the rows of a Copy), once per window offset (a block) and once per
// input row (a block of blocks). One Copy kernel per pattern, with its
// Outer dimensions, keeps the tile's code to one kernel where a Copy per
// sequence of runs made hundreds (and ran each with its own launch).

// copyBlock is a Copy (or a Gather) of the runs so far: the first run's
// addresses, the elements a row (size bytes each) and its dimensions,
// the rows innermost (strides in bytes).
type copyBlock struct {
	from, to prog.Ref
	n, size  int
	dims     [3]copyDim
}

type copyDim struct{ n, dx, dy int }

// span is the bytes of Y the block writes, first to last.
func (b *copyBlock) span() int {
	n := b.size * b.n
	for _, d := range b.dims {
		if d.n > 1 {
			n += (d.n - 1) * d.dy
		}
	}
	return n
}

// sameShape reports whether a and b differ only in their addresses, up
// to level k.
func sameShape(a, b *copyBlock, k int) bool {
	return a.n == b.n && a.size == b.size && a.dims == b.dims && a.from.Buf == b.from.Buf && a.to.Buf == b.to.Buf && a.dims[k].n <= 1
}

// mergeLevel groups consecutive blocks of one shape whose addresses
// step by constant deltas (X's at least 0, Y's past the block) into
// dimension k of one block. Greedy groups can swallow the first block
// of the next repeat when its addresses happen to continue the step (the
// last window offset of one row and the first of the next): groups
// longer than the most common length are cut to it. Above the rows,
// only blocks whose source and destination buffers differ merge (their
// spans are then disjoint, as Copy's blocks need), and only where ok
// accepts the block's dimensions with a new one dy bytes apart.
func mergeLevel(bs []copyBlock, k int, ok func(b *copyBlock, dy int) bool) []copyBlock {
	type group struct{ i, n, dx, dy int }
	var gs []group
	for i := 0; i < len(bs); {
		g := group{i: i, n: 1}
		a := &bs[i]
		if k == 0 || a.from.Buf != a.to.Buf {
			for j := i + 1; j < len(bs) && sameShape(a, &bs[j], k); j++ {
				dx := int(bs[j].from.Off) - int(bs[j-1].from.Off)
				dy := int(bs[j].to.Off) - int(bs[j-1].to.Off)
				if j == i+1 {
					if dx < 0 || dy < a.span() || k > 0 && !ok(a, dy) {
						break
					}
					g.dx, g.dy = dx, dy
				} else if dx != g.dx || dy != g.dy {
					break
				}
				g.n++
			}
		}
		gs = append(gs, g)
		i += g.n
	}
	mode := modeLength(gs, func(g group) int { return g.n })
	out := make([]copyBlock, 0, len(gs))
	for _, g := range gs {
		for at := 0; at < g.n; at += mode {
			b := bs[g.i+at]
			if n := min(mode, g.n-at); n > 1 {
				b.dims[k] = copyDim{n, g.dx, g.dy}
			}
			out = append(out, b)
		}
	}
	return out
}

// modeLength returns the most common length of more than one among
// items (the longer on a tie), or a length no item exceeds.
func modeLength[T any](items []T, length func(T) int) int {
	count := map[int]int{}
	best, longest := 0, 1
	for _, it := range items {
		n := length(it)
		longest = max(longest, n)
		if n < 2 {
			continue
		}
		count[n]++
		if c := count[n]; best == 0 || c > count[best] || c == count[best] && n > best {
			best = n
		}
	}
	if best == 0 {
		return longest
	}
	return best
}

// mergeBlocks merges bs at each level (mergeLevel).
func mergeBlocks(bs []copyBlock, ok func(b *copyBlock, dy int) bool) []copyBlock {
	for k := range 3 {
		bs = mergeLevel(bs, k, ok)
	}
	return bs
}

// anyBlock accepts every block.
func anyBlock(*copyBlock, int) bool { return true }

// wordBlock accepts blocks of 2-byte elements that start words of Y
// (Gather's rule): Y word-aligned, the blocks' strides whole words. The
// rows within a block may step by halves (a stride-2 window gather's
// rows of one element each): the gather carries a half-filled word
// from row to row, and merges a block's last half with its word.
func wordBlock(b *copyBlock, dy int) bool {
	if b.to.Off%4 != 0 || dy%4 != 0 {
		return false
	}
	for _, d := range b.dims[1:] {
		if d.n > 1 && d.dy%4 != 0 {
			return false
		}
	}
	return true
}

// rows returns b's rows and their strides in elements, and its outer
// dimensions.
func (b *copyBlock) rows() (n, xs, ys int, outer [2]codegen.BlockDim) {
	d0 := b.dims[0]
	n, xs, ys = max(d0.n, 1), d0.dx/b.size, d0.dy/b.size
	if n == 1 {
		xs, ys = b.n, b.n
	}
	o := 0
	for _, d := range b.dims[1:] {
		if d.n > 1 {
			outer[o] = codegen.BlockDim{N: d.n, XStride: d.dx / b.size, YStride: d.dy / b.size}
			o++
		}
	}
	return n, xs, ys, outer
}

// copyKernel is block b's Copy (4-byte elements).
func copyKernel(what string, b copyBlock) *prog.Kernel {
	rows, xs, ys, outer := b.rows()
	p := &codegen.Copy{R: rows, W: b.n, XStride: xs, YStride: ys, Workers: codegen.Slots, Outer: outer}
	return &prog.Kernel{What: what, Params: p,
		Fixes: []prog.Fix{{Field: &p.X, Ref: b.from}, {Field: &p.Y, Ref: b.to, Write: true}}}
}

// gatherKernel is block b's Gather (columns of contiguous elements).
func gatherKernel(what string, b copyBlock) *prog.Kernel {
	rows, xs, ys, outer := b.rows()
	g := &codegen.Gather{Size: b.size, R: rows, C: b.n, YStride: ys, RStride: xs, CStride: 1, Workers: codegen.Slots, Outer: outer}
	return &prog.Kernel{What: what, Params: g,
		Fixes: []prog.Fix{{Field: &g.X, Ref: b.from}, {Field: &g.Y, Ref: b.to, Write: true}}}
}
