package profile

import (
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"capnproto.org/go/capnp/v3"
	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite golden files")

// sampleProfile is a small profile with every field set.
func sampleProfile() *Profile {
	return &Profile{
		Arch:         "ipu21-tiny",
		Fingerprint:  "5f1b9c0e",
		Tiles:        4,
		ClockHz:      1.49e9,
		SamplePeriod: 100,
		TotalCycles:  1234,
		Inferences:   1,
		Phases: []Phase{
			{Index: 7, Kind: KindHost, Name: "load inputs", Cycles: 300, SyncCycles: 90,
				TileCycles: []int64{300, 120, 0, 0}, ExchangeBytes: []int64{0, 0, 0, 0}, HostBytes: 64, Instructions: 40},
			{Index: 8, Kind: KindCompute, Name: "add", Cycles: 500, SyncCycles: 90,
				TileCycles: []int64{500, 480, 0, 7}, Instructions: 200},
			{Index: 9, Kind: KindExchange, Cycles: 164, SyncCycles: 90,
				TileCycles: []int64{164, 164, 0, 0}, ExchangeBytes: []int64{32, 16, 0, 0}, Instructions: 12},
		},
		Samples: []Sample{
			{Tile: 0, Phase: 7, Cycle: 0, PC: 0x4c010},
			{Tile: 1, Phase: 8, Cycle: 100, PC: 0x4c020},
			{Tile: 0, Phase: 8, Cycle: 200, PC: 0x4c020},
			{Tile: 3, Phase: 9, Cycle: 100, PC: 0x4c008},
		},
	}
}

func TestRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    *Profile
	}{
		{"full", sampleProfile()},
		{"minimal", &Profile{Tiles: 1}},
		{"no samples", func() *Profile { p := sampleProfile(); p.Samples = nil; p.SamplePeriod = 0; return p }()},
		{"tile counters", func() *Profile {
			p := sampleProfile()
			p.Phases[1].TileCounters = []int64{487, 467, 0, 0}
			return p
		}()},
		{"branches", func() *Profile {
			p := sampleProfile()
			p.Branches = []Branch{{If: "gate", ThenRan: true, Cycles: 754}, {If: "skip", Cycles: 90}}
			return p
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := Write(&buf, tc.p); err != nil {
				t.Fatal(err)
			}
			got, err := Read(buf.Bytes())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.p, got); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
			again, err := Marshal(got)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(buf.Bytes(), again) {
				t.Errorf("rewriting a read profile changed its bytes")
			}
		})
	}
}

// TestReadOlderPhase reads a profile written before Phase.tileCounters,
// whose Phase structs have three pointers: the counters are absent and
// everything else reads as before.
func TestReadOlderPhase(t *testing.T) {
	old := capnp.ObjectSize{DataSize: 40, PointerCount: 3}
	msg, seg, err := capnp.NewMessage(capnp.SingleSegment(nil))
	if err != nil {
		t.Fatal(err)
	}
	root, err := capnp.NewRootStruct(seg, profileSize)
	if err != nil {
		t.Fatal(err)
	}
	root.SetUint32(profVersionOff, Version)
	root.SetUint32(profTilesOff, 2)
	phases, err := capnp.NewCompositeList(seg, old, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := root.SetPtr(profPhasesPtr, phases.ToPtr()); err != nil {
		t.Fatal(err)
	}
	st := phases.Struct(0)
	st.SetUint16(phaseKindOff, uint16(KindCompute))
	st.SetUint64(phaseCyclesOff, 55)
	if err := setUint64s(st, phaseTileCyclesPtr, []int64{55, 40}); err != nil {
		t.Fatal(err)
	}
	data, err := msg.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	p, err := Read(data)
	if err != nil {
		t.Fatal(err)
	}
	want := []Phase{{Kind: KindCompute, Cycles: 55, TileCycles: []int64{55, 40}}}
	if diff := cmp.Diff(want, p.Phases); diff != "" {
		t.Errorf("older profile read (-want +got):\n%s", diff)
	}
}

func TestDeterministic(t *testing.T) {
	a, err := Marshal(sampleProfile())
	if err != nil {
		t.Fatal(err)
	}
	b, err := Marshal(sampleProfile())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatal("two writes of one profile differ")
	}
	// Standard framing, one segment: segment count - 1 = 0, then its size.
	if n := binary.LittleEndian.Uint32(a); n != 0 {
		t.Errorf("segments-1 = %d, want 0", n)
	}
	if words := binary.LittleEndian.Uint32(a[4:]); int(words)*8 != len(a)-8 {
		t.Errorf("segment words %d, file has %d bytes after the header", words, len(a)-8)
	}
}

