package ipuexe

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"runtime"
	"sync"

	"ipu.local/formats/obj"
	"ipu.local/formats/obj/wire"
)

// Version is the package format version this package reads and writes.
const Version = 1

// Magic starts every package file; its last byte is Version.
const Magic = "\x89IPUEXE\x01"

var format = wire.Format{
	Prefix:   Magic[:7],
	Version:  Version,
	Name:     "package format",
	Sections: []string{"meta", "images", "tilemap", "config", "host"},
}

const flagIdle = 1

// FormatError says where a package file is wrong.
type FormatError struct {
	Section string // "header", "table", "meta", "images", "tilemap", "config" or "host"
	Off     int64  // byte offset in the file
	Msg     string
}

func (e *FormatError) Error() string {
	return "ipuexe: " + (&wire.Error{Section: e.Section, Off: e.Off, Msg: e.Msg}).Error()
}

func formatError(e *wire.Error) error {
	return &FormatError{Section: e.Section, Off: e.Off, Msg: e.Msg}
}

// Fingerprint is the hex SHA-256 of a file's bytes.
func Fingerprint(data []byte) string { return obj.Fingerprint(data) }

// EncodeImage returns the canonical bytes of an image (its Body in the
// file without references): two images are the same exactly when their
// bytes are.
func EncodeImage(img *Image) []byte { return encodeBody(img, nil) }

// encodeBody returns an image's Body, the segments refs names stored as
// those references to an earlier image's segments.
func encodeBody(img *Image, refs map[int]obj.Ref) []byte {
	var e wire.Encoder
	e.Grow(bodyHint(img, refs))
	encodeInto(&e, img, refs)
	return e.Data()
}

// bodies holds scratch buffers for bodySum.
var bodies sync.Pool

// bodySum is the SHA-256 of an image's canonical bytes (EncodeImage),
// encoded in a reused buffer: a reader hashing every image of a large
// package would otherwise fault in a fresh buffer for each.
func bodySum(img *Image) [32]byte {
	bp := scratch()
	var e wire.Encoder
	e.Reset(*bp)
	encodeInto(&e, img, nil)
	sum := sha256.Sum256(e.Data())
	*bp = e.Data()
	bodies.Put(bp)
	return sum
}

// scratch returns a buffer of bodies, or a new one.
func scratch() *[]byte {
	if bp, ok := bodies.Get().(*[]byte); ok {
		return bp
	}
	return new([]byte)
}

// encodeInto encodes an image's Body into e (encodeBody).
func encodeInto(e *wire.Encoder, img *Image, refs map[int]obj.Ref) {
	var flags uint8
	if img.Idle {
		flags |= flagIdle
	}
	e.U8(flags)
	e.U32(img.Entry)
	obj.EncodeSegments(e, img.Segments, false, refs)
	obj.EncodeSymbols(e, img.Symbols)
	obj.EncodeTransfers(e, img.Exchange)
}

// bodyHint is about the size of an image's Body: its segments' data
// (but those refs names), and a few words a segment, symbol and
// transfer.
func bodyHint(img *Image, refs map[int]obj.Ref) int {
	n := 16 + 32*(len(img.Symbols)+len(img.Exchange))
	for i, s := range img.Segments {
		n += 32 + len(s.Name)
		if _, ok := refs[i]; !ok {
			n += len(s.Data)
		}
	}
	return n
}

func decodeImage(d *wire.Decoder) (Image, []obj.PendingRef) {
	var img Image
	var pend []obj.PendingRef
	off := d.Off()
	flags := d.U8("image flags")
	if flags&^flagIdle != 0 {
		d.Failf(off, "unknown flags %#x", flags)
	}
	img.Idle = flags&flagIdle != 0
	img.Entry = d.U32("image entry")
	img.Segments, pend = obj.DecodeSegments(d)
	img.Symbols = obj.DecodeSymbols(d)
	img.Exchange = obj.DecodeTransfers(d)
	d.Done()
	return img, pend
}

// Validate checks what every package must satisfy: a tile count in
// range, an object fingerprint, one image per tile, images valid,
// pairwise different, all used and numbered by first use, register
// writes addressing existing tiles.
func Validate(p *Package) error {
	_, err := validate(p, false)
	return err
}

