package link

import (
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"sort"
	"time"

	"ipu.local/formats/obj"
	"ipu.local/formats/plan"
	"ipu.local/libs/par"
	"ipu.local/libs/sched"
)

// The exchange supersteps: scheduled (or relocated from a superstep of
// the same pattern, or from a search state's saved schedules) and
// validated, then their code stored: compressed with repeat loops
// (sched.Compress), with the patch tables those loops load, and their
// figures.

// ExchangeStorage are the figures of the compressed exchange code, each
// the largest over tiles of the tile's total over its exchange
// supersteps; Loops is the total of all tiles.
type ExchangeStorage struct {
	StraightBytes int // the exchange code without repeat loops
	CodeBytes     int // the exchange code with them, patch tables aside
	TableBytes    int // code and patch tables: what the tile stores
	PatchBytes    int // patch tables: per-iteration values stored
	ElidedBytes   int // per-iteration values computed by the loops, not stored
	Loops         int
	// TotalStraight and TotalStored are the exchange code of all tiles
	// without loops, and with them and their patch tables.
	TotalStraight, TotalStored int
}

// packExchanges compresses every exchange superstep's code, sets each
// tile's exchange code bytes to what it stores, and logs the storage.
func (l *linker) packExchanges(log *slog.Logger) {
	began := time.Now()
	l.packed = make([]*sched.Plan, len(l.exch))
	stats := make([][]sched.CompressStats, len(l.exch))
	var steps []int
	for i, sp := range l.exch {
		if sp != nil {
			steps = append(steps, i)
		}
	}
	l.parallel(steps, func(i int) {
		if l.noLoops {
			l.packed[i], stats[i] = l.exch[i], sched.Straight(l.exch[i])
			return
		}
		l.packed[i], stats[i] = sched.Compress(l.p, l.exch[i])
	})
	per := map[int]*sched.CompressStats{}
	for _, i := range steps {
		for k, tc := range l.exch[i].Tiles {
			s := per[tc.Tile]
			if s == nil {
				s = &sched.CompressStats{}
				per[tc.Tile] = s
			}
			s.Add(stats[i][k])
		}
	}
	st := &l.st.ExchangeStorage
	for _, t := range l.sortedTiles() {
		s := per[t]
		if s == nil {
			continue
		}
		l.tiles[t].exCode = s.PackedBytes + s.PatchBytes
		st.StraightBytes = max(st.StraightBytes, s.CodeBytes)
		st.CodeBytes = max(st.CodeBytes, s.PackedBytes)
		st.TableBytes = max(st.TableBytes, s.PackedBytes+s.PatchBytes)
		st.PatchBytes = max(st.PatchBytes, s.PatchBytes)
		st.ElidedBytes = max(st.ElidedBytes, s.ElidedBytes)
		st.Loops += s.Loops
		st.TotalStraight += s.CodeBytes
		st.TotalStored += s.PackedBytes + s.PatchBytes
	}
	l.st.ExchangeTableBytes = st.TableBytes
	// The memory figures had the bound of size_tile_code: now the code.
	for i := range l.st.Memory {
		if tl := l.tiles[l.st.Memory[i].Tile]; tl != nil {
			l.st.Memory[i].ExchangeCode = int64(tl.exCode)
		}
	}
	log.Info("exchange table and repeat patch storage", slog.Int("exchange_table_bytes", st.TableBytes),
		slog.Int("maximum_uncompressed_repeat_patch_bytes", st.PatchBytes), slog.Int("maximum_elided_arithmetic_patch_bytes", st.ElidedBytes))
	log.Debug("compressed exchange code with repeat loops", slog.Int("loops", st.Loops),
		slog.Int("straight_code_bytes", st.StraightBytes), slog.Int("compressed_code_bytes", st.CodeBytes),
		slog.Int("all_tiles_straight_bytes", st.TotalStraight), slog.Int("all_tiles_stored_bytes", st.TotalStored),
		slog.Int64("elapsed_ms", time.Since(began).Milliseconds()))
}

