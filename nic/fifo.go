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

// push appends v, doubling the buffer when full.
func (q *fifo[T]) push(v T) {
	if q.n == len(q.buf) {
		buf := make([]T, max(2*len(q.buf), 8))
		for i := range q.n {
			buf[i] = q.buf[(q.head+i)%len(q.buf)]
		}
		q.buf, q.head = buf, 0
	}
	q.buf[(q.head+q.n)%len(q.buf)] = v
	q.n++
}

// pop removes and returns the oldest item; the queue must not be empty.
// Its slot is cleared, so that what it refers to can be collected.
func (q *fifo[T]) pop() T {
	var zero T
	v := q.buf[q.head]
	q.buf[q.head] = zero
	q.head = (q.head + 1) % len(q.buf)
	q.n--
	return v
}
