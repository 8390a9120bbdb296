package prog

import (
	"fmt"
	"sync"

	"ipu.local/libs/arch"
	"ipu.local/libs/codegen"
)

// ProbeAddrs places k's buffers at made-up addresses that meet its
// kernel's rules (interleaved buffers up from the interleaved region's
// start, the others down from the non-interleaved region's end, where
// storage placement puts them too, each aligned as placed), so that its
// code can be emitted and measured before storage is placed: a kernel's
// code length does not depend on its addresses (they live in its
// tables), only on its shapes. A buffer too large for its region is an
// error. The caller restores k's fields if it needs them.
func ProbeAddrs(p *arch.Preset, k *Kernel) error {
	seen := map[*Buffer]uint32{}
	il, ni := p.Interleaved.Lo, p.NonInterleaved.Hi
	for _, f := range k.Fixes {
		b := f.Ref.Buf
		a, ok := seen[b]
		if !ok {
			align := max(b.Align, 32)
			if b.Region == NonInterleaved {
				if b.Size > ni-p.NonInterleaved.Lo {
					return fmt.Errorf("buffer %s of %d bytes does not fit in the %d bytes of non-interleaved memory", b.Name, b.Size, p.NonInterleaved.Size())
				}
				ni = (ni - b.Size) &^ (align - 1)
				a = ni
			} else {
				il = (il + align - 1) &^ (align - 1)
				a, il = il, il+b.Size
			}
			seen[b] = a
		}
		*f.Field = a + f.Ref.Off
	}
	return nil
}

// probeLens caches the code bytes of kernels at the made-up addresses,
// by kernel key.
var probeLens sync.Map

// ProbeCode is k's code bytes at the made-up addresses of ProbeAddrs,
// cached in k (for p) and by k's key; k's address fields are restored
// after. A kernel whose buffers do not fit their regions, or whose code
// the made-up addresses cannot emit (operands in one memory element:
// matrix kernels of large blocks), counts 0: the linker sizes code
// exactly.
func (k *Kernel) ProbeCode(p *arch.Preset) int64 {
	if k.probeFor == p {
		return k.probe
	}
	k.probe, k.probeFor = k.probeCode(p), p
	return k.probe
}

func (k *Kernel) probeCode(p *arch.Preset) int64 {
	saved := make([]uint32, len(k.Fixes))
	for i, f := range k.Fixes {
		saved[i] = *f.Field
	}
	defer func() {
		for i, f := range k.Fixes {
			*f.Field = saved[i]
		}
	}()
	if ProbeAddrs(p, k) != nil {
		return 0
	}
	key := k.Key()
	if n, ok := probeLens.Load(key); ok {
		return n.(int64)
	}
	var n int64
	b := codegen.NewBuilder(p, p.Executable.Lo)
	if _, err := k.Emit(b); err == nil {
		n = 4 * int64(b.Len())
	}
	probeLens.Store(key, n)
	return n
}
