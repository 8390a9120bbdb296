package prog

import (
	"fmt"

	"ipu.local/libs/arch"
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
