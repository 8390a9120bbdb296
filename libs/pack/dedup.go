package pack

// Identical images are stored once: images are compared by what their
// canonical bytes (ipuexe.EncodeImage) carry, field by field, a hash of
// those fields only proposing candidates, so that a package of copied
// weights is not encoded (and held) a second time to number its images.

import (
	"bytes"
	"encoding/binary"
	"hash/maphash"
	"slices"

	"ipu.local/formats/ipuexe"
	"ipu.local/formats/obj"
	"ipu.local/libs/par"
)

// dedup numbers images by their content, in order of first use.
type dedup struct {
	index map[uint64][]uint32 // stored images with that hash
}

func (d *dedup) add(pkg *ipuexe.Package, img *ipuexe.Image, sum uint64) uint32 {
	if d.index == nil {
		d.index = map[uint64][]uint32{}
	}
	for _, i := range d.index[sum] {
		if sameImage(&pkg.Images[i], img) {
			return i
		}
	}
	i := uint32(len(pkg.Images))
	pkg.Images = append(pkg.Images, *img)
	d.index[sum] = append(d.index[sum], i)
	return i
}

// imageSeed seeds the images' hashes: they only propose candidates, so
// the package does not depend on it.
var imageSeed = maphash.MakeSeed()

// hashImage hashes the fields of img that its canonical bytes carry.
func hashImage(img *ipuexe.Image) uint64 {
	var h maphash.Hash
	h.SetSeed(imageSeed)
	var b []byte
	u32 := func(v uint32) { b = binary.LittleEndian.AppendUint32(b, v) }
	str := func(s string) { u32(uint32(len(s))); b = append(b, s...) }
	if img.Idle {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	u32(img.Entry)
	u32(uint32(len(img.Segments)))
	for i := range img.Segments {
		s := &img.Segments[i]
		str(s.Name)
		b = append(b, byte(s.Kind))
		u32(s.Addr)
		u32(s.Size)
		h.Write(b)
		b = b[:0]
		if s.Kind != obj.BSS {
			h.Write(s.Data)
		}
	}
	for _, s := range img.Symbols {
		str(s.Name)
		u32(s.Addr)
		u32(s.Size)
		if s.Code {
			b = append(b, 1)
		} else {
			b = append(b, 0)
		}
	}
	for _, x := range img.Exchange {
		b = binary.LittleEndian.AppendUint64(b, uint64(x.Cycle))
		u32(uint32(x.Phase))
		u32(uint32(x.Dst))
		u32(uint32(x.DstCount))
		u32(uint32(x.Words))
	}
	h.Write(b)
	return h.Sum64()
}

// hashImages hashes images on a worker per core.
func hashImages(imgs []ipuexe.Image) []uint64 {
	out := make([]uint64, len(imgs))
	par.For(len(imgs), par.Cores(), func(_, i int) { out[i] = hashImage(&imgs[i]) })
	return out
}

// sameImage reports whether two images have the same canonical bytes:
// the same fields, a bss segment's data aside.
func sameImage(a, b *ipuexe.Image) bool {
	if a.Idle != b.Idle || a.Entry != b.Entry || len(a.Segments) != len(b.Segments) ||
		!slices.Equal(a.Symbols, b.Symbols) || !slices.Equal(a.Exchange, b.Exchange) {
		return false
	}
	for i := range a.Segments {
		s, t := &a.Segments[i], &b.Segments[i]
		if s.Name != t.Name || s.Kind != t.Kind || s.Addr != t.Addr || s.Size != t.Size {
			return false
		}
		if s.Kind != obj.BSS && !bytes.Equal(s.Data, t.Data) {
			return false
		}
	}
	return true
}
