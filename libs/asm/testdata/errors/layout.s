// Sections: placement, kinds, overlaps.
	nop                         // ERROR: nop outside a section
x:                              // ERROR: label x outside a section
.section a, code, 0x4c000
	nop
.section b, code, 0x4c000       // ERROR: section b [0x4c000, 0x4c004) overlaps section a [0x4c000, 0x4c004) on tile 0
	nop
.section c, code, 0x80000       // ERROR: code section c [0x80000, 0x80004) is outside the executable range [0x4c000, 0x80000)
	nop
.section d, data, 0xe8000       // ERROR: section d [0xe8000, 0xe8004) is outside tile memory [0x4c000, 0xe8000)
	.word 1
.section e, data, 0x80000
	nop                         // ERROR: instruction nop in data section e
.section f, code, 0x4c100
	.byte 1
	halt                        // ERROR: instruction at misaligned address 0x4c101
.section g, bss, 0x90000
	.word 1                     // ERROR: .word in bss section g
.section h, data, 0x4c000-4     // ERROR: section h [0x4bffc, 0x4c000) is outside tile memory
	.word 2