// imageCheck is one image's checked canonical bytes: their length, hash
// and, for Marshal, their zstd frame.
type imageCheck struct {
	err    error
	size   int
	sum    [32]byte
	frame  []byte
	stored int // the length of the Body in the frame
}

// validate is Validate; with frames it also returns each image's
// canonical length and zstd frame, so that Marshal encodes every image
// once. The images are checked (and compressed) on a worker per core;
// the errors are those of a check in image order.
func validate(p *Package, frames bool) ([]imageCheck, error) {
	if err := validateMeta(p.Tiles, p.Object); err != nil {
		return nil, err
	}
	if len(p.TileImage) != p.Tiles {
		return nil, fmt.Errorf("tilemap has %d tiles, want %d", len(p.TileImage), p.Tiles)
	}
	var refs []map[int]obj.Ref
	if frames {
		refs = imageRefs(p.Images)
	}
	checks := checkImages(p.Images, refs, frames)
	// Images are compared by the SHA-256 of their canonical bytes, so that
	// checking does not hold a second copy of every image.
	seen := map[[32]byte]int{}
	for i := range checks {
		c := &checks[i]
		if c.err != nil {
			return nil, fmt.Errorf("image %d: %w", i, c.err)
		}
		if j, dup := seen[c.sum]; dup {
			return nil, fmt.Errorf("image %d: same as image %d (identical images are stored once)", i, j)
		}
		seen[c.sum] = i
	}
	if err := validateTilemap(p.TileImage, len(p.Images)); err != nil {
		return nil, err
	}
	if err := validateConfig(p.Config, p.Tiles); err != nil {
		return nil, err
	}
	return checks, obj.ValidateHost(&p.Host)
}

// imageRefs finds the segments of images that an earlier image holds
// (obj.FindRefs), named by image number.
func imageRefs(imgs []Image) []map[int]obj.Ref {
	groups := make([][]obj.Segment, len(imgs))
	ids := make([]uint32, len(imgs))
	for i := range imgs {
		groups[i], ids[i] = imgs[i].Segments, uint32(i)
	}
	return obj.FindRefs(groups, ids)
}

// checkImages checks every image on a worker per core: its program,
// then its canonical bytes' size and hash (and frame: of its Body with
// the references refs names).
func checkImages(imgs []Image, refs []map[int]obj.Ref, frames bool) []imageCheck {
	checks := make([]imageCheck, len(imgs))
	forEach(len(imgs), worthWorkers(imgs), func(i int) {
		img, c := &imgs[i], &checks[i]
		if c.err = obj.ValidateProgram(img.Segments, img.Symbols, img.Exchange); c.err != nil {
			return
		}
		// The bodies are encoded in a reused buffer: only their hash and
		// compressed frame are kept.
		bp := scratch()
		defer bodies.Put(bp)
		var e wire.Encoder
		e.Reset(*bp)
		encodeInto(&e, img, nil)
		body := e.Data()
		if c.size = len(body); c.size > MaxImageBytes {
			c.err = fmt.Errorf("%d bytes, more than %d", c.size, MaxImageBytes)
			return
		}
		c.sum = sha256.Sum256(body)
		if frames {
			if len(refs[i]) > 0 {
				e.Reset(body)
				encodeInto(&e, img, refs[i])
				body = e.Data()
			}
			c.frame, c.stored = wire.Compress(body), len(body)
		}
		*bp = e.Data()
	})
	return checks
}

// worthWorkers reports whether checking imgs side by side pays for a
// second zstd block encoder (a few milliseconds to set up): for many
// images or many bytes, not for a small program on a few tiles.
func worthWorkers(imgs []Image) bool {
	const manyImages, manyBytes = 256, 4 << 20
	if len(imgs) >= manyImages {
		return true
	}
	n := 0
	for i := range imgs {
		for _, s := range imgs[i].Segments {
			if n += len(s.Data); n >= manyBytes {
				return true
			}
		}
	}
	return false
}

