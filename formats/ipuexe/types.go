package ipuexe

import "ipu.local/formats/obj"

// Package is a loadable application for every tile of one architecture.
type Package struct {
	Arch     string
	Compiler string
	// Tiles is the number of tiles of the architecture: every one gets an
	// image.
	Tiles int
	// Object is the hex SHA-256 of the .ipuobj file bytes the package was
	// packed from.
	Object string
	// Images are the unique tile images, in the order of first use by
	// tile index.
	Images []Image
	// TileImage gives each tile's image: len Tiles, indices into Images.
	TileImage []uint32
	// Config is the device configuration replayed at load, in order.
	Config []obj.RegWrite
	// Host is the host program.
	Host obj.HostProgram
}

// Image is what one or more tiles load.
type Image struct {
	// Idle marks the image of tiles that run no program.
	Idle     bool
	Entry    uint32
	Segments []obj.Segment
	Symbols  []obj.Symbol
	Exchange []obj.Transfer
}

// MaxImageBytes bounds the encoded size of one image (its Body in the
// file, what its zstd frame decompresses to): ImageBytes of the largest
// tile memory the format allows.
const MaxImageBytes = 2 * obj.MaxTileMemory

// ImageBytes bounds the encoded size of one image for a tile of
// tileMemory bytes: its segments' data, at most the tile's memory, and
// its symbols and transfers, which describe that memory and the data
// moved in and out of it, at most as much again (real images carry a few
// hundred bytes of them). With at most one image per tile, a package
// decompresses to at most Tiles x ImageBytes(tile memory) bytes, each
// frame checked against its declared length before anything is
// allocated for it.
func ImageBytes(tileMemory uint32) uint32 { return 2 * tileMemory }

// Limits are the bounds an architecture puts on its packages.
type Limits struct {
	Tiles      int    // the architecture's tiles: a package has at most these
	TileMemory uint32 // bytes of one tile's memory, at most obj.MaxTileMemory
}

// ReadOptions tune ReadWith.
type ReadOptions struct {
	// Limits, when set, returns the bounds of the architecture a package
	// names (the format package does not know the presets): its images
	// are then bounded by ImageBytes(TileMemory) and its tiles by Tiles,
	// instead of by the format's own obj.MaxTileMemory and obj.MaxTiles.
	Limits func(arch string) (Limits, error)
	// NoImages cuts the images section's frames out and bounds their
	// lengths, but neither decompresses nor checks them: Images holds as
	// many empty images. For a reader that does not use the images and
	// knows the package for one validated before: ipu-check, whose device
	// was loaded (ipu-load validates every image) with the package of the
	// same fingerprint.
	NoImages bool
}
