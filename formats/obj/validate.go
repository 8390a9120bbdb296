package obj

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
)

// Limits every object obeys. They hold for every architecture preset; the
// packer checks the preset's own, tighter limits.
const (
	// MaxTiles bounds tile indices.
	MaxTiles = 4096
	// MaxTileMemory bounds the bytes of one segment and of all of a tile's
	// segments together (624 KiB, the tile memory of every preset).
	MaxTileMemory = 638976
	// MaxPageBytes bounds a host page: a host address is the page id
	// above a 24-bit offset.
	MaxPageBytes = 1 << 24
	// MaxModelBytes bounds HostProgram.Model.
	MaxModelBytes = 256 << 20
)

// Validate checks what every object must satisfy: tiles in increasing
// index order, each tile's segments consistent (see ValidateSegments),
// symbols in address order, transfers and host program in range.
func Validate(o *Object) error {
	prev := -1
	for i := range o.Tiles {
		t := &o.Tiles[i]
		if t.Index < 0 || t.Index >= MaxTiles {
			return fmt.Errorf("tile %d: index out of range [0, %d)", t.Index, MaxTiles)
		}
		if t.Index <= prev {
			return fmt.Errorf("tile %d: tiles not in increasing index order (after tile %d)", t.Index, prev)
		}
		prev = t.Index
		if err := ValidateProgram(t.Segments, t.Symbols, t.Exchange); err != nil {
			return fmt.Errorf("tile %d: %w", t.Index, err)
		}
	}
	return ValidateHost(&o.Host)
}

// ValidateProgram checks one tile's segments, symbols and transfers.
func ValidateProgram(segs []Segment, syms []Symbol, xfers []Transfer) error {
	if err := ValidateSegments(segs); err != nil {
		return err
	}
	for i := 1; i < len(syms); i++ {
		if syms[i].Addr < syms[i-1].Addr {
			return fmt.Errorf("symbol %d %q: not in address order (%#x after %#x)", i, syms[i].Name, syms[i].Addr, syms[i-1].Addr)
		}
	}
	for i, x := range xfers {
		for _, f := range []struct {
			name string
			v    int64
		}{{"phase", int64(x.Phase)}, {"dst", int64(x.Dst)}, {"dst count", int64(x.DstCount)}, {"words", int64(x.Words)}} {
			if f.v < 0 || f.v > math.MaxInt32 {
				return fmt.Errorf("transfer %d: %s %d out of range", i, f.name, f.v)
			}
		}
		if x.Cycle < 0 {
			return fmt.Errorf("transfer %d: cycle %d is negative", i, x.Cycle)
		}
	}
	return nil
}

// ValidateSegments checks that segments are in increasing address order,
// do not overlap, have a known kind, hold Size bytes of data (none for
// BSS) and fit in MaxTileMemory.
func ValidateSegments(segs []Segment) error {
	var total uint64
	for i := range segs {
		s := &segs[i]
		switch s.Kind {
		case Code, Data:
			if uint64(len(s.Data)) != uint64(s.Size) {
				return fmt.Errorf("segment %d %q: size %d but %d bytes of data", i, s.Name, s.Size, len(s.Data))
			}
		case BSS:
			if len(s.Data) != 0 {
				return fmt.Errorf("segment %d %q: bss segment carries %d bytes of data", i, s.Name, len(s.Data))
			}
		default:
			return fmt.Errorf("segment %d %q: unknown kind %d", i, s.Name, s.Kind)
		}
		if s.Size > MaxTileMemory {
			return fmt.Errorf("segment %d %q: size %d exceeds tile memory (%d bytes)", i, s.Name, s.Size, MaxTileMemory)
		}
		end := uint64(s.Addr) + uint64(s.Size)
		if end > 1<<32 {
			return fmt.Errorf("segment %d %q: addr %#x size %d wraps the address space", i, s.Name, s.Addr, s.Size)
		}
		if i > 0 {
			p := &segs[i-1]
			if s.Addr < p.Addr {
				return fmt.Errorf("segment %d %q: not in address order (%#x after %#x)", i, s.Name, s.Addr, p.Addr)
			}
			if pend := uint64(p.Addr) + uint64(p.Size); uint64(s.Addr) < pend {
				return fmt.Errorf("segment %d %q: addr %#x overlaps segment %d %q (ends at %#x)", i, s.Name, s.Addr, i-1, p.Name, pend)
			}
		}
		total += uint64(s.Size)
		if total > MaxTileMemory {
			return fmt.Errorf("segment %d %q: segments total %d bytes, more than tile memory (%d bytes)", i, s.Name, total, MaxTileMemory)
		}
	}
	return nil
}

