// Package pack turns a linked object into an application package: one
// image for every tile of the architecture, identical images stored once,
// tiles without a program given the shared idle image, and the device
// configuration completed with each programmed tile's registers
// (TileConfig): entry, executable range, sync-group and exchange
// membership, which the device enforces.
//
// It is where an object meets its architecture: the object format only
// knows format-wide limits, Build checks every segment against the
// preset's memory map.
package pack

import (
	"fmt"

	"ipu.local/formats/ipuexe"
	"ipu.local/formats/obj"
	"ipu.local/libs/arch"
	"ipu.local/libs/isa"
	"ipu.local/libs/sim"
)

// Build packs o for preset p. The package has p.Tiles tiles; its Object
// fingerprint is left empty for the caller, who holds the object's file
// bytes, to set (ipuexe.Write requires it).
func Build(o *obj.Object, p *arch.Preset) (*ipuexe.Package, error) {
	if o.Arch != p.Name {
		return nil, fmt.Errorf("object is for architecture %q, packing for %q", o.Arch, p.Name)
	}
	if err := obj.Validate(o); err != nil {
		return nil, err
	}
	for i := range o.Tiles {
		if err := checkTile(&o.Tiles[i], p); err != nil {
			return nil, err
		}
	}
	if err := checkConfig(o, p); err != nil {
		return nil, err
	}

	pkg := &ipuexe.Package{
		Arch:      o.Arch,
		Compiler:  o.Compiler,
		Tiles:     p.Tiles,
		TileImage: make([]uint32, p.Tiles),
		Host:      o.Host,
	}
	var d dedup
	idle := IdleImage(p)
	idleSum := hashImage(&idle)
	imgs := make([]ipuexe.Image, len(o.Tiles))
	for i := range o.Tiles {
		ot := &o.Tiles[i]
		imgs[i] = ipuexe.Image{Entry: ot.Entry, Segments: ot.Segments, Symbols: ot.Symbols, Exchange: ot.Exchange}
	}
	sums := hashImages(imgs)
	next := 0 // next object tile
	for t := 0; t < p.Tiles; t++ {
		img, sum := &idle, idleSum
		if next < len(o.Tiles) && o.Tiles[next].Index == t {
			img, sum = &imgs[next], sums[next]
			next++
		}
		pkg.TileImage[t] = d.add(pkg, img, sum)
	}

	// The exchange's members: every tile whose code sends or receives,
	// every tile with listed transfers, and every tile one delivers to.
	inXchg := make([]bool, p.Tiles)
	for i := range o.Tiles {
		ot := &o.Tiles[i]
		if exchangeCode(ot.Segments) {
			inXchg[ot.Index] = true
		}
		for _, x := range ot.Exchange {
			inXchg[ot.Index] = true
			for u := x.Dst; u < x.Dst+x.DstCount && u < p.Tiles; u++ {
				if u >= 0 {
					inXchg[u] = true
				}
			}
		}
	}
	pkg.Config = append([]obj.RegWrite(nil), o.Config...)
	for i := range o.Tiles {
		ot := &o.Tiles[i]
		pkg.Config = append(pkg.Config, TileConfig(ot.Index, ot.Entry, ot.Segments, inXchg[ot.Index])...)
	}
	return pkg, nil
}

// TileConfig is the configuration of a tile that runs a program with
// entry and segments: its entry register, its executable range, the
// smallest range holding every code segment, its membership of the sync
// group (every programmed tile takes part in the supersteps) and its
// membership of the exchange (exchange: the tile sends or receives).
func TileConfig(tile int, entry uint32, segs []obj.Segment, exchange bool) []obj.RegWrite {
	lo, hi := uint32(0), uint32(0)
	first := true
	for _, s := range segs {
		if s.Kind != obj.Code || s.Size == 0 {
			continue
		}
		end := s.Addr + s.Size
		if first || s.Addr < lo {
			lo = s.Addr
		}
		if first || end > hi {
			hi = end
		}
		first = false
	}
	t := uint32(tile)
	return []obj.RegWrite{
		{Tile: t, Reg: sim.RegExecLo, Value: lo},
		{Tile: t, Reg: sim.RegExecHi, Value: hi},
		{Tile: t, Reg: sim.RegEntry, Value: entry},
		{Tile: t, Reg: sim.RegSyncGroup, Value: 1},
		{Tile: t, Reg: sim.RegExchange, Value: b2u(exchange)},
	}
}

// exchangeCode reports whether code segments hold a send or recv.
func exchangeCode(segs []obj.Segment) bool {
	for _, s := range segs {
		if s.Kind != obj.Code {
			continue
		}
		for off := 0; off+4 <= len(s.Data); off += 4 {
			w := isa.Word(s.Data[off:])
			// The opcode is the top byte: decode only the candidates
			// (a data word in the code stream fails to decode).
			switch isa.Op(w >> 24) {
			case isa.SEND, isa.SEND2, isa.RECV:
				if _, err := isa.Decode(w); err == nil {
					return true
				}
			}
		}
	}
	return false
}

