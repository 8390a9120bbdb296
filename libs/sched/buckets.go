package sched

// buckets groups items by tile in one allocation: count every item's
// tile first, then alloc, then put the items (a counting sort, which is
// what sorting the whole phase by tile cost before).
type buckets[T any] struct {
	start []int // items of tile t are items[start[t]:start[t+1]]
	next  []int // where tile t's next item goes
	items []T
}

func newBuckets[T any](tiles int) *buckets[T] {
	return &buckets[T]{start: make([]int, tiles+1)}
}

// count reserves n items for tile t.
func (b *buckets[T]) count(t, n int) { b.start[t+1] += n }

// alloc sizes the buckets once every item is counted.
func (b *buckets[T]) alloc() {
	for t := 1; t < len(b.start); t++ {
		b.start[t] += b.start[t-1]
	}
	b.next = append([]int(nil), b.start[:len(b.start)-1]...)
	b.items = make([]T, b.start[len(b.start)-1])
}

// put adds an item of tile t.
func (b *buckets[T]) put(t int, v T) {
	b.items[b.next[t]] = v
	b.next[t]++
}

// of returns tile t's items.
func (b *buckets[T]) of(t int) []T { return b.items[b.start[t]:b.next[t]] }
