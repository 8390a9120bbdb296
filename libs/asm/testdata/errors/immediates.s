// Immediates out of range.
.section text, code, 0x4c000
	addi $m1, $m2, 32768        // ERROR: operand 3 of addi: immediate 32768 out of range -32768..32767
	andi $m1, $m2, -1           // ERROR: operand 3 of andi: immediate -1 out of range 0..65535
	li $m1, 0x100000            // ERROR: immediate 1048576 out of range 0..1048575
	run $m1, $m2, 256           // ERROR: immediate 256 out of range 0..255
	ldm $m1, [$m2+32768]        // ERROR: memory offset 32768 out of range -32768..32767
	ldm $m1, [$m2+=-32769]      // ERROR: increment -32769 out of range -32768..32767
	rpti 4096, 1                // ERROR: repeat count 4096 out of range 0..4095
	rpti 1, 256                 // ERROR: body length 256 out of range 0..255
	get $m1, 6                  // ERROR: no control register 6
	get $m1, speed              // ERROR: unknown control register speed
