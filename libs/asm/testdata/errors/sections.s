// A wrong .section line: its contents are not checked again.
.section i, code, nolabel       // ERROR: undefined symbol nolabel
	.word 1
	nop
.section j, text                // ERROR: unknown section kind text
	.word 1
	.zero                       // ERROR: .zero takes 1 operand, got 0
	.align 4
	nop
.section k, data
	.word 1
	nop                         // ERROR: instruction nop in data section k
