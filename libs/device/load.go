package device

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"

	"ipu.local/formats/ipuexe"
	"ipu.local/formats/obj"
	"ipu.local/libs/arch"
	"ipu.local/libs/sim"
	"ipu.local/libs/trace"
)

// Open opens the existing device at path, checking its header.
func Open(path string) (*Device, error) {
	return openFile(path)
}

// Attach opens the device at path for loading a package for architecture
// archName, creating a fresh powered-off device of that architecture when
// path does not exist. An existing device of another architecture is an
// error.
func Attach(path, archName string, log *slog.Logger) (*Device, error) {
	log.Info("opening IPU device", slog.String("path", path))
	p, err := arch.Lookup(archName)
	if err != nil {
		return nil, fmt.Errorf("device %s: %w", path, err)
	}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		if err := create(path, p); err != nil {
			return nil, err
		}
	}
	d, err := openFile(path)
	if err != nil {
		return nil, err
	}
	if d.g.preset.Name != p.Name {
		d.Close()
		return nil, fmt.Errorf("device %s is an %s device, package is for %s", path, d.g.preset.Name, p.Name)
	}
	log.Info("IPU device attached", trace.Bare("path", path))
	return d, nil
}

// LoadOptions tune Load.
type LoadOptions struct {
	// Sim configures the simulator that runs the startup program.
	Sim sim.Options
	// AfterImages, when set, is called once every tile image is written
	// and before the startup program runs: a test hook to kill a loader
	// at the worst moment.
	AfterImages func()
	// Progress, when set, is told the tile images written so far out of
	// those to write (a progress bar).
	Progress func(done, total int)
}

// Load powers the device on, replays pkg's device configuration, writes
// every tile's image, runs the startup program to the first host sync and
// records the package's fingerprint. Until it returns nil the device is
// marked loading, and refuses sessions.
//
// The file system backing the device file may fail it (a full disk): the
// tile memory the package uses is reserved on disk first (fallocate), and
// a page the file system cannot provide anyway is a one-line error naming
// the device, never a crash (guard). Either way the device stays marked
// loading.
func (d *Device) Load(pkg *ipuexe.Package, fingerprint string, log *slog.Logger, opt LoadOptions) error {
	if err := d.checkPackage(pkg, fingerprint); err != nil {
		return err
	}
	images, err := simImages(d.g.preset, pkg)
	if err != nil {
		return fmt.Errorf("device %s: %w", d.path, err)
	}
	return d.guard("load", func() error { return d.load(pkg, images, fingerprint, log, opt) })
}

// load is Load once the package is checked.
func (d *Device) load(pkg *ipuexe.Package, images []*sim.Image, fingerprint string, log *slog.Logger, opt LoadOptions) error {
	log.Info("initializing IPU device")
	var busy []int
	for t, idx := range pkg.TileImage {
		if images[idx] != nil {
			busy = append(busy, t)
		}
	}
	used := d.usedSpans(pkg, busy)
	if err := d.powerOn(used); err != nil {
		return err
	}
	if err := d.reserve(used); err != nil {
		return err
	}
	log.Info("IPU device initialized")

	// At power-on every tile's configuration registers are unset: a tile
	// runs only where the package's configuration sets its executable
	// range and sync-group membership.
	so := opt.Sim
	so.RequireConfig = true
	m := sim.New(d.g.preset, d.tileMem, so)
	m.UseFile(tileFile{d})
	writes, err := d.replay(m, pkg.Config)
	if err != nil {
		return err
	}
	log.Info("replaying device configuration", slog.Int("register_writes", writes))

	// The busy tiles load in chunks, their code predecoded side by side;
	// progress is told after each chunk.
	const chunk = 64
	for lo := 0; lo < len(busy); lo += chunk {
		ts := busy[lo:min(lo+chunk, len(busy))]
		imgs := make([]sim.Image, len(ts))
		for i, t := range ts {
			d.setDirty(t)
			imgs[i] = *images[pkg.TileImage[t]]
		}
		if err := m.LoadAll(ts, imgs); err != nil {
			var le *sim.LoadError
			var fe *FileError
			if errors.As(err, &fe) {
				return fe // names the device, the tile and the cause
			}
			if errors.As(err, &le) {
				return fmt.Errorf("device %s: tile %d: load image %d: %w", d.path, le.Tile, pkg.TileImage[le.Tile], le.Err)
			}
			return fmt.Errorf("device %s: %w", d.path, err)
		}
		if opt.Progress != nil {
			opt.Progress(lo+len(ts), len(busy))
		}
	}
	if opt.AfterImages != nil {
		opt.AfterImages()
	}
	res, err := m.Run(noHost{}, 0)
	if err != nil {
		return fmt.Errorf("device %s: startup program: %w", d.path, err)
	}
	if !res.AtHost {
		return fmt.Errorf("device %s: startup program: every tile halted before the first host sync", d.path)
	}
	mark := m.Mark()
	log.Info("loading application", slog.Int("tile_count", pkg.Tiles), slog.Int("final_mark", mark))

	if err := d.writeState(m.MarshalState()); err != nil {
		return err
	}
	d.setFingerprint(fingerprint)
	d.setMark(mark)
	d.setState(Loaded)
	if err := d.syncHeader(); err != nil {
		return err
	}
	log.Info("application loaded and initial synchronization completed", slog.Int("tile_count", pkg.Tiles))
	return nil
}

