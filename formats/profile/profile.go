// Package profile is the profile artifact: what the simulated device
// measured while ipu-check ran a package (per-superstep and per-tile
// cycles, exchange and host traffic, sampled program counters).
//
// The file is one Cap'n Proto message in the standard stream framing,
// unpacked, with the schema profile.capnp (in this directory):
//
//	segment table: uint32 segments-1, uint32 words per segment, padding
//	Profile (root, 5 data words, 4 pointers) {
//		version      UInt32   data bits [0, 32)     must be 1
//		tiles        UInt32   data bits [32, 64)
//		clockHz      Float64  data bits [64, 128)
//		samplePeriod UInt64   data bits [128, 192)
//		totalCycles  UInt64   data bits [192, 256)
//		inferences   UInt32   data bits [256, 288)
//		arch         Text     pointer 0
//		fingerprint  Text     pointer 1
//		phases       List(Phase)  pointer 2   Phase: 5 data words, 4 pointers
//		samples      List(Sample) pointer 3   Sample: 3 data words
//	}
//
// The Go code builds and reads the message with the capnp library's
// low-level API; the offsets below are the ones the capnp compiler assigns
// to profile.capnp (`capnp compile -ocapnp profile.capnp` prints them, and a
// test checks them when the capnp tool is installed). So the standard tool
// reads a profile:
//
//	capnp decode formats/profile/profile.capnp Profile < model.capnp
//
// Writing is deterministic: one segment, objects allocated in a fixed order.
// Reading trusts nothing: the library checks every pointer against the
// segment, and a traversal limit proportional to the file size stops
// amplification (lists of empty structs claiming huge lengths) before this
// package allocates anything for them.
package profile

import (
	"errors"
	"fmt"
	"io"
	"math"

	"capnproto.org/go/capnp/v3"
)

// Version is the value of Profile.version this package writes and reads.
const Version = 1

// Kind is the kind of one superstep (the schema's PhaseKind).
type Kind uint16

const (
	KindUnknown Kind = iota // the package's phase list does not describe it
	KindCompute
	KindExchange
	KindHost // host exchange
)

func (k Kind) String() string {
	switch k {
	case KindUnknown:
		return "unknown"
	case KindCompute:
		return "compute"
	case KindExchange:
		return "exchange"
	case KindHost:
		return "host"
	}
	return fmt.Sprintf("kind(%d)", uint16(k))
}

// Profile is the profile of one ipu-check run.
type Profile struct {
	Arch         string  // architecture preset name
	Fingerprint  string  // fingerprint of the package that ran
	Tiles        int     // tiles on the chip; the length of every per-tile list
	ClockHz      float64 // tile clock
	SamplePeriod int64   // cycles between PC samples (0: none)
	TotalCycles  int64   // cycles of the profiled inferences, syncs included
	Inferences   int     // inferences the profile covers
	Phases       []Phase
	Samples      []Sample
	// Branches are the Ifs the tiles branched on, in program order, with
	// the side that ran (absent from profiles of programs without them).
	Branches []Branch
}

// Branch is the side one If took in the profiled run.
type Branch struct {
	If      string
	ThenRan bool  // true: the then side ran; false: the else side
	Cycles  int64 // the side's phases, syncs included
}

// Phase is one superstep.
type Phase struct {
	Index         int // superstep index since the device was loaded
	Kind          Kind
	Name          string
	Cycles        int64   // longest tile, without the sync
	SyncCycles    int64   // barrier cost
	TileCycles    []int64 // per tile, len Tiles
	ExchangeBytes []int64 // per tile bytes sent, len Tiles (or empty)
	HostBytes     int64
	Instructions  int64
	// TileCounters is, for a compute superstep, each tile's cycle
	// counter as its supervisor stored it in its profile buffer in tile
	// memory (read back from the device after the run), len Tiles; empty
	// for other supersteps and in profiles written before the field.
	TileCounters []int64
}

