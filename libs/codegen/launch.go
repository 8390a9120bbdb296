package codegen

import (
	"fmt"

	"ipu.local/libs/isa"
)

// Slots is the number of issue slots of a tile (= worker contexts): a
// context issues at most once every Slots cycles.
const Slots = 6

// A program's supervisor launches a kernel with its tile runtime's launch
// routine (libs/link runtime.go) expanded in place: the entry loaded, a
// run per worker, the join; what CyclesAt counts (EmitLaunch and the
// join). The routine's return is not expanded, so a launch costs no call
// (LaunchCallCycles is 0; choices between one launch and several,
// RowsSplit, count it all the same).
const (
	LaunchCallIssues = 0
	LaunchCallCycles = LaunchCallIssues * Slots
)

// Cost is what a kernel costs: the workers to launch and, for each, its
// issue cycles from its first instruction to its exit (Work[w] = 6 x the
// sum of the Cycles of the instructions worker w issues before exit).
type Cost struct {
	Workers int
	Work    []int64
}

// Cycles is the kernel's cost at phase 0: see CyclesAt.
func (c Cost) Cycles() int64 { return LaunchCycles(0, c.Work) }

// CyclesAt returns the tile cycles from the issue of the launch's first
// instruction (EmitLaunch), at a cycle whose slot is phase (cycle mod 6),
// to the issue of the supervisor's first instruction after the join that
// follows the launch. The next kernel's launch thus starts at phase
// (phase + CyclesAt(phase)) mod 6.
func (c Cost) CyclesAt(phase int) int64 { return LaunchCycles(phase, c.Work) }

// Kernel is a kernel emitted into a Builder.
type Kernel struct {
	Entry Label // the workers' entry point
	Cost
}

// EmitLaunch emits the supervisor code that starts a kernel on workers
// 0..workers-1:
//
//	li  $m1, entry
//	run $m1, $mzero, 0
//	...
//	run $m1, $mzero, workers-1
//
// It clobbers the supervisor's $m1. Follow it with Join (b.Join()); Cost
// covers the launch and the join. A kernel finds its worker index with
// get $m0, context (worker w runs in context w), so the supervisor spends
// one instruction per worker.
func EmitLaunch(b *Builder, entry Label, workers int) {
	if workers < 0 || workers > Slots {
		b.fail(b.PC(), "launch of %d workers (want 0..%d)", workers, Slots)
		return
	}
	b.LoadLabel(M1, entry)
	for w := 0; w < workers; w++ {
		b.Run(M1, MZero, w)
	}
}

// EmitLaunchAt is EmitLaunch for an entry given by address (below 2^20,
// as every tile address is).
func EmitLaunchAt(b *Builder, entry uint32, workers int) {
	if workers < 0 || workers > Slots {
		b.fail(b.PC(), "launch of %d workers (want 0..%d)", workers, Slots)
		return
	}
	if entry >= 1<<20 {
		b.fail(b.PC(), "launch entry %#x is not a tile address", entry)
		return
	}
	b.LoadAddr(M1, entry)
	for w := 0; w < workers; w++ {
		b.Run(M1, MZero, w)
	}
}

// LaunchCycles models the supervisor issuing EmitLaunch's code and then
// join, with worker w exiting work[w] cycles after its first issue. It
// follows the issue rules of the isa package doc: cycle t belongs to slot
// t mod 6; worker w issues only in slot w; the supervisor issues in a
// cycle whose slot has no running worker, at most once every 6 cycles; a
// worker started by run at cycle t is running from t+1, issues first at
// the first cycle after t in its slot, and stops running when its exit
// issues. A join issued while workers run blocks until the last of them
// exits at cycle e and issues again at e+1.
//
// The result counts from the launch's first issue (at a cycle in slot
// phase) to the supervisor's first issue after the join.
func LaunchCycles(phase int, work []int64) int64 {
	phase = ((phase % Slots) + Slots) % Slots
	t0 := int64(phase)
	var runAt, end [Slots]int64
	var ran [Slots]bool
	busy := func(t int64) bool {
		s := int(t % Slots)
		return ran[s] && runAt[s] < t && t <= end[s]
	}
	// next is the first cycle at or after t whose slot has no running
	// worker. Past the next Slots cycles, slot s is free from the first
	// cycle in its slot after end[s] (its worker started before t).
	next := func(t int64) int64 {
		for i := int64(0); i < Slots; i++ {
			if !busy(t + i) {
				return t + i
			}
		}
		first := int64(-1)
		for s := range ran {
			u := max(t+Slots, end[s]+1)
			u += (int64(s) - u%Slots + Slots) % Slots
			if first < 0 || u < first {
				first = u
			}
		}
		return first
	}
	snext := t0 + Slots // after li
	for w := 0; w < len(work) && w < Slots; w++ {
		t := next(snext)
		start := t + 1 + (int64(w)-(t+1)%Slots+Slots)%Slots
		ran[w], runAt[w], end[w] = true, t, start+work[w]
		snext = t + Slots
	}
	tj := next(snext)
	last := int64(-1)
	for w := range ran {
		if ran[w] && end[w] > last {
			last = end[w]
		}
	}
	if last >= tj {
		return last + 1 + Slots - t0
	}
	return tj + Slots - t0
}

// Helpers the kernels share.

// emitTableBase emits the worker prologue that finds this worker's row
// of a per-worker table of rows of words words placed at table: base =
// &table[w] for the worker in context w ($m0 is clobbered). It costs
// tableBaseIssues issues.
func emitTableBase(b *Builder, table Label, words int, base MReg) {
	b.Get(M0, isa.CSRContext)
	b.Muli(base, M0, int32(4*words))
	b.LoadLabel(M0, table)
	b.Add(base, base, M0)
}

const tableBaseIssues = 4

// emitTable emits the per-worker table (rows of equal length).
func emitTable(b *Builder, table Label, rows [][]uint32) {
	b.Bind(table)
	for _, r := range rows {
		for _, w := range r {
			b.Word(w)
		}
	}
}

// split divides n items into w contiguous ranges as evenly as possible,
// the first n mod w ranges one longer.
func split(n, w int) (start, count []int) {
	start, count = make([]int, w), make([]int, w)
	q, r := n/w, n%w
	s := 0
	for i := 0; i < w; i++ {
		c := q
		if i < r {
			c++
		}
		start[i], count[i] = s, c
		s += c
	}
	return start, count
}

// checkWorkers validates a requested worker count.
func checkWorkers(w int) error {
	if w < 1 || w > Slots {
		return fmt.Errorf("workers %d out of range [1, %d]", w, Slots)
	}
	return nil
}
