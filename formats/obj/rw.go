package obj

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"runtime"
	"sort"
	"sync"

	"ipu.local/formats/obj/wire"
)

// Version is the object format version this package reads and writes.
const Version = 1

// Magic starts every object file; its last byte is Version.
const Magic = "\x89IPUOBJ\x01"

var format = wire.Format{
	Prefix:   Magic[:7],
	Version:  Version,
	Name:     "object format",
	Sections: []string{"meta", "tiles", "host", "config"},
}

// FormatError says where an object file is wrong.
type FormatError struct {
	Section string // "header", "table", "meta", "tiles", "host" or "config"
	Off     int64  // byte offset in the file
	Msg     string
}

func (e *FormatError) Error() string {
	return "obj: " + (&wire.Error{Section: e.Section, Off: e.Off, Msg: e.Msg}).Error()
}

func formatError(e *wire.Error) error {
	return &FormatError{Section: e.Section, Off: e.Off, Msg: e.Msg}
}

// Fingerprint is the hex SHA-256 of a file's bytes.
func Fingerprint(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// Write validates o and writes it. The same object always gives the same
// bytes.
func Write(w io.Writer, o *Object) error {
	secs, err := encode(o)
	if err != nil {
		return err
	}
	return format.Write(w, secs)
}

// Marshal validates o and returns its file bytes, as Write writes them.
func Marshal(o *Object) ([]byte, error) {
	secs, err := encode(o)
	if err != nil {
		return nil, err
	}
	return format.Bytes(secs), nil
}

// encode validates o and encodes its sections. The tiles section holds
// each tile's encoding by reference (wire.Encoder.Refs), and the host
// section the model: the writer copies each only into the file.
func encode(o *Object) ([]*wire.Encoder, error) {
	if err := Validate(o); err != nil {
		return nil, fmt.Errorf("obj: %w", err)
	}
	var meta, tiles, host, config wire.Encoder
	meta.String(o.Arch)
	meta.String(o.Compiler)
	meta.String(o.Source)

	tiles.U32(uint32(len(o.Tiles)))
	for _, part := range encodeTiles(o.Tiles) {
		tiles.Refs(part)
	}
	EncodeHost(&host, &o.Host)
	EncodeConfig(&config, o.Config)
	return []*wire.Encoder{&meta, &tiles, &host, &config}, nil
}

// encodeTiles encodes each tile (its segments compressed, or references
// to an earlier tile's same segment) on a worker per core; the parts are
// in tile order, so the bytes do not depend on the workers. Each part is
// its encoder's pieces (wire.Encoder.Chunks), which the tiles section
// takes by reference: a tile's data is copied only into the file.
func encodeTiles(ts []Tile) [][][]byte {
	groups := make([][]Segment, len(ts))
	ids := make([]uint32, len(ts))
	for i := range ts {
		groups[i], ids[i] = ts[i].Segments, uint32(ts[i].Index)
	}
	refs := FindRefs(groups, ids)
	parts := make([][][]byte, len(ts))
	workers := min(runtime.GOMAXPROCS(0), len(ts))
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(ts); i += workers {
				t := &ts[i]
				var e wire.Encoder
				e.U32(uint32(t.Index))
				e.U32(t.Entry)
				EncodeSegments(&e, t.Segments, true, refs[i])
				EncodeSymbols(&e, t.Symbols)
				EncodeTransfers(&e, t.Exchange)
				parts[i] = e.Chunks()
			}
		}()
	}
	wg.Wait()
	return parts
}

// Read decodes and validates an object file. Its errors are *FormatError.
// Raw segments and the host model share data's bytes (DecodeSegments),
// and a reference shares the data of the segment it names: the caller
// must change neither data nor segment data while the object is in use.
func Read(data []byte) (*Object, error) {
	secs, werr := format.Parse(data)
	if werr != nil {
		return nil, formatError(werr)
	}
	o := &Object{}

	d := secs[0].Decoder()
	o.Arch = d.String("arch")
	o.Compiler = d.String("compiler")
	o.Source = d.String("source")
	d.Done()
	if d.Err() != nil {
		return nil, formatError(d.Err())
	}

	if err := readTiles(secs[1].Decoder(), o); err != nil {
		return nil, err
	}

	d = secs[2].Decoder()
	o.Host = DecodeHost(d)
	d.Done()
	if d.Err() != nil {
		return nil, formatError(d.Err())
	}

	d = secs[3].Decoder()
	o.Config = DecodeConfig(d)
	d.Done()
	if d.Err() != nil {
		return nil, formatError(d.Err())
	}
	return o, nil
}

// tileSegments returns the segments of the tile of ts with an index
// (ts in increasing index order).
func tileSegments(ts []Tile) func(uint32) ([]Segment, bool) {
	return func(idx uint32) ([]Segment, bool) {
		j := sort.Search(len(ts), func(j int) bool { return ts[j].Index >= int(idx) })
		if j == len(ts) || ts[j].Index != int(idx) {
			return nil, false
		}
		return ts[j].Segments, true
	}
}

func readTiles(d *wire.Decoder, o *Object) error {
	n := d.Count("tile", minTile)
	if n > 0 {
		o.Tiles = make([]Tile, n)
	}
	prev := -1
	for i := range o.Tiles {
		t := &o.Tiles[i]
		start := d.Off()
		idx := d.U32("tile index")
		if d.Err() == nil && idx >= MaxTiles {
			d.Failf(start, "tile %d: index out of range [0, %d)", idx, MaxTiles)
		}
		if d.Err() == nil && int(idx) <= prev {
			d.Failf(start, "tile %d: tiles not in increasing index order (after tile %d)", idx, prev)
		}
		t.Index = int(idx)
		prev = t.Index
		t.Entry = d.U32("tile entry")
		var pend []PendingRef
		t.Segments, pend = DecodeSegments(d)
		t.Symbols = DecodeSymbols(d)
		t.Exchange = DecodeTransfers(d)
		if d.Err() == nil && len(pend) > 0 {
			if off, err := ResolveRefs(t.Segments, pend, "tile", tileSegments(o.Tiles[:i])); err != nil {
				d.Failf(off, "%v", err)
			}
		}
		if e := d.Err(); e != nil {
			if e.Off > start+4 {
				return &FormatError{Section: e.Section, Off: e.Off, Msg: fmt.Sprintf("tile %d: %s", t.Index, e.Msg)}
			}
			return formatError(e)
		}
		if err := ValidateProgram(t.Segments, t.Symbols, t.Exchange); err != nil {
			return &FormatError{Section: "tiles", Off: start, Msg: fmt.Sprintf("tile %d: %v", t.Index, err)}
		}
	}
	d.Done()
	if d.Err() != nil {
		return formatError(d.Err())
	}
	return nil
}
