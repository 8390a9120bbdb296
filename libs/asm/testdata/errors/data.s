// Data directives.
.section d, data, 0x80000
	.word 0x100000000           // ERROR: .word value 4294967296 out of range -2147483648..4294967295
	.half 65536                 // ERROR: .half value 65536 out of range -32768..65535
	.byte -129                  // ERROR: .byte value -129 out of range -128..255
	.float 1e39                 // ERROR: .float: 1e39 overflows FP32
	.f16 65520                  // ERROR: .f16: 65520 overflows FP16
	.float abc                  // ERROR: undefined symbol abc
	.align 3                    // ERROR: .align 3: want a power of two from 1 to 65536
	.zero -1                    // ERROR: .zero -1: want a size from 0 to 2^32
	.section x                  // ERROR: .section takes 2 or 3 operands, got 1
	.section x, text            // ERROR: unknown section kind text (want code, data or bss)
