// skipwrite: adds 1.0 to the four floats of x and writes them to y, but
// only on the first call: from the second call on it skips the write, as a
// broken program that stopped writing its outputs would. ipu-check must
// report FAIL for the second inference (the output page is poisoned before
// each run, so the first run's results cannot pass for the second's).

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
	li $m1, buf
	li $m2, 0
	li $m3, 16
	hin $m1, $m2, $m3        // x from host page 0
	ali $a4, 0
	alih $a4, 0x3f80         // $a4 = 1.0
	ld32 $a0, [$m1+0]
	f32add $a0, $a0, $a4
	st32 $a0, [$m1+0]
	ld32 $a0, [$m1+4]
	f32add $a0, $a0, $a4
	st32 $a0, [$m1+4]
	ld32 $a0, [$m1+8]
	f32add $a0, $a0, $a4
	st32 $a0, [$m1+8]
	ld32 $a0, [$m1+12]
	f32add $a0, $a0, $a4
	st32 $a0, [$m1+12]
	li $m7, calls
	ldm $m8, [$m7+0]
	addi $m8, $m8, 1
	stm $m8, [$m7+0]         // calls served, this one included
	cmpeqi $m9, $m8, 1
	brz $m9, done            // not the first call: no write
	li $m6, 0
	lih $m6, 0x100           // host page 1, offset 0
	hout $m6, $m1, $m3
done:
	hsync $m0
	br call

.section bss, bss
buf:	.space 16
calls:	.space 4
