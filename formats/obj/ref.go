package obj

// Segment references: a code or data segment whose bytes an earlier tile
// of an object (or an earlier image of a package) already holds is
// stored as a reference to that segment instead of a second copy. A
// weight copied to many tiles is then stored once.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"runtime"
	"sync"
)

// RefMin is the smallest code or data segment FindRefs stores as a
// reference (a reference takes 8 bytes of data).
const RefMin = CompressMin

// Ref names a segment: its group (a tile's Index in an object, an
// image's number in a package) and its number in that group's segments.
type Ref struct{ Group, Seg uint32 }

// PendingRef is a segment DecodeSegments read as a reference: its Data
// is nil until ResolveRefs fills it.
type PendingRef struct {
	Seg int   // the segment's number in its group
	Ref Ref   // the segment it refers to
	Off int64 // where the reference is in the decoder's input
}

// FindRefs returns, for each group of segments (a tile's or an image's),
// the references of its code and data segments of at least RefMin bytes
// whose kind and bytes are those of a segment of an earlier group: to
// the first such segment, by group then segment order, which is stored
// itself. ids are the groups' names (increasing). A hash only proposes
// candidates and their bytes are compared, so the result does not depend
// on the hash, the host or the workers. Groups without references get a
// nil map.
func FindRefs(groups [][]Segment, ids []uint32) []map[int]Ref {
	sums := hashSegments(groups)
	type loc struct{ g, s int }
	first := map[uint64][]loc{}
	refs := make([]map[int]Ref, len(groups))
	var fresh []loc
	for g, segs := range groups {
		fresh = fresh[:0]
		for s := range segs {
			seg := &segs[s]
			if !refable(seg) {
				continue
			}
			found := false
			for _, c := range first[sums[g][s]] {
				if o := &groups[c.g][c.s]; o.Kind == seg.Kind && bytes.Equal(o.Data, seg.Data) {
					if refs[g] == nil {
						refs[g] = map[int]Ref{}
					}
					refs[g][s] = Ref{Group: ids[c.g], Seg: uint32(c.s)}
					found = true
					break
				}
			}
			if !found {
				fresh = append(fresh, loc{g, s})
			}
		}
		// A group's own segments become candidates after it: references
		// name earlier groups only.
		for _, l := range fresh {
			h := sums[l.g][l.s]
			first[h] = append(first[h], l)
		}
	}
	return refs
}

// refable reports whether FindRefs considers a segment.
func refable(s *Segment) bool {
	return s.Kind != BSS && len(s.Data) >= RefMin
}

// hashSegments hashes the segments FindRefs considers, on a worker per
// core.
func hashSegments(groups [][]Segment) [][]uint64 {
	seed := maphash.MakeSeed()
	sums := make([][]uint64, len(groups))
	workers := max(1, min(runtime.GOMAXPROCS(0), len(groups)))
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for g := w; g < len(groups); g += workers {
				sums[g] = make([]uint64, len(groups[g]))
				for s := range groups[g] {
					if seg := &groups[g][s]; refable(seg) {
						sums[g][s] = maphash.Bytes(seed, seg.Data)
					}
				}
			}
		}()
	}
	wg.Wait()
	return sums
}

// ResolveRefs fills the data of the referenced segments of segs from the
// segments group returns for a reference's group (false when no earlier
// group has that name); what names a group in errors ("tile", "image").
// The referenced segment must exist and have the same kind and size; the
// reference shares its data (capped at its length, so an append copies):
// a weight copied to many tiles is in memory once, as in the file.
// On error it returns the reference's offset.
func ResolveRefs(segs []Segment, pend []PendingRef, what string, group func(id uint32) ([]Segment, bool)) (int64, error) {
	for _, p := range pend {
		s := &segs[p.Seg]
		other, ok := group(p.Ref.Group)
		if !ok {
			return p.Off, fmt.Errorf("segment %d %q: refers to %s %d, not an earlier one", p.Seg, s.Name, what, p.Ref.Group)
		}
		if int64(p.Ref.Seg) >= int64(len(other)) {
			return p.Off, fmt.Errorf("segment %d %q: refers to segment %d of %s %d, which has %d", p.Seg, s.Name, p.Ref.Seg, what, p.Ref.Group, len(other))
		}
		o := &other[p.Ref.Seg]
		if o.Kind != s.Kind || o.Size != s.Size || uint32(len(o.Data)) != o.Size {
			return p.Off, fmt.Errorf("segment %d %q: refers to segment %d of %s %d, %s of %d bytes, not %s of %d", p.Seg, s.Name, p.Ref.Seg, what, p.Ref.Group, o.Kind, o.Size, s.Kind, s.Size)
		}
		s.Data = o.Data[:len(o.Data):len(o.Data)]
	}
	return 0, nil
}

// encodeRef is a reference's 8 bytes of segment data.
func encodeRef(r Ref) []byte {
	b := binary.LittleEndian.AppendUint32(nil, r.Group)
	return binary.LittleEndian.AppendUint32(b, r.Seg)
}

// decodeRef reads encodeRef's bytes.
func decodeRef(b []byte) Ref {
	return Ref{Group: binary.LittleEndian.Uint32(b), Seg: binary.LittleEndian.Uint32(b[4:])}
}
