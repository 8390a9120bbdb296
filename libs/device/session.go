package device

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strconv"

	"ipu.local/formats/ipuexe"
	"ipu.local/formats/obj"
	"ipu.local/libs/onnx"
	"ipu.local/libs/sim"
)

// Loaded returns the fingerprint of the package the device runs and its
// current sync mark, or why the device cannot run anything.
func (d *Device) Loaded() (fingerprint string, mark int, err error) {
	st, err := d.State()
	if err != nil {
		return "", 0, err
	}
	switch st {
	case PoweredOff:
		return "", 0, fmt.Errorf("device %s holds no application: run ipu-load", d.path)
	case Loading:
		return "", 0, fmt.Errorf("device %s is not loaded: an earlier load did not finish; run ipu-load again", d.path)
	case Running:
		return "", 0, fmt.Errorf("device %s is not loaded: an earlier call did not finish; run ipu-load again", d.path)
	}
	if d.staleBoot() {
		return "", 0, fmt.Errorf("device %s was not loaded in this boot of the host (a board loses its application when its host restarts): run ipu-load again", d.path)
	}
	fp, err := d.fingerprint()
	if err != nil {
		return "", 0, err
	}
	if fp == "" {
		return "", 0, &HeaderError{Path: d.path, Field: "fingerprint", Msg: "empty on a loaded device"}
	}
	return fp, d.mark(), nil
}

// Session is a host exchange session with the application on a loaded
// device: host pages, tensors in them, and calls that run the tiles.
type Session struct {
	d     *Device
	fp    string
	pkg   *ipuexe.Package
	log   *slog.Logger
	m     *sim.Machine
	opt   sim.Options
	pages hostPages
}

// maxHostBytes bounds the host pages one session allocates.
const maxHostBytes = 1 << 30

// NewSession starts a session with the application of pkg, which must be
// the package (by fingerprint) the device was loaded with.
func (d *Device) NewSession(pkg *ipuexe.Package, fingerprint string, log *slog.Logger) (*Session, error) {
	fp, mark, err := d.Loaded()
	if err != nil {
		return nil, err
	}
	if fp != fingerprint {
		return nil, fmt.Errorf("device %s runs package %s..., not %s...: run ipu-load", d.path, short(fp), short(fingerprint))
	}
	if pkg.Arch != d.g.preset.Name {
		return nil, fmt.Errorf("device %s is an %s device, package is for %s", d.path, d.g.preset.Name, pkg.Arch)
	}
	s := &Session{d: d, fp: fingerprint, pkg: pkg, log: log, pages: hostPages{}}
	if err := s.restore(sim.Options{}); err != nil {
		return nil, err
	}
	if got := s.m.Mark(); got != mark {
		return nil, &HeaderError{Path: d.path, Field: "mark", Msg: fmt.Sprintf("is %d, simulator state says %d", mark, got)}
	}
	log.Info("starting host exchange session", slog.Int("startup_mark", mark))
	return s, nil
}

func short(fp string) string {
	if len(fp) > 8 {
		return fp[:8]
	}
	return fp
}

// restore rebuilds the machine from the state blob in the file.
func (s *Session) restore(opt sim.Options) error {
	b, err := s.d.readState()
	if err != nil {
		return err
	}
	m := sim.New(s.d.g.preset, s.d.tileMem, opt)
	if err := m.UnmarshalState(b); err != nil {
		return fmt.Errorf("device %s: simulator state: %w", s.d.path, err)
	}
	s.m, s.opt = m, opt
	return nil
}

// Attach allocates the host exchange pages, zeroed.
func (s *Session) Attach(pages []obj.Page) error {
	s.log.Info("attaching host exchange pages", slog.Int("pages", len(pages)))
	total := uint64(0)
	out := make(hostPages, len(pages))
	for i, p := range pages {
		if _, dup := out[p.ID]; dup {
			return fmt.Errorf("host page %d: page id %d attached twice", i, p.ID)
		}
		if p.Bytes > 1<<24 {
			return fmt.Errorf("host page %d (id %d): %d bytes exceed a page's 16 MiB", i, p.ID, p.Bytes)
		}
		total += uint64(p.Bytes)
		if total > maxHostBytes {
			return fmt.Errorf("host page %d (id %d): host pages exceed %d bytes", i, p.ID, maxHostBytes)
		}
		out[p.ID] = nil
	}
	for _, p := range pages {
		out[p.ID] = make([]byte, p.Bytes)
	}
	s.pages = out
	s.log.Info("host exchange session started")
	return nil
}