// Sample is one sampled supervisor PC.
type Sample struct {
	Tile  int
	Phase int
	Cycle int64
	PC    uint32
}

// Layout of the schema's structs, as the capnp compiler assigns it.
var (
	profileSize = capnp.ObjectSize{DataSize: 40, PointerCount: 5}
	branchSize  = capnp.ObjectSize{DataSize: 16, PointerCount: 1}
	phaseSize   = capnp.ObjectSize{DataSize: 40, PointerCount: 4}
	sampleSize  = capnp.ObjectSize{DataSize: 24, PointerCount: 0}
)

// Byte offsets of data fields and indices of pointer fields.
const (
	profVersionOff      capnp.DataOffset = 0
	profTilesOff        capnp.DataOffset = 4
	profClockHzOff      capnp.DataOffset = 8
	profSamplePeriodOff capnp.DataOffset = 16
	profTotalCyclesOff  capnp.DataOffset = 24
	profInferencesOff   capnp.DataOffset = 32
	profArchPtr         uint16           = 0
	profFingerprintPtr  uint16           = 1
	profPhasesPtr       uint16           = 2
	profSamplesPtr      uint16           = 3
	profBranchesPtr     uint16           = 4

	branchIfPtr      uint16           = 0
	branchThenRanBit capnp.BitOffset  = 0
	branchCyclesOff  capnp.DataOffset = 8

	phaseIndexOff         capnp.DataOffset = 0
	phaseKindOff          capnp.DataOffset = 4
	phaseCyclesOff        capnp.DataOffset = 8
	phaseSyncCyclesOff    capnp.DataOffset = 16
	phaseHostBytesOff     capnp.DataOffset = 24
	phaseInstructionsOff  capnp.DataOffset = 32
	phaseNamePtr          uint16           = 0
	phaseTileCyclesPtr    uint16           = 1
	phaseExchangeBytesPtr uint16           = 2
	phaseTileCountersPtr  uint16           = 3

	sampleTileOff  capnp.DataOffset = 0
	samplePhaseOff capnp.DataOffset = 4
	sampleCycleOff capnp.DataOffset = 8
	samplePCOff    capnp.DataOffset = 16
)

// MaxTiles bounds Profile.Tiles, far above any chip, so that a corrupt
// count cannot make a consumer allocate gigabytes for per-tile tables.
const MaxTiles = 1 << 20

// maxListLen bounds every list this package writes: a capnp list length
// is 29 bits.
const maxListLen = 1<<29 - 1

// Error is a profile that is malformed or does not fit the format. Field
// is the schema path at fault ("phases[3].tileCycles").
type Error struct {
	Field string
	Msg   string
}

func (e *Error) Error() string {
	if e.Field == "" {
		return "profile: " + e.Msg
	}
	return "profile: " + e.Field + ": " + e.Msg
}

