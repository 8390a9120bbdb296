package lower

// Superstep compaction (a plan whose Supersteps is plan.Compact). Steps
// are lowered one after another, so a step's supersteps follow those of
// every step before it, even one it does not depend on: the three
// projections of an attention block ran one after another, each behind
// the previous one's reduce exchange. compact moves each step's part of
// a compute superstep (its kernels on every tile, together) into the
// earliest compute superstep its data allows, and every exchange
// superstep (whole) into the earliest exchange superstep its transfers
// allow, so that independent work shares supersteps and syncs. A part
// moves whole because a step's kernels on different tiles finish one
// piece of work: moving those that could go earlier alone lengthens an
// earlier superstep without shortening their own.
//
// Dependencies are by buffer, across all of the buffer's tiles and
// offsets, which is conservative: a compute kernel touches only its own
// tile's memory, and a tile runs its kernels of a superstep in order,
// so a part may join compute superstep i when every buffer it reads was
// last written in a compute superstep at or before i or an exchange
// superstep before i, and every buffer it writes was last read and
// written likewise. A transfer reads its source and writes its
// destinations all at once with the other transfers of its superstep:
// an exchange superstep may join exchange superstep i when its sources
// were last written before i and its destinations last read and written
// before i. Host supersteps stay where they are and nothing crosses
// them; a program that branches is not compacted (its sides' superstep
// ranges are fixed).
//
// The result is the same computation: every access to a tile's buffer
// keeps its order against every conflicting access (write after read,
// read after write, write after write). Liveness, placement and the
// passes that rewrite kernels run after compaction.

import (
	"fmt"
	"strings"

	"ipu.local/formats/obj"
	"ipu.local/libs/prog"
)

// access is a buffer's last write and read on any of its tiles:
// superstep indices in the compacted program (-1: none).
type access struct{ w, r int32 }

// compactor holds the state of one compaction.
type compactor struct {
	out []*cstep
	// floor: nothing may move at or before it (the last host superstep).
	floor int
	// bounds: merged exchange supersteps' bound cells by contributors
	// (the step cache's, when there is one); merged, the supersteps
	// themselves, and now the cache's lowering count (mergedStep).
	bounds map[string]*int64
	merged map[string]*mergedStep
	now    int
	// alias: buffers that are another (a step cache's replays).
	alias map[*prog.Buffer]*prog.Buffer
	// marker numbers the buffers met; bufs holds their accesses.
	marker *prog.Marker
	bufs   []*access
	// work, lo, hi: compute's scratch, by tile.
	work   [][]*prog.Kernel
	lo, hi []int
	// accs: partAccesses's scratch; seen: its marks by buffer number
	// and access (2*number+write), serial the current part's.
	accs   []partAcc
	seen   []uint32
	serial uint32
}

// cstep is a superstep of the compacted program being built: its work
// is gathered at the end, and only when it is not one original
// superstep's whole.
type cstep struct {
	kind obj.PhaseKind
	// from: the original supersteps contributing, in order.
	from []*prog.Superstep
	// names: the compute parts' names; parts: the compute parts, in
	// order.
	names []string
	parts []piece
	host  *prog.Superstep // a host superstep, kept as it is
	// whole: the original superstep all of whose work is here.
	whole *prog.Superstep
}

// piece is one part of an original compute superstep: kernels [lo, hi)
// of each tile (nil lo: from 0, nil hi: to the end).
type piece struct {
	s      *prog.Superstep
	tiles  []int
	lo, hi map[int]int
}

// kernels returns the piece's kernels on tile t.
func (p piece) kernels(t int) []*prog.Kernel {
	ks := p.s.Work[t]
	lo, hi := 0, len(ks)
	if p.lo != nil {
		lo = p.lo[t]
	}
	if p.hi != nil {
		hi = p.hi[t]
	}
	return ks[lo:hi]
}

// compact compacts p's supersteps in place (see the file comment).
// cache, when not nil, shares merged exchange supersteps and their bound
// cells across the programs of one step cache; alias maps a buffer that a
// replayed step reads to the buffer of p that it stands for.
// sums, when not nil, holds the accesses of parts that a step cache's
// fragments hold (partSum).
func compact(p *prog.Program, parts map[*prog.Superstep][]partMark, sums partSums, cache *StepCache, alias map[*prog.Buffer]*prog.Buffer) {
	if len(p.Branches) > 0 || len(p.Steps) < 3 {
		return
	}
	c := &compactor{marker: prog.NewMarker(), floor: -1, alias: alias}
	if cache != nil {
		c.bounds, c.merged, c.now = cache.bounds, cache.merged, cache.lowerings
	}
	for _, s := range p.Steps {
		switch s.Kind {
		case obj.Compute:
			c.compute(s, parts[s], sums[s])
		case obj.Exchange:
			c.exchange(s)
		default:
			c.out = append(c.out, &cstep{kind: s.Kind, host: s, from: []*prog.Superstep{s}})
			c.floor = len(c.out) - 1
		}
	}
	p.Steps = c.finish(p.Steps[:0])
}

