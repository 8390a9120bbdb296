package link

// The profile buffer: a per-tile buffer in tile memory where each tile's
// supervisor stores, at the end of every compute superstep, the tile's
// cycle counter (CSR cycles: the cycles since the superstep began, at
// the issue of the get), one 32-bit word per compute superstep in
// program order. ipu-check reads it back from the device after a run
// (the object's symbol ProfileSymbol says where it is) and puts the
// counters into the profile.
//
// The store runs after the superstep's last join and before its sync
// (before a branch side's jump), profileInstrs supervisor instructions
// at one issue every codegen.Slots cycles: costProgram counts them in
// the superstep's cycles, so the linker's cycles stay the simulator's.
// The counter a tile stores is thus its superstep cycles (the
// simulator's tile cycles, the sync's issue included) less
// ProfileCounterLag, or less ProfileCounterLag + prog.JumpCycles at the
// end of a then side, whose jump follows the store.

import (
	"fmt"

	"ipu.local/formats/obj"
	"ipu.local/libs/codegen"
	"ipu.local/libs/isa"
	"ipu.local/libs/prog"
)

// ProfileSymbol names the profile buffer in an object's symbols.
const ProfileSymbol = obj.ProfileSymbol

// profileInstrs is the code of one counter store: li (a tile address is
// below 2^20, one instruction), get, stm.
const profileInstrs = prog.ProfileStoreInstrs

// profileCycles is the supervisor cycles of one counter store.
const profileCycles = prog.ProfileStoreCycles

// ProfileCounterLag is a tile's superstep cycles less the counter it
// stores: the get's issue to the sync's issue (the stm's slot and the
// sync's), and the cycle of the sync's issue.
const ProfileCounterLag = 2*codegen.Slots + 1

// addProfileBuffer adds the profile buffer to the program's buffers: a
// word per compute superstep on every tile with a program, live for the
// whole program.
func (l *linker) addProfileBuffer() {
	l.profWord = make([]int, len(l.prog.Steps))
	n := 0
	for i, s := range l.prog.Steps {
		l.profWord[i] = -1
		if s.Kind == obj.Compute {
			l.profWord[i] = n
			n++
		}
	}
	if n == 0 {
		return
	}
	id := 0
	for _, b := range l.prog.Buffers {
		id = max(id, b.ID+1)
	}
	l.prof = &prog.Buffer{ID: id, Name: ProfileSymbol, Tiles: l.sortedTiles(),
		Size: uint32(4*n+7) &^ 7, Align: 16, Permanent: true, First: 0, Last: len(l.prog.Steps) - 1}
	l.prog.Buffers = append(l.prog.Buffers, l.prof)
}

// emitProfileStore emits superstep i's counter store on a tile: its
// word's address in $m1, the cycle counter in $m2, the store.
func (l *linker) emitProfileStore(b *codegen.Builder, i int) error {
	if l.prof == nil || l.profWord[i] < 0 {
		return nil
	}
	at := l.prof.Addr + 4*uint32(l.profWord[i])
	if codegen.ConstLen(at) != 1 {
		return fmt.Errorf("profile buffer word at %#x is not a one-instruction address", at)
	}
	b.LoadConst(codegen.M1, at)
	b.Emit(isa.Inst{Op: isa.GET, D: uint8(codegen.M2), Imm: isa.CSRCycles})
	b.Stm(codegen.M2, codegen.M1, 0)
	return nil
}
