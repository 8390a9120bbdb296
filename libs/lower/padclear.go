package lower

import (
	"ipu.local/libs/codegen"
	"ipu.local/libs/layout"
	"ipu.local/libs/prog"
)

// The padding-clear pass. An FP8 cast of a product operand (a Pack into
// AMP panels) pads the operand to the AMP's granularity: an A panel's
// last group of 4 rows may be partial, and the kernel clears the lanes
// past the operand, so that no garbage (NaN or Inf) enters a product.
// A clear is needed only where the padded value reaches a result
// somebody reads. An A panel's padded lane i makes only the product's
// result row i; when every product reading the panel reads back only
// rows [0, RowsRead) of its result (the epilogue's and the reduction's
// loop bounds: prog.Kernel.RowsRead) and every padded lane's row is at
// or past RowsRead, the lanes are never read, and the pass removes their
// clears (codegen.Pack.LanePadUnread). B panels' padded lanes make
// result columns that the epilogue reads (its rows are padded to 16),
// and k padding enters every result: those clears stay.
//
// The proof is per tile: every read of the panel's buffer on the pack's
// tile must be a product's A operand (a transfer reading it, or any
// other kernel, keeps the clears).

// elidePadClears runs the pass over pr and returns the number of packs
// whose clears it removed (the packs whose code got shorter). Supersteps
// it changes are replaced by copies (a step cache's supersteps are
// shared with other programs).
func elidePadClears(pr *prog.Program) int {
	cands := padCandidates(pr)
	if len(cands) == 0 {
		return 0
	}
	reads := padReads(pr, cands)
	removed := 0
	for i, s := range pr.Steps {
		var copied bool
		for t, ks := range s.Work {
			for j, k := range ks {
				p, y, ok := padPack(k)
				if !ok || !lanePadUnread(p, y, reads[padKey{y.Buf, t}]) {
					continue
				}
				nk := elided(k, p)
				if !cheaper(nk, k) {
					continue
				}
				if !copied {
					ns := *s
					ns.Work = make(map[int][]*prog.Kernel, len(s.Work))
					for u, us := range s.Work {
						ns.Work[u] = append([]*prog.Kernel(nil), us...)
					}
					pr.Steps[i], s, copied = &ns, &ns, true
				}
				s.Work[t][j] = nk
				removed++
			}
		}
	}
	return removed
}

// padKey is a buffer on a tile.
type padKey struct {
	buf  *prog.Buffer
	tile int
}

// padPack returns kernel k's parameters and output when it is an FP8 A
// panel pack whose clears the pass may remove.
func padPack(k *prog.Kernel) (*codegen.Pack, prog.Ref, bool) {
	p, ok := k.Params.(*codegen.Pack)
	if !ok || p.Out != codegen.AMPFP8 || p.Kind != codegen.APanel || p.LanePadUnread {
		return nil, prog.Ref{}, false
	}
	for _, f := range k.Fixes {
		if f.Field == &p.Y {
			return p, f.Ref, f.Ref.Buf != nil
		}
	}
	return nil, prog.Ref{}, false
}

// padCandidates returns the buffers on tiles that a candidate pack
// writes: the only ones whose reads the pass needs.
func padCandidates(pr *prog.Program) map[padKey]bool {
	cands := map[padKey]bool{}
	for _, s := range pr.Steps {
		for t, ks := range s.Work {
			for _, k := range ks {
				if _, y, ok := padPack(k); ok {
					cands[padKey{y.Buf, t}] = true
				}
			}
		}
	}
	return cands
}

// padReads returns every read of the candidate buffers, by buffer and
// tile: kernels' operand reads and transfers' sources.
func padReads(pr *prog.Program, cands map[padKey]bool) map[padKey][]padRead {
	reads := map[padKey][]padRead{}
	for _, s := range pr.Steps {
		for t, ks := range s.Work {
			for _, k := range ks {
				for _, f := range k.Fixes {
					key := padKey{f.Ref.Buf, t}
					if f.Write || !cands[key] {
						continue
					}
					r := padRead{k: k, off: f.Ref.Off}
					if mm, ok := k.Params.(*codegen.MatMul); ok && mm.Type == codegen.AMPFP8 && f.Field == &mm.A {
						r.ok = true
					}
					reads[key] = append(reads[key], r)
				}
			}
		}
		for _, x := range s.Xfers {
			if key := (padKey{x.From.Buf, x.Src}); x.From.Buf != nil && cands[key] {
				reads[key] = append(reads[key], padRead{})
			}
		}
	}
	return reads
}

// padRead is a read of a buffer on a tile: the kernel, the offset it
// reads at, and whether it is an FP8 product's A operand (a transfer:
// none; the lanes are FP8 bytes).
type padRead struct {
	k   *prog.Kernel
	off uint32
	ok  bool
}

// lanePadUnread reports whether the padded lanes of pack p writing at y
// are never read, given the reads of y's buffer on the pack's tile: each
// read overlapping the panel is a product's A operand with the panel's
// k extent, reading it from a group boundary, whose result rows at and
// past the pack's last lane are unread.
func lanePadUnread(p *codegen.Pack, y prog.Ref, rs []padRead) bool {
	lanes := p.R
	if p.Transpose {
		lanes = p.C
	}
	if lanes%layout.AGroup == 0 || len(rs) == 0 {
		return false // no padded lanes, or nobody reads the panel
	}
	group := layout.AGroup * p.KP // bytes of a group of FP8 lanes
	groups := (lanes + layout.AGroup - 1) / layout.AGroup
	lo, hi := y.Off, y.Off+uint32(groups*group)
	for _, r := range rs {
		if !r.ok {
			return false
		}
		mm := r.k.Params.(*codegen.MatMul)
		end := r.off + uint32(mm.M*mm.K)
		if end <= lo || r.off >= hi {
			continue // reads another part of the buffer
		}
		if mm.K != p.KP || lo < r.off || (lo-r.off)%uint32(group) != 0 || r.k.RowsRead <= 0 {
			return false
		}
		first := int(lo-r.off) / group * layout.AGroup // the pack's first lane, as a result row
		if first+lanes < r.k.RowsRead {
			return false // a padded lane's row is read
		}
	}
	return true
}

// elided returns a copy of pack kernel k (parameters p) that leaves its
// padded lanes uncleared.
func elided(k *prog.Kernel, p *codegen.Pack) *prog.Kernel {
	np := *p
	np.LanePadUnread = true
	nk := &prog.Kernel{What: k.What, Params: &np, RowsRead: k.RowsRead}
	for _, f := range k.Fixes {
		switch f.Field {
		case &p.X:
			f.Field = &np.X
		case &p.Y:
			f.Field = &np.Y
		}
		nk.Fixes = append(nk.Fixes, f)
	}
	return nk
}

// cheaper reports whether kernel a's code issues fewer instructions than
// b's on some worker and more on none (a clear removed).
func cheaper(a, b *prog.Kernel) bool {
	ca, err1 := a.Cost()
	cb, err2 := b.Cost()
	if err1 != nil || err2 != nil || ca.Workers != cb.Workers {
		return false
	}
	less := false
	for w := range ca.Work {
		if ca.Work[w] > cb.Work[w] {
			return false
		}
		less = less || ca.Work[w] < cb.Work[w]
	}
	return less
}
