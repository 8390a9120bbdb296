package obj

import (
	"fmt"
	"math"
)

// Limits every object obeys. They hold for every architecture preset; the
// packer checks the preset's own, tighter limits.
const (
	// MaxTiles bounds tile indices.
	MaxTiles = 4096
	// MaxTileMemory bounds the bytes of one segment and of all of a tile's
	// segments together (624 KiB, the tile memory of every preset).
	MaxTileMemory = 638976
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

// ValidateHost checks the host program's kinds and shapes.
func ValidateHost(h *HostProgram) error {
	for i, p := range h.Phases {
		if p.Kind > HostExchange {
			return fmt.Errorf("host phase %d %q: unknown kind %d", i, p.Name, p.Kind)
		}
	}
	for _, l := range []struct {
		what string
		ts   []Tensor
	}{{"input", h.Inputs}, {"output", h.Outputs}} {
		for i, t := range l.ts {
			for j, d := range t.Shape {
				if d < 0 {
					return fmt.Errorf("host %s %d %q: dimension %d is %d", l.what, i, t.Name, j, d)
				}
			}
		}
	}
	return nil
}
