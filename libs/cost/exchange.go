package cost

import (
	"fmt"
	"sort"

	"ipu.local/libs/arch"
	"ipu.local/libs/sched"
)

// OverflowError is an exchange phase whose receivers get more bytes
// than tile memory holds: like a MemoryReport, the split does not fit.
type OverflowError struct {
	Lo, Hi int    // the receiving tiles [Lo, Hi)
	Bytes  uint64 // bytes they receive
}

func (e *OverflowError) Error() string {
	return fmt.Sprintf("exchange into tiles [%d, %d): %d bytes received exceed tile memory", e.Lo, e.Hi, e.Bytes)
}

// Exchange collects the transfers of one exchange phase. Addresses are
// synthetic (the linker places storage): each receiving tile's buffers
// are laid end to end from the bottom of tile memory, which is all
// sched's bound needs (it counts words, operand values and timing).
type Exchange struct {
	p         *arch.Preset
	Transfers []sched.Transfer
	next      map[int]uint32
	// Words is the words the phase moves, counting each receiver.
	Words int64
}

// NewExchange starts an empty phase.
func NewExchange(p *arch.Preset) *Exchange {
	return &Exchange{p: p, next: map[int]uint32{}}
}

// Move adds the transfers that bring the regions of dst (one per tile)
// from src, bytes per element as moved. A region a tile already holds
// costs nothing. Receivers of the same region on contiguous tiles share
// one multicast.
func (x *Exchange) Move(src, dst Dist, bytes int) error {
	if src.Rows != dst.Rows || src.Cols != dst.Cols {
		return fmt.Errorf("exchange of a %dx%d matrix into a %dx%d layout", src.Rows, src.Cols, dst.Rows, dst.Cols)
	}
	// Source regions, deduplicated; the holders of each, sorted.
	type region struct{ r0, r1, c0, c1 int }
	holders := map[region][]int{}
	var regs []region
	maxH := 0
	for _, pc := range src.Pieces {
		r := region{pc.R0, pc.R1, pc.C0, pc.C1}
		if _, ok := holders[r]; !ok {
			regs = append(regs, r)
		}
		holders[r] = append(holders[r], pc.Tile)
		maxH = max(maxH, pc.R1-pc.R0)
	}
	sort.Slice(regs, func(i, j int) bool {
		a, b := regs[i], regs[j]
		if a.r0 != b.r0 {
			return a.r0 < b.r0
		}
		return a.c0 < b.c0
	})
	// Destination runs: same region, contiguous tiles.
	dp := append([]Piece(nil), dst.Pieces...)
	sort.Slice(dp, func(i, j int) bool {
		a, b := dp[i], dp[j]
		if a.R0 != b.R0 || a.C0 != b.C0 || a.R1 != b.R1 || a.C1 != b.C1 {
			if a.R0 != b.R0 {
				return a.R0 < b.R0
			}
			if a.C0 != b.C0 {
				return a.C0 < b.C0
			}
			if a.R1 != b.R1 {
				return a.R1 < b.R1
			}
			return a.C1 < b.C1
		}
		return a.Tile < b.Tile
	})
	for i := 0; i < len(dp); {
		j := i + 1
		for j < len(dp) && dp[j].R0 == dp[i].R0 && dp[j].R1 == dp[i].R1 && dp[j].C0 == dp[i].C0 && dp[j].C1 == dp[i].C1 && dp[j].Tile == dp[j-1].Tile+1 {
			j++
		}
		d := dp[i]
		lo, hi := d.Tile, dp[j-1].Tile+1
		k := sort.Search(len(regs), func(k int) bool { return regs[k].r0 >= d.R0-maxH })
		for ; k < len(regs) && regs[k].r0 < d.R1; k++ {
			s := regs[k]
			r0, r1 := max(s.r0, d.R0), min(s.r1, d.R1)
			c0, c1 := max(s.c0, d.C0), min(s.c1, d.C1)
			if r0 >= r1 || c0 >= c1 {
				continue
			}
			runs := 1
			switch dst.Panel {
			case RowAlign:
				if c1-c0 != s.c1-s.c0 || c1-c0 != d.C1-d.C0 {
					runs = Units(r1-r0, RowAlign)
				}
			case ColAlign:
				if r1-r0 != s.r1-s.r0 || r1-r0 != d.R1-d.R0 {
					runs = Units(c1-c0, ColAlign)
				}
			}
			words := ((r1-r0)*(c1-c0)*bytes + 3) / 4
			hs := holders[s]
			// A receiver that holds the region already needs nothing;
			// the sender is the first holder outside the run, else the
			// first holder inside it (it sends to the rest of the run).
			var src = -1
			for _, t := range hs {
				if t < lo || t >= hi {
					src = t
					break
				}
			}
			if src < 0 {
				held := map[int]bool{}
				for _, t := range hs {
					held[t] = true
				}
				if len(held) == hi-lo {
					continue // every receiver holds it
				}
				src = hs[0]
			}
			for r := 0; r < runs; r++ {
				w := words/runs + btoi(r < words%runs)
				if err := x.add(src, lo, hi, max(w, 1), hs); err != nil {
					return err
				}
			}
		}
		i = j
	}
	return nil
}

// add sends words from src to the tiles of [lo, hi) that do not hold
// the region (holders), as multicasts over the contiguous runs left.
func (x *Exchange) add(src, lo, hi, words int, holders []int) error {
	holds := func(t int) bool {
		for _, h := range holders {
			if h == t {
				return true
			}
		}
		return false
	}
	for t := lo; t < hi; {
		if holds(t) {
			t++
			continue
		}
		e := t + 1
		for e < hi && !holds(e) {
			e++
		}
		addr := uint32(0)
		for u := t; u < e; u++ {
			addr = max(addr, x.next[u])
		}
		n := 4 * uint32(words)
		if uint64(addr)+uint64(n) > uint64(x.p.Memory.Size()) {
			return &OverflowError{Lo: t, Hi: e, Bytes: uint64(addr) + uint64(n)}
		}
		for u := t; u < e; u++ {
			x.next[u] = addr + n
		}
		x.Transfers = append(x.Transfers, sched.Transfer{Src: src, Dst: t, DstN: e - t, Words: words,
			SrcAddr: x.p.Memory.Lo, DstAddr: x.p.Memory.Lo + addr})
		x.Words += int64(words) * int64(e-t)
		t = e
	}
	return nil
}

// Received is the bytes tile t receives in the phase.
func (x *Exchange) Received(t int) int64 { return int64(x.next[t]) }

// Bound is sched's lower bound on the phase's cycles (0 for an empty
// phase).
func (x *Exchange) Bound() (int64, error) {
	if len(x.Transfers) == 0 {
		return 0, nil
	}
	return sched.Bound(x.p, x.Transfers, sched.Options{})
}

// Cycles is the phase's cost: the bound, the preset's fixed cost per
// exchange phase and the sync that ends it.
func (x *Exchange) Cycles() (int64, error) {
	b, err := x.Bound()
	if err != nil || b == 0 {
		return 0, err
	}
	return b + int64(x.p.ExchangeFixedCycles) + int64(x.p.SyncCycles), nil
}

// PerTile counts the transfers each tile sends or receives.
func (x *Exchange) PerTile() map[int]int {
	m := map[int]int{}
	for _, t := range x.Transfers {
		m[t.Src]++
		for u := t.Dst; u < t.Dst+t.Dests(); u++ {
			m[u]++
		}
	}
	return m
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
