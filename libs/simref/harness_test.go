package simref_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"

	"ipu.local/libs/arch"
	"ipu.local/libs/sim"
	"ipu.local/libs/simref"
)

// machine is what the differential test needs of both simulators.
type machine interface {
	Load(tile int, img sim.Image) error
	Configure(tile int, reg, value uint32) error
	Run(host sim.Host, command uint32) (*sim.RunResult, error)
	Mark() int
	Snapshot(tile int) sim.TileSnapshot
}

// lazyMem gives every tile zeroed memory on first use.
type lazyMem struct {
	p   *arch.Preset
	mem map[int][]byte
}

func newLazyMem(p *arch.Preset) *lazyMem { return &lazyMem{p: p, mem: map[int][]byte{}} }

func (l *lazyMem) get(t int) []byte {
	if l.mem[t] == nil {
		l.mem[t] = make([]byte, l.p.Memory.Size())
	}
	return l.mem[t]
}

// runRecord is one Run call.
type runRecord struct {
	Result *sim.RunResult
	Fault  *sim.Fault
	Mark   int
}

// record is everything observable after running a program.
type record struct {
	Runs  []runRecord
	Snaps map[int]sim.TileSnapshot
	mem   *lazyMem
	host  *hostMem
}

// execute loads prog on a fresh machine made by mk and runs it: one Run per
// command while the tiles return to the host.
func execute(prog *program, mk func(p *arch.Preset, mem func(int) []byte) machine) (*record, error) {
	return executeSwapping(prog, mk, nil)
}

// executeSwapping is execute; after every Run that returns to the host,
// swap (when not nil) may replace the machine, as a device does when a new
// process takes it over.
func executeSwapping(prog *program, mk func(p *arch.Preset, mem func(int) []byte) machine,
	swap func(m machine, p *arch.Preset, mem func(int) []byte) (machine, error)) (*record, error) {
	lm := newLazyMem(prog.preset)
	m := mk(prog.preset, lm.get)
	if err := m.Configure(0, sim.RegWatchdog, watchdog); err != nil {
		return nil, err
	}
	for _, id := range prog.tiles {
		if v, ok := prog.fp8[id]; ok {
			if err := m.Configure(id, sim.RegFP8, v); err != nil {
				return nil, err
			}
		}
		if err := m.Load(id, prog.images[id]); err != nil {
			return nil, err
		}
	}
	host := &hostMem{b: append([]byte(nil), prog.host...)}
	rec := &record{Snaps: map[int]sim.TileSnapshot{}, mem: lm, host: host}
	for _, cmd := range prog.commands {
		res, err := m.Run(host, cmd)
		rr := runRecord{Result: res, Mark: m.Mark()}
		if err != nil {
			var f *sim.Fault
			if !errors.As(err, &f) {
				return nil, fmt.Errorf("run: %w", err)
			}
			rr.Fault = f
		}
		rec.Runs = append(rec.Runs, rr)
		if err != nil || res == nil || !res.AtHost {
			break
		}
		if swap != nil {
			if m, err = swap(m, prog.preset, lm.get); err != nil {
				return nil, err
			}
		}
	}
	for t := 0; t < prog.preset.Tiles; t++ {
		rec.Snaps[t] = m.Snapshot(t)
	}
	return rec, nil
}

func newRef(p *arch.Preset, mem func(int) []byte) machine { return simref.New(p, mem) }

// memDiff describes the first differing words of two tile memories.
func memDiff(p *arch.Preset, want, got *lazyMem) string {
	var sb strings.Builder
	n := 0
	zero := make([]byte, p.Memory.Size())
	same := true
	for t := 0; t < p.Tiles && same; t++ {
		w, g := want.mem[t], got.mem[t]
		same = bytes.Equal(w, g) || w == nil && bytes.Equal(g, zero) || g == nil && bytes.Equal(w, zero)
	}
	if same {
		return ""
	}
	for t := 0; t < p.Tiles; t++ {
		w, g := want.mem[t], got.mem[t]
		if w == nil && g == nil {
			continue
		}
		if w == nil {
			w = zero
		}
		if g == nil {
			g = zero
		}
		for i := 0; i+4 <= len(w); i += 4 {
			a, b := binary.LittleEndian.Uint32(w[i:]), binary.LittleEndian.Uint32(g[i:])
			if a != b {
				if n < 12 {
					fmt.Fprintf(&sb, "tile %d [%#x]: want %#08x, got %#08x\n", t, p.Memory.Lo+uint32(i), a, b)
				}
				n++
			}
		}
	}
	if n > 12 {
		fmt.Fprintf(&sb, "... %d differing words in all\n", n)
	}
	return sb.String()
}

// TestGeneratorOnReference checks the generator: programs without an
// injected fault run to the end on the reference interpreter.
func TestGeneratorOnReference(t *testing.T) {
	faults := map[sim.FaultKind]int{}
	var firstBad []string
	clean, injected := 0, 0
	var phases, cycles, instructions, exchangeBytes, hostBytes int64
	for seed := int64(1); seed <= 300; seed++ {
		prog := generate(seed, modeFor(seed))
		rec, err := execute(prog, newRef)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		for _, r := range rec.Runs {
			for _, ph := range r.Result.Phases {
				phases++
				cycles += ph.Cycles
				instructions += ph.Instructions
				hostBytes += ph.HostBytes
				for _, b := range ph.ExchangeBytes {
					exchangeBytes += b
				}
			}
		}
		last := rec.Runs[len(rec.Runs)-1]
		if prog.note != "" {
			injected++
			if last.Fault != nil {
				faults[last.Fault.Kind]++
			}
			continue
		}
		clean++
		if last.Fault != nil && len(firstBad) < 10 {
			firstBad = append(firstBad, fmt.Sprintf("seed %d: %v", seed, last.Fault))
		}
	}
	t.Logf("%d clean programs, %d with an injected fault; faults seen: %v", clean, injected, faults)
	t.Logf("%d supersteps, %d cycles, %d instructions, %d exchange bytes, %d host bytes", phases, cycles, instructions, exchangeBytes, hostBytes)
	if len(firstBad) > 0 {
		t.Errorf("clean programs that fault:\n%s", strings.Join(firstBad, "\n"))
	}
}
