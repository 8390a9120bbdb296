package plan

import (
	"fmt"
	"math/rand/v2"
)

// StateFormat is the version string of the search state file.
const StateFormat = "ipu-plan-state/1"

// State is the planner's resumable search state (JSON, like the plan):
//
//	State {
//		format      "ipu-plan-state/1"
//		model       fingerprint of the .onnx; arch, tiles, seed as the plan's
//		attempts    local moves evaluated so far, over every invocation
//		rng         the PCG generator's state (MarshalBinary, base64)
//		current     the point the walk stands on, with its cycles
//		incumbent   the best point seen, with its cycles
//		visited     keys of the points evaluated, sorted, deduplicated
//		exchanges   the last validation link's exchange schedules (optional)
//		validated_cycles  the incumbent's linked cycles, as ipu-plan's
//		            validation link found them (optional: 0 before one)
//		shard, shards     the part of a sharded search (ipu-plan --shard
//		            I/N: shard I of N, its RNG stream jumped I x 2^64
//		            draws ahead of the seed's); absent when unsharded
//		whole_rows  the graph values whose row layouts the start laid
//		            out whole (their tiles' code did not fit them
//		            halved), sorted; absent when none
//	}
//
// A planner run loads it, makes its moves and saves it: one run of 2N
// attempts equals two runs of N.
type State struct {
	Format    string   `json:"format"`
	Model     string   `json:"model"`
	Arch      string   `json:"arch"`
	Tiles     int      `json:"tiles"`
	Seed      uint64   `json:"seed"`
	Attempts  int      `json:"attempts"`
	RNG       []byte   `json:"rng"`
	Current   Point    `json:"current"`
	Incumbent Point    `json:"incumbent"`
	Visited   []string `json:"visited"`
	// Exchanges are the validation link's exchange schedules, for the
	// next run to reuse (exchanges.go).
	Exchanges []Exchange `json:"exchanges,omitempty"`
	// Validated is the incumbent's linked cost under the objective (0:
	// not validated): final_cycles, plus the host link's cycles under
	// ObjectiveInference; what ipu-plan --merge compares shards by.
	Validated int64 `json:"validated_cycles,omitempty"`
	// Shard of Shards: a sharded search's part (0 of 0: unsharded).
	Shard  int `json:"shard,omitempty"`
	Shards int `json:"shards,omitempty"`
	// Objective is what the search minimises ("": the default,
	// ObjectiveInference); a resumed search keeps it.
	Objective string `json:"objective,omitempty"`
	// Reserve is the bytes of every tile the search keeps free beyond
	// its memory checks (ipu-plan's retry of a plan that does not
	// place); a resumed search keeps it.
	Reserve int64 `json:"memory_reserve,omitempty"`
	// MaxVariable, when not 0, is the largest variable (a buffer with no
	// data, not permanent) the search lets a tile hold, in bytes
	// (ipu-plan's retry of a plan whose variable did not fit in memory
	// free in pieces); a resumed search keeps it.
	MaxVariable int64 `json:"max_variable_bytes,omitempty"`
	// Whole are the values (graph value indices, sorted) whose row
	// layouts the start laid out whole instead of halved: the points'
	// plans depend on it, so a resumed search keeps it.
	Whole []int `json:"whole_rows,omitempty"`
}

// MaxShards bounds a sharded search's shard count.
const MaxShards = 4096

// Point is one assignment of decisions to the planned nodes.
type Point struct {
	Cycles    int64      `json:"cycles"`
	Decisions []Decision `json:"decisions"`
}

// Decision is the search's choice for one node (sorted by node).
type Decision struct {
	Node       int    `json:"node"`
	Split      Split  `json:"split"`
	CastOrder  string `json:"cast_order,omitempty"`
	Stationary string `json:"stationary,omitempty"`
	Tiles      [2]int `json:"tiles"`
}

// MaxVisited bounds the visited set a state keeps (oldest keys are not
// tracked by age: the planner trims the set to the sorted first
// MaxVisited keys).
const MaxVisited = 1 << 16

// MarshalState encodes s canonically.
func MarshalState(s *State) ([]byte, error) { return marshal(s) }