// hostPages is the host memory the tiles reach: page id to bytes.
type hostPages map[uint8][]byte

// ReadHost implements sim.Host.
func (h hostPages) ReadHost(addr uint32, dst []byte) error {
	b, err := h.hostRange(addr, len(dst))
	if err != nil {
		return err
	}
	copy(dst, b)
	return nil
}

// WriteHost implements sim.Host.
func (h hostPages) WriteHost(addr uint32, src []byte) error {
	b, err := h.hostRange(addr, len(src))
	if err != nil {
		return err
	}
	copy(b, src)
	return nil
}

func (h hostPages) hostRange(addr uint32, n int) ([]byte, error) {
	id, off := uint8(addr>>24), uint64(addr&0xFFFFFF)
	p, ok := h[id]
	if !ok {
		return nil, fmt.Errorf("host address %#x: page %d not attached", addr, id)
	}
	if off+uint64(n) > uint64(len(p)) {
		return nil, fmt.Errorf("host address %#x: %d bytes overrun page %d of %d bytes", addr, n, id, len(p))
	}
	return p[off : off+uint64(n)], nil
}

// tensorPage returns the host page of a tensor laid out in blocks.
func (s *Session) tensorPage(kind string, t obj.Tensor) ([]byte, error) {
	p, ok := s.pages[t.Page]
	if !ok {
		return nil, fmt.Errorf("%s %q: host page %d not attached", kind, t.Name, t.Page)
	}
	return p, nil
}

// tensorRange returns where tensor t, placed at its Offset, lives in the
// host pages.
func (s *Session) tensorRange(kind string, t obj.Tensor) ([]byte, error) {
	size, err := tensorBytes(t)
	if err != nil {
		return nil, fmt.Errorf("%s %q: %w", kind, t.Name, err)
	}
	p, ok := s.pages[t.Page]
	if !ok {
		return nil, fmt.Errorf("%s %q: host page %d not attached", kind, t.Name, t.Page)
	}
	if uint64(t.Offset)+size > uint64(len(p)) {
		return nil, fmt.Errorf("%s %q: %d bytes at offset %d overrun host page %d of %d bytes", kind, t.Name, size, t.Offset, t.Page, len(p))
	}
	return p[t.Offset : uint64(t.Offset)+size], nil
}

// tensorBytes is the size of t: elements times the size of its type.
func tensorBytes(t obj.Tensor) (uint64, error) {
	elem := 0
	for dt := onnx.DataType(1); dt <= onnx.Float8E5M2FNUZ; dt++ {
		if dt.String() == t.DType {
			elem = dt.ElemSize()
			break
		}
	}
	if elem == 0 {
		return 0, fmt.Errorf("unknown element type %q", t.DType)
	}
	n := uint64(elem)
	for i, d := range t.Shape {
		if d < 0 || d > 1<<32 {
			return 0, fmt.Errorf("dimension %d is %d", i, d)
		}
		n *= uint64(d)
		if n > maxHostBytes {
			return 0, fmt.Errorf("shape %v exceeds %d bytes", t.Shape, maxHostBytes)
		}
	}
	return n, nil
}

func findTensor(ts []obj.Tensor, name string) (obj.Tensor, bool) {
	for _, t := range ts {
		if t.Name == name {
			return t, true
		}
	}
	return obj.Tensor{}, false
}

// WriteInput copies the raw little-endian elements of input name into its
// host page: at its Offset, or into each of its blocks.
func (s *Session) WriteInput(name string, raw []byte) error {
	t, ok := findTensor(s.pkg.Host.Inputs, name)
	if !ok {
		return fmt.Errorf("package has no input %q", name)
	}
	if len(t.Blocks) > 0 || t.DType == "int64" || t.DType == "bool" { // int64 held as int32, bool as words: converted by the layout
		p, err := s.tensorPage("input", t)
		if err != nil {
			return err
		}
		if err := t.Scatter(p, raw); err != nil {
			return fmt.Errorf("input %q: %w", name, err)
		}
		return nil
	}
	b, err := s.tensorRange("input", t)
	if err != nil {
		return err
	}
	if len(raw) != len(b) {
		return fmt.Errorf("input %q: %d bytes, want %d (%s %v)", name, len(raw), len(b), t.DType, t.Shape)
	}
	copy(b, raw)
	return nil
}

