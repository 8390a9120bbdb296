// Package obj is the object format: the linker's output and ipu-pack's
// input. A program for every tile of one architecture (code and data
// segments with addresses, symbols, exchange transfers), the host program
// (BSP phase list, host exchange pages, named inputs and outputs) and the
// device configuration (register writes).
package obj