// ReadState decodes and validates a search state file.
func ReadState(data []byte) (*State, error) {
	if err := checkFormat(data, StateFormat); err != nil {
		return nil, stateErr(err)
	}
	var s State
	if err := decodeStrict(data, &s); err != nil {
		return nil, stateErr(err)
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return &s, nil
}

func stateErr(err error) error {
	if e, ok := err.(*Error); ok {
		e.Kind = "search state"
	}
	return err
}

func stateAt(path, format string, args ...any) error {
	return &Error{Kind: "search state", Path: path, Msg: fmt.Sprintf(format, args...)}
}

// Validate checks s's fields and that its RNG state decodes.
func (s *State) Validate() error {
	if s.Format != StateFormat {
		return stateAt("format", "unsupported format %q (want %q)", s.Format, StateFormat)
	}
	if s.Tiles <= 0 || s.Tiles > MaxTiles {
		return stateAt("tiles", "%d out of range [1, %d]", s.Tiles, MaxTiles)
	}
	if s.Attempts < 0 {
		return stateAt("attempts", "negative")
	}
	if s.Validated < 0 {
		return stateAt("validated_cycles", "negative")
	}
	if err := CheckObjective(s.Objective); err != nil {
		return stateAt("objective", "%v", err)
	}
	if s.Reserve < 0 || s.Reserve > 1<<30 {
		return stateAt("memory_reserve", "%d out of range [0, %d]", s.Reserve, 1<<30)
	}
	if s.MaxVariable < 0 || s.MaxVariable > 1<<30 {
		return stateAt("max_variable_bytes", "%d out of range [0, %d]", s.MaxVariable, 1<<30)
	}
	if s.Shards < 0 || s.Shards > MaxShards || s.Shard < 0 || (s.Shards == 0 && s.Shard != 0) || (s.Shards > 0 && s.Shard >= s.Shards) {
		return stateAt("shard", "shard %d of %d is not one of [0, N) with N in [1, %d]", s.Shard, s.Shards, MaxShards)
	}
	if _, err := s.PCG(); err != nil {
		return stateAt("rng", "%v", err)
	}
	for _, pt := range []struct {
		path string
		p    *Point
	}{{"current", &s.Current}, {"incumbent", &s.Incumbent}} {
		if pt.p.Cycles < 0 {
			return stateAt(pt.path+".cycles", "negative")
		}
		for i, d := range pt.p.Decisions {
			dp := fmt.Sprintf("%s.decisions[%d]", pt.path, i)
			if d.Node < 0 || (i > 0 && pt.p.Decisions[i-1].Node >= d.Node) {
				return stateAt(dp+".node", "%d: nodes must be sorted, non-negative, once each", d.Node)
			}
			if d.Split.M < 1 || d.Split.N < 1 || d.Split.K < 1 {
				return stateAt(dp+".split", "factors must be at least 1")
			}
			if r := d.Split.Rest; r != nil && (r.Axis != "m" && r.Axis != "n" || r.At < 1 || r.M < 1 || r.N < 1) {
				return stateAt(dp+".split.rest", "axis %q at %d factors %d, %d: want axis m or n, a positive offset and factors", r.Axis, r.At, r.M, r.N)
			}
			if d.Tiles[0] < 0 || d.Tiles[0] >= d.Tiles[1] || d.Tiles[1] > s.Tiles {
				return stateAt(dp+".tiles", "[%d, %d) is not a non-empty range of [0, %d)", d.Tiles[0], d.Tiles[1], s.Tiles)
			}
			switch d.CastOrder {
			case "", BeforeExchange, AfterExchange:
			default:
				return stateAt(dp+".cast_order", "unknown cast order %q", d.CastOrder)
			}
			switch d.Stationary {
			case "", "a", "b":
			default:
				return stateAt(dp+".stationary", "unknown operand %q", d.Stationary)
			}
		}
	}
	if len(s.Whole) > MaxVisited {
		return stateAt("whole_rows", "%d values exceed %d", len(s.Whole), MaxVisited)
	}
	for i, v := range s.Whole {
		if v < 0 || i > 0 && s.Whole[i-1] >= v {
			return stateAt(fmt.Sprintf("whole_rows[%d]", i), "%d: values must be sorted, non-negative, once each", v)
		}
	}
	if len(s.Visited) > MaxVisited {
		return stateAt("visited", "%d keys exceed %d", len(s.Visited), MaxVisited)
	}
	if err := s.validateExchanges(); err != nil {
		return err
	}
	for i := 1; i < len(s.Visited); i++ {
		if s.Visited[i-1] >= s.Visited[i] {
			return stateAt(fmt.Sprintf("visited[%d]", i), "not sorted or repeated")
		}
	}
	return nil
}

// NewState returns the state of a fresh search: no attempts, the PCG
// seeded from seed.
func NewState(model, arch string, tiles int, seed uint64) *State {
	s := &State{Format: StateFormat, Model: model, Arch: arch, Tiles: tiles, Seed: seed}
	s.SetPCG(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	return s
}

// PCG returns the generator the state holds.
func (s *State) PCG() (*rand.PCG, error) {
	var p rand.PCG
	if err := p.UnmarshalBinary(s.RNG); err != nil {
		return nil, err
	}
	return &p, nil
}

// SetPCG stores the generator's state.
func (s *State) SetPCG(p *rand.PCG) {
	b, err := p.MarshalBinary()
	if err != nil {
		panic(err) // PCG's MarshalBinary never fails
	}
	s.RNG = b
}