func validateMeta(tiles int, object string) error {
	if tiles < 1 || tiles > obj.MaxTiles {
		return fmt.Errorf("tile count %d out of range [1, %d]", tiles, obj.MaxTiles)
	}
	if b, err := hex.DecodeString(object); err != nil || len(b) != sha256.Size || hex.EncodeToString(b) != object {
		return fmt.Errorf("object fingerprint %q is not a lowercase hex SHA-256", object)
	}
	return nil
}

// validateTilemap checks that tiles use existing images, that images are
// numbered in the order of their first use, and that each is used.
func validateTilemap(tileImage []uint32, images int) error {
	next := uint32(0)
	for t, i := range tileImage {
		switch {
		case int64(i) >= int64(images):
			return fmt.Errorf("tile %d: image %d out of range (%d images)", t, i, images)
		case i > next:
			return fmt.Errorf("tile %d: uses image %d before image %d is used (images are numbered by first use)", t, i, next)
		case i == next:
			next++
		}
	}
	if int(next) != images {
		return fmt.Errorf("image %d: used by no tile", next)
	}
	return nil
}

func validateConfig(ws []obj.RegWrite, tiles int) error {
	for i, w := range ws {
		if w.Tile != obj.AllTiles && int64(w.Tile) >= int64(tiles) {
			return fmt.Errorf("register write %d: tile %d out of range (%d tiles)", i, w.Tile, tiles)
		}
	}
	return nil
}

// Write validates p and writes it. The same package always gives the
// same bytes.
func Write(w io.Writer, p *Package) error {
	secs, err := encode(p)
	if err != nil {
		return err
	}
	return format.Write(w, secs)
}

// Marshal validates p and returns its file bytes, as Write writes them.
func Marshal(p *Package) ([]byte, error) {
	secs, err := encode(p)
	if err != nil {
		return nil, err
	}
	return format.Bytes(secs), nil
}

// encode validates p and encodes its sections, the compressed images
// and the host model by reference (wire.Encoder.BytesRef).
func encode(p *Package) ([]*wire.Encoder, error) {
	checks, err := validate(p, true)
	if err != nil {
		return nil, fmt.Errorf("ipuexe: %w", err)
	}
	var meta, images, tilemap, config, host wire.Encoder
	meta.String(p.Compiler)
	meta.String(p.Arch)
	meta.U32(uint32(p.Tiles))
	meta.String(p.Object)

	images.U32(uint32(len(p.Images)))
	for _, c := range checks {
		images.U32(uint32(c.stored))
		images.BytesRef(c.frame)
	}
	tilemap.U32(uint32(len(p.TileImage)))
	for _, i := range p.TileImage {
		tilemap.U32(i)
	}
	obj.EncodeConfig(&config, p.Config)
	obj.EncodeHost(&host, &p.Host)
	return []*wire.Encoder{&meta, &images, &tilemap, &config, &host}, nil
}

// Read decodes and validates a package file, its images bounded by the
// format's limits (MaxImageBytes). Its errors are *FormatError. The host
// model shares data's bytes: the caller must not change data while the
// package is in use.
func Read(data []byte) (*Package, error) {
	return ReadWith(data, ReadOptions{})
}

