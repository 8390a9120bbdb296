package planner

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"ipu.local/formats/plan"
	"ipu.local/libs/arch"
)

// The jump is the generator's own recurrence: n draws and a jump of n
// leave the same state, for small n and, composed, for 2^64.
func TestJumpPCG(t *testing.T) {
	for _, n := range []uint64{0, 1, 2, 3, 17, 1000} {
		a, b := rand.NewPCG(7, 11), rand.NewPCG(7, 11)
		for range n {
			a.Uint64()
		}
		if err := jumpPCG(b, u128{lo: n}); err != nil {
			t.Fatal(err)
		}
		if x, y := a.Uint64(), b.Uint64(); x != y {
			t.Errorf("jump %d: next draw %d, want %d", n, y, x)
		}
	}
	// 2^63 twice is 2^64; 2^64 three times is 3 x 2^64.
	a, b := rand.NewPCG(1, 2), rand.NewPCG(1, 2)
	for range 2 {
		if err := jumpPCG(a, u128{lo: 1 << 63}); err != nil {
			t.Fatal(err)
		}
	}
	if err := jumpPCG(b, u128{hi: 1}); err != nil {
		t.Fatal(err)
	}
	if x, y := a.Uint64(), b.Uint64(); x != y {
		t.Errorf("2 x 2^63 draws give %d, 2^64 give %d", x, y)
	}
	c := rand.NewPCG(1, 2)
	for range 3 {
		if err := jumpPCG(c, u128{hi: 1}); err != nil {
			t.Fatal(err)
		}
	}
	d := rand.NewPCG(1, 2)
	if err := jumpPCG(d, u128{hi: 3}); err != nil {
		t.Fatal(err)
	}
	if x, y := c.Uint64(), d.Uint64(); x != y {
		t.Errorf("3 jumps of 2^64 give %d, one of 3 x 2^64 gives %d", x, y)
	}
}

// Shards draw from disjoint streams: shard 0 is the plain search, the
// others walk elsewhere from the same start, and each resumes only as
// itself.
func TestShards(t *testing.T) {
	p := arch.MustLookup("ipu21-64")
	g := load(t, "qk-early")
	opt := Options{Seed: 3, MaxAttempts: 6, ModelFingerprint: "fp"}
	plain, plainS, _, err := Plan(g, p, opt)
	if err != nil {
		t.Fatal(err)
	}
	states := map[string]int{}
	draws := map[uint64]int{}
	for i := range 4 {
		o := opt
		o.Shard, o.Shards = i, 4
		pl, s, _, err := Plan(g, p, o)
		if err != nil {
			t.Fatal(err)
		}
		if s.Shard != i || s.Shards != 4 {
			t.Errorf("shard %d: state says %d/%d", i, s.Shard, s.Shards)
		}
		if i == 0 {
			a, _ := plan.Marshal(plain)
			b, _ := plan.Marshal(pl)
			if !bytes.Equal(a, b) {
				t.Errorf("shard 0/4 plans otherwise than the plain search")
			}
			if d := cmp.Diff(plainS.Visited, s.Visited); d != "" {
				t.Errorf("shard 0/4 visited (-plain +shard):\n%s", d)
			}
		}
		if j, ok := states[string(s.RNG)]; ok {
			t.Errorf("shards %d and %d end at the same generator state", j, i)
		}
		states[string(s.RNG)] = i
		// Their streams, from where they stopped, share no draw.
		pcg, _ := s.PCG()
		for range 1000 {
			v := pcg.Uint64()
			if j, ok := draws[v]; ok && j != i {
				t.Fatalf("shards %d and %d draw %d", j, i, v)
			}
			draws[v] = i
		}
		// A shard's state resumes only as that shard.
		o.State, o.Shard = s, (i+1)%4
		if _, _, _, err := Plan(g, p, o); err == nil || !strings.Contains(err.Error(), "search state is for shard") {
			t.Errorf("shard %d state resumed as %d: %v", i, o.Shard, err)
		}
	}
	for _, bad := range [][2]int{{4, 4}, {-1, 2}, {1, 0}, {0, plan.MaxShards + 1}} {
		o := opt
		o.Shard, o.Shards = bad[0], bad[1]
		if _, _, _, err := Plan(g, p, o); err == nil || !strings.Contains(err.Error(), "is not one of") {
			t.Errorf("shard %d/%d: %v", bad[0], bad[1], err)
		}
	}
}
