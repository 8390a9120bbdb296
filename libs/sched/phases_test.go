package sched

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"ipu.local/libs/arch"
)

// The real phases: SCHED_PHASES names a directory of JSON arrays of
// Transfer (one exchange phase each, e.g. a transformer layer's on 1472
// tiles); the tests and benchmarks using them skip without it.

func loadPhases(tb testing.TB) (names []string, phases [][]Transfer) {
	tb.Helper()
	dir := os.Getenv("SCHED_PHASES")
	if dir == "" {
		tb.Skip("SCHED_PHASES not set")
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(files) == 0 {
		tb.Fatalf("SCHED_PHASES %s: no *.json (%v)", dir, err)
	}
	sort.Strings(files)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		var ph []Transfer
		if err := json.Unmarshal(b, &ph); err != nil {
			tb.Fatalf("%s: %v", f, err)
		}
		names = append(names, filepath.Base(f))
		phases = append(phases, ph)
	}
	return names, phases
}

// hashPlan hashes everything Schedule decides: the events, every tile's
// code and cycles, the makespan and bound, the alignment figures (not
// their time), and the compressed code and its figures.
func hashPlan(p *arch.Preset, pl *Plan, a AlignStats) string {
	h := sha256.New()
	w := func(vs ...int64) {
		for _, v := range vs {
			binary.Write(h, binary.LittleEndian, v)
		}
	}
	w(pl.Makespan, pl.LowerBound, int64(len(pl.Events)))
	for _, e := range pl.Events {
		w(e.Send, e.Cycles, b2i(e.Pair), int64(len(e.Arrive)))
		w(e.Arrive...)
	}
	hashTiles(h, w, pl.Tiles)
	w(int64(a.Transfers), int64(a.Failed), int64(a.Rescheduled), int64(a.Rounds), b2i(a.Success))
	cp, cs := Compress(p, pl)
	hashTiles(h, w, cp.Tiles)
	fmt.Fprintf(h, "%+v", cs)
	return fmt.Sprintf("%x", h.Sum(nil)[:12])
}

func hashTiles(h hash.Hash, w func(...int64), tiles []TileCode) {
	for _, tc := range tiles {
		w(int64(tc.Tile), tc.Cycles, int64(len(tc.Code)), int64(tc.TableAt))
		for _, in := range tc.Code {
			fmt.Fprintf(h, "%v;", in)
		}
		for _, v := range tc.Table {
			w(int64(v))
		}
		for _, v := range tc.TableLoads {
			w(int64(v))
		}
	}
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// TestPlanHashes writes a hash of every plan of the real phases and of
// the test cases to SCHED_HASHES (one line each), for comparing two
// versions of the scheduler; it also validates each plan.
func TestPlanHashes(t *testing.T) {
	out := os.Getenv("SCHED_HASHES")
	if out == "" {
		t.Skip("SCHED_HASHES not set")
	}
	type job struct {
		name  string
		p     *arch.Preset
		phase []Transfer
		opt   Options
	}
	var jobs []job
	if os.Getenv("SCHED_PHASES") != "" {
		names, phases := loadPhases(t)
		for i := range names {
			jobs = append(jobs, job{names[i], arch.MustLookup("ipu21"), phases[i], Options{}})
		}
	}
	for _, c := range phaseCases() {
		jobs = append(jobs, job{c.name, arch.MustLookup(c.arch), c.phase, c.opt})
	}
	p := arch.MustLookup("ipu21")
	for _, mc := range []int{1, 16} {
		jobs = append(jobs, job{fmt.Sprintf("large %d", mc), p, random(rand.New(rand.NewSource(11)), p.Tiles, 3000, 64, mc), Options{}})
	}
	jobs = append(jobs, job{"gather 1472", p, gather(p.Tiles, 1), Options{}})
	r := rand.New(rand.NewSource(5))
	for i := 0; i < 300; i++ {
		p := arch.MustLookup([]string{"ipu21-tiny", "ipu21-64", "ipu21"}[r.Intn(3)])
		tiles := min(p.Tiles, 4+r.Intn(60))
		ph := random(r, tiles, 1+r.Intn(40), 1+r.Intn(40), 1+r.Intn(6))
		opt := Options{NoSend2: r.Intn(3) == 0, EarlySync: r.Intn(3) == 0, Passes: r.Intn(6)}
		if r.Intn(4) == 0 {
			opt.Regs = uint16(r.Intn(0x8000)) | 0x0007
		}
		jobs = append(jobs, job{fmt.Sprintf("random %d", i), p, ph, opt})
	}
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, j := range jobs {
		pl, a, err := ScheduleStats(j.p, j.phase, j.opt)
		if err != nil {
			t.Fatalf("%s: %v", j.name, err)
		}
		if err := Validate(j.p, j.phase, pl); err != nil {
			t.Fatalf("%s: %v", j.name, err)
		}
		fmt.Fprintf(f, "%s %s %d\n", j.name, hashPlan(j.p, pl, a), pl.Makespan)
	}
}

// BenchmarkPhases schedules each real phase (see loadPhases).
func BenchmarkPhases(b *testing.B) {
	names, phases := loadPhases(b)
	p := arch.MustLookup("ipu21")
	b.Run("schedule", func(b *testing.B) {
		for b.Loop() {
			for _, ph := range phases {
				if _, _, err := ScheduleStats(p, ph, Options{}); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	for i, ph := range phases {
		b.Run("phase/"+names[i], func(b *testing.B) {
			for b.Loop() {
				if _, _, err := ScheduleStats(p, ph, Options{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	var pls []*Plan
	plans := func(b *testing.B) {
		for i, ph := range phases[len(pls):] {
			pl, err := Schedule(p, ph, Options{})
			if err != nil {
				b.Fatalf("%s: %v", names[i], err)
			}
			pls = append(pls, pl)
		}
	}
	b.Run("validate", func(b *testing.B) {
		plans(b)
		for b.Loop() {
			for i, ph := range phases {
				if err := Validate(p, ph, pls[i]); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("compress", func(b *testing.B) {
		plans(b)
		for b.Loop() {
			for _, pl := range pls {
				Compress(p, pl)
			}
		}
	})
}
