// Package ipuexe is the application package format (.ipuexe): ipu-pack's
// output and ipu-load's input. It holds a loadable image for every tile of
// the architecture (identical images stored once), the device
// configuration and the host program, and records the fingerprint of the
// object it was packed from.
//
// # File layout
//
// All integers are little-endian. A string is a uint32 length and that
// many bytes. The header and section table are those of package
// ipu.local/formats/obj/wire, and the shared parts (segments, symbols,
// transfers, host program, register writes) are encoded as in package
// ipu.local/formats/obj:
//
//	Header struct {
//		Magic    [8]byte // "\x89IPUEXE\x01": the last byte is the version
//		NSection uint32  // 5
//		Reserved uint32  // 0
//	}
//	Table [NSection]struct {
//		Kind uint32 // 1 meta, 2 images, 3 tilemap, 4 config, 5 host: in this order
//		CRC  uint32 // CRC-32C (Castagnoli) of the section bytes
//		Off  uint64 // sections follow the table back to back
//		Len  uint64 // the last one ends at the end of the file
//	}
//	Meta struct { // the package header
//		Compiler string // toolchain version
//		Arch     string // architecture preset name
//		Tiles    uint32 // every tile of the architecture, 1..obj.MaxTiles
//		Object   string // hex SHA-256 of the .ipuobj file packed
//	}
//	Images struct {
//		NImage uint32
//		Image  [NImage]struct {
//			RawLen uint32 // length of Body, at most ImageBytes(tile memory)
//			Frame  []byte // uint32 length, then one zstd frame holding Body
//		}
//	}
//	Body struct {
//		Flags    uint8 // bit 0: idle
//		Entry    uint32
//		Segments        // obj segments, stored raw (Enc 0) or as references (Enc 2)
//		Symbols         // obj symbols
//		Transfers       // obj transfers
//	}
//	Tilemap struct {
//		NTile uint32           // == Meta.Tiles
//		Image [NTile]uint32    // index into Images
//	}
//	Config struct { NWrite uint32; Write [NWrite]struct{ Tile, Reg, Value uint32 } }
//	Host   obj.HostProgram encoding
//
// A package is canonical: images are pairwise different, every image is
// used, and images are numbered in the order of their first use by tile
// index, so the same tile programs always give the same file. A code or
// data segment of at least obj.RefMin bytes whose kind and bytes are
// those of a segment of an earlier image (a weight copied to many tiles)
// is stored as a reference to the first such segment (Reference.Tile
// then names the image's number, Seg its segment), so its bytes are in
// the file once; an image's canonical bytes (EncodeImage, what makes two
// images the same) are those of its Body with every segment raw. Read
// checks that a reference names an earlier image and an existing segment
// of the same kind and size, and shares its data (capped at its length;
// the caller must not change it), so the weight is in memory once too.
// Read checks
// every offset, count and length against the bytes left before
// allocating, bounds each image's decompression by its declared RawLen
// (a frame whose header declares another size is refused before anything
// is allocated for it, one without a size stops at RawLen), and RawLen by
// ImageBytes of the tile memory: the format's largest (MaxImageBytes), or
// with ReadWith and ReadOptions.Limits the memory of the architecture the
// package names (libs/pack.Limits), whose tile count then bounds Tiles.
// It checks each section's CRC and validates the package as Write does. Its
// errors are *FormatError, naming the section and the byte offset.
package ipuexe