// ReadWith is Read with the limits of the package's architecture
// (opt.Limits): a tool that runs the package bounds what it decompresses
// by the memory of the device it targets.
func ReadWith(data []byte, opt ReadOptions) (*Package, error) {
	secs, werr := format.Parse(data)
	if werr != nil {
		return nil, formatError(werr)
	}
	p := &Package{}

	d := secs[0].Decoder()
	p.Compiler = d.String("compiler")
	p.Arch = d.String("arch")
	tilesOff := d.Off()
	p.Tiles = d.Int("tile count")
	objOff := d.Off()
	p.Object = d.String("object fingerprint")
	d.Done()
	if d.Err() != nil {
		return nil, formatError(d.Err())
	}
	if err := validateMeta(p.Tiles, p.Object); err != nil {
		off := tilesOff
		if p.Tiles >= 1 && p.Tiles <= obj.MaxTiles {
			off = objOff
		}
		return nil, &FormatError{Section: "meta", Off: off, Msg: err.Error()}
	}

	lim := Limits{Tiles: obj.MaxTiles, TileMemory: obj.MaxTileMemory}
	if opt.Limits != nil {
		l, err := opt.Limits(p.Arch)
		if err != nil {
			return nil, &FormatError{Section: "meta", Off: secs[0].Off, Msg: fmt.Sprintf("arch %q: %v", p.Arch, err)}
		}
		if l.TileMemory > obj.MaxTileMemory || l.Tiles > obj.MaxTiles {
			return nil, &FormatError{Section: "meta", Off: secs[0].Off, Msg: fmt.Sprintf("arch %q: %d tiles of %d bytes exceed the format's %d tiles of %d bytes", p.Arch, l.Tiles, l.TileMemory, obj.MaxTiles, obj.MaxTileMemory)}
		}
		if p.Tiles > l.Tiles {
			return nil, &FormatError{Section: "meta", Off: tilesOff, Msg: fmt.Sprintf("tile count %d exceeds architecture %s's %d tiles", p.Tiles, p.Arch, l.Tiles)}
		}
		lim = l
	}

	if err := readImages(secs[1].Decoder(), p, lim, opt.NoImages); err != nil {
		return nil, err
	}

	d = secs[2].Decoder()
	n := d.Count("tile", 4)
	if d.Err() == nil && n != p.Tiles {
		d.Failf(secs[2].Off, "tilemap has %d tiles, want %d", n, p.Tiles)
	}
	if d.Err() != nil {
		return nil, formatError(d.Err())
	}
	p.TileImage = make([]uint32, n)
	for i := range p.TileImage {
		p.TileImage[i] = d.U32("tile image")
	}
	d.Done()
	if d.Err() != nil {
		return nil, formatError(d.Err())
	}
	if err := validateTilemap(p.TileImage, len(p.Images)); err != nil {
		return nil, &FormatError{Section: "tilemap", Off: secs[2].Off, Msg: err.Error()}
	}

	d = secs[3].Decoder()
	p.Config = obj.DecodeConfig(d)
	d.Done()
	if d.Err() != nil {
		return nil, formatError(d.Err())
	}
	if err := validateConfig(p.Config, p.Tiles); err != nil {
		return nil, &FormatError{Section: "config", Off: secs[3].Off, Msg: err.Error()}
	}

	d = secs[4].Decoder()
	p.Host = obj.DecodeHost(d)
	d.Done()
	if d.Err() != nil {
		return nil, formatError(d.Err())
	}
	return p, nil
}

// readImages reads the images section. The frames are cut out of it in
// order, then (unless skip: ReadOptions.NoImages) decompressed, decoded
// and checked on a worker per core (for many images: a package over a
// full chip has one per tile), and the errors are those of a read in
// image order.
func readImages(d *wire.Decoder, p *Package, lim Limits, skip bool) error {
	maxImage := ImageBytes(lim.TileMemory)
	n := d.Count("image", 4+4)
	if d.Err() == nil && n > p.Tiles {
		d.Failf(d.Off()-4, "%d images for %d tiles", n, p.Tiles)
	}
	if d.Err() != nil {
		return formatError(d.Err())
	}
	frames := make([]imageFrame, 0, n)
	for i := 0; i < n; i++ {
		f := imageFrame{start: d.Off()}
		rawLen := d.U32("image length")
		if d.Err() == nil && rawLen > maxImage {
			d.Failf(f.start, "image %d: length %d exceeds the limit (%d bytes: twice the %d-byte tile memory of %s)", i, rawLen, maxImage, lim.TileMemory, p.Arch)
		}
		f.off, f.size = d.Off(), int(rawLen)
		f.frame = d.Bytes("image")
		if d.Err() != nil {
			break // reported after the images before it
		}
		frames = append(frames, f)
	}
	if n > 0 {
		p.Images = make([]Image, n)
	}
	if skip {
		d.Done()
		if d.Err() != nil {
			return formatError(d.Err())
		}
		return nil
	}
	rd := make([]readImg, len(frames))
	eachImage(len(frames), func(i int) {
		p.Images[i], rd[i] = readImage(i, frames[i])
	})
	// References name earlier images: resolved in image order, up to the
	// first image that did not read.
	bad := len(frames)
	for i := range frames {
		if rd[i].err != nil {
			bad = i
			break
		}
		if err := resolveImage(p.Images, i, frames[i], rd[i].pend); err != nil {
			rd[i].err, bad = err, i
			break
		}
	}
	eachImage(bad, func(i int) { rd[i].sum, rd[i].err = checkImage(i, frames[i], &p.Images[i], rd[i]) })
	seen := map[[32]byte]int{}
	for i := range frames {
		if rd[i].err != nil {
			return rd[i].err
		}
		if j, dup := seen[rd[i].sum]; dup {
			return &FormatError{Section: "images", Off: frames[i].start, Msg: fmt.Sprintf("image %d: same as image %d (identical images are stored once)", i, j)}
		}
		seen[rd[i].sum] = i
	}
	if d.Err() != nil {
		return formatError(d.Err())
	}
	d.Done()
	if d.Err() != nil {
		return formatError(d.Err())
	}
	return nil
}

