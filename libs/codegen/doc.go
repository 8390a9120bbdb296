// Package codegen is the kernel library of the linker: an assembler in Go
// (Builder) and generators of worker kernels with exact cycle formulas
// for the cost model.
//
// # Builder
//
// A Builder emits isa.Inst values at a fixed base address. Every word is
// 4 bytes, so labels have addresses as soon as they are bound; branches
// (br, brz, brnz, call), repeat loops (rpt, rpti: body length and count)
// and label addresses (li) are fixups resolved by Finish, which reports
// offsets and immediates that do not fit, unbound labels and repeat
// bodies holding a branch or data. LoadAddr and LoadConst choose li or
// li+lih, LoadA and LoadF32 ali or ali+alih. Word places data (the
// kernels' per-worker tables) in the code stream. Repeat emits a loop and
// Issued counts the issue cycles of the code emitted with each loop body
// multiplied by its count: the cost of straight-line code with loops.
//
// # Kernels
//
// A kernel generator (EmitMatMul, EmitPack, EmitUnary,
// EmitBinary, EmitCast, EmitRows) checks its parameters (shapes, then addresses against the
// builder's preset), emits the worker code and returns a Kernel: its
// entry label and its Cost. The same parameters' Cost method gives the
// cost without emitting anything.
//
// The elementwise kernels (Unary, Binary, Cast) are stream kernels: at
// FP32 or FP16 (ElemType; casts by kind), on N elements or, with R > 1,
// on R rows of N elements with a row stride per array (padded rows, a
// stride-0 row broadcast, a PerRow column broadcast). Every row touches
// only its own bytes of Y, and the rows x units grid is split over the
// workers by the exact cost (see stream). The zero value of every 2-D
// and FP16 field gives the 1-D FP32 kernel.
//
// Worker conventions: the supervisor starts worker w in context w
// (EmitLaunch: li $m1, entry; run $m1, $mzero, w for w < Workers); the
// kernel finds its index with get $m0, context and its part of the work
// in a per-worker table emitted after the code (no division at run time,
// any split). Workers use every register and end with exit; they set CSR
// fp8 themselves when they need it.
//
// Cost: Work[w] is 6 x the issue cycles worker w spends before its exit
// (the isa timing: a worker issues once every 6 cycles, an instruction of
// Cycles n takes n of its slots). LaunchCycles turns the work into the
// supervisor's view: cycles from the launch's first instruction to the
// first supervisor instruction after the join, for a launch starting in a
// given slot (phase); Cost.Cycles is phase 0. Back-to-back kernels add up
// exactly when each starts at the phase the previous one ended at.
//
// Every kernel's doc defines its arithmetic order; Emulate* reproduce it
// bit for bit in plain Go for the host reference.
package codegen