// lowestNI is the lowest non-interleaved buffer address of tile t.
func (l *linker) lowestNI(t int) uint32 {
	lo := l.p.NonInterleaved.Hi
	for _, b := range l.prog.Buffers {
		if b.Placed && b.Addr < l.p.NonInterleaved.Hi && containsTile(b.Tiles, t) {
			lo = min(lo, b.Addr)
		}
	}
	return lo
}

// codeSpaceError is tile t's code, n bytes from the executable range's
// start, reaching its lowest non-interleaved buffer at lo: the room
// below the buffers, and what would give more.
func (l *linker) codeSpaceError(t int, n uint64, lo uint32) error {
	room := uint64(lo) - min(uint64(lo), uint64(l.p.Executable.Lo))
	return fmt.Errorf("tile %d: code of %d bytes does not fit the %d bytes below its buffers (from %#x): the program is too large for %d tiles; plan it on more", t, n, room, lo, l.pl.Tiles)
}

// lowerExchanges schedules every exchange superstep with the placed
// addresses and validates the schedule against the simulator's rules.
//
// Supersteps that move the same pattern (sched.SamePattern: the repeated
// layers of a model, repeated operand moves) share one schedule: the
// first of each pattern, in program order, is scheduled; each later one
// relocates that schedule to its own addresses (sched.Relocate) and
// validates the result, and is scheduled from scratch only when the
// relocation is refused (it would change what the schedule depends on)
// or does not validate. Which superstep reuses which depends on the
// program alone, not on the order the parallel work completes in, and a
// relocated schedule is the one scheduling would make.
func (l *linker) lowerExchanges(log *slog.Logger) error {
	if err := l.checkFragments(); err != nil {
		return err
	}
	l.exch = make([]*sched.Plan, len(l.prog.Steps))
	for _, tl := range l.tiles {
		tl.exCode = 0 // the bound of size_tile_code gives way to the code
	}
	x := l.exchangePatterns()
	l.scheduleExchanges(log, x)
	for i, s := range l.prog.Steps {
		if s.Kind != obj.Exchange {
			continue
		}
		if x.errs[i] != nil {
			return x.errs[i]
		}
		l.accountExchange(log, x, i)
	}
	if !l.noSave {
		l.saveSchedules(x.xss, x.from)
	}
	l.packExchanges(log)
	return nil
}

// exchanges is the exchange supersteps' transfers by superstep, grouped
// by pattern, and how each was scheduled.
type exchanges struct {
	xss [][]sched.Transfer
	// from: the superstep whose schedule i reuses (i: none); leaders
	// the first of each pattern, followers the others.
	from               []int
	leaders, followers []int
	// errs: each superstep's error; refused, why a schedule it might
	// have reused was not; fromState, whether its schedule is the
	// search state's; aligns, the alignment figures of one scheduled
	// here.
	errs, refused []error
	fromState     []bool
	aligns        []*sched.AlignStats
}

// exchangePatterns groups the exchange supersteps by pattern.
func (l *linker) exchangePatterns() *exchanges {
	n := len(l.prog.Steps)
	x := &exchanges{xss: make([][]sched.Transfer, n), from: make([]int, n),
		errs: make([]error, n), refused: make([]error, n), fromState: make([]bool, n), aligns: make([]*sched.AlignStats, n)}
	first := map[string]int{}
	for i, s := range l.prog.Steps {
		if s.Kind != obj.Exchange {
			continue
		}
		xs := make([]sched.Transfer, len(s.Xfers))
		for k, t := range s.Xfers {
			xs[k] = t.Sched()
		}
		x.xss[i], x.from[i] = xs, i
		if l.noReuse || len(xs) == 0 {
			x.leaders = append(x.leaders, i)
			continue
		}
		key := sched.PatternKey(xs)
		if j, ok := first[key]; ok {
			x.from[i] = j
			x.followers = append(x.followers, i)
			continue
		}
		first[key] = i
		x.leaders = append(x.leaders, i)
	}
	return x
}

