// Command ipu-dump prints the canonical, stable text of any artifact of the
// toolchain, for reading and for diff:
//
//	ipu-dump FILE
//	ipu-dump --memory OBJECT.ipuobj
//
// --memory prints only an object's per-tile memory breakdown, the fullest
// tiles first, tiles with the same figures on one line.
//
// The kind is recognised from the file's magic number: an object
// (.ipuobj: tiles, segments, disassembled code, symbols, exchange
// transfers, host program, configuration, and the memory report: per
// tile the bytes of code (kernels, runtime, supervisor), exchange code and
// tables, constants, variables, the profile buffer and stacks (none: the
// architecture runs without stacks), and what is left of
// the architecture preset's usable tile memory, the 8 tiles using the
// most, the totals), a package (.ipuexe: each
// distinct tile image with the tiles using it and its disassembly), or a
// profile (.capnp: cycles per phase and per tile, samples).
package main
