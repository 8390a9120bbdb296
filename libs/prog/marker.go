package prog

// Marker numbers the buffers one pass over a program meets, without a
// map: a buffer holds the marker's epoch and its number. Passes over
// programs that share buffers (a step cache's) must not run at once.
type Marker struct {
	epoch uint64
	n     int32
}

// NewMarker returns a marker that has numbered no buffer.
func NewMarker() *Marker { return &Marker{epoch: epochs.Add(1)} }

// Index returns b's number, from 0 in the order met, and whether b was
// met for the first time.
func (m *Marker) Index(b *Buffer) (int32, bool) {
	if b.markEpoch != m.epoch {
		b.markEpoch, b.mark = m.epoch, m.n
		m.n++
		return b.mark, true
	}
	return b.mark, false
}
