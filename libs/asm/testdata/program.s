// A small two-tile program: tile 0 sends a vector to tile 1, which adds
// one to each element and returns it to the host.
.arch ipu21-tiny

.equ N, 4                       // elements
.equ BYTES, N * 4

.page 0, 64
.input "x", float, [N], 0, 0
.output "y", float, [N], 0, BYTES
.phase host, "load"
.phase exchange, "scatter"
.phase compute, "add"
.phase host, "store"
.config watchdog, 100000
.config fp8, 0x10, 1

.tile 0-1
.section text, code, 0x4c000
main:
        get     $m0, tileid
        li      $m1, buf
        li      $m2, BYTES
        brnz    $m0, receiver
        hin     $m1, $mzero, $m2        # host page 0 offset 0 -> buf
        sync
        li      $m3, 1                  # destination tile 1
        send    $m3, $m1, $m2
        sync
        br      done
receiver:
        sync
        li      $m4, 0
        recv    $m4, $m1, $m2
        sync
        li      $m5, work
        run     $m5, $m1, 0
        join
        li      $m6, BYTES
        hout    $m6, $m1, $m2
done:
        hsync   $m7
        halt
.align 16
work:                           // worker: add 1.0 to N floats at $m0
        li      $m1, one
        ld32    $a0, [$m1]
        rpti    N, 3
        ld32    $a1, [$m0]
        f32add  $a1, $a1, $a0
        st32    $a1, [$m0+=4]
        exit

.section consts, data, 0x80000
one:    .float 1.0
half:   .f16 0.5, -2
        .half 0x3c00
bytes:  .byte 1, 2, 255, -1
        .align 8
table:  .word main, work, . - table, -1

.section buf, bss
buf:    .space BYTES

.tile 1
.xfer 1, 12, 1, 1, N