// partSum is the accesses of one step's part of a compute superstep,
// as a step cache's fragment holds them: its kernels' buffers, each
// with whether some kernel writes it, found by the first compaction
// that meets the part. A fragment's kernels are the same in every
// program that replays it, so later compactions read the accesses
// instead of every kernel's fixes on every tile (on a 1472-tile layer,
// about 31000 kernels and 95000 fixes a program, and the buffers they
// name about 125). kernels is the part's kernel count: a part that
// holds any other kernels is read kernel by kernel.
type partSum struct {
	kernels int
	accs    []partAcc
	filled  bool
}

// partAcc is a buffer a part accesses (before aliases are resolved)
// and whether it writes it.
type partAcc struct {
	buf   *prog.Buffer
	write bool
}

// partSums holds parts' accesses by superstep and part index (0: the
// kernels before the first mark).
type partSums map[*prog.Superstep]map[int]*partSum

// set records sum as the accesses of part j of superstep s.
func (ps *partSums) set(s *prog.Superstep, j int, sum *partSum) {
	if *ps == nil {
		*ps = partSums{}
	}
	m := (*ps)[s]
	if m == nil {
		m = map[int]*partSum{}
		(*ps)[s] = m
	}
	m[j] = sum
}

// partAccesses returns the distinct buffer accesses of the part holding
// kernels [lo[k], hi[k]) of each tile's work[k], count kernels in all:
// sum's when it holds this part's, else found from the kernels' fixes
// (and kept in sum when the part is the one sum stands for).
func (c *compactor) partAccesses(sum *partSum, count int, work [][]*prog.Kernel, lo, hi []int) []partAcc {
	ours := sum != nil && sum.kernels == count
	if ours && sum.filled {
		return sum.accs
	}
	c.serial++
	accs := c.accs[:0]
	for k := range work {
		for _, kn := range work[k][lo[k]:hi[k]] {
			for _, f := range kn.Fixes {
				c.slot(f.Ref.Buf) // numbers the buffer
				i, _ := c.marker.Index(f.Ref.Buf)
				key := 2 * int(i)
				if f.Write {
					key++
				}
				if key >= len(c.seen) {
					c.seen = append(c.seen, make([]uint32, key+1-len(c.seen))...)
				}
				if c.seen[key] == c.serial {
					continue
				}
				c.seen[key] = c.serial
				accs = append(accs, partAcc{f.Ref.Buf, f.Write})
			}
		}
	}
	c.accs = accs
	if ours {
		sum.accs, sum.filled = append([]partAcc(nil), accs...), true
		return sum.accs
	}
	return accs
}

// slot returns buffer b's accesses (an alias's: those of the buffer it
// stands for).
func (c *compactor) slot(b *prog.Buffer) *access {
	i, first := c.marker.Index(b)
	if first {
		if int(i) >= len(c.bufs) {
			c.bufs = append(c.bufs, make([]*access, int(i)+1-len(c.bufs))...)
		}
		canon := b
		for n := 0; c.alias != nil && n < len(c.alias); n++ {
			a, ok := c.alias[canon]
			if !ok {
				break
			}
			canon = a
		}
		a := &access{-1, -1}
		if canon != b {
			a = c.slot(canon) // may grow c.bufs: assigned after
		}
		c.bufs[i] = a
	}
	return c.bufs[i]
}

// after is the earliest superstep of kind k that may follow an access in
// superstep at: the same one when both are compute supersteps (the tile
// runs its kernels in order), else the next.
func (c *compactor) after(at int32, k obj.PhaseKind) int {
	if at < 0 {
		return 0
	}
	if k == obj.Compute && c.out[at].kind == obj.Compute {
		return int(at)
	}
	return int(at) + 1
}

