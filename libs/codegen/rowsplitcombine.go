package codegen

import "ipu.local/libs/isa"

// This file holds the last launch of a split reduction: combining each
// row's partials into its output.

// A reduction's last launch: worker w combines the partials of a range
// of rows (FP16 outputs: of pairs of rows, the odd last row merged into
// its word), as Rows splits them.
//
//	table: $m2 = the first row's partials, $m3 = Y, $m4 = rows (pairs)
//	       [, $m9 = the odd last row]
//	FP32:  loop: combine -> $a6 [*c]; $m2 += 4K; st32 [$m3+=4]; addi; brnz
//	FP16:  brz pairs, tail; loop: combine -> $a6 [*c]; $m2 += 4K;
//	       combine (even K: lanes in $a8:9) -> $a7 [*c]; $m2 += 4K;
//	       f32v2tof16; st32; addi; brnz
//	       tail: brz odd, done; combine -> $a6 [*c]; $m2 += 4K;
//	       f32v2tof16; merge
//	       done:

func (p Rows) combineWords() int {
	if p.OutF16 {
		return 4
	}
	return 3
}

func (p Rows) combinePrologue(b *Builder, table Label) {
	emitTableBase(b, table, p.combineWords(), M1)
	b.Ldm(rwX, M1, 0)
	b.Ldm(rwY, M1, 4)
	b.Ldm(rwRows, M1, 8)
	if p.OutF16 {
		b.Ldm(rwTail, M1, 12)
	}
	if p.Op == ReduceMean {
		b.LoadF32(rwInvC, p.invC())
	}
}

// combineRow emits d = the value of the row whose partials are at $m2
// (its lanes in the pair at acc), and moves $m2 to the next row.
func (p Rows) combineRow(b *Builder, d, acc AReg) {
	p.combineVia(b, isa.FADD, d, acc, rwX)
	if p.Op == ReduceMean {
		b.F(isa.FMUL, d, d, rwInvC)
	}
	b.Addi(rwX, rwX, int32(4*p.Chunks))
}

func (p Rows) combineLoops(b *Builder) {
	if !p.OutF16 {
		loop := b.Here()
		p.combineRow(b, rwZ, rwZ)
		b.St32P(rwZ, rwY, 4)
		b.Addi(rwRows, rwRows, -1)
		b.Brnz(rwRows, loop)
		b.Exit()
		return
	}
	tail, done := b.Label(), b.Label()
	b.Brz(rwRows, tail)
	loop := b.Here()
	p.combinePair(b)
	b.Addi(rwRows, rwRows, -1)
	b.Brnz(rwRows, loop)
	b.Bind(tail)
	b.Brz(rwTail, done)
	p.combineTail(b)
	b.Bind(done)
	b.Exit()
}

func (p Rows) combinePair(b *Builder) {
	p.combineRow(b, rwZ, rwZ)
	p.combineRow(b, rwZ+1, rwT2) // $a6 holds the first row's
	b.F1(isa.CVTFH, rwZ, rwZ)
	b.St32P(rwZ, rwY, 4)
}

func (p Rows) combineTail(b *Builder) {
	p.combineRow(b, rwZ, rwZ)
	b.F1(isa.CVTFH, rwZ, rwZ)
	storeLow16(b, rwY, rwZ)
}

func (p Rows) combineCost() Cost {
	pro := issues(func(b *Builder) { p.combinePrologue(b, b.Label()) })
	if p.OutF16 {
		pair := issues(p.combinePair) + 2
		tail := issues(p.combineTail)
		workers, _, pairs, odd := p.split16()
		c := Cost{Workers: workers, Work: make([]int64, workers)}
		for w := range c.Work {
			v := pro + 2 + int64(pairs[w])*pair
			if odd[w] {
				v += tail
			}
			c.Work[w] = Slots * v
		}
		return c
	}
	row := issues(func(b *Builder) { p.combineRow(b, rwZ, rwZ) }) + 3
	workers := min(p.Workers, p.R)
	_, count := split(p.R, workers)
	c := Cost{Workers: workers, Work: make([]int64, workers)}
	for w := range c.Work {
		c.Work[w] = Slots * (pro + int64(count[w])*row)
	}
	return c
}

func (p Rows) emitCombine(b *Builder) (Kernel, error) {
	k := Kernel{Entry: b.Here(), Cost: p.combineCost()}
	table := b.Label()
	p.combinePrologue(b, table)
	p.combineLoops(b)
	var rows [][]uint32
	if p.OutF16 {
		workers, first, pairs, odd := p.split16()
		for w := 0; w < workers; w++ {
			tail := uint32(0)
			if odd[w] {
				tail = 1
			}
			rows = append(rows, []uint32{p.fieldWord(ufS1, first[w], 0), p.Y + uint32(2*first[w]), uint32(pairs[w]), tail})
		}
	} else {
		workers := min(p.Workers, p.R)
		start, count := split(p.R, workers)
		for w := 0; w < workers; w++ {
			rows = append(rows, []uint32{p.fieldWord(ufS1, start[w], 0), p.Y + uint32(4*start[w]), uint32(count[w])})
		}
	}
	emitTable(b, table, rows)
	return k, b.Err()
}