// scheduleExchanges schedules the exchange supersteps. The phases are
// independent: the first of each pattern is scheduled and validated
// side by side with the others, the most transfers first (so that no
// big one starts last, alone), then the others are relocated side by
// side. A schedule of the search state's pattern is relocated instead.
func (l *linker) scheduleExchanges(log *slog.Logger, x *exchanges) {
	saved := l.savedByPattern(log, x.xss)
	schedule := func(i int) error {
		for k, sv := range saved[sched.PatternKey(x.xss[i])] {
			if l.noReuse {
				break
			}
			sp, err := sched.Relocate(sv.plan, sv.phase, x.xss[i])
			if err == nil {
				err = sched.Validate(l.p, x.xss[i], sp)
			}
			if err == nil {
				l.exch[i], x.fromState[i] = sp, true
				return nil
			}
			if k == 0 {
				x.refused[i] = err // why the pattern's first did not serve
			}
		}
		sp, al, err := sched.ScheduleStats(l.p, x.xss[i], sched.Options{})
		if err == nil {
			err = sched.Validate(l.p, x.xss[i], sp)
			x.aligns[i] = &al
		}
		l.exch[i] = sp
		return err
	}
	leaders := x.leaders
	sort.SliceStable(leaders, func(a, b int) bool { return len(x.xss[leaders[a]]) > len(x.xss[leaders[b]]) })
	l.parallel(leaders, func(i int) {
		if err := schedule(i); err != nil {
			x.errs[i] = fmt.Errorf("superstep %d (%s): %w", i, l.prog.Steps[i].Name, err)
		}
	})
	lead := slices.Clone(x.from) // each follower's leader
	l.parallel(x.followers, func(i int) {
		j := x.from[i]
		if x.errs[j] != nil {
			x.from[i] = i // reported at j, which comes first
			return
		}
		if sp, err := l.relocate(x, j, i); err != nil {
			x.refused[i], x.from[i] = err, i
		} else {
			l.exch[i] = sp
		}
	})
	// The followers their leader's schedule did not serve, by leader in
	// program order: each tries the ones scheduled before it (a
	// superstep of a later layer often relocates from another later
	// layer's where the first layer's buffers lie differently), and is
	// scheduled itself when none serves. Relocate makes the schedule
	// Schedule would, so the program is the same either way.
	byLeader := map[int][]int{}
	var groups []int
	for _, i := range x.followers {
		if x.refused[i] == nil || x.errs[i] != nil {
			continue
		}
		j := lead[i]
		if len(byLeader[j]) == 0 {
			groups = append(groups, j)
		}
		byLeader[j] = append(byLeader[j], i)
	}
	l.parallel(groups, func(j int) {
		var own []int // the group's supersteps scheduled themselves
		for _, i := range byLeader[j] {
			for _, k := range own {
				if sp, err := l.relocate(x, k, i); err == nil {
					l.exch[i], x.from[i] = sp, k
					break
				}
			}
			if x.from[i] != i {
				continue
			}
			if err := schedule(i); err != nil {
				x.errs[i] = fmt.Errorf("superstep %d (%s): %w", i, l.prog.Steps[i].Name, err)
				continue
			}
			own = append(own, i)
		}
	})
}

// relocate makes superstep i's schedule from superstep j's, validated.
func (l *linker) relocate(x *exchanges, j, i int) (*sched.Plan, error) {
	sp, err := sched.Relocate(l.exch[j], x.xss[j], x.xss[i])
	if err == nil {
		err = sched.Validate(l.p, x.xss[i], sp)
	}
	return sp, err
}

// accountExchange logs how exchange superstep i was scheduled and
// counts it in the link's figures; the superstep takes its makespan.
func (l *linker) accountExchange(log *slog.Logger, x *exchanges, i int) {
	s, sp := l.prog.Steps[i], l.exch[i]
	switch {
	case x.fromState[i]:
		l.st.FromState++
		log.Info("reused exchange optimization after validating relocated rows", slog.Int("phase", i))
		log.Debug("reused a search state's exchange schedule", slog.Int("phase", i), slog.Int("transfers", len(s.Xfers)), slog.Int64("cycles", sp.Makespan))
	case x.from[i] != i:
		l.st.ReusedExchanges++
		log.Info("reused exchange optimization after validating relocated rows", slog.Int("phase", i))
		log.Debug("reused an earlier superstep's exchange schedule", slog.Int("phase", i), slog.Int("from", x.from[i]), slog.Int("transfers", len(s.Xfers)), slog.Int64("cycles", sp.Makespan))
	case x.refused[i] != nil:
		l.st.RefusedReuses++
		log.Debug("scheduled exchange superstep again: its relocation was refused", slog.Int("phase", i), slog.String("reason", x.refused[i].Error()))
	}
	if a := x.aligns[i]; a != nil {
		l.st.addAlign(*a)
		log.Debug("validated exchange schedule instruction alignment", slog.Int("phase", i), slog.Int("transfers", a.Transfers),
			slog.Int("failed", a.Failed), slog.Int("rescheduled", a.Rescheduled), slog.Int("rounds", a.Rounds), slog.Bool("success", a.Success))
	}
	s.Cycles = sp.Makespan
	l.st.Transfers += len(s.Xfers)
}

