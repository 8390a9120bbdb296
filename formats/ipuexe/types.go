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
// file): the tile's memory contents (at most obj.MaxTileMemory) plus its
// symbols and transfers. With at most one image per tile, a package
// decodes to at most Tiles x MaxImageBytes bytes.
const MaxImageBytes = 4 << 20
