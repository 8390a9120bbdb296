package plan

import "fmt"

// Exchange is one scheduled exchange superstep that a search state keeps
// for a later run to reuse: ipu-plan's validation link saves the
// schedules it made, and the next run on the state relocates each one to
// the superstep that moves the same pattern and validates it instead of
// scheduling again. Nothing in it is trusted: a schedule is used only
// after libs/sched has replayed its code against the superstep.
type Exchange struct {
	// Transfers are the superstep's streams: source tile, first
	// destination tile, destinations (their count, and above its 16 bits
	// the tiles from one to the next when not 1), words, source and
	// destination addresses.
	Transfers [][6]int64      `json:"transfers"`
	Tiles     []ExchangeTile  `json:"tiles"`
	Events    []ExchangeEvent `json:"events"`
	Makespan  int64           `json:"makespan"`
	Bound     int64           `json:"lower_bound"`
	Options   ExchangeOptions `json:"options"`
}

// ExchangeTile is one tile's exchange code: encoded instruction words.
type ExchangeTile struct {
	Tile   int      `json:"tile"`
	Code   []uint32 `json:"code"`
	Cycles int64    `json:"cycles"`
}

// ExchangeEvent is when one transfer happens (sched.Event).
type ExchangeEvent struct {
	Send   int64   `json:"send"`
	Pair   bool    `json:"pair,omitempty"`
	Cycles int64   `json:"cycles"`
	Arrive []int64 `json:"arrive"`
}

// ExchangeOptions are the schedule's options (sched.Options).
type ExchangeOptions struct {
	NoSend2   bool   `json:"no_send2,omitempty"`
	EarlySync bool   `json:"early_sync,omitempty"`
	Regs      uint16 `json:"regs,omitempty"`
	Passes    int    `json:"passes,omitempty"`
}

// MaxExchangeWords bounds the code words a state's or a plan's exchanges
// hold (a larger program's schedules are not saved; the 12-layer
// BERT-base FP16 encoder's take 3.6M in order, more compacted).
const MaxExchangeWords = 1 << 24

// validateExchanges checks the sizes and ranges of the saved exchanges.
func (s *State) validateExchanges() error {
	return checkExchanges(s.Exchanges, "exchanges", stateAt)
}

// checkExchanges checks the sizes and ranges of saved exchanges, naming
// a fault's field from path with at.
func checkExchanges(xs []Exchange, path string, at func(path, format string, args ...any) error) error {
	words := 0
	for i, e := range xs {
		p := fmt.Sprintf("%s[%d]", path, i)
		if len(e.Events) != len(e.Transfers) {
			return at(p+".events", "%d events for %d transfers", len(e.Events), len(e.Transfers))
		}
		for k, x := range e.Transfers {
			for j, v := range x {
				if j == 2 {
					v = x[2] & 0xFFFF // the count; the stride above it
					if st := x[2] >> 16; st < 0 || st > MaxTiles {
						return at(fmt.Sprintf("%s.transfers[%d][%d]", p, k, j), "stride %d out of range", st)
					}
				}
				if v < 0 || (j < 3 && v > MaxTiles) || v > 1<<32 {
					return at(fmt.Sprintf("%s.transfers[%d][%d]", p, k, j), "%d out of range", v)
				}
			}
			if n := x[2] & 0xFFFF; int64(len(e.Events[k].Arrive)) != n {
				return at(fmt.Sprintf("%s.events[%d].arrive", p, k), "%d arrivals for %d destinations", len(e.Events[k].Arrive), n)
			}
		}
		for k, t := range e.Tiles {
			if t.Tile < 0 || t.Tile >= MaxTiles {
				return at(fmt.Sprintf("%s.tiles[%d].tile", p, k), "%d out of range", t.Tile)
			}
			words += len(t.Code)
		}
		if words > MaxExchangeWords {
			return at(p, "the exchanges hold more than %d code words", MaxExchangeWords)
		}
	}
	return nil
}