// imageFrame is one image of the images section: where it starts, where
// its frame starts, its frame and its declared decompressed size.
type imageFrame struct {
	start, off int64
	size       int
	frame      []byte
}

// readImg is what reading an image found: its references to resolve,
// the SHA-256 of its canonical bytes (of its Body when it has no
// references) and the first error.
type readImg struct {
	pend []obj.PendingRef
	sum  [32]byte
	err  error
}

// readImage decompresses and decodes image i.
func readImage(i int, f imageFrame) (Image, readImg) {
	body, err := wire.Decompress(f.frame, f.size)
	if err != nil {
		return Image{}, readImg{err: &FormatError{Section: "images", Off: f.off + 4, Msg: fmt.Sprintf("image %d: %v", i, err)}}
	}
	bd := wire.NewDecoder("images", body, 0)
	img, pend := decodeImage(bd)
	if e := bd.Err(); e != nil {
		return Image{}, readImg{err: &FormatError{Section: "images", Off: f.off + 4, Msg: fmt.Sprintf("image %d at decompressed byte %#x: %s", i, e.Off, e.Msg)}}
	}
	r := readImg{pend: pend}
	if len(pend) == 0 {
		r.sum = sha256.Sum256(body)
	}
	return img, r
}

// resolveImage fills the data of image i's references from the images
// before it.
func resolveImage(imgs []Image, i int, f imageFrame, pend []obj.PendingRef) error {
	if len(pend) == 0 {
		return nil
	}
	off, err := obj.ResolveRefs(imgs[i].Segments, pend, "image", func(id uint32) ([]obj.Segment, bool) {
		if int64(id) >= int64(i) {
			return nil, false
		}
		return imgs[id].Segments, true
	})
	if err != nil {
		return &FormatError{Section: "images", Off: f.off + 4, Msg: fmt.Sprintf("image %d at decompressed byte %#x: %v", i, off, err)}
	}
	return nil
}

// checkImage checks image i's program and returns the SHA-256 of its
// canonical bytes.
func checkImage(i int, f imageFrame, img *Image, r readImg) ([32]byte, error) {
	if err := obj.ValidateProgram(img.Segments, img.Symbols, img.Exchange); err != nil {
		return [32]byte{}, &FormatError{Section: "images", Off: f.start, Msg: fmt.Sprintf("image %d: %v", i, err)}
	}
	if len(r.pend) == 0 {
		return r.sum, nil
	}
	return bodySum(img), nil
}

// readWorkersFrom is the image count from which readImages reads on a
// worker per core.
const readWorkersFrom = 64

// eachImage calls f for each of n images, on a worker per core when
// there are many.
func eachImage(n int, f func(i int)) { forEach(n, n >= readWorkersFrom, f) }

// forEach calls f for each i in [0, n): on a worker per core when
// parallel, else in order on this goroutine's one worker.
func forEach(n int, parallel bool, f func(i int)) {
	workers := min(runtime.GOMAXPROCS(0), n)
	if !parallel {
		workers = min(workers, 1)
	}
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				f(i)
			}
		}()
	}
	wg.Wait()
}
