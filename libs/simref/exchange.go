package simref

import (
	"fmt"
	"sort"

	"ipu.local/libs/sim"
)

// arrival is what reaches one tile in one cycle from one send: one word,
// or two from a send2.
type arrival struct {
	src   int
	pc    uint32 // of the send
	words []uint32
}

// store is one received word, written at the barrier.
type store struct {
	tile      int
	addr, val uint32
}

// checkBus replays every supertile's bus: sends in (issue cycle, tile)
// order each take their slots; the one that takes the total over the
// supertile's capacity faults at its issue cycle.
func (m *Machine) checkBus(steps []*step) []candidate {
	type use struct {
		tile       int
		snd        *sent
		start, end int64
		slots      int
	}
	var out []candidate
	capacity := m.p.SupertileSize
	for lo := 0; lo < len(steps); lo += m.p.SupertileSize {
		var uses []use
		for ti := lo; ti < lo+m.p.SupertileSize && ti < len(steps); ti++ {
			if steps[ti] == nil {
				continue
			}
			for k := range steps[ti].sends {
				snd := &steps[ti].sends[k]
				u := use{tile: ti, snd: snd, start: snd.issue, end: snd.issue + int64(len(snd.words)), slots: 1}
				if snd.double {
					u.end, u.slots = snd.issue+int64(len(snd.words)/2), 2
				}
				uses = append(uses, u)
			}
		}
		sort.SliceStable(uses, func(i, j int) bool {
			if uses[i].start != uses[j].start {
				return uses[i].start < uses[j].start
			}
			return uses[i].tile < uses[j].tile
		})
		for i, u := range uses {
			total := u.slots
			for _, v := range uses[:i] {
				if v.end > u.start {
					total += v.slots
				}
			}
			if total > capacity {
				out = append(out, candidate{class: classBus, f: &sim.Fault{Kind: sim.FaultBus, Tile: u.tile,
					Context: supervisor, PC: u.snd.pc, Phase: m.mark, Cycle: u.start,
					Detail: fmt.Sprintf("supertile %d needs %d of its %d bus slots", m.p.Supertile(u.tile), total, capacity)}})
				break
			}
		}
	}
	return out
}

// exchange replays the superstep's sends cycle by cycle at every tile's
// input against its recv windows. It returns the faults found (the first
// of each receiving tile) and the words to store if there are none.
func (m *Machine) exchange(steps []*step) ([]candidate, []store) {
	// What arrives where and when.
	in := make([]map[int64][]arrival, len(steps))
	for i := range in {
		in[i] = map[int64][]arrival{}
	}
	for src, s := range steps {
		if s == nil {
			continue
		}
		for _, snd := range s.sends {
			per := 1
			if snd.double {
				per = 2
			}
			for k := 0; k < len(snd.words); k += per {
				leave := snd.issue + int64(k/per)
				for j, u := 0, snd.dst; j < snd.ndst; j, u = j+1, u+snd.stride {
					c := leave + int64(m.p.Latency(src, u))
					in[u][c] = append(in[u][c], arrival{src: src, pc: snd.pc, words: snd.words[k : k+per]})
				}
			}
		}
	}

	var faults []candidate
	var stores []store
	for u := range steps {
		var wins []window
		if steps[u] != nil {
			wins = steps[u].windows
		}
		// Beyond the last arrival and the last recv nothing changes: a
		// window still open faults in the cycle after.
		last := int64(-1)
		for c := range in[u] {
			last = max(last, c)
		}
		for _, w := range wins {
			last = max(last, w.start)
		}
		fault := func(kind sim.FaultKind, c int64, tile int, pc uint32, detail string) {
			faults = append(faults, candidate{class: classExchange, receiver: u, f: &sim.Fault{
				Kind: kind, Tile: tile, Context: supervisor, PC: pc, Phase: m.mark, Cycle: c, Detail: detail}})
		}
		silent := func(c int64, w window, got uint32) {
			fault(sim.FaultSilent, c, u, w.pc, fmt.Sprintf("listening to tile %d: %d of %d words arrived", w.src, got, w.words))
		}
		wi := -1           // the window of the latest recv issued so far
		var got uint32 = 0 // words that window received
	cycles:
		for c := int64(0); c <= last+1; c++ {
			arr := in[u][c]
			if len(arr) > 1 {
				var pc uint32
				if wi+1 < len(wins) && wins[wi+1].start == c {
					pc = wins[wi+1].pc
				} else if wi >= 0 {
					pc = wins[wi].pc
				}
				fault(sim.FaultTwoSenders, c, u, pc, fmt.Sprintf("tiles %d and %d", arr[0].src, arr[1].src))
				break cycles
			}
			// A recv issued now ends the previous window.
			if wi+1 < len(wins) && wins[wi+1].start == c {
				if wi >= 0 && got < wins[wi].words {
					silent(c, wins[wi], got)
					break cycles
				}
				wi++
				got = 0
			}
			listening := wi >= 0 && got < wins[wi].words
			switch {
			case len(arr) == 1 && (!listening || wins[wi].src != arr[0].src):
				fault(sim.FaultNoListener, c, arr[0].src, arr[0].pc, fmt.Sprintf("word for tile %d", u))
				break cycles
			case len(arr) == 1:
				for _, v := range arr[0].words {
					if got == wins[wi].words {
						fault(sim.FaultNoListener, c, arr[0].src, arr[0].pc,
							fmt.Sprintf("word for tile %d after its recv completed", u))
						break cycles
					}
					stores = append(stores, store{u, wins[wi].addr + 4*got, v})
					got++
				}
			case listening:
				silent(c, wins[wi], got)
				break cycles
			}
		}
	}
	return faults, stores
}
