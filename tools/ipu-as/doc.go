// Command ipu-as assembles tile assembly into an object file.
//
// Usage:
//
//	ipu-as IN.s -o OUT.ipuobj [--arch ipu21] [--log-format text|json] [-v]
//
// The source syntax is described in libs/asm/SYNTAX.md: sections of code
// and data for one tile or a list of tiles, labels, constants, and the
// host program and device configuration directives. --arch names the
// architecture preset of a source without a .arch directive (a .arch in
// the source wins).
//
// The object is written atomically: on any error there is no output file
// (an existing one is left as it was). Every problem in the source is
// reported on its own line as
//
//	ipu-as: IN.s:LINE:COL: message
//
// up to 10 of them, and the exit status is 1. Command-line mistakes exit
// with status 2. On success nothing is printed.
//
// ipu-dump shows the object; the assembler's package also disassembles
// objects back into source (asm.DisassembleObject).
package main