// savedSchedule is one of Options.Saved, decoded.
type savedSchedule struct {
	index int // in Options.Saved
	phase []sched.Transfer
	plan  *sched.Plan
}

// savedByPattern decodes Options.Saved by pattern key, in their order;
// an entry that does not decode is skipped (it is a cache: the
// superstep is scheduled). A pattern has more than one when a superstep
// of it did not relocate from the first (saveSchedules), so a pattern
// keeps at most as many as xss has supersteps of it (none of a pattern
// xss does not have), and no copies: a plan from elsewhere that repeats
// a schedule cannot make every superstep of its pattern try each copy.
func (l *linker) savedByPattern(log *slog.Logger, xss [][]sched.Transfer) map[string][]savedSchedule {
	room := map[string]int{}
	for _, xs := range xss {
		if len(xs) > 0 {
			room[sched.PatternKey(xs)]++
		}
	}
	m := map[string][]savedSchedule{}
	for k, e := range l.saved {
		phase, pl, err := sched.Load(e)
		if err != nil {
			log.Debug("skipped a saved exchange schedule", slog.Int("index", k), slog.String("reason", err.Error()))
			continue
		}
		key := sched.PatternKey(phase)
		switch {
		case len(m[key]) >= room[key]:
			log.Debug("skipped a saved exchange schedule", slog.Int("index", k), slog.String("reason", "no superstep of its pattern left to serve"))
			continue
		case slices.ContainsFunc(m[key], func(s savedSchedule) bool { return reflect.DeepEqual(l.saved[s.index], e) }):
			log.Debug("skipped a saved exchange schedule", slog.Int("index", k), slog.String("reason", "a copy of one before it"))
			continue
		}
		m[key] = append(m[key], savedSchedule{k, phase, pl})
	}
	return m
}

// saveSchedules keeps one schedule per pattern (the first superstep of
// each, in program order), and the schedule of each superstep that did
// not relocate from it, for a search state, unless their code exceeds
// plan.MaxExchangeWords.
func (l *linker) saveSchedules(xss [][]sched.Transfer, from []int) {
	words := 0
	var out []plan.Exchange
	for i, sp := range l.exch {
		if sp == nil || from[i] != i || len(xss[i]) == 0 {
			continue
		}
		for _, tc := range sp.Tiles {
			words += len(tc.Code)
		}
		if words > plan.MaxExchangeWords {
			return
		}
		e, err := sched.Save(xss[i], sp)
		if err != nil {
			return
		}
		out = append(out, e)
	}
	l.st.Saved = out
}

// checkFragments refuses a program whose busiest tile runs more exchange
// fragments (sends and receptions) than its executable range can hold
// (sched.FragmentLimit), the limit the planner screens candidates with.
func (l *linker) checkFragments() error {
	frags := make([]int, l.p.Tiles)
	for _, s := range l.prog.Steps {
		for _, x := range s.Xfers {
			frags[x.Src]++
			for u := x.Dst; u <= x.Last(); u += x.Step() {
				frags[u]++
			}
		}
	}
	limit := sched.FragmentLimit(l.p)
	for t, n := range frags {
		if n > limit {
			return fmt.Errorf("tile %d: %d exchange fragments (sends and receptions), more than the %d its executable range holds", t, n, limit)
		}
	}
	return nil
}

// parallel runs fn for every item on all host cores; fn must touch only
// its item's state.
func (l *linker) parallel(items []int, fn func(i int)) {
	par.For(len(items), par.Cores(), func(_, k int) { fn(items[k]) })
}