// ReadOutput returns a copy of output name's raw little-endian elements,
// read from its Offset or gathered from its blocks.
func (s *Session) ReadOutput(name string) ([]byte, error) {
	t, ok := findTensor(s.pkg.Host.Outputs, name)
	if !ok {
		return nil, fmt.Errorf("package has no output %q", name)
	}
	if len(t.Blocks) > 0 || t.DType == "int64" || t.DType == "bool" { // int64 held as int32, bool as words: converted by the layout
		p, err := s.tensorPage("output", t)
		if err != nil {
			return nil, err
		}
		y, err := t.Gather(p)
		if err != nil {
			return nil, fmt.Errorf("output %q: %w", name, err)
		}
		return y, nil
	}
	b, err := s.tensorRange("output", t)
	if err != nil {
		return nil, err
	}
	return append([]byte(nil), b...), nil
}

// poisonElem is the element a poisoned output holds, by element type: a
// NaN with a payload no arithmetic produces where the type has NaNs, the
// byte 0xA5 repeated otherwise (an integer no test expects, and no valid
// bool).
func poisonElem(dtype string) []byte {
	switch dtype {
	case "float":
		return []byte{0xA5, 0xA5, 0xC5, 0x7F} // 0x7fc5a5a5
	case "double":
		return []byte{0xA5, 0xA5, 0xA5, 0xA5, 0xA5, 0xA5, 0xF8, 0x7F} // 0x7ff8a5a5a5a5a5a5
	case "float16":
		return []byte{0xA5, 0x7E} // 0x7ea5
	case "bfloat16":
		return []byte{0xC5, 0x7F} // 0x7fc5
	case "float8e4m3fn":
		return []byte{0x7F} // its only NaN, S.1111.111
	case "float8e5m2":
		return []byte{0x7E}
	case "float8e4m3fnuz", "float8e5m2fnuz":
		return []byte{0x80} // the FNUZ types' only NaN, negative zero's code
	case "int64":
		// The device holds int64 as int32: a poison it can hold
		// (0xa5a5a5a5 sign-extended).
		return []byte{0xA5, 0xA5, 0xA5, 0xA5, 0xFF, 0xFF, 0xFF, 0xFF}
	}
	return []byte{0xA5}
}

// PoisonPattern returns the raw elements of a poisoned output of t's
// type and shape (see PoisonOutputs).
func PoisonPattern(t obj.Tensor) ([]byte, error) {
	size, err := tensorBytes(t)
	if err != nil {
		return nil, fmt.Errorf("output %q: %w", t.Name, err)
	}
	e := poisonElem(t.DType)
	if size%uint64(len(e)) != 0 {
		return nil, fmt.Errorf("output %q: %d bytes are not whole %s elements", t.Name, size, t.DType)
	}
	return bytes.Repeat(e, int(size)/len(e)), nil
}

// Unwritten counts the elements of an output read back (raw, in t's
// element type) that still hold the poison, and returns the first one's
// index (-1 for none). It counts only the types whose poison is a NaN
// payload that no arithmetic produces (float, double, float16,
// bfloat16), where it tells an output the run did not write from a NaN
// it computed; in the other types the poison may be a value a run
// writes, and an unwritten element shows as a mismatch, if at all.
func Unwritten(t obj.Tensor, raw []byte) (first, n int) {
	first = -1
	switch t.DType {
	case "float", "double", "float16", "bfloat16":
	default:
		return first, 0
	}
	e := poisonElem(t.DType)
	for i := 0; i+len(e) <= len(raw); i += len(e) {
		if bytes.Equal(raw[i:i+len(e)], e) {
			if first < 0 {
				first = i / len(e)
			}
			n++
		}
	}
	return first, n
}