// ValidateHost checks the host program: kinds, shapes, pages (unique
// ids, at most MaxPageBytes), the model's size, and the block layouts:
// each block on its own (see Block), an output's blocks covering it
// exactly once, and no output block sharing page bytes with another
// output or an input (for tensors placed at an Offset, only against
// blocks).
func ValidateHost(h *HostProgram) error {
	for i, p := range h.Phases {
		if p.Kind > HostExchange {
			return fmt.Errorf("host phase %d %q: unknown kind %d", i, p.Name, p.Kind)
		}
	}
	pageBytes := map[uint8]uint32{}
	for i, p := range h.Pages {
		if _, dup := pageBytes[p.ID]; dup {
			return fmt.Errorf("host page %d: id %d declared twice", i, p.ID)
		}
		if p.Bytes > MaxPageBytes {
			return fmt.Errorf("host page %d (id %d): %d bytes, more than %d", i, p.ID, p.Bytes, MaxPageBytes)
		}
		pageBytes[p.ID] = p.Bytes
	}
	var ranges []pageRange
	for _, l := range []struct {
		what string
		ts   []Tensor
	}{{"input", h.Inputs}, {"output", h.Outputs}} {
		for i := range l.ts {
			t := &l.ts[i]
			for j, d := range t.Shape {
				if d < 0 {
					return fmt.Errorf("host %s %d %q: dimension %d is %d", l.what, i, t.Name, j, d)
				}
			}
			tr, err := checkLayout(t, l.what == "output", pageBytes)
			if err != nil {
				return hostTensorError(l.what, t.Name, err)
			}
			ranges = append(ranges, tr...)
		}
	}
	if err := checkOverlaps(ranges); err != nil {
		return err
	}
	if len(h.Model) > MaxModelBytes {
		return fmt.Errorf("host model: %d bytes, more than %d", len(h.Model), MaxModelBytes)
	}
	end := 0
	for i, b := range h.Branches {
		switch {
		case b.CondBytes != 1 && b.CondBytes != 2 && b.CondBytes != 4:
			return fmt.Errorf("host branch %d (If %q): condition of %d bytes, want 1, 2 or 4", i, b.If, b.CondBytes)
		case b.CondAddr%4 != 0:
			return fmt.Errorf("host branch %d (If %q): condition address %#x is not word aligned", i, b.If, b.CondAddr)
		case b.Then[0] < end || b.Then[0] >= b.Then[1] || b.Then[1] != b.Else[0] || b.Else[0] >= b.Else[1] || b.Else[1] > len(h.Phases):
			return fmt.Errorf("host branch %d (If %q): phases then [%d, %d) else [%d, %d) are not consecutive ranges after the previous branch within the %d phases",
				i, b.If, b.Then[0], b.Then[1], b.Else[0], b.Else[1], len(h.Phases))
		}
		end = b.Else[1]
	}
	return nil
}

// hostTensorError names the tensor (and block) a layout error is about.
func hostTensorError(what, name string, err error) error {
	var le *LayoutError
	if errors.As(err, &le) && le.Block >= 0 {
		return fmt.Errorf("host %s %q block %d: %s", what, name, le.Block, le.Msg)
	}
	return fmt.Errorf("host %s %q: %w", what, name, err)
}

// pageRange is page bytes a tensor or one of its blocks uses.
type pageRange struct {
	page   uint8
	lo, hi uint64
	what   string // "input" or "output"
	name   string
	block  int // -1: the tensor at its Offset
}

func (r *pageRange) String() string {
	if r.block < 0 {
		return fmt.Sprintf("host %s %q", r.what, r.name)
	}
	return fmt.Sprintf("host %s %q block %d", r.what, r.name, r.block)
}

// checkLayout checks a tensor's blocks and returns the page ranges that
// must not overlap others.
func checkLayout(t *Tensor, output bool, pageBytes map[uint8]uint32) ([]pageRange, error) {
	what := "input"
	if output {
		what = "output"
	}
	if len(t.Blocks) == 0 {
		lo, hi := t.Span()
		if hi == lo {
			return nil, nil
		}
		return []pageRange{{t.Page, lo, hi, what, t.Name, -1}}, nil
	}
	n, ok := pageBytes[t.Page]
	if !ok {
		return nil, fmt.Errorf("page %d not declared", t.Page)
	}
	size, rows, cols, err := t.checkBlocks(uint64(n))
	if err != nil {
		return nil, err
	}
	if output {
		if err := checkCover(t.Blocks, rows, cols); err != nil {
			return nil, err
		}
	}
	rs := make([]pageRange, len(t.Blocks))
	for i := range t.Blocks {
		b := &t.Blocks[i]
		rs[i] = pageRange{t.Page, uint64(b.Offset), uint64(b.Offset) + b.Bytes(size), what, t.Name, i}
	}
	return rs, nil
}

// checkOverlaps reports an output block sharing page bytes with anything,
// and an output placed at an Offset sharing them with any block. Inputs
// may share bytes (a block fetched twice), and so may tensors placed at
// an Offset, as they always could.
func checkOverlaps(rs []pageRange) error {
	slices.SortStableFunc(rs, func(a, b pageRange) int {
		return cmp.Or(cmp.Compare(a.page, b.page), cmp.Compare(a.lo, b.lo))
	})
	// The range reaching furthest so far, of each kind that may conflict.
	var anyR, blockR, outR, outBlockR *pageRange
	further := func(cur *pageRange, r *pageRange) *pageRange {
		if cur == nil || cur.page != r.page || r.hi > cur.hi {
			return r
		}
		return cur
	}
	for i := range rs {
		r := &rs[i]
		isOut, isBlock := r.what == "output", r.block >= 0
		var prev *pageRange
		switch {
		case isOut && isBlock:
			prev = anyR
		case isOut:
			prev = blockR
		case isBlock:
			prev = outR
		default:
			prev = outBlockR
		}
		if prev != nil && prev.page == r.page && prev.hi > r.lo {
			return fmt.Errorf("%s: page %d bytes [%#x,%#x) overlap %s (bytes [%#x,%#x))", r, r.page, r.lo, r.hi, prev, prev.lo, prev.hi)
		}
		anyR = further(anyR, r)
		if isBlock {
			blockR = further(blockR, r)
		}
		if isOut {
			outR = further(outR, r)
		}
		if isOut && isBlock {
			outBlockR = further(outBlockR, r)
		}
	}
	return nil
}
