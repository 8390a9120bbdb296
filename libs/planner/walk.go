package planner

// The search's random walk: attempts priced a batch at a time, in the
// order and with the outcome of one attempt at a time.

import (
	"errors"
	"math/rand/v2"

	"ipu.local/libs/lower"
)

// walk is the search's random walk: the current point, the incumbent,
// the points visited and the random stream.
type walk struct {
	cur, inc   point
	curR, incR *result
	visited    map[string]bool
	pcg        *rand.PCG
	rng        *rand.Rand
}

// attempts makes the walk's attempts from attempt a on, as many as it
// can price at once, and returns how many it made. Each attempt's move
// is drawn from the current point, so attempts are priced together on
// the guess that none before them moves the walk: the first that does
// ends the batch, the random stream goes back to where it stood after
// that attempt, and the attempts priced past it are dropped (their
// prices stay cached but are not counted). The walk is therefore the
// one-at-a-time walk, whatever the number of workers.
func (pl *planner) attempts(w *walk, a int, opt Options, st *Stats) (int, error) {
	type attempt struct {
		nb    point
		u     float64
		after rand.PCG // the stream after the attempt's draws
	}
	n := min(len(pl.steps), opt.MaxAttempts-a)
	batch := make([]attempt, n)
	var pts []point
	var ceil []int64
	seen := map[string]bool{}
	for j := range batch {
		nb := pl.move(w.cur, w.rng)
		u := w.rng.Float64() // drawn every attempt, so the stream does not depend on what was visited
		batch[j] = attempt{nb, u, *w.pcg}
		if k := nb.key(); !w.visited[k] && !seen[k] {
			seen[k] = true
			pts = append(pts, nb)
			// A point the walk does not take unless it is cheaper (and
			// then it is priced) need not be priced when it cannot be.
			c := int64(noCeiling)
			if u >= acceptWorse {
				c = w.curR.cost()
			}
			ceil = append(ceil, c)
		}
	}
	rs, errs := pl.evalBelow(pts, ceil, false)
	skipped := map[string]bool{}
	for j, pt := range pts {
		if rs[j] == nil && errs[j] == nil {
			skipped[pt.key()] = true
		}
	}
	for j, at := range batch {
		if opt.Progress != nil {
			opt.Progress(a+j, opt.MaxAttempts, w.incR.total)
		}
		moved, err := pl.attempt(w, at.nb, at.u, skipped[at.nb.key()], st)
		if err != nil {
			return 0, err
		}
		if moved && j < len(batch)-1 {
			*w.pcg = at.after
			return j + 1, nil
		}
	}
	return len(batch), nil
}

// attempt tries the walk's move to nb (its price cached by attempts,
// or skipped: it cannot cost less than the current point, which the walk
// keeps) and reports whether the current point changed.
func (pl *planner) attempt(w *walk, nb point, u float64, skipped bool, st *Stats) (bool, error) {
	k := nb.key()
	if w.visited[k] {
		return false, nil
	}
	w.visited[k] = true
	if skipped {
		return false, nil
	}
	r, err := pl.eval(nb)
	if err != nil {
		var nl *lower.NotLoweredError
		if errors.As(err, &nl) {
			return false, nil // a layout the linker cannot run: not a candidate
		}
		return false, err
	}
	st.Evaluated++
	if r.mem != nil {
		return false, nil
	}
	moved := false
	if r.cost() < w.curR.cost() || u < acceptWorse {
		w.cur, w.curR, moved = nb, r, true
	}
	if r.cost() < w.incR.cost() {
		w.inc, w.incR = nb, r
	}
	return moved, nil
}
