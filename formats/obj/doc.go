// Package obj is the object format: the linker's output and ipu-pack's
// input. A program for every tile of one architecture (code and data
// segments with addresses, symbols, exchange transfers), the host program
// (BSP phase list, host exchange pages, named inputs and outputs) and the
// device configuration (register writes).
//
// # File layout
//
// All integers are little-endian. A string is a uint32 length and that
// many bytes. The header and section table are those of package
// ipu.local/formats/obj/wire:
//
//	Header struct {
//		Magic    [8]byte // "\x89IPUOBJ\x01": the last byte is the version
//		NSection uint32  // 4
//		Reserved uint32  // 0
//	}
//	Table [NSection]struct {
//		Kind uint32 // 1 meta, 2 tiles, 3 host, 4 config: in this order
//		CRC  uint32 // CRC-32C (Castagnoli) of the section bytes
//		Off  uint64 // sections follow the table back to back
//		Len  uint64 // the last one ends at the end of the file
//	}
//	Meta struct {
//		Arch     string // architecture preset name
//		Compiler string // toolchain version
//		Source   string // fingerprint of what the object was made from
//	}
//	Tiles struct {
//		NTile uint32
//		Tile  [NTile]struct { // increasing Index
//			Index    uint32 // < MaxTiles
//			Entry    uint32
//			NSeg     uint32
//			Segment  [NSeg]Segment // increasing Addr, non-overlapping
//			NSym     uint32
//			Symbol   [NSym]struct{ Name string; Addr, Size uint32; Flags uint8 } // Flags bit 0: code
//			NXfer    uint32
//			Transfer [NXfer]struct{ Phase uint32; Cycle int64; Dst, DstCount, Words uint32 }
//		}
//	}
//	Segment struct {
//		Name  string
//		Kind  uint8  // 0 code, 1 data, 2 bss
//		Enc   uint8  // 0 raw, 1 zstd, 2 reference
//		Addr  uint32
//		Size  uint32 // bytes in tile memory, at most MaxTileMemory
//		NData uint32 // bytes below: 0 for bss, Size when raw, the frame's length for zstd, 8 for a reference
//		Data  [NData]byte
//	}
//	Reference struct { // Data of a reference segment
//		Tile uint32 // Index of an earlier tile
//		Seg  uint32 // number of one of its segments: same Kind, same Size
//	}
//	Host struct {
//		NPhase  uint32; Phase  [NPhase]struct{ Kind uint8; Name string }
//		NPage   uint32; Page   [NPage]struct{ ID uint8; Bytes uint32 }
//		NInput  uint32; Input  [NInput]Tensor
//		NOutput uint32; Output [NOutput]Tensor
//		NModel  uint32; Model  [NModel]byte // plan graph JSON, at most MaxModelBytes
//	}
//	Tensor struct {
//		Name, DType string
//		Rank        uint32
//		Shape       [Rank]int64
//		Page        uint8
//		Offset      uint32 // 0 when NBlock > 0
//		Accumulate  int64
//		NBlock      uint32
//		Block       [NBlock]struct {
//			Offset, R0, R1, C0, C1, Rows, Cols uint32
//			Flags uint8 // bit 0: transpose
//			Order uint8 // 0 row-major, 1 A panels, 2 B panels
//		}
//	}
//	Config struct {
//		NWrite uint32
//		Write  [NWrite]struct{ Tile, Reg, Value uint32 }
//	}
//
// A code or data segment of at least RefMin bytes whose kind and bytes
// are those of a segment of an earlier tile (a weight copied to many
// tiles) is stored as a reference to the first such segment, which is
// stored itself; a reference names an earlier tile only, so a reader
// resolves it from the tiles it has read (Read shares the referenced
// segment's data; a segment stored raw, and the host model, share the
// file's bytes; every shared slice is capped at its length). Other
// code and data segments of at least CompressMin bytes are stored as one
// zstd frame when that is smaller; the encoder's options are fixed, so
// Write gives the same bytes for the same object. Read checks every
// offset, count and length against the bytes left before allocating,
// bounds decompression by the declared Size (at most MaxTileMemory for
// one segment and for all of a tile's segments together, so a file
// decodes to at most MaxTiles x MaxTileMemory bytes of data), checks each
// section's CRC, checks that a reference names an earlier tile and an
// existing segment of the same kind and size, and validates the object
// as Write does, the host
// program's tensor layouts included (ValidateHost). Its errors are
// *FormatError, naming the section and the byte offset.
//
// # Host tensor layouts
//
// A tensor without blocks lies row-major at its Offset. A tensor with
// blocks is laid out for the tiles that fetch or store it with one host
// transfer each: every block is a region of the tensor's matrix view (or
// of its transpose) in row-major, A-panel or B-panel order over a padded
// grid (see Block). Tensor.Scatter and Tensor.Gather move a tensor's
// row-major data into and out of its page either way.
package obj
