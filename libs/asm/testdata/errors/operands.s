// Instruction and operand syntax.
.section text, code, 0x4c000
	add $m1, $m2                // ERROR: add takes 3 operands, got 2
	ld64 $a2:3, $a3             // ERROR: operand 2 of ld64: want memory operand [$mN+off]
	frob $m1                    // ERROR: unknown instruction frob
	add $m1, $m2, $a3           // ERROR: operand 3 of add: want $m register, got $a3
	ld64 $a1:2, [$m0]           // ERROR: register pair $a1:2 must start at an even register
	ld128 $a2:5, [$m0]          // ERROR: register quad $a2:5 must start at a multiple of 4
	ld64 $a0:2, [$m0]           // ERROR: register group $a0:2 must span 2 or 4 registers
	ld128 $a4:5, [$m0]          // ERROR: operand 1 of ld128: want register quad $aN:N+3, got $a4:5
	add $m1, $m2, $m16          // ERROR: unknown register $m16
	.bogus 1                    // ERROR: unknown directive .bogus