// checkPackage checks what Load relies on, although ipuexe.Read has
// checked it already: a package is input, and Load must not panic.
func (d *Device) checkPackage(pkg *ipuexe.Package, fingerprint string) error {
	if pkg.Arch != d.g.preset.Name {
		return fmt.Errorf("device %s is an %s device, package is for %s", d.path, d.g.preset.Name, pkg.Arch)
	}
	if pkg.Tiles < 0 || pkg.Tiles > d.g.tiles {
		return fmt.Errorf("device %s: package has %d tiles, device has %d", d.path, pkg.Tiles, d.g.tiles)
	}
	if len(pkg.TileImage) != pkg.Tiles {
		return fmt.Errorf("device %s: package maps %d tiles to images, says it has %d", d.path, len(pkg.TileImage), pkg.Tiles)
	}
	for t, idx := range pkg.TileImage {
		if uint64(idx) >= uint64(len(pkg.Images)) {
			return fmt.Errorf("device %s: package tile %d: image %d of %d", d.path, t, idx, len(pkg.Images))
		}
	}
	if fingerprint == "" || len(fingerprint) > fingerprintLen {
		return fmt.Errorf("device %s: package fingerprint of %d bytes (want 1 to %d)", d.path, len(fingerprint), fingerprintLen)
	}
	if _, err := cString([]byte(fingerprint)); err != nil {
		return fmt.Errorf("device %s: package fingerprint: %w", d.path, err)
	}
	return nil
}

// simImages converts the package's images for the simulator, once per
// distinct image; idle images stay nil.
func simImages(p *arch.Preset, pkg *ipuexe.Package) ([]*sim.Image, error) {
	out := make([]*sim.Image, len(pkg.Images))
	for i, img := range pkg.Images {
		if img.Idle {
			continue
		}
		si := &sim.Image{Entry: img.Entry}
		for j, s := range img.Segments {
			if !p.Memory.Contains(s.Addr, s.Size) {
				return nil, fmt.Errorf("image %d segment %d %q: [%#x, +%d) outside tile memory %v", i, j, s.Name, s.Addr, s.Size, p.Memory)
			}
			switch s.Kind {
			case obj.BSS:
				// Power-on left the memory zero.
				continue
			case obj.Code, obj.Data:
				if uint64(len(s.Data)) != uint64(s.Size) {
					return nil, fmt.Errorf("image %d segment %d %q: %d data bytes, size %d", i, j, s.Name, len(s.Data), s.Size)
				}
			default:
				return nil, fmt.Errorf("image %d segment %d %q: unknown kind %d", i, j, s.Name, s.Kind)
			}
			si.Segments = append(si.Segments, sim.Segment{Addr: s.Addr, Data: s.Data, Code: s.Kind == obj.Code})
		}
		out[i] = si
	}
	return out, nil
}

// powerOn marks the device loading before anything else changes, then
// clears the memory of every tile a past load touched: of every tile when
// that load was in an earlier boot, whose dirty bits may not have reached
// the disk (boot.go). Only then does the header take this boot's id, so
// a power-on killed half way clears every tile again next time. keep are
// the spans the load reserves next (zeroDirty).
func (d *Device) powerOn(keep []fileSpan) error {
	stale := d.staleBoot()
	d.setState(Loading)
	d.setFingerprint("")
	d.setMark(0)
	if err := d.syncHeader(); err != nil {
		return err
	}
	if stale {
		d.zeroAll()
	}
	d.zeroDirty(keep)
	d.setBoot(hostBoot())
	copy(d.m[offMagic:], magic) // a version 1 device becomes version 2
	return d.syncHeader()
}

// replay validates and performs the package's register writes in order,
// returning how many it performed: the first invalid one (an unknown
// register, a tile or value out of range) is a one-line error naming its
// index, tile and register.
func (d *Device) replay(m *sim.Machine, ws []obj.RegWrite) (int, error) {
	n := 0
	for i, w := range ws {
		if err := d.configure(m, w); err != nil {
			return n, fmt.Errorf("device %s: configuration write %d (tile %s register %s value %#x): %w", d.path, i, tileName(w.Tile), sim.RegName(w.Reg), w.Value, err)
		}
		n++
	}
	return n, nil
}

// configure replays one register write; AllTiles writes every tile.
func (d *Device) configure(m *sim.Machine, w obj.RegWrite) error {
	if w.Tile == obj.AllTiles {
		for t := 0; t < d.g.tiles; t++ {
			if err := m.Configure(t, w.Reg, w.Value); err != nil {
				return err
			}
		}
		return nil
	}
	if uint64(w.Tile) >= uint64(d.g.tiles) {
		return fmt.Errorf("tile %d out of range (device has %d)", w.Tile, d.g.tiles)
	}
	return m.Configure(int(w.Tile), w.Reg, w.Value)
}

func tileName(t uint32) string {
	if t == obj.AllTiles {
		return "all"
	}
	return fmt.Sprint(t)
}

// noHost is the host side during the startup program: no pages attached.
type noHost struct{}

func (noHost) ReadHost(addr uint32, dst []byte) error {
	return fmt.Errorf("no host pages attached during load (address %#x)", addr)
}

func (noHost) WriteHost(addr uint32, src []byte) error {
	return fmt.Errorf("no host pages attached during load (address %#x)", addr)
}