// PoisonOutputs fills every output tensor in the host pages with the NaN
// pattern of its element type (PoisonPattern): a run that does not write
// an output leaves the poison there, never the results of an earlier run,
// so reading the outputs back checks that the run wrote them. Call it
// before each run.
func (s *Session) PoisonOutputs() error {
	for _, t := range s.pkg.Host.Outputs {
		raw, err := PoisonPattern(t)
		if err != nil {
			return err
		}
		p, err := s.tensorPage("output", t)
		if err != nil {
			return err
		}
		if err := t.Scatter(p, raw); err != nil {
			return fmt.Errorf("output %q: poison: %w", t.Name, err)
		}
	}
	return nil
}

// Call invokes a host exchange call: the tiles waiting at their host sync
// receive command and run until they all wait at the next one. The new
// machine state is saved to the device file, ready for the next call. The
// only call is "run". A device fault is returned as the error (a
// *sim.Fault inside) and leaves the device loaded at its previous sync.
func (s *Session) Call(call string, command uint32, opt sim.Options) (*sim.RunResult, error) {
	if call != "run" {
		return nil, fmt.Errorf("unknown host exchange call %q (known: run)", call)
	}
	d := s.d
	fp, mark, err := d.Loaded()
	if err != nil {
		return nil, err
	}
	if fp != s.fp {
		return nil, fmt.Errorf("device %s runs package %s..., not %s...: run ipu-load", d.path, short(fp), short(s.fp))
	}
	// Rebuild the machine when the options change, and when the file
	// moved on without this session (it holds the truth).
	if s.m == nil || opt != s.opt || s.m.Mark() != mark {
		if err := s.restore(opt); err != nil {
			return nil, err
		}
	}
	d.setState(Running)
	if err := d.syncHeader(); err != nil {
		return nil, err
	}
	var res *sim.RunResult
	err = d.guard("call "+strconv.Quote(call), func() error {
		var err error
		res, err = s.m.Run(s.pages, command)
		return err
	})
	var fe *FileError
	if errors.As(err, &fe) {
		// The device file failed under the run: the machine state in
		// it is unknown, and the device stays marked running.
		s.m = nil
		return nil, err
	}
	if err != nil {
		// The blob still holds the machine at its last host sync.
		s.m = nil
		d.setState(Loaded)
		if serr := d.syncHeader(); serr != nil {
			return nil, serr
		}
		return nil, fmt.Errorf("device %s: call %q: %w", d.path, call, err)
	}
	res.Command = command
	if err := d.writeState(s.m.MarshalState()); err != nil {
		return nil, err
	}
	d.setMark(s.m.Mark())
	d.setState(Loaded)
	if err := d.syncHeader(); err != nil {
		return nil, err
	}
	s.log.Info("invoking host exchange call", slog.String("call", call), slog.Uint64("command", uint64(command)), slog.Int("phases", len(res.Phases)))
	return res, nil
}

// CodeSymbol returns the code symbol of the package's image on tile t
// whose range holds pc (a fault's PC: the kernel, or "supervisor"), or
// false.
func (s *Session) CodeSymbol(t int, pc uint32) (obj.Symbol, bool) {
	if t < 0 || t >= len(s.pkg.TileImage) || int(s.pkg.TileImage[t]) >= len(s.pkg.Images) {
		return obj.Symbol{}, false
	}
	return obj.SymbolAt(s.pkg.Images[s.pkg.TileImage[t]].Symbols, pc)
}

// ReadTile returns a copy of n bytes of tile t's memory from address
// addr, as the last call left it (ipu-check reads which side of a
// branch ran from the condition's word).
func (s *Session) ReadTile(t int, addr uint32, n int) ([]byte, error) {
	p := s.d.g.preset
	if t < 0 || t >= p.Tiles {
		return nil, fmt.Errorf("tile %d outside the %d tiles of %s", t, p.Tiles, p.Name)
	}
	if n < 0 || addr < p.Memory.Lo || uint64(addr)+uint64(n) > uint64(p.Memory.Hi) {
		return nil, fmt.Errorf("tile %d: %d bytes at %#x outside tile memory %s", t, n, addr, p.Memory)
	}
	off := addr - p.Memory.Lo
	return append([]byte(nil), s.d.tileMem(t)[off:off+uint32(n)]...), nil
}
