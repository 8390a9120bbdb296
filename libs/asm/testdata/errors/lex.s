// Characters the lexer rejects.
.section text, code
	nop @                       // ERROR: unexpected character '@'
	.byte "abc                  // ERROR: unterminated string
	5: nop                      // ERROR: expected instruction, directive or label, got 5
	ld32 $a1, [$m1+=]           // ERROR: missing expression
	jr                          // ERROR: jr takes 1 operand, got 0
	nop $m1                     // ERROR: nop takes 0 operands, got 1
	halt, $m1                   // ERROR: missing operand before ,