func TestWriteRejects(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*Profile)
		want   string
	}{
		{"no tiles", func(p *Profile) { p.Tiles = 0 }, "profile: tiles: 0 is not a tile count"},
		{"short tile list", func(p *Profile) { p.Phases[1].TileCycles = p.Phases[1].TileCycles[:3] },
			"profile: phases[1].tileCycles: 3 entries, want 4 (tiles)"},
		{"bad exchange list", func(p *Profile) { p.Phases[2].ExchangeBytes = []int64{1} },
			"profile: phases[2].exchangeBytes: 1 entries, want 0 or 4 (tiles)"},
		{"negative cycles", func(p *Profile) { p.Phases[0].Cycles = -1 }, "profile: phases[0].cycles: -1 out of range"},
		{"sample tile", func(p *Profile) { p.Samples[2].Tile = 4 }, "profile: samples[2].tile: tile 4 out of range (tiles 4)"},
		{"kind", func(p *Profile) { p.Phases[0].Kind = 9 }, "profile: phases[0].kind: unknown kind 9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := sampleProfile()
			tc.mutate(p)
			_, err := Marshal(p)
			if err == nil {
				t.Fatal("no error")
			}
			if diff := cmp.Diff(tc.want, err.Error()); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReadRejects(t *testing.T) {
	good, err := Marshal(sampleProfile())
	if err != nil {
		t.Fatal(err)
	}
	wrongVersion := bytes.Clone(good)
	// The root struct follows the 8-byte header and the root pointer.
	binary.LittleEndian.PutUint32(wrongVersion[16:], 2)
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "profile: empty file"},
		{"short header", good[:4], "profile: unmarshal: short header section"},
		{"truncated", good[:len(good)-8], "profile: unmarshal: short data section"},
		{"version", wrongVersion, "profile: version: unsupported version 2 (this reader knows version 1)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Read(tc.data)
			if err == nil {
				t.Fatal("no error")
			}
			if diff := cmp.Diff(tc.want, err.Error()); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestReadAmplification: a list of a billion empty structs in a tiny file
// must hit the traversal limit, not an allocation.
func TestReadAmplification(t *testing.T) {
	// Words: 0 root pointer, 1-5 root data, 6-9 root pointers.
	msg := []byte{
		0, 0, 0, 0, 10, 0, 0, 0, // one segment of 10 words
		0, 0, 0, 0, 5, 0, 4, 0, // root: struct right after, 5 data words, 4 pointers
	}
	root := make([]byte, 5*8)
	binary.LittleEndian.PutUint32(root, Version)
	binary.LittleEndian.PutUint32(root[4:], 1) // tiles
	msg = append(msg, root...)
	ptrs := make([]byte, 4*8)
	// Pointer 2 (phases): composite list whose tag is the next word
	// (offset 0), holding 0 words.
	binary.LittleEndian.PutUint64(ptrs[16:], 1|7<<32)
	// The tag: 2^29-1 elements of 0 data words and 0 pointers.
	binary.LittleEndian.PutUint64(ptrs[24:], uint64(1<<29-1)<<2)
	msg = append(msg, ptrs...)
	if len(msg) != 8+10*8 {
		t.Fatalf("test message has %d bytes", len(msg))
	}
	_, err := Read(msg)
	if err == nil {
		t.Fatal("no error")
	}
	if !strings.Contains(err.Error(), "traversal limit") {
		t.Errorf("error %q does not mention the traversal limit", err)
	}
}

func TestDumpGolden(t *testing.T) {
	var buf bytes.Buffer
	if err := Dump(&buf, sampleProfile()); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "sample.dump")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -update)", err)
	}
	if diff := cmp.Diff(string(want), buf.String()); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}

