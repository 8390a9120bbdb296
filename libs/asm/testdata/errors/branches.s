// Branch targets.
.section text, code, 0x4c000
start:
	br start + 2                // ERROR: branch target 0x4c002 is not 4-aligned
	brz $m1, .+0x20004          // ERROR: out of range (offset 32768 instructions, want -32768..32767)
	brz $m1, .-0x1fffc
	brnz $m1, .-0x20000         // ERROR: offset -32769 instructions
	br .+0x200004               // ERROR: offset 524288 instructions, want -524288..524287
	br .-0x1ffffc
	br nowhere                  // ERROR: undefined symbol nowhere
	call $m1, 5                 // ERROR: branch target 0x5 is not 4-aligned
	call $m1, -4