// place returns the index of the first superstep of kind k at or after
// i, appending one when there is none.
func (c *compactor) place(i int, k obj.PhaseKind) int {
	i = max(i, c.floor+1)
	for ; i < len(c.out); i++ {
		if c.out[i].kind == k {
			return i
		}
	}
	c.out = append(c.out, &cstep{kind: k})
	return len(c.out) - 1
}

// partMark is where a step that joined a compute superstep started
// putting its kernels there: the superstep's kernel count by tile then.
type partMark struct {
	at   map[int]int
	step string
}

// compute places the kernels of compute superstep s, each step's part
// whole (marks: where the parts after the first start; sums: the
// accesses of those parts that a fragment holds, by part).
func (c *compactor) compute(s *prog.Superstep, marks []partMark, sums map[int]*partSum) {
	// The tiles (in any order: a tile's kernels keep theirs, and the
	// tiles are independent), each tile's kernels and the current part's
	// [lo, hi) of them, the last three in scratch the supersteps share.
	n := len(s.Work)
	if cap(c.work) < n {
		c.work, c.lo, c.hi = make([][]*prog.Kernel, n), make([]int, n), make([]int, n)
	}
	tiles := make([]int, 0, n)
	work, lo, hi := c.work[:n], c.lo[:n], c.hi[:n]
	for t, ks := range s.Work {
		work[len(tiles)], lo[len(tiles)] = ks, 0
		tiles = append(tiles, t)
	}
	at := -1 // the cstep of every part so far (-2: more than one)
	for j := 0; j <= len(marks); j++ {
		pc := piece{s: s, tiles: tiles}
		if j > 0 {
			pc.lo = marks[j-1].at
		}
		count := 0
		if j < len(marks) {
			pc.hi = marks[j].at
			for k, t := range tiles {
				hi[k] = pc.hi[t]
				count += hi[k] - lo[k]
			}
		} else {
			for k := range tiles {
				hi[k] = len(work[k])
				count += hi[k] - lo[k]
			}
		}
		if count == 0 {
			continue
		}
		accs := c.partAccesses(sums[j], count, work, lo, hi)
		e := 0
		for _, pa := range accs {
			a := c.slot(pa.buf)
			e = max(e, c.after(a.w, obj.Compute))
			if pa.write {
				e = max(e, c.after(a.r, obj.Compute))
			}
		}
		i := c.place(e, obj.Compute)
		cs := c.out[i]
		cs.join(s)
		cs.parts = append(cs.parts, pc)
		if j == 0 {
			first, _, _ := strings.Cut(s.Name, "+")
			cs.names = append(cs.names, first)
		} else {
			cs.names = append(cs.names, marks[j-1].step)
		}
		if at == -1 {
			at = i
		} else if at != i {
			at = -2
		}
		for _, pa := range accs {
			if a := c.slot(pa.buf); pa.write {
				a.w = max(a.w, int32(i))
			} else {
				a.r = max(a.r, int32(i))
			}
		}
		copy(lo, hi)
	}
	if at >= 0 {
		c.out[at].whole = s
	}
}

// exchange places exchange superstep s whole.
func (c *compactor) exchange(s *prog.Superstep) {
	if len(s.Xfers) == 0 {
		return
	}
	e := 0
	for _, x := range s.Xfers {
		e = max(e, c.after(c.slot(x.From.Buf).w, obj.Exchange))
		a := c.slot(x.To.Buf)
		e = max(e, c.after(a.w, obj.Exchange), c.after(a.r, obj.Exchange))
	}
	i := c.place(e, obj.Exchange)
	c.out[i].join(s)
	for _, x := range s.Xfers {
		a := c.slot(x.From.Buf)
		a.r = max(a.r, int32(i))
		a = c.slot(x.To.Buf)
		a.w = max(a.w, int32(i))
	}
}

// join records s as contributing to cs.
func (cs *cstep) join(s *prog.Superstep) {
	if n := len(cs.from); n > 0 && cs.from[n-1] == s {
		return
	}
	cs.from = append(cs.from, s)
}

