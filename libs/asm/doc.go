// Package asm is the tile assembler and disassembler: Assemble turns
// assembly text into an object (formats/obj) using the instruction table
// of libs/isa; Disassemble lists machine code; DisassembleObject writes an
// object back as source that assembles into the same object.
//
// SYNTAX.md is the full reference. In short:
//
//   - One statement per line: labels (name:), then an instruction or a
//     directive with comma-separated operands. Comments: // or # to the end
//     of the line. Mnemonics and directives are case-insensitive.
//   - Expressions over 64-bit integers: + - * / % << >> ~ ( ), numbers
//     (42, 0x2a, 0b101, negative by unary minus), labels (absolute
//     addresses), . (the current line's address) and .equ constants.
//   - Registers $m0..$m15 ($mzero = $m15), $a0..$a15 ($azero), pairs
//     $a0:1 (even first register) and quads $a0:3 (multiple of 4).
//     Memory operands [$m2+8], [$m2-8], [$m2] and post-increment [$m2+=8].
//     Branch targets are absolute (a label, .+N, 0x4c010); the assembler
//     computes (target - (pc+4)) / 4 and checks alignment and range.
//     Control registers by name (tileid context cycles fp8 phase tiles) or
//     number. rpti takes count, len. Mnemonics with several table entries
//     are chosen by operand kind.
//   - Tiles: .tile N | A-B | 0,3,5-7 starts a block assembled for each
//     listed tile (per-tile labels; later blocks may add to a subset).
//   - Sections: .section NAME, code|data|bss[, ADDR] (without ADDR: after
//     the previous section of its class, aligned to 8), .entry, .align,
//     .word, .half, .byte, .float, .f16, .zero, .space, .equ.
//   - Whole object: .arch, .page, .input, .output, .phase, .config; per
//     tile: .xfer.
//
// Errors are an ErrorList: "FILE:LINE:COL: message" for each problem, at
// most MaxErrors of them.
package asm
