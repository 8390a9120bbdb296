package link

import (
	"fmt"
	"encoding/json"
	"os"
	"testing"
	"time"

	"ipu.local/formats/obj"
	"ipu.local/formats/plan"
	"ipu.local/libs/arch"
	"ipu.local/libs/graph"
	"ipu.local/libs/lower"
	"ipu.local/libs/sched"
)

func TestProfLink(t *testing.T) {
	path := os.Getenv("PROF_PLAN")
	if path == "" {
		t.Skip()
	}
	data, _ := os.ReadFile(path)
	pl, err := plan.Read(data)
	if err != nil {
		t.Fatal(err)
	}
	g, _ := graph.Decode(&pl.Graph)
	p := arch.MustLookup(pl.Arch)
	pr, err := lower.Lower(pl, g, p)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range pr.Steps {
		if s.Kind != obj.Exchange {
			continue
		}
		xs := make([]sched.Transfer, len(s.Xfers))
		dests, words := 0, 0
		for k, x := range s.Xfers {
			xs[k] = sched.Transfer{Src: x.Src, Dst: x.Dst, DstN: x.Dests(), Words: x.Words, SrcAddr: 0x80000 + x.From.Off, DstAddr: 0x90000 + x.To.Off}
			dests += x.Dests()
			words += x.Words
		}
		if d := os.Getenv("PROF_DUMPALL"); d != "" {
			b, _ := json.Marshal(xs)
			os.WriteFile(fmt.Sprintf("%s/%03d.json", d, i), b, 0o644)
		}
		if s.Name == os.Getenv("PROF_DUMP") {
			b, _ := json.Marshal(xs)
			os.WriteFile("/tmp/phase.json", b, 0o644)
		}
		st := time.Now()
		sp, err := sched.Schedule(p, xs, sched.Options{})
		if err != nil {
			t.Logf("%d %s: %v", i, s.Name, err)
			continue
		}
		t.Logf("%d %s: %d transfers %d dests %d words: makespan %d bound %d in %v", i, s.Name, len(xs), dests, words, sp.Makespan, sp.LowerBound, time.Since(st))
	}
}

func TestProfBufs(t *testing.T) {
	path := os.Getenv("PROF_BUFS")
	if path == "" {
		t.Skip()
	}
	data, _ := os.ReadFile(path)
	pl, err := plan.Read(data)
	if err != nil {
		t.Fatal(err)
	}
	g, _ := graph.Decode(&pl.Graph)
	p := arch.MustLookup(pl.Arch)
	pr, err := lower.Lower(pl, g, p)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range pr.Buffers {
		if len(b.Tiles) > 0 && b.Tiles[0] == 0 {
			t.Logf("buf %s size %#x region %v align %d first %d last %d apart %d", b.Name, b.Size, b.Region, b.Align, b.First, b.Last, len(b.Apart))
		}
	}
	for _, s := range pr.Steps {
		for _, k := range s.Work[0] {
			t.Logf("step %s kernel %+v", s.Name, k)
		}
	}
}

func TestProfFullLink(t *testing.T) {
	path := os.Getenv("PROF_FULL")
	if path == "" {
		t.Skip()
	}
	data, _ := os.ReadFile(path)
	st := time.Now()
	pl, err := plan.Read(data)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("read %v", time.Since(st))
	o, _, err := Link(pl, plan.Fingerprint(data), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("link %v", time.Since(st))
	b, err := obj.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("marshal %v %d bytes", time.Since(st), len(b))
}
