package link

import (
	"log/slog"
	"os"
	"testing"
	"time"

	"ipu.local/formats/obj"
	"ipu.local/formats/plan"
	"ipu.local/libs/arch"
	"ipu.local/libs/graph"
	"ipu.local/libs/sched"
)

// TestReuseTimes measures, on the plan file $REUSE_PLAN, the exchange
// lowering's parts one superstep at a time on one goroutine: scheduling
// every superstep, and relocating the supersteps of a repeated pattern,
// each with its validation (skipped without the variable).
func TestReuseTimes(t *testing.T) {
	l := placedLinker(t)
	p := l.p
	var sch, val, rel, val2, schF, valF time.Duration
	first := map[string]int{}
	plans := map[int]*sched.Plan{}
	xss := map[int][]sched.Transfer{}
	n, reused := 0, 0
	for i, s := range l.prog.Steps {
		if s.Kind != obj.Exchange {
			continue
		}
		n++
		xs := make([]sched.Transfer, len(s.Xfers))
		for k, x := range s.Xfers {
			xs[k] = x.Sched()
		}
		xss[i] = xs
		t0 := time.Now()
		sp, err := sched.Schedule(p, xs, sched.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t1 := time.Now()
		if err := sched.Validate(p, xs, sp); err != nil {
			t.Fatal(err)
		}
		t2 := time.Now()
		sch += t1.Sub(t0)
		val += t2.Sub(t1)
		plans[i] = sp
		key := sched.PatternKey(xs)
		j, ok := first[key]
		if !ok {
			first[key] = i
			continue
		}
		t3 := time.Now()
		rp, err := sched.Relocate(plans[j], xss[j], xs)
		if err != nil {
			continue
		}
		t4 := time.Now()
		if err := sched.Validate(p, xs, rp); err != nil {
			t.Fatal(err)
		}
		t5 := time.Now()
		rel += t4.Sub(t3)
		val2 += t5.Sub(t4)
		schF += t1.Sub(t0)
		valF += t2.Sub(t1)
		reused++
	}
	t.Logf("%d exchange supersteps: schedule %v + validate %v", n, sch, val)
	t.Logf("%d relocatable: schedule %v + validate %v, or relocate %v + validate %v", reused, schF, valF, rel, val2)
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// placedLinker reads the plan file $REUSE_PLAN and runs the linker's
// phases up to storage placement (skips without the variable).
func placedLinker(t *testing.T) *linker {
	path := os.Getenv("REUSE_PLAN")
	if path == "" {
		t.Skip("REUSE_PLAN names no plan file")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pl, err := plan.Read(data)
	if err != nil {
		t.Fatal(err)
	}
	p, err := arch.Lookup(pl.Arch)
	if err != nil {
		t.Fatal(err)
	}
	g, err := graph.Decode(&pl.Graph)
	if err != nil {
		t.Fatal(err)
	}
	l := &linker{p: p, pl: pl, g: g, tiles: map[int]*tile{}, kcode: map[any]*kernelCode{}}
	for _, fn := range []func() error{
		func() error { return l.compileRuntime(discard()) },
		func() error { return l.planKernels(discard()) },
		func() error { return l.compileKernels(discard()) },
		func() error { return l.linkRuntime(discard()) },
		func() error { return l.sizeTileCode(discard()) },
		func() error { return l.placeStorage(discard()) },
	} {
		if err := fn(); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

// TestReuseLowerTimes times lower_exchanges on $REUSE_PLAN's program with
// and without reuse, twice, alternating.
func TestReuseLowerTimes(t *testing.T) {
	l := placedLinker(t)
	for r := 0; r < 2; r++ {
		for _, off := range []bool{true, false} {
			l.noReuse = off
			l.st = Stats{}
			start := time.Now()
			if err := l.lowerExchanges(discard()); err != nil {
				t.Fatal(err)
			}
			t.Logf("no reuse %v: lower_exchanges %v, %d reused", off, time.Since(start), l.st.ReusedExchanges)
		}
	}
}