// capnpTool returns the path of the capnp command or skips the test.
func capnpTool(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("capnp")
	if err != nil {
		t.Skip("capnp not on PATH (install Debian's capnproto package)")
	}
	return path
}

// TestSchemaLayout checks the Go offsets against the ones the capnp
// compiler assigns to profile.capnp.
func TestSchemaLayout(t *testing.T) {
	tool := capnpTool(t)
	out, err := exec.Command(tool, "compile", "-ocapnp", "profile.capnp").CombinedOutput()
	if err != nil {
		t.Fatalf("capnp compile: %v\n%s", err, out)
	}
	bits := func(off capnp.DataOffset, width int) string {
		return fmt.Sprintf("bits[%d, %d)", int(off)*8, int(off)*8+width)
	}
	ptr := func(i uint16) string { return fmt.Sprintf("ptr[%d]", i) }
	want := map[string]string{
		"Profile":              fmt.Sprintf("%d bytes, %d ptrs", profileSize.DataSize, profileSize.PointerCount),
		"Profile.version":      bits(profVersionOff, 32),
		"Profile.arch":         ptr(profArchPtr),
		"Profile.fingerprint":  ptr(profFingerprintPtr),
		"Profile.tiles":        bits(profTilesOff, 32),
		"Profile.clockHz":      bits(profClockHzOff, 64),
		"Profile.samplePeriod": bits(profSamplePeriodOff, 64),
		"Profile.totalCycles":  bits(profTotalCyclesOff, 64),
		"Profile.inferences":   bits(profInferencesOff, 32),
		"Profile.phases":       ptr(profPhasesPtr),
		"Profile.samples":      ptr(profSamplesPtr),
		"Profile.branches":     ptr(profBranchesPtr),
		"Branch":               fmt.Sprintf("%d bytes, %d ptrs", branchSize.DataSize, branchSize.PointerCount),
		"Branch.ifName":        ptr(branchIfPtr),
		"Branch.thenRan":       fmt.Sprintf("bits[%d, %d)", branchThenRanBit, branchThenRanBit+1),
		"Branch.cycles":        bits(branchCyclesOff, 64),
		"Phase":                fmt.Sprintf("%d bytes, %d ptrs", phaseSize.DataSize, phaseSize.PointerCount),
		"Phase.index":          bits(phaseIndexOff, 32),
		"Phase.kind":           bits(phaseKindOff, 16),
		"Phase.name":           ptr(phaseNamePtr),
		"Phase.cycles":         bits(phaseCyclesOff, 64),
		"Phase.syncCycles":     bits(phaseSyncCyclesOff, 64),
		"Phase.tileCycles":     ptr(phaseTileCyclesPtr),
		"Phase.exchangeBytes":  ptr(phaseExchangeBytesPtr),
		"Phase.hostBytes":      bits(phaseHostBytesOff, 64),
		"Phase.instructions":   bits(phaseInstructionsOff, 64),
		"Phase.tileCounters":   ptr(phaseTileCountersPtr),
		"Sample":               fmt.Sprintf("%d bytes, %d ptrs", sampleSize.DataSize, sampleSize.PointerCount),
		"Sample.tile":          bits(sampleTileOff, 32),
		"Sample.phase":         bits(samplePhaseOff, 32),
		"Sample.cycle":         bits(sampleCycleOff, 64),
		"Sample.pc":            bits(samplePCOff, 32),
	}
	structRe := regexp.MustCompile(`^struct (\w+) @0x[0-9a-f]+ \{  # (.*)$`)
	fieldRe := regexp.MustCompile(`^  (\w+) @\d+ :[^;]+;  # (.*)$`)
	got := map[string]string{}
	current := ""
	for _, line := range strings.Split(string(out), "\n") {
		if m := structRe.FindStringSubmatch(line); m != nil {
			current = m[1]
			got[current] = m[2]
			continue
		}
		if strings.HasPrefix(line, "}") || strings.HasPrefix(line, "enum") {
			current = ""
			continue
		}
		if m := fieldRe.FindStringSubmatch(line); m != nil && current != "" {
			got[current+"."+m[1]] = m[2]
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("layout mismatch (-want +got):\n%s", diff)
	}
}

// TestCapnpDecode reads a written profile with the standard capnp tool.
func TestCapnpDecode(t *testing.T) {
	tool := capnpTool(t)
	data, err := Marshal(sampleProfile())
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(tool, "decode", "profile.capnp", "Profile")
	cmd.Stdin = bytes.NewReader(data)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("capnp decode: %v\n%s", err, out)
	}
	// One line, no space inside parentheses: "(a = 1, b = 2)".
	text := strings.Join(strings.Fields(string(out)), " ")
	text = strings.ReplaceAll(strings.ReplaceAll(text, "( ", "("), " )", ")")
	for _, want := range []string{
		`version = 1`,
		`arch = "ipu21-tiny"`,
		`fingerprint = "5f1b9c0e"`,
		`tiles = 4`,
		`clockHz = 1490000000`,
		`samplePeriod = 100`,
		`totalCycles = 1234`,
		`inferences = 1`,
		`index = 7, kind = host, name = "load inputs", cycles = 300, syncCycles = 90, tileCycles = [300, 120, 0, 0], exchangeBytes = [0, 0, 0, 0], hostBytes = 64, instructions = 40`,
		`index = 8, kind = compute, name = "add", cycles = 500, syncCycles = 90, tileCycles = [500, 480, 0, 7], hostBytes = 0, instructions = 200`,
		`index = 9, kind = exchange, cycles = 164, syncCycles = 90, tileCycles = [164, 164, 0, 0], exchangeBytes = [32, 16, 0, 0], hostBytes = 0, instructions = 12`,
		`(tile = 1, phase = 8, cycle = 100, pc = 311328)`,
		`(tile = 3, phase = 9, cycle = 100, pc = 311304)`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("capnp decode output lacks %q:\n%s", want, text)
		}
	}
}

