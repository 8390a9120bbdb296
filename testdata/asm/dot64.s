// dot64: the dot product of two FP16 vectors of 16384 elements, split over
// 64 tiles, reduced to tile 0 through the exchange, returned in FP32.
//
// Per inference (one host "run" call) the program takes 9 supersteps:
//   1  host:     every tile fetches its 256-element slices of x and y
//   2  compute:  4 workers each take 64 elements: FP16 products are exact
//                in FP32 and accumulate in FP32 (f32v2fma); the supervisor
//                adds the 4 partials
//   3-8 exchange: a binary tree: in step s (mask = 1<<s) tile t with
//                t & (2*mask-1) == mask sends its sum to t-mask, which adds
//                it at the start of the next superstep
//   9  host:     tile 0 writes the sum to host page 1, then every tile
//                waits at hsync for the next call
// The expected cycle counts are worked out in tools/ipu-check's
// dot64 test from the ipu21 preset.

.arch ipu21

.equ ELEMS, 256              // elements per tile
.equ XBUF, 0x80000           // this tile's x slice (interleaved memory)
.equ YBUF, 0x80200           // this tile's y slice
.equ PART, 0x80400           // the 4 workers' partial sums
.equ SUM, 0x80410            // this tile's running sum
.equ RBUF, 0x80420           // a partial sum received from another tile
.equ YHOST, 32768            // y's offset in host page 0

// Exchange schedule. Counting from the step's first instruction (B), the
// supervisor issues every 6 cycles: the sender path issues its send at
// B+54 (after a delay of 0: the delay instruction keeps both paths the
// same length), the word arrives at B+64 (the latency between any two of
// tiles 0..63 on ipu21 is 10 cycles: one exchange column apart at most);
// the receiver path would issue its recv at B+60, so it delays by 4.
.equ SEND_DELAY, 0
.equ RECV_DELAY, 4

.page 0, 65536
.page 1, 4
.input x, float16, [16384], 0, 0
.input y, float16, [16384], 0, 32768
.output dot, float, [1], 1, 0, 16384     // accumulate: a sum of 16384 products
.phase host, "fetch"
.phase compute, "dot"
.phase exchange, "reduce0"
.phase exchange, "reduce1"
.phase exchange, "reduce2"
.phase exchange, "reduce3"
.phase exchange, "reduce4"
.phase exchange, "reduce5"
.phase host, "result"

.tile 0-63
.section text, code, 0x4c000
.entry main

main:
	hsync $m0                    // startup ends: wait for the host's first call
inference:
	// superstep 1: host exchange
	get $m9, tileid
	shli $m1, $m9, 9             // tile * 512 bytes
	li $m2, XBUF
	li $m3, ELEMS*2
	hin $m2, $m1, $m3            // x slice from page 0
	li $m4, YHOST
	add $m4, $m4, $m1
	li $m2, YBUF
	hin $m2, $m4, $m3            // y slice from page 0
	sync

	// superstep 2: compute
	li $m5, worker
	li $m6, 0
	run $m5, $m6, 0
	li $m6, 1
	run $m5, $m6, 1
	li $m6, 2
	run $m5, $m6, 2
	li $m6, 3
	run $m5, $m6, 3
	join
	li $m7, PART
	ld32 $a0, [$m7+0]
	ld32 $a1, [$m7+4]
	f32add $a0, $a0, $a1
	ld32 $a1, [$m7+8]
	f32add $a0, $a0, $a1
	ld32 $a1, [$m7+12]
	f32add $a0, $a0, $a1
	li $m7, SUM
	st32 $a0, [$m7+0]
	li $m8, 1                    // mask of the first reduction step
	sync

	// supersteps 3-8: the reduction tree
xstep:
	shli $m10, $m8, 1
	addi $m10, $m10, -1
	and $m10, $m9, $m10          // t & (2*mask-1)
	cmpeq $m11, $m10, $m8
	brnz $m11, sender
	brnz $m10, quiet
receiver:
	add $m12, $m9, $m8           // listen to t+mask
	li $m2, RBUF
	li $m3, 1
	delay RECV_DELAY
	recv $m12, $m2, $m3
	sync
	br xnext
sender:
	sub $m12, $m9, $m8           // send to t-mask
	li $m2, SUM
	li $m3, 1
	delay SEND_DELAY
	send $m12, $m2, $m3
	sync
	br xnext
quiet:
	sync
xnext:
	// every tile adds RBUF (zero unless it just received) and clears it
	li $m7, SUM
	ld32 $a0, [$m7+0]
	ld32 $a1, [$m7+RBUF-SUM]
	f32add $a0, $a0, $a1
	st32 $a0, [$m7+0]
	st32 $azero, [$m7+RBUF-SUM]
	shli $m8, $m8, 1
	cmplti $m11, $m8, 64
	brnz $m11, xstep

	// superstep 9: tile 0 returns the sum
	brnz $m9, done
	li $m1, 0
	lih $m1, 0x0100              // host page 1, offset 0
	li $m2, SUM
	li $m3, 4
	hout $m1, $m2, $m3
done:
	hsync $m0
	br inference

// worker w ($m0) takes elements [64w, 64w+64) of this tile's slices
worker:
	shli $m1, $m0, 7             // w * 128 bytes
	li $m2, XBUF
	add $m2, $m2, $m1
	li $m3, YBUF
	add $m3, $m3, $m1
	rpti 16, 8
	ld64 $a0:1, [$m2+=8]
	ld64 $a2:3, [$m3+=8]
	f16v2tof32 $a4:5, $a0
	f16v2tof32 $a6:7, $a1
	f16v2tof32 $a8:9, $a2
	f16v2tof32 $a10:11, $a3
	f32v2fma $a12:13, $a4:5, $a8:9
	f32v2fma $a12:13, $a6:7, $a10:11
	f32v2sum $a0, $a12:13
	shli $m1, $m0, 2
	li $m4, PART
	add $m4, $m4, $m1
	st32 $a0, [$m4+0]
	exit
