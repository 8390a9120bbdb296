// Line and expression syntax.
.section text, code
	add $m1, $m2, $m3,          // ERROR: missing operand after ,
	ldm $m1, [$m2               // ERROR: missing ] in memory operand
	ldm $m1, [$a2]              // ERROR: base must be an $m register, got $a2
	ldm $m1, [$m2*4]            // ERROR: want +, -, += or -= after the base register, got *
	li $m1, (3                  // ERROR: missing ) in expression
	li $m1, 3 +                 // ERROR: missing operand in expression
	li $m1, "s"                 // ERROR: unexpected "s" in expression
	li $m1, 0x                  // ERROR: bad number 0x
	li $m1, 99999999999999999999 // ERROR: number 99999999999999999999 is too large
	add $m0:1, $m1, $m2         // ERROR: $m registers do not form groups