// TestCapnpEncode reads a message the standard capnp tool wrote from text.
func TestCapnpEncode(t *testing.T) {
	tool := capnpTool(t)
	src := `(version = 1, arch = "ipu2", tiles = 2, clockHz = 1.33e9, inferences = 3,
	  phases = [(index = 1, kind = compute, cycles = 10, tileCycles = [10, 4], instructions = 5)],
	  samples = [(tile = 1, phase = 1, cycle = 7, pc = 4096)])`
	cmd := exec.Command(tool, "encode", "profile.capnp", "Profile")
	cmd.Stdin = strings.NewReader(src)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("capnp encode: %v", err)
	}
	got, err := Read(out)
	if err != nil {
		t.Fatal(err)
	}
	want := &Profile{
		Arch: "ipu2", Tiles: 2, ClockHz: 1.33e9, Inferences: 3,
		Phases:  []Phase{{Index: 1, Kind: KindCompute, Cycles: 10, TileCycles: []int64{10, 4}, Instructions: 5}},
		Samples: []Sample{{Tile: 1, Phase: 1, Cycle: 7, PC: 4096}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}

func FuzzRead(f *testing.F) {
	good, err := Marshal(sampleProfile())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(good[:len(good)/2])
	minimal, _ := Marshal(&Profile{Tiles: 1})
	f.Add(minimal)
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Read(data)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error %q", err)
			}
			return
		}
		// What reads must write and dump.
		if _, err := Marshal(p); err != nil {
			t.Fatalf("read profile does not write: %v", err)
		}
		if err := Dump(&bytes.Buffer{}, p); err != nil {
			t.Fatal(err)
		}
	})
}
