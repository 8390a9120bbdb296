// replay: computes y = x + 1 on its first call; on every later call it
// neither reads x nor computes, and writes the first call's y again, as a
// broken program that lost its input transfer would. Its outputs are
// right only while every inference gets the same inputs: ipu-check must
// give each inference its own, and report FAIL for the second.

.arch ipu21-tiny

.page 0, 16
.page 1, 16
.input x, float, [4], 0, 0
.output y, float, [4], 1, 0
.phase host, "add_one"

.tile 0
.section text, code
.entry main

main:
	hsync $m0                // startup ends: wait for the first call
call:
	li $m1, ibuf
	li $m5, obuf
	li $m3, 16
	li $m7, calls
	ldm $m8, [$m7+0]
	addi $m8, $m8, 1
	stm $m8, [$m7+0]         // calls served, this one included
	cmpeqi $m9, $m8, 1
	brz $m9, write           // not the first call: replay obuf
	li $m2, 0
	hin $m1, $m2, $m3        // x from host page 0
	ali $a4, 0
	alih $a4, 0x3f80         // $a4 = 1.0
	ld32 $a0, [$m1+0]
	f32add $a0, $a0, $a4
	st32 $a0, [$m5+0]
	ld32 $a0, [$m1+4]
	f32add $a0, $a0, $a4
	st32 $a0, [$m5+4]
	ld32 $a0, [$m1+8]
	f32add $a0, $a0, $a4
	st32 $a0, [$m5+8]
	ld32 $a0, [$m1+12]
	f32add $a0, $a0, $a4
	st32 $a0, [$m5+12]
write:
	li $m6, 0
	lih $m6, 0x100           // host page 1, offset 0
	hout $m6, $m5, $m3
	hsync $m0
	br call

.section bss, bss
ibuf:	.space 16
obuf:	.space 16
calls:	.space 4