func b2u(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}

// IdleImage is the image of a tile without a program: one halt at the
// start of the executable range.
func IdleImage(p *arch.Preset) ipuexe.Image {
	code := make([]byte, 4)
	isa.PutWord(code, isa.MustEncode(isa.Inst{Op: isa.HALT}))
	return ipuexe.Image{
		Idle:     true,
		Entry:    p.Executable.Lo,
		Segments: []obj.Segment{{Name: "idle", Kind: obj.Code, Addr: p.Executable.Lo, Size: 4, Data: code}},
	}
}

// checkTile checks one tile's program against the preset's memory map.
func checkTile(t *obj.Tile, p *arch.Preset) error {
	if t.Index >= p.Tiles {
		return fmt.Errorf("tile %d: out of range (%s has %d tiles)", t.Index, p.Name, p.Tiles)
	}
	entryOK := false
	for i := range t.Segments {
		s := &t.Segments[i]
		where := fmt.Sprintf("tile %d segment %d %q", t.Index, i, s.Name)
		if !p.Memory.Contains(s.Addr, s.Size) {
			return fmt.Errorf("%s: [%#x, %#x) outside tile memory [%#x, %#x)", where, s.Addr, uint64(s.Addr)+uint64(s.Size), p.Memory.Lo, p.Memory.Hi)
		}
		if s.Addr%4 != 0 {
			return fmt.Errorf("%s: addr %#x not 4-aligned", where, s.Addr)
		}
		if s.Kind != obj.Code {
			continue
		}
		if !p.Executable.Contains(s.Addr, s.Size) {
			return fmt.Errorf("%s: code [%#x, %#x) outside the executable range [%#x, %#x)", where, s.Addr, uint64(s.Addr)+uint64(s.Size), p.Executable.Lo, p.Executable.Hi)
		}
		if s.Size%4 != 0 {
			return fmt.Errorf("%s: code size %d not a multiple of 4", where, s.Size)
		}
		if t.Entry >= s.Addr && t.Entry-s.Addr < s.Size {
			entryOK = true
		}
	}
	if t.Entry%4 != 0 {
		return fmt.Errorf("tile %d: entry %#x not 4-aligned", t.Index, t.Entry)
	}
	if !entryOK {
		return fmt.Errorf("tile %d: entry %#x not inside a code segment", t.Index, t.Entry)
	}
	return nil
}

// checkConfig checks the object's register writes: known registers,
// existing tiles, and entry writes that agree with the tiles' programs
// (Build adds those itself).
func checkConfig(o *obj.Object, p *arch.Preset) error {
	entries := map[uint32]uint32{}
	for _, t := range o.Tiles {
		entries[uint32(t.Index)] = t.Entry
	}
	for i, w := range o.Config {
		where := fmt.Sprintf("config write %d (tile %s reg %#x)", i, tileName(w.Tile), w.Reg)
		if w.Tile != obj.AllTiles && int64(w.Tile) >= int64(p.Tiles) {
			return fmt.Errorf("%s: tile out of range (%s has %d tiles)", where, p.Name, p.Tiles)
		}
		switch w.Reg {
		case sim.RegFP8, sim.RegWatchdog:
		case sim.RegExecLo, sim.RegExecHi, sim.RegSyncGroup, sim.RegExchange:
			return fmt.Errorf("%s: register %s is set by the packer from the tile's program", where, sim.RegName(w.Reg))
		case sim.RegEntry:
			if w.Tile == obj.AllTiles {
				return fmt.Errorf("%s: the entry register is per tile", where)
			}
			entry, ok := entries[w.Tile]
			if !ok {
				return fmt.Errorf("%s: tile has no program", where)
			}
			if w.Value != entry {
				return fmt.Errorf("%s: value %#x disagrees with the tile's entry %#x", where, w.Value, entry)
			}
		default:
			return fmt.Errorf("%s: unknown register", where)
		}
	}
	return nil
}

func tileName(t uint32) string {
	if t == obj.AllTiles {
		return "all"
	}
	return fmt.Sprint(t)
}

// Limits returns the bounds architecture archName puts on its packages,
// for ipuexe.ReadWith: its tiles, and its tile memory, which bounds what
// each image decompresses to (ipuexe.ImageBytes).
func Limits(archName string) (ipuexe.Limits, error) {
	p, err := arch.Lookup(archName)
	if err != nil {
		return ipuexe.Limits{}, err
	}
	return ipuexe.Limits{Tiles: p.Tiles, TileMemory: p.Memory.Size()}, nil
}