func errorf(field, format string, args ...any) error {
	return &Error{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// validate checks what both Write and Read require of a profile.
func (p *Profile) validate() error {
	if p.Tiles <= 0 || p.Tiles > MaxTiles {
		return errorf("tiles", "%d is not a tile count", p.Tiles)
	}
	if p.Inferences < 0 || p.Inferences > math.MaxUint32 {
		return errorf("inferences", "%d out of range", p.Inferences)
	}
	if p.SamplePeriod < 0 {
		return errorf("samplePeriod", "%d out of range", p.SamplePeriod)
	}
	if p.TotalCycles < 0 {
		return errorf("totalCycles", "%d out of range", p.TotalCycles)
	}
	if math.IsNaN(p.ClockHz) || math.IsInf(p.ClockHz, 0) || p.ClockHz < 0 {
		return errorf("clockHz", "%v is not a clock rate", p.ClockHz)
	}
	if len(p.Phases) > maxListLen {
		return errorf("phases", "%d phases is too many", len(p.Phases))
	}
	if len(p.Samples) > maxListLen {
		return errorf("samples", "%d samples is too many", len(p.Samples))
	}
	for i := range p.Phases {
		ph := &p.Phases[i]
		at := fmt.Sprintf("phases[%d]", i)
		if ph.Index < 0 || ph.Index > math.MaxUint32 {
			return errorf(at+".index", "%d out of range", ph.Index)
		}
		if ph.Kind > KindHost {
			return errorf(at+".kind", "unknown kind %d", uint16(ph.Kind))
		}
		for _, f := range []struct {
			name string
			v    int64
		}{{"cycles", ph.Cycles}, {"syncCycles", ph.SyncCycles}, {"hostBytes", ph.HostBytes}, {"instructions", ph.Instructions}} {
			if f.v < 0 {
				return errorf(at+"."+f.name, "%d out of range", f.v)
			}
		}
		if len(ph.TileCycles) != p.Tiles {
			return errorf(at+".tileCycles", "%d entries, want %d (tiles)", len(ph.TileCycles), p.Tiles)
		}
		if len(ph.ExchangeBytes) != 0 && len(ph.ExchangeBytes) != p.Tiles {
			return errorf(at+".exchangeBytes", "%d entries, want 0 or %d (tiles)", len(ph.ExchangeBytes), p.Tiles)
		}
		if len(ph.TileCounters) != 0 && len(ph.TileCounters) != p.Tiles {
			return errorf(at+".tileCounters", "%d entries, want 0 or %d (tiles)", len(ph.TileCounters), p.Tiles)
		}
		for t, v := range ph.TileCounters {
			if v < 0 {
				return errorf(fmt.Sprintf("%s.tileCounters[%d]", at, t), "%d out of range", v)
			}
		}
		for t, v := range ph.TileCycles {
			if v < 0 {
				return errorf(fmt.Sprintf("%s.tileCycles[%d]", at, t), "%d out of range", v)
			}
		}
		for t, v := range ph.ExchangeBytes {
			if v < 0 {
				return errorf(fmt.Sprintf("%s.exchangeBytes[%d]", at, t), "%d out of range", v)
			}
		}
	}
	if len(p.Branches) > maxListLen {
		return errorf("branches", "%d branches is too many", len(p.Branches))
	}
	for i, b := range p.Branches {
		if b.Cycles < 0 {
			return errorf(fmt.Sprintf("branches[%d].cycles", i), "%d out of range", b.Cycles)
		}
	}
	for i, s := range p.Samples {
		at := fmt.Sprintf("samples[%d]", i)
		if s.Tile < 0 || s.Tile >= p.Tiles {
			return errorf(at+".tile", "tile %d out of range (tiles %d)", s.Tile, p.Tiles)
		}
		if s.Phase < 0 || s.Phase > math.MaxUint32 {
			return errorf(at+".phase", "%d out of range", s.Phase)
		}
		if s.Cycle < 0 {
			return errorf(at+".cycle", "%d out of range", s.Cycle)
		}
	}
	return nil
}

// Marshal encodes p as a Cap'n Proto message in the standard framing.
func Marshal(p *Profile) ([]byte, error) {
	if err := p.validate(); err != nil {
		return nil, err
	}
	msg, seg, err := capnp.NewMessage(capnp.SingleSegment(nil))
	if err != nil {
		return nil, fmt.Errorf("profile: %w", err)
	}
	root, err := capnp.NewRootStruct(seg, profileSize)
	if err != nil {
		return nil, fmt.Errorf("profile: %w", err)
	}
	root.SetUint32(profVersionOff, Version)
	root.SetUint32(profTilesOff, uint32(p.Tiles))
	root.SetUint64(profClockHzOff, math.Float64bits(p.ClockHz))
	root.SetUint64(profSamplePeriodOff, uint64(p.SamplePeriod))
	root.SetUint64(profTotalCyclesOff, uint64(p.TotalCycles))
	root.SetUint32(profInferencesOff, uint32(p.Inferences))
	if err := root.SetText(profArchPtr, p.Arch); err != nil {
		return nil, fmt.Errorf("profile: arch: %w", err)
	}
	if err := root.SetText(profFingerprintPtr, p.Fingerprint); err != nil {
		return nil, fmt.Errorf("profile: fingerprint: %w", err)
	}

	phases, err := capnp.NewCompositeList(seg, phaseSize, int32(len(p.Phases)))
	if err != nil {
		return nil, fmt.Errorf("profile: phases: %w", err)
	}
	if err := root.SetPtr(profPhasesPtr, phases.ToPtr()); err != nil {
		return nil, fmt.Errorf("profile: phases: %w", err)
	}
	for i := range p.Phases {
		if err := encodePhase(phases.Struct(i), &p.Phases[i]); err != nil {
			return nil, fmt.Errorf("profile: phases[%d]: %w", i, err)
		}
	}

	samples, err := capnp.NewCompositeList(seg, sampleSize, int32(len(p.Samples)))
	if err != nil {
		return nil, fmt.Errorf("profile: samples: %w", err)
	}
	if err := root.SetPtr(profSamplesPtr, samples.ToPtr()); err != nil {
		return nil, fmt.Errorf("profile: samples: %w", err)
	}
	for i, s := range p.Samples {
		st := samples.Struct(i)
		st.SetUint32(sampleTileOff, uint32(s.Tile))
		st.SetUint32(samplePhaseOff, uint32(s.Phase))
		st.SetUint64(sampleCycleOff, uint64(s.Cycle))
		st.SetUint32(samplePCOff, s.PC)
	}

	if len(p.Branches) > 0 {
		brs, err := capnp.NewCompositeList(seg, branchSize, int32(len(p.Branches)))
		if err != nil {
			return nil, fmt.Errorf("profile: branches: %w", err)
		}
		if err := root.SetPtr(profBranchesPtr, brs.ToPtr()); err != nil {
			return nil, fmt.Errorf("profile: branches: %w", err)
		}
		for i, b := range p.Branches {
			st := brs.Struct(i)
			st.SetBit(branchThenRanBit, b.ThenRan)
			st.SetUint64(branchCyclesOff, uint64(b.Cycles))
			if err := st.SetText(branchIfPtr, b.If); err != nil {
				return nil, fmt.Errorf("profile: branches[%d]: ifName: %w", i, err)
			}
		}
	}

	data, err := msg.Marshal()
	if err != nil {
		return nil, fmt.Errorf("profile: %w", err)
	}
	return data, nil
}

func encodePhase(st capnp.Struct, ph *Phase) error {
	st.SetUint32(phaseIndexOff, uint32(ph.Index))
	st.SetUint16(phaseKindOff, uint16(ph.Kind))
	st.SetUint64(phaseCyclesOff, uint64(ph.Cycles))
	st.SetUint64(phaseSyncCyclesOff, uint64(ph.SyncCycles))
	st.SetUint64(phaseHostBytesOff, uint64(ph.HostBytes))
	st.SetUint64(phaseInstructionsOff, uint64(ph.Instructions))
	if err := st.SetText(phaseNamePtr, ph.Name); err != nil {
		return fmt.Errorf("name: %w", err)
	}
	if err := setUint64s(st, phaseTileCyclesPtr, ph.TileCycles); err != nil {
		return fmt.Errorf("tileCycles: %w", err)
	}
	if err := setUint64s(st, phaseExchangeBytesPtr, ph.ExchangeBytes); err != nil {
		return fmt.Errorf("exchangeBytes: %w", err)
	}
	if err := setUint64s(st, phaseTileCountersPtr, ph.TileCounters); err != nil {
		return fmt.Errorf("tileCounters: %w", err)
	}
	return nil
}

// setUint64s stores v as a List(UInt64) in pointer i (null when empty).
func setUint64s(st capnp.Struct, i uint16, v []int64) error {
	if len(v) == 0 {
		return nil
	}
	l, err := capnp.NewUInt64List(st.Segment(), int32(len(v)))
	if err != nil {
		return err
	}
	for j, x := range v {
		l.Set(j, uint64(x))
	}
	return st.SetPtr(i, l.ToPtr())
}

// Write writes p to w. The same profile always gives the same bytes.
func Write(w io.Writer, p *Profile) error {
	data, err := Marshal(p)
	if err != nil {
		return err
	}
	_, err = w.Write(data)
	return err
}

// Read decodes a profile written by Write (or by any Cap'n Proto writer
// using profile.capnp) and validates it.
func Read(data []byte) (*Profile, error) {
	root, err := readRoot(data)
	if err != nil {
		return nil, err
	}
	p := &Profile{
		Tiles:        int(root.Uint32(profTilesOff)),
		ClockHz:      math.Float64frombits(root.Uint64(profClockHzOff)),
		Inferences:   int(root.Uint32(profInferencesOff)),
		SamplePeriod: int64(root.Uint64(profSamplePeriodOff)),
		TotalCycles:  int64(root.Uint64(profTotalCyclesOff)),
	}
	if p.Arch, err = readText(root, profArchPtr); err != nil {
		return nil, errorf("arch", "%s", oneLine(err))
	}
	if p.Fingerprint, err = readText(root, profFingerprintPtr); err != nil {
		return nil, errorf("fingerprint", "%s", oneLine(err))
	}
	if p.Phases, err = readPhases(root); err != nil {
		return nil, err
	}
	if p.Samples, err = readSamples(root); err != nil {
		return nil, err
	}
	if p.Branches, err = readBranches(root); err != nil {
		return nil, err
	}
	if err := p.validate(); err != nil {
		return nil, err
	}
	return p, nil
}

// readRoot decodes the message, bounds its traversal and returns its
// root struct, of this reader's version.
func readRoot(data []byte) (capnp.Struct, error) {
	if len(data) == 0 {
		return capnp.Struct{}, errorf("", "empty file")
	}
	msg, err := capnp.Unmarshal(data)
	if err != nil {
		return capnp.Struct{}, errorf("", "%s", oneLine(err))
	}
	// A correct reader visits each object once, so it never traverses
	// more than the file holds; the margin covers the rounding of empty
	// objects up to one word.
	msg.ResetReadLimit(2*uint64(len(data)) + 1024)

	rootPtr, err := msg.Root()
	if err != nil {
		return capnp.Struct{}, errorf("", "root: %s", oneLine(err))
	}
	root := rootPtr.Struct()
	if !root.IsValid() {
		return capnp.Struct{}, errorf("", "root is not a struct")
	}
	if v := root.Uint32(profVersionOff); v != Version {
		return capnp.Struct{}, errorf("version", "unsupported version %d (this reader knows version %d)", v, Version)
	}
	return root, nil
}

// readPhases reads the phases (nil when there are none).
func readPhases(root capnp.Struct) ([]Phase, error) {
	phases, err := readList(root, profPhasesPtr)
	if err != nil {
		return nil, errorf("phases", "%s", oneLine(err))
	}
	var out []Phase
	if phases.Len() > 0 {
		out = make([]Phase, phases.Len())
	}
	for i := range out {
		at := fmt.Sprintf("phases[%d]", i)
		st := phases.Struct(i)
		ph := &out[i]
		ph.Index = int(st.Uint32(phaseIndexOff))
		ph.Kind = Kind(st.Uint16(phaseKindOff))
		ph.Cycles = int64(st.Uint64(phaseCyclesOff))
		ph.SyncCycles = int64(st.Uint64(phaseSyncCyclesOff))
		ph.HostBytes = int64(st.Uint64(phaseHostBytesOff))
		ph.Instructions = int64(st.Uint64(phaseInstructionsOff))
		if ph.Name, err = readText(st, phaseNamePtr); err != nil {
			return nil, errorf(at+".name", "%s", oneLine(err))
		}
		if ph.TileCycles, err = readUint64s(st, phaseTileCyclesPtr); err != nil {
			return nil, errorf(at+".tileCycles", "%s", oneLine(err))
		}
		if ph.ExchangeBytes, err = readUint64s(st, phaseExchangeBytesPtr); err != nil {
			return nil, errorf(at+".exchangeBytes", "%s", oneLine(err))
		}
		// Absent (null, or beyond an older, smaller Phase) in profiles
		// written before the field.
		if ph.TileCounters, err = readUint64s(st, phaseTileCountersPtr); err != nil {
			return nil, errorf(at+".tileCounters", "%s", oneLine(err))
		}
	}
	return out, nil
}

// readSamples reads the PC samples (nil when there are none).
func readSamples(root capnp.Struct) ([]Sample, error) {
	samples, err := readList(root, profSamplesPtr)
	if err != nil {
		return nil, errorf("samples", "%s", oneLine(err))
	}
	var out []Sample
	if samples.Len() > 0 {
		out = make([]Sample, samples.Len())
	}
	for i := range out {
		st := samples.Struct(i)
		out[i] = Sample{
			Tile:  int(st.Uint32(sampleTileOff)),
			Phase: int(st.Uint32(samplePhaseOff)),
			Cycle: int64(st.Uint64(sampleCycleOff)),
			PC:    st.Uint32(samplePCOff),
		}
	}
	return out, nil
}

// readBranches reads the branches taken (nil when there are none).
func readBranches(root capnp.Struct) ([]Branch, error) {
	brs, err := readList(root, profBranchesPtr)
	if err != nil {
		return nil, errorf("branches", "%s", oneLine(err))
	}
	var out []Branch
	for i := 0; i < brs.Len(); i++ {
		st := brs.Struct(i)
		b := Branch{ThenRan: st.Bit(branchThenRanBit), Cycles: int64(st.Uint64(branchCyclesOff))}
		if b.Cycles < 0 {
			return nil, errorf(fmt.Sprintf("branches[%d].cycles", i), "%d out of range", uint64(b.Cycles))
		}
		if b.If, err = readText(st, branchIfPtr); err != nil {
			return nil, errorf(fmt.Sprintf("branches[%d].ifName", i), "%s", oneLine(err))
		}
		out = append(out, b)
	}
	return out, nil
}

// readText returns the text in pointer i ("" when null).
func readText(st capnp.Struct, i uint16) (string, error) {
	ptr, err := st.Ptr(i)
	if err != nil {
		return "", err
	}
	if !ptr.IsValid() {
		return "", nil
	}
	b := ptr.TextBytes()
	if b == nil {
		return "", errors.New("not a NUL-terminated text")
	}
	return string(b), nil
}

// readList returns the list in pointer i (an empty list when null).
func readList(st capnp.Struct, i uint16) (capnp.List, error) {
	ptr, err := st.Ptr(i)
	if err != nil {
		return capnp.List{}, err
	}
	if !ptr.IsValid() {
		return capnp.List{}, nil
	}
	l := ptr.List()
	if !l.IsValid() {
		return capnp.List{}, errors.New("not a list")
	}
	return l, nil
}

// readUint64s returns the List(UInt64) in pointer i as int64s.
func readUint64s(st capnp.Struct, i uint16) ([]int64, error) {
	l, err := readList(st, i)
	if err != nil || l.Len() == 0 {
		return nil, err
	}
	ul := capnp.UInt64List(l)
	out := make([]int64, l.Len())
	for j := range out {
		v := ul.At(j)
		if v > math.MaxInt64 {
			return nil, fmt.Errorf("entry %d: %d out of range", j, v)
		}
		out[j] = int64(v)
	}
	return out, nil
}

// oneLine keeps library errors to one line.
func oneLine(err error) string {
	s := err.Error()
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			return s[:i]
		}
	}
	return s
}