// finish returns the compacted supersteps, appended to dst. A superstep
// holding exactly one original superstep's work is that superstep.
func (c *compactor) finish(dst []*prog.Superstep) []*prog.Superstep {
	for _, cs := range c.out {
		switch {
		case cs.host != nil:
			dst = append(dst, cs.host)
		case len(cs.from) == 1 && (cs.kind == obj.Exchange || cs.whole == cs.from[0]):
			dst = append(dst, cs.from[0])
		case cs.kind == obj.Exchange:
			dst = append(dst, c.mergeExchange(cs.from))
		default:
			s := prog.NewSuperstep(obj.Compute, partsName(cs.names))
			s.Work = make(map[int][]*prog.Kernel, len(cs.parts[0].tiles))
			for _, pc := range cs.parts {
				for _, t := range pc.tiles {
					ks := pc.kernels(t)
					if len(ks) == 0 {
						continue
					}
					if have, ok := s.Work[t]; ok {
						s.Work[t] = append(have, ks...)
					} else {
						// The original's array, capped: an append copies.
						s.Work[t] = ks[:len(ks):len(ks)]
					}
				}
			}
			dst = append(dst, s)
		}
	}
	return dst
}

// mergedStep is an exchange superstep merged from a step cache's
// replayed supersteps, and the last lowering that used it.
type mergedStep struct {
	s    *prog.Superstep
	used int
}

// mergeExchange returns the exchange superstep merged from from, their
// transfers in order. A merge of supersteps that each have a bound cell
// (the step cache's replays: the same supersteps in every program that
// replays them) is the same superstep in every program of the cache,
// made once: the merged transfers of a BERT-base layer's program were
// about 1.4 MB, a sixth of what pricing it allocated.
func (c *compactor) mergeExchange(from []*prog.Superstep) *prog.Superstep {
	k, ok := mergeKey(from)
	if ok && c.merged != nil {
		if m := c.merged[k]; m != nil {
			m.used = c.now
			return m.s
		}
	}
	s := prog.NewSuperstep(obj.Exchange, mergedName(from))
	n := 0
	for _, f := range from {
		n += len(f.Xfers)
	}
	s.Xfers = make([]prog.Transfer, 0, n)
	for _, f := range from {
		s.Xfers = append(s.Xfers, f.Xfers...)
	}
	if ok && c.bounds != nil {
		cell, have := c.bounds[k]
		if !have {
			cell = new(int64)
			*cell = -1
			c.bounds[k] = cell
		}
		s.Bound = cell
		if c.merged != nil {
			c.merged[k] = &mergedStep{s: s, used: c.now}
		}
	}
	return s
}

// mergeKey is the key of a merge of from by their bound cells; false
// when one has none.
func mergeKey(from []*prog.Superstep) (string, bool) {
	var b strings.Builder
	for _, s := range from {
		if s.Bound == nil {
			return "", false
		}
		fmt.Fprintf(&b, "%p;", s.Bound)
	}
	return b.String(), true
}

// partsName names a compute superstep by the steps whose kernels run in
// it (names: a superstep's first name when its first part came, else
// the step's), as lowering names one ("compute:a+b").
func partsName(names []string) string {
	out := names[0]
	if !strings.Contains(out, ":") {
		out = "compute:" + out
	}
	seen := map[string]bool{strings.TrimPrefix(out, "compute:"): true}
	for _, n := range names[1:] {
		n = strings.TrimPrefix(n, "compute:")
		if !seen[n] {
			seen[n] = true
			out += "+" + n
		}
	}
	return out
}

// mergedName names a superstep by the supersteps merged into it: the
// first's name, then each other's step names not already in it.
func mergedName(from []*prog.Superstep) string {
	name := from[0].Name
	prefix := ""
	if i := strings.IndexByte(name, ':'); i >= 0 {
		prefix = name[:i+1]
	}
	seen := map[string]bool{}
	parts := strings.Split(strings.TrimPrefix(name, prefix), "+")
	for _, p := range parts {
		seen[p] = true
	}
	for _, s := range from[1:] {
		n := s.Name
		if p, ok := strings.CutPrefix(n, prefix); ok && prefix != "" {
			n = p
		}
		for _, p := range strings.Split(n, "+") {
			if !seen[p] {
				seen[p] = true
				parts = append(parts, p)
			}
		}
	}
	return prefix + strings.Join(parts, "+")
}

// markPart records, before a step is lowered, where its kernels will
// start in the current compute superstep when they join it.
func (l *lowerer) markPart() {
	if l.step == nil {
		return
	}
	s := l.cur
	if s == nil || l.out.Steps[len(l.out.Steps)-1] != s || len(s.Work) == 0 {
		return
	}
	m := make(map[int]int, len(s.Work))
	for t, ks := range s.Work {
		m[t] = len(ks)
	}
	if l.parts == nil {
		l.parts = map[*prog.Superstep][]partMark{}
	}
	l.parts[s] = append(l.parts[s], partMark{m, l.step.Name})
}
