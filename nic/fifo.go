package nic

// fifo is a queue in a circular buffer: its storage is the most items
// ever waiting at once, never the number that went through. A slice
// appended at the tail and consumed from the head, emptied only when
// drained, grows with every packet under steady traffic, where it is
// never empty.
type fifo[T any] struct {
	buf     []T
	head, n int
}

func (q *fifo[T]) len() int { return q.n }

// push appends v, doubling the buffer when full: its length is a
// power of two, so that positions wrap by a mask rather than a division.
func (q *fifo[T]) push(v T) {
	if q.n == len(q.buf) {
		buf := make([]T, max(2*len(q.buf), 8))
		for i := range q.n {
			buf[i] = q.buf[(q.head+i)&(len(q.buf)-1)]
		}
		q.buf, q.head = buf, 0
	}
	q.buf[(q.head+q.n)&(len(q.buf)-1)] = v
	q.n++
}

// pop removes and returns the oldest item; the queue must not be empty.
// Its slot is cleared, so that what it refers to can be collected.
func (q *fifo[T]) pop() T {
	var zero T
	v := q.buf[q.head]
	q.buf[q.head] = zero
	q.head = (q.head + 1) & (len(q.buf) - 1)
	q.n--
	return v
}

// wrap is index i's position in a ring of n entries, i mod n: by a mask
// when n is a power of two, as rings almost always are, sparing a
// division per packet.
func wrap(i uint64, n int) uint64 {
	if n&(n-1) == 0 {
		return i & uint64(n-1)
	}
	return i % uint64(n)
}
