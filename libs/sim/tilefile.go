package sim

import (
	"sync"

	"ipu.local/libs/arch"
)

// TileFile is the file behind the tiles' memory (the device file),
// written with system calls instead of through the mapping mem
// returns. A page of a shared mapping is mapped into a process at its
// first touch, a fault each: 20 us a page where a hypervisor keeps the
// page tables, which made a quarter of a small model's load and check.
// Loading writes whole images, which need not be mapped. (Restoring a
// state could read the code the same way, but a run reads the data next
// to it, which the code's faults had mapped in passing: no gain.)
type TileFile interface {
	// WriteTile writes src to tile's memory at addr.
	WriteTile(tile int, addr uint32, src []byte) error
}

// UseFile makes LoadAll write the images' segments with f instead of
// through the tiles' memory; the programs decode from a copy of their
// code. Everything else (Load, Run) still works on the memory, which
// must show what f writes (a shared mapping of the file does).
func (m *Machine) UseFile(f TileFile) { m.file = f }

// codeCopies holds tile-sized buffers that the code is copied into for
// predecoding (decodeProgram and codeIndex read only the code ranges;
// the rest of a buffer is stale).
var codeCopies sync.Pool

// withCodeCopy calls fn with a buffer of a tile's memory (address lo at
// index 0) holding fill's bytes.
func (m *Machine) withCodeCopy(fill func(buf []byte) error, fn func(buf []byte)) error {
	size := int(m.p.Memory.Size())
	buf, _ := codeCopies.Get().([]byte)
	if len(buf) != size {
		buf = make([]byte, size)
	}
	defer codeCopies.Put(buf)
	if err := fill(buf); err != nil {
		return err
	}
	fn(buf)
	return nil
}

// writeImage writes img's segments to tile with m.file and copies into
// buf, in order as Load copies them into memory, those that meet the
// tile's code ranges: buf's code is then the memory's.
func (m *Machine) writeImage(tile int, img Image, code []arch.Range, buf []byte) error {
	lo := m.p.Memory.Lo
	for _, s := range img.Segments {
		if err := m.file.WriteTile(tile, s.Addr, s.Data); err != nil {
			return err
		}
		end := uint64(s.Addr) + uint64(len(s.Data))
		for _, r := range code {
			if uint64(r.Lo) < end && s.Addr < r.Hi {
				copy(buf[s.Addr-lo:], s.Data)
				break
			}
		}
	}
	return nil
}
