// Labels and constants.
.equ N, 4
.equ N, 5                       // ERROR: constant N already defined at line 2
.equ loop, 1                    // ERROR: constant loop is also a label (line 9)
.equ A, B + 1
.equ B, A
.equ D, . + 4                   // ERROR: .equ cannot use .
.section t, code
loop:
loop:                           // ERROR: label loop already defined at line 9
	li $m1, A                   // ERROR: constant A is defined in terms of itself
	li $m1, missing             // ERROR: undefined symbol missing
	li $m2, 1 / 0               // ERROR: division by zero
	li $m2, 1 << 64             // ERROR: shift count 64 out of range 0..63
.section u, data
	.zero later                 // ERROR: label later (line 17) is used before it is defined
later:
