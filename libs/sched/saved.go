package sched

import (
	"fmt"

	"ipu.local/formats/plan"
	"ipu.local/libs/isa"
)

// Save returns the schedule pl of phase in the search state's form.
func Save(phase []Transfer, pl *Plan) (plan.Exchange, error) {
	e := plan.Exchange{Makespan: pl.Makespan, Bound: pl.LowerBound,
		Options: plan.ExchangeOptions{NoSend2: pl.Options.NoSend2, EarlySync: pl.Options.EarlySync, Regs: pl.Options.Regs, Passes: pl.Options.Passes}}
	for _, x := range phase {
		e.Transfers = append(e.Transfers, [6]int64{int64(x.Src), int64(x.Dst), savedDests(x), int64(x.Words), int64(x.SrcAddr), int64(x.DstAddr)})
	}
	for _, ev := range pl.Events {
		e.Events = append(e.Events, plan.ExchangeEvent{Send: ev.Send, Pair: ev.Pair, Cycles: ev.Cycles, Arrive: ev.Arrive})
	}
	for _, tc := range pl.Tiles {
		t := plan.ExchangeTile{Tile: tc.Tile, Cycles: tc.Cycles, Code: make([]uint32, len(tc.Code))}
		for i, in := range tc.Code {
			w, err := isa.Encode(in)
			if err != nil {
				return plan.Exchange{}, fmt.Errorf("tile %d instruction %d: %w", tc.Tile, i, err)
			}
			t.Code[i] = w
		}
		e.Tiles = append(e.Tiles, t)
	}
	return e, nil
}

// Load returns a saved schedule and the phase it was made for. The code
// is decoded, nothing else checked: Relocate it to a phase and Validate
// the result before using it.
func Load(e plan.Exchange) ([]Transfer, *Plan, error) {
	phase := make([]Transfer, len(e.Transfers))
	for i, x := range e.Transfers {
		phase[i] = Transfer{Src: int(x[0]), Dst: int(x[1]), DstN: int(x[2] & 0xFFFF), Stride: int(x[2] >> 16), Words: int(x[3]), SrcAddr: uint32(x[4]), DstAddr: uint32(x[5])}
	}
	pl := &Plan{Makespan: e.Makespan, LowerBound: e.Bound,
		Options: Options{NoSend2: e.Options.NoSend2, EarlySync: e.Options.EarlySync, Regs: e.Options.Regs, Passes: e.Options.Passes}}
	for _, ev := range e.Events {
		pl.Events = append(pl.Events, Event{Send: ev.Send, Pair: ev.Pair, Cycles: ev.Cycles, Arrive: ev.Arrive})
	}
	for _, t := range e.Tiles {
		tc := TileCode{Tile: t.Tile, Cycles: t.Cycles, Code: make([]isa.Inst, len(t.Code))}
		for i, w := range t.Code {
			in, err := isa.Decode(w)
			if err != nil {
				return nil, nil, fmt.Errorf("tile %d instruction %d: %w", t.Tile, i, err)
			}
			tc.Code[i] = in
		}
		pl.Tiles = append(pl.Tiles, tc)
	}
	return phase, pl, nil
}

// savedDests is a transfer's destinations as a saved schedule keeps
// them: the count, and above its 16 bits the stride when it is not 1
// (states saved before strided multicasts read as consecutive tiles).
func savedDests(x Transfer) int64 {
	n := int64(x.Dests())
	if st := x.Step(); st > 1 {
		n |= int64(st) << 16
	}
	return n
}
